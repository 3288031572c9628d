"""Any controller build as the controller under test (``--controller-cmd``): the template and
its placeholders, the AWS environment, readiness by health URL or log line, and our own
controller run as an external command against a sim lab."""

from __future__ import annotations

import dataclasses
import os
import re
import subprocess
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
    choose_command,
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


def test_choose_command_from_the_front_door_flags(tmp_path: Path) -> None:
    assert choose_command() is None
    assert choose_command(controller="ours") is None
    custom = choose_command(controller_cmd=OURS, ready_log="serving")
    assert custom is not None
    assert (custom.name, custom.ready_log) == ("custom", "serving")
    binary = tmp_path / "aws-cloud-controller-manager"
    binary.write_text("#!/bin/sh\n", encoding="utf-8")
    with pytest.raises(ControllerCommandError, match="no executable file"):
        choose_command(controller=f"upstream={binary}")
    binary.chmod(0o755)
    braced = tmp_path / "acm-{v2}"
    braced.write_text("#!/bin/sh\n", encoding="utf-8")
    braced.chmod(0o755)
    odd = choose_command(controller=f"upstream={braced}")
    assert odd is not None
    assert odd.render(dict.fromkeys(PLACEHOLDERS, "x"))[0] == str(braced)
    preset = choose_command(controller=f"upstream={binary}")
    assert preset is not None
    assert preset.name == "upstream"
    assert preset.template == upstream_preset(str(binary)).template
    assert preset.ready_url == upstream_preset(str(binary)).ready_url
    for bad, words in (
        ({"controller_cmd": OURS, "controller": "ours"}, "give one of them"),
        ({"controller": "upstream="}, "upstream=PATH"),
        ({"ready_url": "http://x/healthz"}, "--controller-ready-url"),
        ({"controller_cmd": OURS, "ready_log": "("}, "not a regular expression"),
    ):
        with pytest.raises(ControllerCommandError, match=re.escape(words)):
            choose_command(**bad)


def test_a_command_runs_its_program_as_a_shell_in_the_labs_virtualenv_finds_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A bare name is looked up in the lab's virtualenv first, then on PATH; ``{python}`` is
    the lab's interpreter; a program that is not there is refused before anything runs."""
    monkeypatch.setenv("PATH", "/usr/bin:/bin")  # the virtualenv is not on it
    venv_python = str(Path(sys.executable).parent / "python")
    for template, program in (("python -m controller", venv_python), ("{python}", sys.executable)):
        command = choose_command(controller_cmd=template)
        assert command is not None
        assert ControllerProcess(_spec(tmp_path, command)).command[0] == program
        assert command.template[0] == template.split()[0], "kept as typed"
    env = _spec(tmp_path, ControllerCommand.parse("ccm")).environ()
    assert env["PATH"].split(os.pathsep)[:3] == [
        str(Path(sys.executable).parent),
        "/usr/bin",
        "/bin",
    ]
    with pytest.raises(ControllerCommandError, match=r"no program 'no-such-ccm' \(not in the lab"):
        choose_command(controller_cmd="no-such-ccm --kubeconfig {kubeconfig}")
    with pytest.raises(ControllerCommandError, match="no executable file there"):
        choose_command(controller_cmd=f"{tmp_path}/ccm --kubeconfig {{kubeconfig}}")
    # a program named by a placeholder filled at start is looked for then
    assert choose_command(controller_cmd="{log_dir}/ccm") is not None


PLUGIN_TESTS = """
def test_runs_the_build(lab):
    proc = lab.start_controller()
    assert proc.command[1:3] == ["-m", "controller"], proc.command
    assert str(lab.kubeconfig_path) in proc.command
    assert proc.url


def test_needs_our_flags(lab):
    lab.start_controller(legacy=["k8s-84926"])
    raise AssertionError("not skipped")
"""


@pytest.mark.slow
def test_pytest_option_runs_the_build_and_skips_cases_needing_ours(tmp_path: Path) -> None:
    """``pytest --controller-cmd``: the session lab runs that build; a case that needs our
    controller's flags is skipped with the reason; a bad flag is a usage error."""
    (tmp_path / "test_build.py").write_text(PLUGIN_TESTS, encoding="utf-8")
    base = [sys.executable, "-m", "pytest", "-p", "lab.pytest_plugin", "-p", "no:cacheprovider"]
    base += ["--rootdir", str(tmp_path), "-c", os.devnull, "-rs", str(tmp_path)]
    done = subprocess.run(
        [*base, "--controller-cmd", OURS],
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
        cwd=Path(__file__).resolve().parents[1],
    )
    out = done.stdout + done.stderr
    assert "1 passed, 1 skipped" in out, out
    assert "--controller-cmd: this case runs our controller with --legacy-behavior k8s-84926" in out
    bad = subprocess.run(
        [*base, "--controller", "upstream=/nonexistent/acm"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        cwd=Path(__file__).resolve().parents[1],
    )
    assert bad.returncode == 4, bad.stdout + bad.stderr
    assert "no executable file at /nonexistent/acm" in bad.stderr


def test_our_controller_leaves_no_kubeconfig_files_behind(lab: Lab, tmp_path: Path) -> None:
    """The controller leaves with ``os._exit`` after SIGTERM (fast), but runs its exit
    handlers first: the Kubernetes client's temporary copy of the kubeconfig's inline CA
    (``certificate-authority-data``, a TLS lab's) is removed, not left in the temp dir."""
    assert "certificate-authority-data" in lab.kubeconfig_path.read_text(encoding="utf-8")
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    spec = dataclasses.replace(lab.controller_spec(), env={"TMPDIR": str(scratch)})
    proc = ControllerProcess(spec).start()
    try:
        assert list(scratch.iterdir()), "the client wrote the CA out while running"
    finally:
        code = proc.stop()
    assert code == 0
    assert list(scratch.iterdir()) == []
