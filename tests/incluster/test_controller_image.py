"""``lab.up --controller-image IMAGE``: another build's image in-cluster on kind.

The manifests are checked against what upstream's ``examples/existing-cluster/base`` (at
kubernetes/cloud-provider-aws v1.33.0) runs: a DaemonSet on the control plane with
``hostNetwork``, its flags and its ClusterRole's rules; plus what the lab adds so the pod
reaches it (cloud config ServiceOverrides and the metadata endpoint on the nodes' gateway).
Loading and applying run through the fake ``docker``/``kind``/``kubectl`` (``fakes``), as the
other in-cluster tests do; refusals are one line and start nothing.
"""

from __future__ import annotations

import io
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from rich.console import Console

from lab.frontdoor import controller as frontdoor_controller
from lab.frontdoor import debug as frontdoor_debug
from lab.frontdoor.up import up
from lab.incluster_image import (
    NAME,
    UPSTREAM_RULES,
    ImageSettings,
    deploy_image_to_lab,
    render_image_manifests,
)
from lab.spec import up_request
from lab.state import LabError, load_state
from tests.cluster.fakecli import container
from tests.incluster.support import Fakes, by_kind, write_lab_state
from tests.test_front_door import assert_one_line_error, invoke, nothing_left

UPSTREAM_IMAGE = "registry.k8s.io/provider-aws/cloud-controller-manager:v1.33.0"
GATEWAY = "172.30.0.1"


def settings(image: str = UPSTREAM_IMAGE) -> ImageSettings:
    from lab.controllerproc import render_cloud_config

    aws = f"http://{GATEWAY}:41000"
    return ImageSettings(
        image=image,
        cloud_config=render_cloud_config(
            region="us-east-1", cluster_id="ccm-lab", aws_endpoint=aws
        ),
        aws_endpoint=aws,
        imds_endpoint=f"http://{GATEWAY}:41001",
    )


