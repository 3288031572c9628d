"""Any controller build as the controller under test (``--controller-cmd``): the template and
its placeholders, the AWS environment, readiness by health URL or log line, and our own
controller run as an external command against a sim lab."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from kubernetes import client

from lab.component import ComponentNotReady
from lab.compose import Lab, wait_for
from lab.controllerproc import (
    PLACEHOLDERS,
    ControllerCommand,
    ControllerCommandError,
    ControllerProcess,
    ControllerSpec,
    upstream_preset,
)

OURS = (
    f"{sys.executable} -m controller --kubeconfig {{kubeconfig}} --cloud-config {{cloud_config}} "
    "--metrics-addr {metrics_addr}"
)


def _spec(tmp_path: Path, command: ControllerCommand | None) -> ControllerSpec:
    return ControllerSpec(
        kubeconfig=tmp_path / "kubeconfig",
        cloud_config=tmp_path / "cloud.conf",
        log_path=tmp_path / "controller.log",
        imds_endpoint="http://127.0.0.1:5",
        command=command,
        aws_endpoint="http://127.0.0.1:6",
        region="eu-west-1",
    )


def test_templates_are_filled_and_checked(tmp_path: Path) -> None:
    command = ControllerCommand.parse("ccm --kubeconfig={kubeconfig} --x='a b' --lit={{x}}")
    values = _spec(tmp_path, command).placeholders(metrics_port=7, secure_port=8)
    assert set(values) == set(PLACEHOLDERS)
    assert command.render(values) == [
        "ccm", f"--kubeconfig={tmp_path / 'kubeconfig'}", "--x=a b", "--lit={x}"
    ]  # fmt: skip
    assert values["metrics_addr"] == "127.0.0.1:7"
    with pytest.raises(ControllerCommandError, match=r"unknown placeholder \{kubconfig\}"):
        ControllerCommand.parse("ccm --kubeconfig={kubconfig}")
    with pytest.raises(ControllerCommandError, match="No closing quotation"):
        ControllerCommand.parse("ccm 'unclosed")
    with pytest.raises(ControllerCommandError, match="give the command"):
        ControllerCommand.parse("  ")
    with pytest.raises(ControllerCommandError, match="--controller-ready-log"):
        ControllerCommand.parse("ccm", ready_log="(")


def test_external_commands_get_the_aws_environment_a_deployment_has(tmp_path: Path) -> None:
    env = _spec(tmp_path, ControllerCommand.parse("ccm")).environ()
    assert env["AWS_EC2_METADATA_SERVICE_ENDPOINT"] == "http://127.0.0.1:5"
    assert env["AWS_ENDPOINT_URL_EC2"] == "http://127.0.0.1:6"
    assert env["AWS_ENDPOINT_URL_ELASTIC_LOAD_BALANCING"] == "http://127.0.0.1:6"
    assert env["AWS_REGION"] == "eu-west-1"
    assert "AWS_ENDPOINT_URL_EC2" not in _spec(tmp_path, None).environ()


def test_upstream_preset_flags() -> None:
    """The flags of k8s.io/cloud-provider's options (and component-base's) the preset sets."""
    preset = upstream_preset("/opt/aws-cloud-controller-manager")
    flags = {p.split("=", 1)[0] for p in preset.template[1:]}
    assert flags == {
        "--cloud-provider", "--cloud-config", "--kubeconfig", "--authentication-kubeconfig",
        "--authorization-kubeconfig", "--controllers", "--configure-cloud-routes",
        "--leader-elect", "--use-service-account-credentials", "--bind-address",
        "--secure-port", "--v",
    }  # fmt: skip
    preset.check()
    assert preset.ready_url == "https://127.0.0.1:{secure_port}/healthz"


@pytest.mark.parametrize("ready", ["url", "log"])
def test_our_controller_as_an_external_command_serves_the_lab(lab: Lab, ready: str) -> None:
    command = (
        ControllerCommand.parse(OURS)
        if ready == "url"
        else ControllerCommand.parse(OURS, ready_log=r"serving /healthz, /readyz and /metrics")
    )
    proc = lab.start_controller(command=command)
    assert proc.command[:3] == [sys.executable, "-m", "controller"]
    assert f"--kubeconfig {lab.kubeconfig_path}" in " ".join(proc.command)
    core = client.CoreV1Api(lab.api_client())
    core.create_namespaced_service(
        "default", {"metadata": {"name": "ext"}, "spec": {"type": "LoadBalancer",
                                                        "ports": [{"port": 80}]}}
    )  # fmt: skip
    wait_for(
        lambda: core.read_namespaced_service("ext", "default").status.load_balancer.ingress,
        timeout=60,
        what="the external controller's ELB on the Service",
    )
    with pytest.raises(ValueError, match="--controller-cmd"):
        lab.controller_spec(legacy=["k8s-84926"], command=command)


def test_a_command_that_never_gets_ready_is_reported(lab: Lab) -> None:
    never = ControllerCommand.parse(f"{sys.executable} -c 'import time; time.sleep(60)'")
    proc = ControllerProcess(lab.controller_spec(command=never), ready_timeout=2)
    try:
        with pytest.raises(ComponentNotReady, match=r"127\.0\.0\.1:\d+/healthz did not answer 200"):
            proc.start()
    finally:
        proc.stop()
