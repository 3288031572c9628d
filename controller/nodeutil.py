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
import logging
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


def addresses_for_node_ip(
    cloud_addresses: Sequence[NodeAddress], provided: str
) -> tuple[NodeAddress, ...]:
    """Filter the cloud's addresses by the kubelet's ``--node-ip`` (one or two IPs)."""
    ips = [p.strip() for p in provided.split(",") if p.strip()]
    if not ips:
        return tuple(cloud_addresses)
    chosen: list[NodeAddress] = []
    for ip in ips:
        matches = [a for a in cloud_addresses if a.address == ip]
        if not matches:
            raise NodeIPError(
                f"failed to get node address from cloud provider that matches ip: {ip}"
            )
        chosen.extend(m for m in matches if m not in chosen)
    matched_types = {a.type for a in chosen}
    rest = [a for a in cloud_addresses if a.type not in matched_types and a not in chosen]
    return (*chosen, *rest)


def addresses_to_api(addresses: Sequence[NodeAddress]) -> list[dict[str, str]]:
    return [{"type": a.type, "address": a.address} for a in addresses]
