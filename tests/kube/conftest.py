"""Fixtures for the API simulator tests: one simulator per session, reset per test.

Every test using ``sim`` fails if a request handler raised inside the server while it ran
(``KubeServer.take_internal_errors``), so simulator bugs surface in the test that hit them.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client

from lab.kube.server import KubeServer


@pytest.fixture(scope="session")
def kube_sim() -> Iterator[KubeServer]:
    with KubeServer() as sim:
        yield sim


@pytest.fixture
def sim(kube_sim: KubeServer) -> Iterator[KubeServer]:
    kube_sim.control.reset()
    kube_sim.take_internal_errors()
    yield kube_sim
    errors = kube_sim.take_internal_errors()
    assert not errors, "server-side handler exceptions:\n" + "\n".join(errors)


@pytest.fixture(scope="session")
def api_client(kube_sim: KubeServer) -> Any:
    return kube_sim.api_client()


@pytest.fixture
def core(sim: KubeServer, api_client: Any) -> client.CoreV1Api:
    return client.CoreV1Api(api_client)


def make_cm(name: str, **labels: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": labels}, "data": {"k": "v"}}


def make_node(name: str, *tweaks: Any) -> dict[str, Any]:
    node: dict[str, Any] = {
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "spec": {},
        "status": {
            "conditions": [{"type": "Ready", "status": "True"}],
            "addresses": [{"type": "Hostname", "address": name}],
        },
    }
    for tweak in tweaks:
        tweak(node)
    return node


def raw(
    sim: KubeServer,
    method: str,
    path: str,
    body: bytes | None = None,
    headers: dict[str, str] | None = None,
) -> tuple[int, dict[str, Any]]:
    """One HTTP request without the client's checks; returns (status, decoded JSON body)."""
    import urllib.error
    import urllib.request

    req = urllib.request.Request(sim.url + path, data=body, method=method, headers=headers or {})
    if sim.token:
        req.add_header("Authorization", f"Bearer {sim.token}")
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, json.loads(resp.read() or b"{}")
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"{}")
