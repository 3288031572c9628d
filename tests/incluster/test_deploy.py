"""``deploy``/``undeploy`` (and their lab front doors) as command sequences, with fake
``docker``, ``kind`` and ``kubectl`` on PATH (the ``fakes`` fixture)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from lab.cluster.kind import KindProvider
from lab.exec import CommandError
from lab.incluster import (
    DEFAULT_IMAGE,
    REPO_ROOT,
    deploy,
    deploy_to_lab,
    lab_settings,
    render_manifests,
    undeploy,
    undeploy_from_lab,
)
from lab.state import LabError
from tests.cluster.fakecli import container
from tests.incluster.support import Fakes, Obj, by_kind, kind_settings, write_lab_state


def test_deploy_builds_loads_applies_and_waits_in_order(fakes: Fakes, tmp_path: Path) -> None:
    provider = KindProvider("ccm-lab", state_dir=tmp_path / "state", runner=fakes.runner)
    settings = lab_settings(host=provider.host_address(), aws_port=4566, imds_port=4567)
    applied = deploy(provider, settings=settings, runner=fakes.runner, kubeconfig=fakes.kubeconfig)
    calls = fakes.calls()
    kc = str(fakes.kubeconfig)
    assert [c["argv"] for c in calls] == [
        ["docker", "network", "inspect", "kind"],
        ["docker", "build", "-f", "deploy/Dockerfile", "-t", DEFAULT_IMAGE, "."],
        ["docker", "image", "inspect", "--format", "{{.Id}}", DEFAULT_IMAGE],
        ["kind", "load", "docker-image", DEFAULT_IMAGE, "--name", "ccm-lab"],
        ["kubectl", "--kubeconfig", kc, "apply", "-f", "-"],
        [
            "kubectl",
            "--kubeconfig",
            kc,
            "rollout",
            "status",
            "deployment/cloud-controller-manager",
            "--namespace",
            "kube-system",
            "--timeout=180s",
        ],
    ]
    assert calls[1]["cwd"] == str(REPO_ROOT)
    assert list(yaml.safe_load_all(calls[4]["stdin"])) == applied == render_manifests(settings)
    text = by_kind(applied)["ConfigMap"]["data"]["cloud.conf"]
    assert "URL = http://172.30.0.1:4566" in text


def test_deploy_stops_at_the_failed_build_with_a_pasteable_command(
    fakes: Fakes, tmp_path: Path
) -> None:
    fakes.fail("docker", "build")
    provider = KindProvider("ccm-lab", state_dir=tmp_path / "state", runner=fakes.runner)
    with pytest.raises(CommandError) as err:
        deploy(provider, settings=kind_settings(), runner=fakes.runner, kubeconfig=fakes.kubeconfig)
    assert f"$ docker build -f deploy/Dockerfile -t {DEFAULT_IMAGE} ." in str(err.value)
    assert "fake docker build failed" in str(err.value)
    assert [c["argv"][0] for c in fakes.calls()] == ["docker"]  # nothing loaded or applied


def test_deploy_without_build_or_wait(fakes: Fakes, tmp_path: Path) -> None:
    fakes.cli.set(
        images=["registry.local/ccm:1.2.3"],  # built or pulled earlier
        containers=[container("lab2-control-plane", "control-plane", "lab2", "172.30.0.9")],
    )
    provider = KindProvider("lab2", state_dir=tmp_path / "state", runner=fakes.runner)
    settings = kind_settings(image="registry.local/ccm:1.2.3")
    deploy(
        provider,
        settings=settings,
        runner=fakes.runner,
        kubeconfig=fakes.kubeconfig,
        build=False,
        wait_timeout=None,
    )
    assert [c["argv"][:4] for c in fakes.calls()] == [
        ["docker", "image", "inspect", "--format"],
        ["kind", "load", "docker-image", "registry.local/ccm:1.2.3"],
        ["kubectl", "--kubeconfig", str(fakes.kubeconfig), "apply"],
    ]


def test_undeploy_deletes_in_reverse_and_never_a_system_namespace(fakes: Fakes) -> None:
    for namespace, first in (("kube-system", "Deployment"), ("ccm-system", "Deployment")):
        settings = kind_settings(namespace=namespace)
        undeploy(settings, runner=fakes.runner, kubeconfig=fakes.kubeconfig)
        call = fakes.calls()[-1]
        assert call["argv"] == [
            "kubectl",
            "--kubeconfig",
            str(fakes.kubeconfig),
            "delete",
            "--ignore-not-found",
            "--wait=false",
            "-f",
            "-",
        ]
        docs = list(yaml.safe_load_all(call["stdin"]))
        assert docs[0]["kind"] == first
        namespaces = [d["metadata"]["name"] for d in docs if d["kind"] == "Namespace"]
        assert namespaces == ([] if namespace == "kube-system" else ["ccm-system"])


def test_deploy_to_a_kind_lab_uses_its_gateway_and_ports(fakes: Fakes, tmp_path: Path) -> None:
    root = write_lab_state(tmp_path / "labs")
    cluster = "ccm-lab-t"
    network = f"ccm-lab-{cluster}"
    fakes.cli.set(
        containers=[
            container(f"{cluster}-control-plane", "control-plane", cluster, "10.0.1.140", network)
        ]
    )
    applied = deploy_to_lab(
        "t", root=root, runner=fakes.runner, legacy=["k8s-81636"], wait_timeout=None
    )
    argvs = [c["argv"] for c in fakes.calls()]
    assert [a[:2] for a in argvs] == [
        ["docker", "ps"],
        ["docker", "inspect"],
        ["docker", "build"],
        ["docker", "image"],
        ["kind", "load"],
        ["kubectl", "--kubeconfig"],
    ]
    assert argvs[4] == ["kind", "load", "docker-image", DEFAULT_IMAGE, "--name", cluster]
    assert argvs[5][2] == str(root / "t" / "kubeconfig")
    k = by_kind(applied)
    assert "URL = http://172.30.0.1:41000" in k["ConfigMap"]["data"]["cloud.conf"]
    env = k["Deployment"]["spec"]["template"]["spec"]["containers"][0]["env"]
    assert {"name": "AWS_EC2_METADATA_SERVICE_ENDPOINT", "value": "http://172.30.0.1:41001"} in env


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"backend": "sim"}, "runs on 'sim'; the in-cluster controller needs kind"),
        ({"controller": True}, "already runs the controller as a local process"),
        (
            {"aws_endpoint": "http://127.0.0.1:41000"},
            "['http://127.0.0.1:41000'] listen on loopback only",
        ),
    ],
)
def test_deploy_to_lab_refuses_with_the_reason(
    fakes: Fakes, tmp_path: Path, changes: Obj, message: str
) -> None:
    root = write_lab_state(tmp_path / "labs", **changes)
    with pytest.raises(LabError, match=re.escape(message)):
        deploy_to_lab("t", root=root, runner=fakes.runner)
    assert not (fakes.cli.root / "calls.jsonl").exists()  # nothing was run


def test_deploy_to_lab_turns_a_failed_command_into_a_lab_error(
    fakes: Fakes, tmp_path: Path
) -> None:
    root = write_lab_state(tmp_path / "labs")
    fakes.cli.set(
        containers=[container("ccm-lab-t-control-plane", "control-plane", "ccm-lab-t", "10.0.1.9")]
    )
    fakes.fail("docker", "build")
    with pytest.raises(LabError, match=re.escape("$ docker build -f deploy/Dockerfile")):
        deploy_to_lab("t", root=root, runner=fakes.runner)


def test_undeploy_from_lab_deletes_with_the_labs_kubeconfig(fakes: Fakes, tmp_path: Path) -> None:
    root = write_lab_state(tmp_path / "labs")
    undeploy_from_lab("t", root=root, runner=fakes.runner)
    (call,) = fakes.calls()
    assert call["argv"][:4] == ["kubectl", "--kubeconfig", str(root / "t" / "kubeconfig"), "delete"]
    kinds = [d["kind"] for d in yaml.safe_load_all(call["stdin"])]
    assert kinds[0] == "Deployment"
    assert "Namespace" not in kinds


def test_deploy_to_a_lab_that_is_not_up_says_how_to_start_it(tmp_path: Path) -> None:
    with pytest.raises(LabError, match=re.escape("invoke lab.up --name nope")):
        deploy_to_lab("nope", root=tmp_path)


def test_deploy_builds_from_a_given_base_image(fakes: Fakes, tmp_path: Path) -> None:
    """Where no registry is reachable: ``--build-arg BASE_IMAGE`` names a local image."""
    provider = KindProvider("ccm-lab", state_dir=tmp_path / "state", runner=fakes.runner)
    deploy(
        provider,
        settings=kind_settings(),
        runner=fakes.runner,
        kubeconfig=fakes.kubeconfig,
        wait_timeout=None,
        base_image="local/python:3.11",
    )
    build = next(c["argv"] for c in fakes.calls() if c["argv"][:2] == ["docker", "build"])
    assert build == [
        "docker", "build", "--build-arg", "BASE_IMAGE=local/python:3.11",
        "-f", "deploy/Dockerfile", "-t", DEFAULT_IMAGE, ".",
    ]  # fmt: skip
