"""``kube-system/extension-apiserver-authentication`` as kube-apiserver's cluster authentication
trust controller writes it (``pkg/controlplane/controller/clusterauthenticationtrust``), read
through the official client as a component using delegated authentication reads it.

Before this the ConfigMap did not exist (404), and the ``kube-root-ca.crt`` of the namespaces
seeded at start held a placeholder instead of the HTTPS simulator's CA until a reset.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from cryptography import x509
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from lab.kube.server import KubeServer

NAME, NS = "extension-apiserver-authentication", "kube-system"
HEADER_KEYS = {
    "requestheader-allowed-names": ["front-proxy-client"],
    "requestheader-extra-headers-prefix": ["X-Remote-Extra-"],
    "requestheader-group-headers": ["X-Remote-Group"],
    "requestheader-username-headers": ["X-Remote-User"],
}


@pytest.fixture(scope="module")
def tls_sim() -> Iterator[KubeServer]:
    with KubeServer(tls=True, version="1.33") as sim:
        yield sim


@pytest.fixture
def core(tls_sim: KubeServer) -> Iterator[client.CoreV1Api]:
    tls_sim.control.reset()
    yield client.CoreV1Api(tls_sim.api_client())
    assert tls_sim.take_internal_errors() == []


def _data(core: client.CoreV1Api) -> dict[str, str]:
    data: dict[str, str] = core.read_namespaced_config_map(NAME, NS).data
    return data


def test_written_with_the_lab_ca_and_kubeadm_s_front_proxy_flags(
    tls_sim: KubeServer, core: client.CoreV1Api
) -> None:
    cm = core.read_namespaced_config_map(NAME, NS)
    ca = (tls_sim.ca_pem or b"").decode()
    assert ca.startswith("-----BEGIN CERTIFICATE-----")
    assert set(cm.data) == {
        "client-ca-file",
        "requestheader-client-ca-file",
        "requestheader-uid-headers",  # 1.32 on: --requestheader-uid-headers, unset in kind
        *HEADER_KEYS,
    }
    assert cm.data["client-ca-file"] == ca
    assert cm.data["requestheader-client-ca-file"] == ca
    x509.load_pem_x509_certificate(cm.data["client-ca-file"].encode())
    for key, values in HEADER_KEYS.items():
        assert cm.data[key] == json.dumps(values, separators=(",", ":"))
    assert cm.data["requestheader-uid-headers"] == "[]"
    assert [m.manager for m in cm.metadata.managed_fields] == ["kube-apiserver"]
    root = core.read_namespaced_config_map("kube-root-ca.crt", "kube-system")
    assert root.data["ca.crt"] == ca  # the namespaces seeded before the CA existed too


def test_before_1_32_there_is_no_uid_headers_key() -> None:
    with KubeServer(tls=True, version="1.31") as sim:
        core = client.CoreV1Api(sim.api_client())
        assert set(_data(core)) == {"client-ca-file", "requestheader-client-ca-file", *HEADER_KEYS}


def test_deleted_or_edited_it_is_written_again_keeping_what_was_added(
    core: client.CoreV1Api,
) -> None:
    core.delete_namespaced_config_map(NAME, NS)
    written = _data(core)
    cm = core.read_namespaced_config_map(NAME, NS)
    cm.data = {
        "requestheader-group-headers": '["X-Other-Group"]',
        "requestheader-username-headers": "not json",
    }
    core.replace_namespaced_config_map(NAME, NS, cm)
    after = _data(core)
    assert after["requestheader-group-headers"] == '["X-Other-Group","X-Remote-Group"]'
    assert after["requestheader-username-headers"] == '["X-Remote-User"]'
    assert {k: v for k, v in after.items() if k != "requestheader-group-headers"} == {
        k: v for k, v in written.items() if k != "requestheader-group-headers"
    }


def test_a_simulator_without_a_ca_writes_none(api_client: Any, sim: KubeServer) -> None:
    """As a kube-apiserver started without --client-ca-file and --requestheader-client-ca-file:
    delegated authentication treats the missing ConfigMap as 'nothing to trust'."""
    with pytest.raises(ApiException) as err:
        client.CoreV1Api(api_client).read_namespaced_config_map(NAME, NS)
    assert err.value.status == 404
