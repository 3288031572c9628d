"""Node IPAM: kube-controller-manager's range allocator, giving each Node a ``podCIDR``.

Role: with ``--allocate-node-cidrs=true --cluster-cidr=10.244.0.0/16`` (kind's defaults, node
mask /24) the nodeipam controller hands every Node without a ``spec.podCIDR`` the next free
/24 and patches ``spec.podCIDR`` and ``spec.podCIDRs``; a deleted Node's range goes back.
"Next" is the range allocator's (``cidrset``): it continues after the last range it handed
out and wraps around, so a freed range is reused only after the others; CIDRs Nodes already
carry are marked used at start. An exhausted cluster CIDR leaves the Node without a range and
records a ``CIDRNotAvailable`` event, as upstream. The kubelet stand-in (``kubelet_pods``) gives
pods addresses from their node's range. Neighbours: ``informers``, ``controller``.
"""

from __future__ import annotations

import ipaddress
import logging
import threading
from collections.abc import Hashable

from lab.clock import LabClock
from lab.dataplane.api import NODES, SMP, Api, meta, path
from lab.dataplane.controller import Controller
from lab.dataplane.events import involved, record
from lab.dataplane.informers import Informers
from lab.kube.objects import Obj
from lab.kubeclient import NotFound

log = logging.getLogger(__name__)

DEFAULT_CLUSTER_CIDR = "10.244.0.0/16"
DEFAULT_NODE_MASK = 24


class CidrSet:
    """The ranges of one cluster CIDR, allocated round-robin from the last one handed out."""

    def __init__(self, cluster_cidr: str, node_mask: int) -> None:
        network = ipaddress.ip_network(cluster_cidr)
        if node_mask < network.prefixlen or node_mask > network.max_prefixlen:
            raise ValueError(
                f"node mask /{node_mask} does not fit cluster CIDR {cluster_cidr} "
                f"(/{network.prefixlen}..{network.max_prefixlen})"
            )
        self.network = network
        self.node_mask = node_mask
        self.size = 2 ** (node_mask - network.prefixlen)
        self._used: set[int] = set()
        self._next = 0
        self._lock = threading.Lock()

    def _subnet(self, index: int) -> str:
        base = int(self.network.network_address) + index * 2 ** (
            self.network.max_prefixlen - self.node_mask
        )
        return f"{ipaddress.ip_address(base)}/{self.node_mask}"

    def _index(self, cidr: str) -> int | None:
        try:
            net = ipaddress.ip_network(cidr)
        except ValueError:
            return None
        inside = net.network_address in self.network and net.broadcast_address in self.network
        if net.prefixlen != self.node_mask or not inside:
            return None
        step = 2 ** (self.network.max_prefixlen - self.node_mask)
        return int((int(net.network_address) - int(self.network.network_address)) // step)

    def allocate_next(self) -> str | None:
        with self._lock:
            for offset in range(self.size):
                index = (self._next + offset) % self.size
                if index not in self._used:
                    self._used.add(index)
                    self._next = (index + 1) % self.size
                    return self._subnet(index)
            return None

    def occupy(self, cidr: str) -> bool:
        index = self._index(cidr)
        if index is None:
            return False
        with self._lock:
            self._used.add(index)
        return True

    def release(self, cidr: str) -> None:
        index = self._index(cidr)
        if index is not None:
            with self._lock:
                self._used.discard(index)


class NodeIpamController(Controller):
    """Assigns ``spec.podCIDR`` to Nodes (see the module doc)."""

    name = "nodeipam-controller"

    def __init__(
        self,
        api: Api,
        informers: Informers,
        clock: LabClock,
        *,
        cluster_cidr: str = DEFAULT_CLUSTER_CIDR,
        node_mask: int = DEFAULT_NODE_MASK,
    ) -> None:
        super().__init__(clock)
        self.api = api
        self.cidrs = CidrSet(cluster_cidr, node_mask)
        self.nodes = informers(NODES)
        self._owned: dict[str, str] = {}
        self.nodes.add_handler(self._on_node)

    def _on_node(self, event: str, node: Obj, old: Obj | None) -> None:
        name = str(meta(node).get("name"))
        cidr = (node.get("spec") or {}).get("podCIDR")
        if event == "DELETED":
            released = self._owned.pop(name, None) or cidr
            if released:
                self.cidrs.release(released)
            return
        if cidr:
            if self._owned.get(name) != cidr:
                self.cidrs.occupy(cidr)
                self._owned[name] = cidr
            return
        self.enqueue(name)

    def sync(self, key: Hashable) -> None:
        name = str(key)
        node = self.nodes.get("", name)
        if node is None or (node.get("spec") or {}).get("podCIDR"):
            return
        cidr = self._owned.get(name) or self.cidrs.allocate_next()
        if cidr is None:
            self._event(node)
            return
        self._owned[name] = cidr
        try:
            self.api.patch(
                path(NODES, None, name),
                {"spec": {"podCIDR": cidr, "podCIDRs": [cidr]}},
                content_type=SMP,
            )
        except NotFound:
            self._owned.pop(name, None)
            self.cidrs.release(cidr)
            return
        log.info("node %s: podCIDR %s", name, cidr)

    def _event(self, node: Obj) -> None:
        name = str(meta(node).get("name"))
        log.warning("node %s: no pod CIDR left in %s", name, self.cidrs.network)
        ref = {**involved(node, kind="Node"), "uid": name}  # node events: uid is the name
        record(
            self.api,
            self.clock,
            ref,
            reason="CIDRNotAvailable",
            message=f"Node {name} status is now: CIDRNotAvailable",
            component="cidrAllocator",
        )
