"""EndpointSlice (``discovery.k8s.io/v1``) defaulting and validation, as kube-apiserver does it.

Role: the strategy of ``endpointslices``, after ``pkg/apis/discovery/v1/defaults.go`` (a port's
``name`` defaults to ``""`` and its ``protocol`` to ``TCP``) and
``pkg/apis/discovery/validation/validation.go``: ``addressType`` required, one of ``FQDN``,
``IPv4``, ``IPv6`` and immutable; at most 1,000 endpoints, each with 1 to 100 addresses checked
against the slice's address type (``IsValidIPv4Address`` / ``IsValidIPv6Address`` with Go's
lenient parser, then ``ValidateEndpointIP``: no unspecified, loopback, link-local or link-local
multicast address; ``IsFullyQualifiedDomainName`` for FQDN); ``nodeName`` a DNS subdomain,
``hostname`` a DNS label, ``deprecatedTopology`` at most 16 valid labels, at most 8 zone hints
with valid, distinct names; at most 20,000 ports with DNS-label, distinct names, protocol TCP /
UDP / SCTP and a qualified-name ``appProtocol``. Field paths and texts are upstream's.
Neighbours: the generic base in ``strategies.py``, the table in ``strategy_table.py``.
"""

from __future__ import annotations

import ipaddress
from typing import Any

from lab.kube.exceptions import (
    FieldError,
    duplicate,
    invalid_value,
    not_supported,
    required,
    too_many,
)
from lab.kube.objects import Obj
from lab.kube.selectors import key_problem, value_problem
from lab.kube.strategies import Strategy
from lab.kube.validation import name_problems, validate_labels

ADDRESS_TYPES = ["FQDN", "IPv4", "IPv6"]
PROTOCOLS = ["SCTP", "TCP", "UDP"]
MAX_ENDPOINTS, MAX_ADDRESSES, MAX_PORTS, MAX_TOPOLOGY, MAX_ZONE_HINTS = 1000, 100, 20000, 16, 8

IP = ipaddress.IPv4Address | ipaddress.IPv6Address


def go_parse_ip(text: str) -> IP | None:
    """Go's ``netutils.ParseIPSloppy``: ``net.ParseIP`` that also takes IPv4 octets with
    leading zeros (as decimal); no IPv6 zone. An IPv4-mapped IPv6 address is its IPv4 address
    (``To4``). None when Go would not parse it."""
    if "%" in text:
        return None
    try:
        ip: IP = ipaddress.ip_address(text)
    except ValueError:
        parts = text.split(".")
        if len(parts) != 4 or not all(p.isdigit() and p.isascii() and len(p) <= 3 for p in parts):
            return None
        if any(int(p) > 255 for p in parts):
            return None
        return ipaddress.IPv4Address(".".join(str(int(p)) for p in parts))
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    return ip


def _link_local_multicast(ip: IP) -> bool:
    if isinstance(ip, ipaddress.IPv4Address):
        return ip in ipaddress.IPv4Network("224.0.0.0/24")
    packed = ip.packed
    return packed[0] == 0xFF and packed[1] & 0x0F == 0x02


def endpoint_ip_errors(field: str, text: str) -> list[FieldError]:
    """``ValidateEndpointIP``: the addresses an endpoint may not have."""
    ip = go_parse_ip(text)
    if ip is None:
        return [invalid_value(field, text, "must be a valid IP address")]
    errs = []
    if ip.is_unspecified:
        errs.append(invalid_value(field, text, f"may not be unspecified ({text})"))
    if ip.is_loopback:
        errs.append(
            invalid_value(field, text, "may not be in the loopback range (127.0.0.0/8, ::1/128)")
        )
    if ip.is_link_local:
        errs.append(
            invalid_value(
                field, text, "may not be in the link-local range (169.254.0.0/16, fe80::/10)"
            )
        )
    if _link_local_multicast(ip):
        errs.append(
            invalid_value(
                field,
                text,
                "may not be in the link-local multicast range (224.0.0.0/24, ff02::/10)",
            )
        )
    return errs


def _address_errors(field: str, address: str, address_type: str) -> list[FieldError]:
    if address_type in ("IPv4", "IPv6"):
        ip = go_parse_ip(address)
        family = ipaddress.IPv4Address if address_type == "IPv4" else ipaddress.IPv6Address
        errs = []
        if not isinstance(ip, family):
            errs.append(invalid_value(field, address, f"must be a valid {address_type} address"))
        return errs + endpoint_ip_errors(field, address)
    if address_type == "FQDN":
        return fqdn_errors(field, address)
    return []  # an unknown type is reported once, on addressType


