"""``invoke lab.up --backend existing --kubeconfig PATH``: the lab attached to a cluster it did
not make.

A simulator started here, apart from the lab (its own API server, kubelet stand-in and data
plane, in this process), stands in for somebody's existing cluster: the lab must find its nodes,
start moto, the metadata service and the controller against its kubeconfig, give a
LoadBalancer Service a load balancer, and on ``lab.down`` leave every object of that cluster
where it was. The front door's refusals come first: each names the flag and the value and
creates nothing.
"""

from __future__ import annotations

import io
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from lab.clock import ScaledClock
from lab.cluster.base import ClusterSpec, NodeSpec, Role
from lab.cluster.sim import SimProvider
from lab.frontdoor.down import down
from lab.frontdoor.nodes import node_action
from lab.frontdoor.up import up
from lab.kubeclient import new_api_client
from lab.preflight import check_kubeconfig_file
from lab.spec import LabSpec, SpecError, up_request
from lab.state import LabError
from lab.versions.release import KubeVersion

UNINITIALIZED = "node.cloudprovider.kubernetes.io/uninitialized"


@pytest.fixture
def their_cluster(tmp_path: Path) -> Iterator[SimProvider]:
    """An "existing" cluster: two nodes without providerIDs, HTTPS with its own token."""
    provider = SimProvider(
        "theirs",
        state_dir=tmp_path / "theirs",
        simulator_options={"tls": True, "token": "their-token", "control_token": "their-token"},
        clock=ScaledClock(10),
    )
    provider.provision(
        ClusterSpec(
            "theirs",
            KubeVersion.parse("1.33"),
            (
                NodeSpec(Role.CONTROL_PLANE, name="their-cp", ip="10.0.0.10"),
                NodeSpec(Role.WORKER, name="their-worker", ip="10.0.16.10"),
            ),
        )
    )
    try:
        yield provider
    finally:
        provider.delete()


def _quiet() -> Console:
    return Console(file=io.StringIO(), width=200)


def _wait(predicate: Any, what: str, timeout: float = 60.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")


@pytest.mark.slow
def test_up_attaches_gives_a_load_balancer_and_down_leaves_their_objects(
    their_cluster: SimProvider, tmp_path: Path
) -> None:
    from kubernetes import client

    kubeconfig = their_cluster.kubeconfig()
    api = new_api_client(kubeconfig)
    core = client.CoreV1Api(api)
    try:
        core.create_namespaced_config_map(
            "default", {"metadata": {"name": "their-config"}, "data": {"k": "v"}}
        )
        core.create_namespaced_service(
            "default",
            {"metadata": {"name": "their-api"}, "spec": {"ports": [{"port": 80}]}},
        )
        out = _quiet()
        state = up(
            up_request(name="ex", backend="existing", kubeconfig=kubeconfig),
            root=tmp_path,
            console=out,
        )
        try:
            assert state.backend == "existing"
            assert state.kubeconfig == str(kubeconfig.resolve())
            assert sorted(n.name for n in state.nodes) == ["their-cp", "their-worker"]
            assert {n.name: n.zone for n in state.nodes} == {
                "their-cp": "us-east-1a",
                "their-worker": "us-east-1b",
            }
            assert state.controller is not None
            # every node initialized by the controller, by the instance the lab seeded for it
            for node in state.nodes:
                seen = core.read_node(node.name)
                assert seen.spec.provider_id == node.provider_id
                assert not any(t.key == UNINITIALIZED for t in seen.spec.taints or [])
            assert sorted(state.cluster_changes) == sorted(
                f"node {n.name}: spec.providerID set to {n.provider_id} (immutable once set)"
                for n in state.nodes
            )
            # no stand-in of ours in their cluster: no daemon-side kubelet actions
            with pytest.raises(LabError, match="kubelet stand-in"):
                node_action("stop-heartbeat", "their-cp", name="ex", root=tmp_path)

            core.create_namespaced_service(
                "default",
                {
                    "metadata": {"name": "web"},
                    "spec": {"type": "LoadBalancer", "ports": [{"port": 80}]},
                },
            )

            def hostname() -> str | None:
                ingress = core.read_namespaced_service("web", "default").status.load_balancer
                found = (ingress.ingress or []) if ingress else []
                return found[0].hostname if found else None

            lb = _wait(hostname, "the Service's load balancer")
            assert lb.endswith(".elb.amazonaws.com"), lb
        finally:
            down(name="ex", root=tmp_path, console=out)
        text = out.file.getvalue()  # type: ignore[attr-defined]
        assert "keeps every object" in text
        assert "spec.providerID set to" in text
        assert not (tmp_path / "ex").exists()
        # their cluster still serves, with all of its objects
        assert sorted(n.metadata.name for n in core.list_node().items) == [
            "their-cp",
            "their-worker",
        ]
        assert core.read_namespaced_config_map("their-config", "default").data == {"k": "v"}
        names = {s.metadata.name for s in core.list_namespaced_service("default").items}
        assert {"their-api", "web"} <= names
    finally:
        api.close()


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _kubeconfig_to(path: Path, server: str) -> Path:
    path.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        f"clusters: [{{name: k, cluster: {{server: '{server}'}}}}]\n"
        "contexts: [{name: c, context: {cluster: k, user: u}}]\n"
        "users: [{name: u, user: {token: t}}]\n",
        encoding="utf-8",
    )
    return path


