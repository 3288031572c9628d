"""The ``default/kubernetes`` Endpoints and EndpointSlice, as kube-apiserver's reconciler keeps
them (``lab/kube/apiserver_endpoints.py``): present from the start and after a reset, put back
at once when a client deletes or edits them. Through the official client and ``kubectl``."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes import client

from lab.kube.server import KubeServer
from tests.kube.test_kubectl import KUBECTL, Kubectl

ADDRESS, PORT = "172.18.0.2", 6443


def check_endpoints(ep: client.V1Endpoints) -> None:
    assert ep.metadata.labels == {"endpointslice.kubernetes.io/skip-mirror": "true"}
    assert len(ep.subsets) == 1
    assert [a.ip for a in ep.subsets[0].addresses] == [ADDRESS]
    assert ep.subsets[0].not_ready_addresses is None
    assert [(p.name, p.port, p.protocol) for p in ep.subsets[0].ports] == [("https", PORT, "TCP")]


def check_slice(eps: client.V1EndpointSlice) -> None:
    # upstream's EndpointsAdapter sets this one label only: no managed-by, so the
    # EndpointSlice controller never adopts or deletes the slice
    assert eps.metadata.labels == {"kubernetes.io/service-name": "kubernetes"}
    assert eps.address_type == "IPv4"
    assert [(e.addresses, e.conditions.ready) for e in eps.endpoints] == [([ADDRESS], True)]
    assert [(p.name, p.port, p.protocol) for p in eps.ports] == [("https", PORT, "TCP")]


def both(api: Any) -> tuple[client.V1Endpoints, client.V1EndpointSlice]:
    ep = client.CoreV1Api(api).read_namespaced_endpoints("kubernetes", "default")
    eps = client.DiscoveryV1Api(api).read_namespaced_endpoint_slice("kubernetes", "default")
    return ep, eps


def test_present_from_start_and_after_reset(sim: KubeServer, api_client: Any) -> None:
    ep, eps = both(api_client)
    check_endpoints(ep)
    check_slice(eps)
    svc = client.CoreV1Api(api_client).read_namespaced_service("kubernetes", "default")
    assert svc.spec.ports[0].target_port == PORT  # the Service points at the same port
    sim.control.reset()
    ep2, eps2 = both(api_client)
    check_endpoints(ep2)
    check_slice(eps2)
    assert ep2.metadata.uid != ep.metadata.uid  # made again, as by a fresh apiserver


def test_deleted_ones_come_back(sim: KubeServer, api_client: Any) -> None:
    core, disc = client.CoreV1Api(api_client), client.DiscoveryV1Api(api_client)
    ep, eps = both(api_client)
    core.delete_namespaced_endpoints("kubernetes", "default")
    disc.delete_namespaced_endpoint_slice("kubernetes", "default")
    ep2, eps2 = both(api_client)
    assert ep2.metadata.uid != ep.metadata.uid
    assert eps2.metadata.uid != eps.metadata.uid
    check_endpoints(ep2)
    check_slice(eps2)


def test_edits_are_reset_but_ports_survive(sim: KubeServer, api_client: Any) -> None:
    """The reconciler rewrites addresses and labels; between restarts it only fills in ports
    that are missing (``reconcilePorts`` is false after the first run)."""
    core, disc = client.CoreV1Api(api_client), client.DiscoveryV1Api(api_client)
    core.patch_namespaced_endpoints(
        "kubernetes",
        "default",
        {
            "metadata": {"labels": {"extra": "x"}},
            "subsets": [
                {"addresses": [{"ip": "10.0.0.9"}], "ports": [{"name": "https", "port": 7443}]}
            ],
        },
    )
    disc.patch_namespaced_endpoint_slice(
        "kubernetes",
        "default",
        [{"op": "replace", "path": "/endpoints", "value": [{"addresses": ["10.0.0.9"]}]}],
    )
    ep, eps = both(api_client)
    assert ep.metadata.labels == {"endpointslice.kubernetes.io/skip-mirror": "true"}
    assert [a.ip for a in ep.subsets[0].addresses] == [ADDRESS]
    assert [(p.name, p.port) for p in ep.subsets[0].ports] == [("https", 7443)]
    check_slice(eps)
    sim.control.reset()  # a restart reconciles the ports too
    check_endpoints(both(api_client)[0])


@pytest.mark.skipif(not KUBECTL.exists(), reason="kubectl not installed")
def test_kubectl_shows_them(sim: KubeServer, tmp_path: Any) -> None:
    kubectl = Kubectl(sim.kubeconfig_path, tmp_path)
    out = kubectl("get", "endpoints", "kubernetes").stdout
    assert out.split("\n")[1].split()[:2] == ["kubernetes", f"{ADDRESS}:{PORT}"]
    out = kubectl("get", "endpointslices").stdout
    row = next(line.split() for line in out.splitlines() if line.startswith("kubernetes "))
    assert row[:4] == ["kubernetes", "IPv4", str(PORT), ADDRESS]