def fqdn_errors(field: str, name: str) -> list[FieldError]:
    """apimachinery's ``IsFullyQualifiedDomainName``."""
    if not name:
        return [required(field)]
    name = name.removesuffix(".")
    problems = name_problems(name, "subdomain")
    if problems:
        return [invalid_value(field, name, p) for p in problems]
    labels = name.split(".")
    if len(labels) < 2:
        return [
            invalid_value(
                field, name, "should be a domain with at least two segments separated by dots"
            )
        ]
    return [
        invalid_value(field, label, p) for label in labels for p in name_problems(label, "label")
    ]


def _qualified_name_errors(field: str, value: str) -> list[FieldError]:
    problem = key_problem(value)
    return [invalid_value(field, value, problem)] if problem else []


def _endpoint_errors(field: str, endpoint: Obj, address_type: str) -> list[FieldError]:
    errs: list[FieldError] = []
    addresses = endpoint.get("addresses") or []
    if not addresses:
        errs.append(required(f"{field}.addresses", "must contain at least 1 address"))
    elif len(addresses) > MAX_ADDRESSES:
        errs.append(too_many(f"{field}.addresses", len(addresses), MAX_ADDRESSES))
    for i, address in enumerate(addresses):
        errs += _address_errors(f"{field}.addresses[{i}]", str(address), address_type)
    node = endpoint.get("nodeName")
    if node is not None:
        errs += [
            invalid_value(f"{field}.nodeName", node, p) for p in name_problems(node, "subdomain")
        ]
    topology = endpoint.get("deprecatedTopology") or {}
    if len(topology) > MAX_TOPOLOGY:
        errs.append(too_many(f"{field}.deprecatedTopology", len(topology), MAX_TOPOLOGY))
    errs += validate_labels(topology or None, f"{field}.deprecatedTopology")
    hostname = endpoint.get("hostname")
    if hostname is not None:
        errs += [
            invalid_value(f"{field}.hostname", hostname, p)
            for p in name_problems(hostname, "label")
        ]
    hints = endpoint.get("hints")
    if isinstance(hints, dict):
        errs += _hint_errors(f"{field}.hints", hints)
    return errs


def _hint_errors(field: str, hints: Obj) -> list[FieldError]:
    zones = hints.get("forZones") or []
    if len(zones) > MAX_ZONE_HINTS:
        return [too_many(f"{field}.forZones", len(zones), MAX_ZONE_HINTS)]
    errs: list[FieldError] = []
    seen: set[str] = set()
    for i, zone in enumerate(zones):
        name = str((zone or {}).get("name") or "")
        path = f"{field}.forZones[{i}].name"
        if name in seen:
            errs.append(duplicate(path, name))
        seen.add(name)
        problem = value_problem(name)
        if problem:
            errs.append(invalid_value(path, name, problem))
    return errs


def _port_errors(ports: list[Any]) -> list[FieldError]:
    if len(ports) > MAX_PORTS:
        return [too_many("ports", len(ports), MAX_PORTS)]
    errs: list[FieldError] = []
    names: set[str] = set()
    for i, item in enumerate(ports):
        port: Obj = item if isinstance(item, dict) else {}
        name = str(port.get("name") or "")
        if name:
            errs += [
                invalid_value(f"ports[{i}].name", name, p) for p in name_problems(name, "label")
            ]
        if name in names:
            errs.append(duplicate(f"ports[{i}].name", name))
        names.add(name)
        protocol = port.get("protocol")
        if protocol is None:
            errs.append(required(f"ports[{i}].protocol"))
        elif protocol not in PROTOCOLS:
            errs.append(not_supported(f"ports[{i}].protocol", protocol, PROTOCOLS))
        app = port.get("appProtocol")
        if app is not None:
            errs += _qualified_name_errors(f"ports[{i}].appProtocol", str(app))
    return errs


class EndpointSliceStrategy(Strategy):
    def default(self, obj: Obj, old: Obj | None) -> None:
        for port in obj.get("ports") or []:
            if isinstance(port, dict):  # nil pointers (absent or null) get their defaults
                if port.get("name") is None:
                    port["name"] = ""
                if port.get("protocol") is None:
                    port["protocol"] = "TCP"

    def validate(self, obj: Obj, old: Obj | None) -> list[FieldError]:
        errs: list[FieldError] = []
        address_type = obj.get("addressType")
        if not address_type:
            errs.append(required("addressType"))
        elif address_type not in ADDRESS_TYPES:
            errs.append(not_supported("addressType", address_type, ADDRESS_TYPES))
        endpoints = obj.get("endpoints") or []
        if len(endpoints) > MAX_ENDPOINTS:
            errs.append(too_many("endpoints", len(endpoints), MAX_ENDPOINTS))
        else:
            for i, endpoint in enumerate(endpoints):
                if isinstance(endpoint, dict):
                    errs += _endpoint_errors(f"endpoints[{i}]", endpoint, str(address_type))
        errs += _port_errors(obj.get("ports") or [])
        if old is not None and old.get("addressType") != address_type:
            errs.append(invalid_value("addressType", address_type or "", "field is immutable"))
        return errs