def test_front_door_refusals_name_the_flag_and_create_nothing(tmp_path: Path) -> None:
    root = tmp_path / "labs"
    good = _kubeconfig_to(tmp_path / "kc", "http://127.0.0.1:1")
    cases: list[tuple[dict[str, Any], str]] = [
        ({"backend": "sim", "kubeconfig": good}, r"^--kubeconfig '.*kc': names the cluster of "),
        ({"backend": "existing"}, r"^--backend existing: give --kubeconfig PATH"),
        (
            {"backend": "existing", "kubeconfig": tmp_path / "missing"},
            r"^--kubeconfig '.*missing': no such file",
        ),
        (
            {"backend": "existing", "kubeconfig": _kubeconfig_to(tmp_path / "empty", "")},
            r"^--kubeconfig '.*empty': names no API server",
        ),
        (
            {"backend": "existing", "kubeconfig": good, "feature_gates": "X=true"},
            r"^--feature-gates: shapes a cluster the lab makes",
        ),
        (
            {"backend": "existing", "kubeconfig": good, "insecure_api": True},
            r"^--insecure-api: shapes a cluster the lab makes",
        ),
    ]
    if os.geteuid() != 0:  # root reads any file
        unreadable = _kubeconfig_to(tmp_path / "secret", "http://127.0.0.1:1")
        unreadable.chmod(0)
        cases.append(
            ({"backend": "existing", "kubeconfig": unreadable}, r"^--kubeconfig .*cannot be read")
        )
    for kwargs, message in cases:
        with pytest.raises(LabError, match=message) as caught:
            up(up_request(name="ex", **kwargs), root=root, console=_quiet())
        assert "\n" not in str(caught.value)
        assert not root.exists(), f"{kwargs} created something"


def test_an_api_server_that_does_not_answer_is_refused_before_anything_starts(
    tmp_path: Path,
) -> None:
    server = f"http://127.0.0.1:{_closed_port()}"
    kubeconfig = _kubeconfig_to(tmp_path / "kc", server)
    root = tmp_path / "labs"
    with pytest.raises(LabError) as caught:
        up(
            up_request(name="ex", backend="existing", kubeconfig=kubeconfig),
            root=root,
            console=_quiet(),
        )
    message = str(caught.value)
    assert message.startswith(f"--kubeconfig {str(kubeconfig)!r}: its API server {server} ")
    assert "does not answer" in message
    assert "start the cluster or fix the kubeconfig" in message
    assert not root.exists()


def test_lab_config_takes_a_kubeconfig_only_with_backend_existing(tmp_path: Path) -> None:
    with pytest.raises(
        ValueError, match=r"^--kubeconfig '.*kc': names the cluster of --backend existing"
    ):
        LabSpec(backend="sim", kubeconfig=tmp_path / "kc")
    with pytest.raises(ValueError, match=r"^--backend existing: give --kubeconfig PATH"):
        LabSpec(backend="existing")
    assert LabSpec(backend="existing", kubeconfig=tmp_path / "kc").cluster_name == "ccm-lab"


INNER = """
import pytest


def test_the_nodes_are_the_clusters(lab, core_v1):
    names = sorted(n.metadata.name for n in core_v1.list_node().items)
    assert names == ["their-cp", "their-worker"]
    assert sorted(n.name for n in lab.nodes) == names
    assert lab.cluster.kind == "existing"
    assert not lab.capabilities.kubelet_stand_in


@pytest.mark.standin("it stops a kubelet's heartbeats")
def test_needs_the_stand_in(lab):
    raise AssertionError("ran without the stand-in")


@pytest.mark.owncluster("its pods run on the lab's nodes")
def test_needs_the_labs_nodes(lab):
    raise AssertionError("ran on an existing cluster")
"""


@pytest.mark.slow
def test_fixtures_attach_and_skip_what_needs_our_stand_ins(
    their_cluster: SimProvider, tmp_path: Path
) -> None:
    repo = Path(__file__).resolve().parents[1]
    inner = tmp_path / "test_inner.py"
    inner.write_text(INNER, encoding="utf-8")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-rs",
            "-p",
            "no:cacheprovider",
            "-p",
            "lab.pytest_plugin",
            "-c",
            str(repo / "pyproject.toml"),
            "--rootdir",
            str(tmp_path),
            str(inner),
            "--backend",
            "existing",
            "--kubeconfig",
            str(their_cluster.kubeconfig()),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 passed, 2 skipped" in done.stdout, done.stdout
    assert "needs the sim backend's kubelet stand-in: it stops a kubelet's heartbeats" in (
        done.stdout
    )
    assert (
        "needs a cluster the lab made (sim or kind), not --backend existing: its pods run on "
        "the lab's nodes" in done.stdout
    )


def test_pytest_options_name_the_flag(tmp_path: Path) -> None:
    """The fixtures' options are judged as lab.up's are: the rule table (the spec built from
    them) and the kubeconfig file check (``lab.plugin.options_spec`` runs both)."""
    with pytest.raises(SpecError, match=r"^--kubeconfig 'kc': names the cluster of"):
        LabSpec(backend="sim", kubeconfig=Path("kc"))
    with pytest.raises(SpecError, match=r"^--backend existing: give --kubeconfig PATH"):
        LabSpec(backend="existing")
    with pytest.raises(LabError, match=r"^--kubeconfig '.*nope': no such file"):
        check_kubeconfig_file(tmp_path / "nope")
    good = _kubeconfig_to(tmp_path / "kc", "http://127.0.0.1:1")
    check_kubeconfig_file(good)
    LabSpec(backend="existing", kubeconfig=good)
    LabSpec(backend="sim")
