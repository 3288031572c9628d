"""Hostile input to the lab's control planes: refused with 400 (or 409) and nothing changed.

Issue 27: the simulator's ``/_lab/reset`` under a running sim lab (it would leave the lab
without Nodes, its stand-ins re-creating and losing Leases), the metadata service's
``default_instance_id`` (part of every metadata path) and ``client_hops`` settings, and the
lab daemon's ``POST /traffic`` body: each refusal names the field and value, and the lab
still works afterwards.
"""

from __future__ import annotations

import json
import logging
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from lab.aws.validation.rules import _valid_description
from lab.clock import ScaledClock
from lab.cluster.base import ClusterSpec, NodeSpec, Role
from lab.cluster.sim import SimProvider
from lab.daemon_client import BadRequest, TrafficRequest
from lab.imds.exceptions import ImdsControlError, InvalidControlRequest
from lab.imds.handlers import _instance_id_field as _imds_instance_id
from lab.imds.server import ImdsServer
from lab.kube.exceptions import KubeControlError
from lab.kube.validation import port_name_problems
from lab.spec import LabSpec, validate_name
from lab.versions.release import KubeVersion
from tests.daemon_support import serving

INSTANCE = "i-0123456789abcdef0"


def node_names(provider: SimProvider) -> list[str]:
    nodes = client.CoreV1Api(provider.api_client()).list_node().items
    return sorted(n.metadata.name for n in nodes)


def test_reset_under_a_running_sim_lab_is_refused_and_changes_nothing(tmp_path: Path) -> None:
    provider = SimProvider(
        "lab", state_dir=tmp_path / "lab", dataplane=False, clock=ScaledClock(100)
    )
    try:
        provider.provision(
            ClusterSpec("lab", KubeVersion.parse("1.31"), (NodeSpec(Role.CONTROL_PLANE),))
        )
        sim = provider.require_simulator()
        core = client.CoreV1Api(provider.api_client())
        core.create_namespaced_config_map("default", {"metadata": {"name": "keep"}})
        before = node_names(provider)
        assert before
        with pytest.raises(KubeControlError) as refused:
            sim.control.reset()
        assert refused.value.status == 409
        assert "sim cluster 'lab'" in refused.value.message
        assert "Nothing was changed" in refused.value.message
        assert node_names(provider) == before
        assert core.read_namespaced_config_map("keep", "default").metadata.name == "keep"
        # the lab's own reset still works: the objects go, the nodes come back
        provider.reset_objects()
        assert node_names(provider) == before
        assert [c.metadata.name for c in core.list_namespaced_config_map("default").items] == [
            "kube-root-ca.crt"
        ]
    finally:
        provider.delete()


# -- the metadata service's settings -----------------------------------------------------------


@pytest.fixture(scope="module")
def imds() -> Iterator[ImdsServer]:
    # the settings never read EC2: an endpoint nobody listens on will do
    with ImdsServer("http://127.0.0.1:9", instance_id=INSTANCE) as server:
        yield server
        assert server.take_internal_errors() == []


@pytest.mark.parametrize(
    ("settings", "fragment"),
    [
        ({"default_instance_id": "../../x"}, "default_instance_id='../../x': expected an EC2"),
        ({"default_instance_id": "i-0123"}, "default_instance_id='i-0123': expected an EC2"),
        ({"default_instance_id": 7}, "default_instance_id=7: expected an EC2 instance id"),
        ({"client_hops": 1e30}, "client_hops=1e+30: expected an integer 1..64"),
        ({"client_hops": 65}, "client_hops=65: expected an integer 1..64"),
        ({"client_hops": 0}, "client_hops=0: expected an integer 1..64"),
        ({"client_hops": "2"}, "client_hops='2': expected an integer 1..64"),
        ({"client_hops": True}, "client_hops=True: expected an integer 1..64"),
    ],
)
def test_imds_settings_are_validated(
    imds: ImdsServer, settings: dict[str, Any], fragment: str
) -> None:
    before = imds.control.state()["settings"]
    with pytest.raises(ImdsControlError) as refused:
        imds.control.configure(settings)  # type: ignore[arg-type]
    assert refused.value.status == 400
    assert fragment in str(refused.value)
    assert imds.control.state()["settings"] == before


