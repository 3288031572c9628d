"""EndpointSlices validated as ``pkg/apis/discovery/validation`` validates them (422 Invalid,
upstream's field paths and texts), through the official client's DiscoveryV1Api.

Before this, an ``IPv4`` slice with the address ``not-an-ip`` was stored (201).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from lab.kube.server import KubeServer


@pytest.fixture
def discovery(sim: KubeServer, api_client: Any) -> client.DiscoveryV1Api:
    return client.DiscoveryV1Api(api_client)


def _slice(address_type: str, *addresses: str, **extra: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {"name": "s"},
        "addressType": address_type,
        "endpoints": [{"addresses": list(addresses)}] if addresses else [],
    }
    body.update(extra)
    return body


def _causes(discovery: client.DiscoveryV1Api, body: dict[str, Any]) -> list[tuple[str, str, str]]:
    with pytest.raises(ApiException) as err:
        discovery.create_namespaced_endpoint_slice("default", body)
    assert err.value.status == 422
    status = json.loads(err.value.body)
    assert status["reason"] == "Invalid"
    assert status["message"].startswith('EndpointSlice.discovery.k8s.io "s" is invalid: ')
    return [(c["reason"], c["field"], c["message"]) for c in status["details"]["causes"]]


def test_an_ipv4_slice_refuses_what_is_not_an_ipv4_address(
    discovery: client.DiscoveryV1Api,
) -> None:
    assert _causes(discovery, _slice("IPv4", "not-an-ip")) == [
        (
            "FieldValueInvalid",
            "endpoints[0].addresses[0]",
            'Invalid value: "not-an-ip": must be a valid IPv4 address',
        ),
        (
            "FieldValueInvalid",
            "endpoints[0].addresses[0]",
            'Invalid value: "not-an-ip": must be a valid IP address',
        ),
    ]
    assert _causes(discovery, _slice("IPv4", "fd00::1")) == [
        (
            "FieldValueInvalid",
            "endpoints[0].addresses[0]",
            'Invalid value: "fd00::1": must be a valid IPv4 address',
        )
    ]


@pytest.mark.parametrize(
    ("address_type", "address", "why"),
    [
        ("IPv4", "0.0.0.0", "may not be unspecified (0.0.0.0)"),
        ("IPv4", "127.0.0.2", "may not be in the loopback range (127.0.0.0/8, ::1/128)"),
        (
            "IPv4",
            "169.254.169.254",
            "may not be in the link-local range (169.254.0.0/16, fe80::/10)",
        ),
        (
            "IPv4",
            "224.0.0.1",
            "may not be in the link-local multicast range (224.0.0.0/24, ff02::/10)",
        ),
        ("IPv6", "::", "may not be unspecified (::)"),
        ("IPv6", "::1", "may not be in the loopback range (127.0.0.0/8, ::1/128)"),
        ("IPv6", "fe80::1", "may not be in the link-local range (169.254.0.0/16, fe80::/10)"),
        (
            "IPv6",
            "ff02::2",
            "may not be in the link-local multicast range (224.0.0.0/24, ff02::/10)",
        ),
    ],
)
def test_endpoint_ips_that_make_no_sense_are_refused(
    discovery: client.DiscoveryV1Api, address_type: str, address: str, why: str
) -> None:
    assert _causes(discovery, _slice(address_type, address)) == [
        ("FieldValueInvalid", "endpoints[0].addresses[0]", f'Invalid value: "{address}": {why}')
    ]


def test_ipv6_and_fqdn_rules(discovery: client.DiscoveryV1Api) -> None:
    assert _causes(discovery, _slice("IPv6", "10.0.0.1", "fd00::1")) == [
        (
            "FieldValueInvalid",
            "endpoints[0].addresses[0]",
            'Invalid value: "10.0.0.1": must be a valid IPv6 address',
        )
    ]
    causes = _causes(discovery, _slice("FQDN", "localhost", "Bad.example.com", ""))
    assert [(c[0], c[1]) for c in causes] == [
        ("FieldValueInvalid", "endpoints[0].addresses[0]"),
        ("FieldValueInvalid", "endpoints[0].addresses[1]"),
        ("FieldValueRequired", "endpoints[0].addresses[2]"),
    ]
    assert causes[0][2].endswith("should be a domain with at least two segments separated by dots")
    assert "a lowercase RFC 1123 subdomain" in causes[1][2]


def test_go_parses_leniently_so_these_are_stored(discovery: client.DiscoveryV1Api) -> None:
    """``ParseIPSloppy`` reads leading zeros as decimal; a mapped IPv6 address is IPv4 to Go;
    a trailing dot ends a fully qualified name."""
    for i, (address_type, address) in enumerate(
        [("IPv4", "010.001.002.003"), ("IPv4", "::ffff:10.1.2.3"), ("FQDN", "web.example.com.")]
    ):
        body = _slice(address_type, address)
        body["metadata"]["name"] = f"ok{i}"
        discovery.create_namespaced_endpoint_slice("default", body)


def test_counts_paths_and_ports(discovery: client.DiscoveryV1Api) -> None:
    empty = _slice("IPv4")
    empty["endpoints"] = [{"addresses": []}]
    assert _causes(discovery, empty) == [
        (
            "FieldValueRequired",
            "endpoints[0].addresses",
            "Required value: must contain at least 1 address",
        )
    ]
    many = _slice("IPv4", *(f"10.0.{i // 250}.{i % 250 + 1}" for i in range(101)))
    assert _causes(discovery, many) == [
        (
            "FieldValueTooMany",
            "endpoints[0].addresses",
            "Too many: 101: must have at most 100 items",
        )
    ]
    crowd = _slice("IPv4")
    crowd["endpoints"] = [{"addresses": ["not-an-ip"]} for _ in range(1001)]
    assert _causes(discovery, crowd) == [
        ("FieldValueTooMany", "endpoints", "Too many: 1001: must have at most 1000 items")
    ]
    ports = _slice(
        "IPv4",
        "10.0.0.1",
        ports=[
            {"name": "http", "port": 80},
            {"name": "http", "port": 81, "protocol": "HTTP"},
            {"name": "Bad_Name", "port": 82, "appProtocol": "-x"},
        ],
    )
    assert [(c[0], c[1]) for c in _causes(discovery, ports)] == [
        ("FieldValueDuplicate", "ports[1].name"),
        ("FieldValueNotSupported", "ports[1].protocol"),
        ("FieldValueInvalid", "ports[2].name"),
        ("FieldValueInvalid", "ports[2].appProtocol"),
    ]
    node = _slice("IPv4", "10.0.0.1")
    node["endpoints"][0].update(nodeName="Node_1", hostname="a.b")
    assert [(c[0], c[1]) for c in _causes(discovery, node)] == [
        ("FieldValueInvalid", "endpoints[0].nodeName"),
        ("FieldValueInvalid", "endpoints[0].hostname"),
    ]


def test_ports_defaulted_and_address_type_immutable(discovery: client.DiscoveryV1Api) -> None:
    created = discovery.create_namespaced_endpoint_slice(
        "default", _slice("IPv4", "10.0.0.1", ports=[{"port": 80}])
    )
    assert (created.ports[0].name, created.ports[0].protocol) == ("", "TCP")
    nulls = _slice("IPv4", "10.0.0.1", ports=[{"port": 80, "name": None, "protocol": None}])
    nulls["metadata"]["name"] = "s3"
    stored = discovery.create_namespaced_endpoint_slice("default", nulls)
    assert (stored.ports[0].name, stored.ports[0].protocol) == ("", "TCP")
    body = _slice("IPv6", "fd00::1")
    body["metadata"]["resourceVersion"] = created.metadata.resource_version
    with pytest.raises(ApiException) as err:
        discovery.replace_namespaced_endpoint_slice("s", "default", body)
    assert err.value.status == 422
    assert json.loads(err.value.body)["details"]["causes"] == [
        {
            "reason": "FieldValueInvalid",
            "message": 'Invalid value: "IPv6": field is immutable',
            "field": "addressType",
        }
    ]
    bad_type = _slice("IPv5", "whatever")
    bad_type["metadata"]["name"] = "s2"
    with pytest.raises(ApiException) as err:
        discovery.create_namespaced_endpoint_slice("default", bad_type)
    assert json.loads(err.value.body)["details"]["causes"] == [
        {
            "reason": "FieldValueNotSupported",
            "message": 'Unsupported value: "IPv5": supported values: "FQDN", "IPv4", "IPv6"',
            "field": "addressType",
        }
    ]
