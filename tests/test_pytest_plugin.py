"""The lab's pytest fixtures work together: controller handle, metadata, node patches."""

from __future__ import annotations

import json
import ssl
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import yaml
from botocore.utils import InstanceMetadataFetcher

from e2e.support import (
    UNINITIALIZED,
    create_service,
    lb_service,
    node_taint_keys,
    wait_for,
    wait_hostname,
)
from lab.compose import Lab

EXCLUDE = "node.kubernetes.io/exclude-from-external-load-balancers"


def test_controller_imds_and_node_patch_fixtures(
    lab: Lab, controller: Any, imds: Any, node_patches: Any, core_v1: Any
) -> None:
    assert controller.running
    assert controller.url
    # The controller's own identity, through botocore's real metadata client.
    fetcher = InstanceMetadataFetcher(timeout=2, num_attempts=1)
    fetcher._base_url = imds.url + "/"  # the documented override is the env variable
    doc = fetcher._get_request(
        "/latest/meta-data/instance-id", None, fetcher._fetch_metadata_token()
    )
    assert doc.text == lab.control_plane.instance_id
    worker = lab.workers[0]
    wait_for(
        lambda: UNINITIALIZED not in node_taint_keys(core_v1.read_node(worker.name)),
        what="worker initialized",
    )
    node_patches.exclude(worker.name)
    assert EXCLUDE in core_v1.read_node(worker.name).metadata.labels
    node_patches.include(worker.name)
    assert EXCLUDE not in (core_v1.read_node(worker.name).metadata.labels or {})


def test_each_test_gets_a_fresh_world(lab: Lab, core_v1: Any) -> None:
    """After the previous test the controller is stopped and nodes are as registered."""
    assert lab.controller is None
    for node in lab.nodes:
        assert UNINITIALIZED in node_taint_keys(core_v1.read_node(node.name))


def test_the_session_lab_serves_its_api_as_lab_up_does(
    request: pytest.FixtureRequest, lab: Lab, controller: Any, core_v1: Any, tmp_path: Path
) -> None:
    """HTTPS with the lab's CA and token, both in the kubeconfig every part of the lab reads:
    the kubelet stand-ins registered the nodes, the controller (a child process) initializes
    them and gives a LoadBalancer Service its ELB, kubectl works from the kubeconfig alone,
    and kubectl without the token is told it must log in."""
    if request.config.getoption("--insecure-api"):
        pytest.skip("--insecure-api: the session lab's API is plain HTTP without a token")
    assert str(lab.cluster.api_url()).startswith("https://127.0.0.1:")
    config = yaml.safe_load(lab.kubeconfig_path.read_text())
    assert config["clusters"][0]["cluster"]["certificate-authority-data"]
    assert config["users"][0]["user"] == {"token": lab.token}
    assert lab.state(tmp_path).token == lab.token

    create_service(core_v1, lb_service("tls-web"))
    assert wait_hostname(core_v1, "tls-web", timeout=60).endswith(".elb.amazonaws.com")
    for node in lab.nodes:
        wait_for(
            lambda n=node.name: UNINITIALIZED not in node_taint_keys(core_v1.read_node(n)),
            what=f"{node.name} initialized",
        )

    kubectl = Path(sys.executable).with_name("kubectl")
    names = subprocess.run(
        [str(kubectl), "--kubeconfig", str(lab.kubeconfig_path), "get", "nodes", "-o", "name"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert names.returncode == 0, names.stderr
    assert sorted(names.stdout.split()) == sorted(f"node/{n.name}" for n in lab.nodes)

    # without credentials kubectl cannot even ask (it prompts for a username, as against any
    # HTTPS kube-apiserver); a request without them gets kube-apiserver's 401 Status; kubectl
    # with a token that is not the lab's is told it must log in
    def kubectl_as(user: dict[str, str]) -> subprocess.CompletedProcess[str]:
        config["users"][0]["user"] = user
        other = tmp_path / "other-kubeconfig"
        other.write_text(yaml.safe_dump(config))
        return subprocess.run(
            [str(kubectl), "--kubeconfig", str(other), "get", "nodes"],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
            stdin=subprocess.DEVNULL,
        )

    anonymous = kubectl_as({})
    assert anonymous.returncode == 1
    assert "Please enter Username" in anonymous.stdout
    wrong = kubectl_as({"token": "not-the-lab-token"})
    assert wrong.returncode == 1
    assert "error: You must be logged in to the server (Unauthorized)" in wrong.stderr
    ca = lab.sim.kube.workdir / "pki" / "ca.crt"
    context = ssl.create_default_context(cafile=str(ca))
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(f"{lab.cluster.api_url()}/api/v1/nodes", context=context)
    with refused.value as answer:
        assert answer.code == 401
        assert json.loads(answer.read()) == {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": "Unauthorized",
            "reason": "Unauthorized",
            "code": 401,
        }