def test_imds_accepts_both_instance_id_lengths_and_hops_up_to_64(imds: ImdsServer) -> None:
    try:
        for instance_id in ("i-0123abcd", INSTANCE):
            state = imds.control.set_default_instance(instance_id)
            assert state["settings"]["default_instance_id"] == instance_id
        assert imds.control.set_client_hops(64)["settings"]["client_hops"] == 64
    finally:
        imds.control.reset()


# -- the lab daemon's /traffic -------------------------------------------------------------------


class _Probe:
    def __init__(self, sent: list[dict[str, Any]]) -> None:
        self.sent = sent

    def send(self, service: str, **kwargs: Any) -> Any:
        self.sent.append({"service": service, **kwargs})
        return type("Report", (), {"to_json": lambda self: {"service": service}})()


class _FakeLab:
    token = "t0k"
    config = LabSpec()

    def __init__(self) -> None:
        self.sent: list[dict[str, Any]] = []

    def traffic_probe(self, *, settle: bool) -> _Probe:
        return _Probe(self.sent)

    def settle(self, *args: Any, **kwargs: Any) -> None:
        return None


@pytest.fixture
def daemon() -> Iterator[tuple[str, _FakeLab]]:
    lab = _FakeLab()
    with serving(lab) as url:
        yield url, lab


def post_traffic(url: str, body: bytes) -> tuple[int, dict[str, Any]]:
    request = urllib.request.Request(
        f"{url}/traffic",
        data=body,
        method="POST",
        headers={"Authorization": "Bearer t0k", "Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as refused:
        with refused:
            return refused.code, json.loads(refused.read())


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        (b'{"service": "web", "requests": [1]}', "'requests' must be a int, got [1]"),
        (b'{"service": "web", "requests": 0}', "'requests' must be 1..100000, got 0"),
        (b'{"service": "web", "requests": 100001}', "'requests' must be 1..100000, got 100001"),
        (b'{"service": "web", "seed": 1e400}', "'seed' must be a int, got inf"),
        (b'{"service": "web", "seed": 1e3}', "'seed' must be a int, got 1000.0"),
        (b'{"service": "web", "port": 0}', "'port' must be 1..65535, got 0"),
        (b'{"service": "' + b"x" * 100_000 + b'"}', "(100000 characters)"),
        (b'{"service": "Web/../x"}', "'service' must be NAME or NAMESPACE/NAME"),
        (b'{"service": "web", "source": ""}', "'source' must be a CIDR or a node name"),
    ],
    ids=[
        "requests-list",
        "requests-zero",
        "requests-too-many",
        "seed-inf",
        "seed-float",
        "port-zero",
        "service-100k",
        "service-path",
        "source-empty",
    ],
)
def test_bad_traffic_bodies_are_400_naming_the_field(
    daemon: tuple[str, _FakeLab],
    body: bytes,
    fragment: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    url, lab = daemon
    with caplog.at_level(logging.DEBUG):
        status, answer = post_traffic(url, body)
    assert status == 400, answer
    assert fragment in answer["error"]
    assert len(answer["error"]) < 300
    assert lab.sent == []
    assert not [r for r in caplog.records if r.exc_info], "a traceback was logged"
    # the daemon still answers a good request
    assert post_traffic(url, b'{"service": "default/web", "requests": 5}') == (
        200,
        {"service": "default/web"},
    )
    assert lab.sent[0]["requests"] == 5


@pytest.mark.parametrize(
    "refused",
    [
        pytest.param(lambda: _imds_instance_id("default_instance_id", "i-0123abcd\n"), id="imds"),
        pytest.param(lambda: TrafficRequest.from_json({"service": "web\n"}), id="daemon"),
        pytest.param(lambda: validate_name("lab\n"), id="lab-name"),
    ],
)
def test_a_trailing_newline_is_not_a_valid_value(refused: Any) -> None:
    """Python's ``$`` matches before a final newline (Go's does not): every pattern that
    admits an identifier anchors at the very end."""
    with pytest.raises((ValueError, BadRequest, InvalidControlRequest)):
        refused()


def test_names_anchor_at_the_very_end() -> None:
    assert port_name_problems("http\n") != []
    assert port_name_problems("http") == []
    assert not _valid_description("ok\n")
    assert _valid_description("ok")
