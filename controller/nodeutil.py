"""Node helpers shared by the node and node-lifecycle controllers.

* :func:`update_node`: read-modify-PUT under retry-on-conflict (upstream's
  ``RetryOnConflict`` around ``Nodes().Update``), re-reading the live object each attempt;
* :func:`addresses_for_node_ip`: upstream ``GetNodeAddressesFromNodeIP``: the kubelet's
  ``--node-ip`` (annotation ``alpha.kubernetes.io/provided-node-ip``) must be one of the
  cloud's addresses; matching addresses come first and other addresses of the same type go;
* taint helpers;
* :func:`node_ref`: the event reference of a Node.
"""

from __future__ import annotations

import copy
import ipaddress
import logging
import re
from collections.abc import Callable, Sequence

from controller.cloud import Node, NodeAddress
from controller.runtime.events import ObjectRef
from controller.runtime.kube import Conflict, KubeClient, Obj

log = logging.getLogger(__name__)

CONFLICT_RETRIES = 20


def node_ref(node: Node) -> ObjectRef:
    """The event reference of a Node: cluster-scoped, and the name stands in for a missing uid
    (as kubelet's node events do), so ``kubectl describe node`` finds it either way."""
    return ObjectRef("Node", node.name, "", node.uid or node.name)


def update_node(kube: KubeClient, name: str, mutate: Callable[[Obj], bool]) -> Obj:
    """Apply ``mutate`` (returns whether it changed anything) to the live Node and PUT it."""
    last: Conflict | None = None
    for _ in range(CONFLICT_RETRIES):
        current = kube.get_node(name)
        new = copy.deepcopy(current)
        if not mutate(new):
            return current
        try:
            return kube.replace_node(new)
        except Conflict as exc:
            log.debug("conflict updating node %s; retrying: %s", name, exc)
            last = exc
    assert last is not None
    raise last


def remove_taint(obj: Obj, key: str) -> bool:
    spec = obj.setdefault("spec", {})
    taints = spec.get("taints") or []
    kept = [t for t in taints if t.get("key") != key]
    if len(kept) == len(taints):
        return False
    spec["taints"] = kept
    return True


def add_taint(obj: Obj, key: str, effect: str) -> bool:
    spec = obj.setdefault("spec", {})
    taints = spec.setdefault("taints", [])
    if any(t.get("key") == key and t.get("effect") == effect for t in taints):
        return False
    taints.append({"key": key, "effect": effect})
    return True


class NodeIPError(ValueError):
    """The provided node IP is not among the cloud's addresses for the instance."""


_IPV4_SLOPPY = re.compile(r"^([0-9]{1,3})\.([0-9]{1,3})\.([0-9]{1,3})\.([0-9]{1,3})$")
IP = ipaddress.IPv4Address | ipaddress.IPv6Address


def parse_ip_sloppy(text: str) -> IP | None:
    """Go's ``net.ParseIP`` as Kubernetes' ``ParseIPSloppy`` reads it: IPv4 octets may have
    leading zeros (``010.1.1.1`` is 10.1.1.1), no IPv6 zone, an IPv4-mapped IPv6 address is
    the IPv4 address (``net.IP.Equal`` compares them equal). ``None`` when not an IP."""
    if "%" in text:
        return None
    try:
        ip: IP = ipaddress.ip_address(text)
    except ValueError:
        match = _IPV4_SLOPPY.match(text)
        if match is None or any(int(o) > 255 for o in match.groups()):
            return None
        ip = ipaddress.IPv4Address(".".join(str(int(o)) for o in match.groups()))
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    return ip


def parse_node_ip_annotation(provided: str) -> list[IP]:
    """Kubernetes ``ParseNodeIPAnnotation``: one IP, or an IPv4/IPv6 pair, comma separated,
    each item exactly an IP (no spaces, no empty item). Checked against
    ``k8s.io/component-helpers/node/util/ips.go`` ``parseNodeIP`` (not sloppy: untrimmed
    items, a parse failure is an error) with dual-stack allowed, as kubernetes/cloud-provider
    @4666611 ``GetNodeAddressesFromNodeIP`` uses it (its list of IPs)."""
    ips: list[IP] = []
    for item in provided.split(","):
        ip = parse_ip_sloppy(item)
        if ip is None:
            raise NodeIPError(f'failed to parse node IP "{provided}": could not parse "{item}"')
        ips.append(ip)
    if len(ips) > 2 or (len(ips) == 2 and ips[0].version == ips[1].version):
        raise NodeIPError(
            f'failed to parse node IP "{provided}": must contain either a single IP or a '
            "dual-stack pair of IPs"
        )
    if len(ips) == 2 and any(ip.is_unspecified for ip in ips):
        raise NodeIPError(
            f'failed to parse node IP "{provided}": dual-stack node IP cannot include '
            "'0.0.0.0' or '::'"
        )
    return ips


def addresses_for_node_ip(
    cloud_addresses: Sequence[NodeAddress], provided: str
) -> tuple[NodeAddress, ...]:
    """Upstream ``GetNodeAddressesFromNodeIP``: filter the cloud's addresses by the kubelet's
    ``--node-ip`` (one IP or a dual-stack pair), comparing addresses as IPs (IPv6 written
    ``…:0:0:0:ba3d`` matches ``…::ba3d``). Matching addresses come first, as the cloud wrote
    them; other addresses of a matched type are dropped."""
    chosen: list[NodeAddress] = []
    matched_types: set[str] = set()
    for ip in parse_node_ip_annotation(provided):
        matches = [a for a in cloud_addresses if parse_ip_sloppy(a.address) == ip]
        if not matches:
            raise NodeIPError(
                f"failed to get node address from cloud provider that matches ip: {ip}"
            )
        chosen.extend(matches)
        matched_types.update(a.type for a in matches)
    rest = [a for a in cloud_addresses if a.type not in matched_types]
    return (*chosen, *rest)


def addresses_to_api(addresses: Sequence[NodeAddress]) -> list[dict[str, str]]:
    return [{"type": a.type, "address": a.address} for a in addresses]
