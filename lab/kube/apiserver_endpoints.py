"""The ``default/kubernetes`` Endpoints and EndpointSlice, kept as kube-apiserver keeps them.

Read off upstream's ``pkg/controlplane/controller/kubernetesservice`` (the loop that runs
``UpdateKubernetesService`` every ``EndpointInterval``, 10 s) and ``pkg/controlplane/
reconcilers`` (the default ``lease`` reconciler and its ``EndpointsAdapter``):

* Endpoints ``default/kubernetes``: labels exactly ``endpointslice.kubernetes.io/skip-mirror:
  "true"`` (so the mirroring controller leaves it alone), one subset whose ``addresses`` are the
  apiservers' advertised IPs and whose ``ports`` are ``[{name: https, port: <secure port>,
  protocol: TCP}]``; written when its subsets or labels differ from that.
* EndpointSlice ``default/kubernetes``: labels exactly ``kubernetes.io/service-name:
  kubernetes`` (no ``endpointslice.kubernetes.io/managed-by``: the EndpointSlice controller
  neither adopts nor deletes it, the Service has no selector anyway), ``addressType: IPv4``,
  one endpoint per IP with ``conditions.ready: true``, the same port; written when its
  endpoints, ports or labels differ.
* Ports are reset to the secure port at start (``reconcilePorts`` true on the first run); the
  periodic runs only fill them in when they are empty, so a client's port edit survives until
  the apiserver restarts (here: until ``/_lab/reset``).

The simulator reconciles on write instead of on a timer: every commit that touches these two
objects is followed at once by the reconciler's writes (``Registry.commit`` in ``registry.py``
calls :func:`reconcile`), so a client that deletes or edits them sees them back in the same
instant, not up to 10 s later.
"""

from __future__ import annotations

import copy
from typing import Any

from lab.kube.exceptions import ApiError
from lab.kube.writes import Writer

NAMESPACE = "default"
NAME = "kubernetes"
#: the advertised address of the simulated apiserver: a kind control-plane node's (the first
#: host of the lab's node network); the Service's targetPort is the secure port
ADVERTISE_ADDRESS = "172.18.0.2"
SECURE_PORT = 6443
MANAGER = "kube-apiserver"
SKIP_MIRROR = "endpointslice.kubernetes.io/skip-mirror"
SERVICE_NAME = "kubernetes.io/service-name"
ENDPOINTS_KEY = ("", "endpoints")
SLICES_KEY = ("discovery.k8s.io", "endpointslices")


def concerns(k: tuple[str, str], key: tuple[str, str]) -> bool:
    """Whether a commit of ``key`` (namespace, name) of kind ``k`` is one to reconcile after."""
    return key == (NAMESPACE, NAME) and k in (ENDPOINTS_KEY, SLICES_KEY)


def _ports() -> list[dict[str, Any]]:
    return [{"name": "https", "port": SECURE_PORT, "protocol": "TCP"}]


def reconcile(writer: Writer, *, reconcile_ports: bool = False) -> None:
    """One ``ReconcileEndpoints`` run through ``writer`` (the store's lock is held by the
    caller or taken here). Refusals (the namespace is gone, a finalizer holds a deleted object)
    are left for the next run, as the upstream loop logs and retries them."""
    store = writer.store
    with store.lock:
        if store.find(store.by_key[("", "namespaces")], "", NAMESPACE) is None:
            return
        address = getattr(store, "advertise_address", ADVERTISE_ADDRESS)
        for sync in (_sync_endpoints, _sync_slice):
            try:
                sync(writer, address, reconcile_ports)
            except ApiError:
                continue


def _sync_endpoints(writer: Writer, address: str, reconcile_ports: bool) -> None:
    store = writer.store
    rt = store.by_key[ENDPOINTS_KEY]
    entry = store.find(rt, NAMESPACE, NAME)
    current = entry.obj if entry is not None else None
    subsets = copy.deepcopy((current or {}).get("subsets") or [])
    if len(subsets) != 1:
        subsets = [{}]
    subset = subsets[0]
    subset["addresses"] = [{"ip": address}]
    if not subset.get("ports") or (reconcile_ports and subset["ports"] != _ports()):
        subset["ports"] = _ports()
    labels = {SKIP_MIRROR: "true"}
    if current is None:
        body = {"metadata": {"name": NAME, "labels": labels}, "subsets": subsets}
        writer.create(rt, NAMESPACE, body, manager=MANAGER)
        return
    if current.get("subsets") == subsets and (current["metadata"].get("labels") or {}) == labels:
        return
    new = copy.deepcopy(current)
    new["metadata"]["labels"] = labels
    new["subsets"] = subsets
    writer.update(rt, NAMESPACE, NAME, new, manager=MANAGER)


def _sync_slice(writer: Writer, address: str, reconcile_ports: bool) -> None:
    store = writer.store
    rt = store.by_key[SLICES_KEY]
    entry = store.find(rt, NAMESPACE, NAME)
    current = entry.obj if entry is not None else None
    if current is not None and current.get("addressType") != "IPv4":
        # not the slice the adapter looks for (addressType is immutable): it goes
        writer.deleter.final_delete(rt, copy.deepcopy(current), current)
        current = None
    endpoints = [{"addresses": [address], "conditions": {"ready": True}}]
    ports = copy.deepcopy((current or {}).get("ports") or [])
    if not ports or (reconcile_ports and ports != _ports()):
        ports = _ports()
    labels = {SERVICE_NAME: NAME}
    if current is None:
        body = {
            "metadata": {"name": NAME, "labels": labels},
            "addressType": "IPv4",
            "endpoints": endpoints,
            "ports": ports,
        }
        writer.create(rt, NAMESPACE, body, manager=MANAGER)
        return
    if (
        current.get("endpoints") == endpoints
        and current.get("ports") == ports
        and (current["metadata"].get("labels") or {}) == labels
    ):
        return
    new = copy.deepcopy(current)
    new["metadata"]["labels"] = labels
    new["endpoints"] = endpoints
    new["ports"] = ports
    writer.update(rt, NAMESPACE, NAME, new, manager=MANAGER)