def test_the_image_runs_as_upstreams_example_daemonset_pointed_at_the_lab() -> None:
    manifests = render_image_manifests(settings())
    assert [m["kind"] for m in manifests] == [
        "ServiceAccount",
        "ClusterRole",
        "ClusterRoleBinding",
        "RoleBinding",
        "ConfigMap",
        "Secret",
        "DaemonSet",
    ]
    k = by_kind(manifests)
    pod = k["DaemonSet"]["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == {"node-role.kubernetes.io/control-plane": ""}
    assert pod["hostNetwork"] is True
    assert pod["serviceAccountName"] == "cloud-controller-manager"
    assert {
        "key": "node.cloudprovider.kubernetes.io/uninitialized",
        "value": "true",
        "effect": "NoSchedule",
    } in pod["tolerations"]
    (ctr,) = pod["containers"]
    assert ctr["image"] == UPSTREAM_IMAGE
    assert ctr["imagePullPolicy"] == "IfNotPresent", "a kind-loaded tag is never pulled"
    # upstream's example flags, the lab's cloud config, the lab's controllers
    for flag in (
        "--cloud-provider=aws",
        "--use-service-account-credentials=true",
        "--configure-cloud-routes=false",
        "--cloud-config=/etc/kubernetes/cloud/cloud.conf",
        "--controllers=cloud-node,cloud-node-lifecycle,service",
    ):
        assert flag in ctr["args"]
    env = {e["name"]: e["value"] for e in ctr["env"]}
    assert env["AWS_EC2_METADATA_SERVICE_ENDPOINT"] == f"http://{GATEWAY}:41001"
    assert env["AWS_ENDPOINT_URL_EC2"] == f"http://{GATEWAY}:41000"
    cloud = k["ConfigMap"]["data"]["cloud.conf"]
    for service in ("ec2", "elasticloadbalancing", "sts"):
        assert f"Service = {service}" in cloud
    assert cloud.count(f"URL = http://{GATEWAY}:41000") == 3
    assert {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"} <= set(k["Secret"]["stringData"])
    assert k["RoleBinding"]["roleRef"]["name"] == "extension-apiserver-authentication-reader"
    assert k["ClusterRoleBinding"]["roleRef"]["name"] == k["ClusterRole"]["metadata"]["name"]
    rules = {
        (r["apiGroups"][0], r["resources"][0]): set(r["verbs"]) for r in k["ClusterRole"]["rules"]
    }
    assert len(rules) == len(UPSTREAM_RULES) == 10
    assert rules[("", "nodes")] == {"*"}
    assert rules[("", "serviceaccounts/token")] == {"create"}  # per-controller tokens
    assert rules[("coordination.k8s.io", "leases")] >= {"create", "get", "update"}
    assert rules[("", "services/status")] >= {"patch"}


@pytest.mark.parametrize("image", ["", "has space", "http://reg/img:1", "-flag"])
def test_an_image_docker_would_refuse_is_refused_naming_the_flag(image: str) -> None:
    with pytest.raises(ValueError, match=re.escape(f"--controller-image {image!r}")):
        settings(image)


def test_deploy_to_a_kind_lab_loads_applies_and_waits(fakes: Fakes, tmp_path: Path) -> None:
    root = write_lab_state(tmp_path / "labs")
    cluster = "ccm-lab-t"
    network = f"ccm-lab-{cluster}"
    fakes.cli.set(
        containers=[
            container(f"{cluster}-control-plane", "control-plane", cluster, "10.0.1.140", network)
        ],
        images=["my-ccm:dev"],
    )
    image = "my-ccm:dev"  # a local build: loaded into the nodes, never pulled
    applied = deploy_image_to_lab("t", image, root=root, runner=fakes.runner, wait_timeout=120)
    calls = fakes.calls()
    argvs = [c["argv"] for c in calls]
    kc = str(root / "t" / "kubeconfig")
    assert [a[:2] for a in argvs] == [
        ["docker", "ps"],
        ["docker", "inspect"],
        ["docker", "image"],
        ["kind", "load"],
        ["kubectl", "--kubeconfig"],
        ["kubectl", "--kubeconfig"],
    ], "no build: the image is the user's, and local (not pulled)"
    assert argvs[2] == ["docker", "image", "inspect", "--format", "{{.Id}}", image]
    assert argvs[3] == ["kind", "load", "docker-image", image, "--name", cluster]
    assert argvs[4] == ["kubectl", "--kubeconfig", kc, "apply", "-f", "-"]
    assert list(yaml.safe_load_all(calls[4]["stdin"])) == applied
    assert argvs[5] == [
        "kubectl",
        "--kubeconfig",
        kc,
        "rollout",
        "status",
        f"daemonset/{NAME}",
        "--namespace",
        "kube-system",
        "--timeout=120s",
    ]
    k = by_kind(applied)
    assert "URL = http://172.30.0.1:41000" in k["ConfigMap"]["data"]["cloud.conf"]
    (ctr,) = k["DaemonSet"]["spec"]["template"]["spec"]["containers"]
    assert ctr["image"] == image


def test_an_image_the_engine_does_not_have_is_one_error_with_the_command(
    fakes: Fakes, tmp_path: Path
) -> None:
    root = write_lab_state(tmp_path / "labs")
    cluster = "ccm-lab-t"
    fakes.cli.set(
        containers=[
            container(f"{cluster}-control-plane", "control-plane", cluster, "10.0.1.140", "n")
        ],
        images=[],
    )
    # neither local nor in any registry this host reaches: the pull's command and its error
    with pytest.raises(LabError, match=r"(?s)docker pull my-ccm:gone.*no such host"):
        deploy_image_to_lab("t", "my-ccm:gone", root=root, runner=fakes.runner)
    assert not any(c["argv"][:2] == ["kubectl", "--kubeconfig"] for c in fakes.calls())


def test_deploy_to_a_sim_lab_or_with_a_local_controller_is_refused(
    fakes: Fakes, tmp_path: Path
) -> None:
    root = write_lab_state(tmp_path / "sim", backend="sim")
    with pytest.raises(LabError, match="runs on 'sim'; the in-cluster controller needs kind"):
        deploy_image_to_lab("t", UPSTREAM_IMAGE, root=root, runner=fakes.runner)
    root = write_lab_state(tmp_path / "local", controller=True)
    with pytest.raises(LabError, match="already runs the controller as a local process"):
        deploy_image_to_lab("t", UPSTREAM_IMAGE, root=root, runner=fakes.runner)
    assert not (fakes.cli.root / "calls.jsonl").exists()  # nothing was run


@pytest.mark.parametrize(
    ("flags", "match"),
    [
        ({"backend": "sim"}, r"--controller-image img:1: an image runs in-cluster on kind"),
        ({"controller": False}, r"--controller-image img:1 with --no-controller"),
        ({"legacy": ["k8s-84926"]}, r"with --legacy-behavior/--args"),
        ({"controller_image": "bad image"}, r"--controller-image 'bad image': expected an image"),
    ],
    ids=["sim", "no-controller", "legacy", "bad-reference"],
)
def test_controller_image_refusals_change_nothing(
    tmp_path: Path, flags: dict[str, object], match: str
) -> None:
    given: dict[str, object] = {"controller_image": "img:1", "backend": "kind", **flags}
    with pytest.raises(LabError, match=match):
        up(up_request(name="x", **given), root=tmp_path, console=Console(file=io.StringIO()))
    assert not (tmp_path / "x").exists()


def test_controller_image_on_sim_is_one_line_at_the_front_door(tmp_path: Path) -> None:
    result = invoke(
        tmp_path, "lab.up", "--name", "x", "--backend", "sim", "--controller-image", "img:1"
    )
    assert_one_line_error(result, "--controller-image img:1", "--backend kind")
    nothing_left(tmp_path, "x")


def test_restart_of_an_image_lab_restarts_its_daemonset(fakes: Fakes, tmp_path: Path) -> None:
    """``lab.controller.restart`` on a lab of ``--controller-image``: the DaemonSet rolled
    (``kubectl rollout restart``, then its status), no local controller started."""
    from lab.incluster_image import restart_image_in_lab

    root = write_lab_state(tmp_path / "labs", controller_image="my-ccm:dev")
    cluster = "ccm-lab-t"
    fakes.cli.set(
        containers=[
            container(f"{cluster}-control-plane", "control-plane", cluster, "10.0.1.140", "n")
        ],
        images=["my-ccm:dev"],
    )
    restart_image_in_lab("t", root=root, runner=fakes.runner, wait_timeout=60)
    kc = str(root / "t" / "kubeconfig")
    where = [f"daemonset/{NAME}", "--namespace", "kube-system"]
    kubectl = [c["argv"] for c in fakes.calls() if c["argv"][0] == "kubectl"]
    assert kubectl == [
        ["kubectl", "--kubeconfig", kc, "rollout", "restart", *where],
        ["kubectl", "--kubeconfig", kc, "rollout", "status", *where, "--timeout=60s"],
    ]


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (
            lambda root: frontdoor_controller.restart_controller(
                name="t", root=root, legacy=["k8s-84926"], console=Console(file=io.StringIO())
            ),
            r"--legacy-behavior/--args: lab 't' runs its controller in-cluster from "
            r"--controller-image my-ccm:dev",
        ),
        (
            lambda root: frontdoor_debug.debug_controller(
                name="t", root=root, console=Console(file=io.StringIO())
            ),
            r"lab 't' runs its controller in-cluster .* two controllers",
        ),
    ],
    ids=["restart-with-our-flags", "debug"],
)
def test_an_image_lab_refuses_a_local_controller_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, call: Any, match: str
) -> None:
    """A local controller beside the in-cluster one would make two: refused, nothing run."""
    root = write_lab_state(tmp_path / "labs", controller_image="my-ccm:dev")
    monkeypatch.setattr(frontdoor_controller, "require_daemon", lambda state: None)
    monkeypatch.setattr(frontdoor_controller, "controller_free", load_state)
    monkeypatch.setattr(frontdoor_debug, "controller_free", load_state)
    with pytest.raises(LabError, match=match) as refused:
        call(root)
    assert "\n" not in str(refused.value)
    assert load_state("t", root).controller is None
