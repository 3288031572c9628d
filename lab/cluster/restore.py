"""Reset for clusters that cannot be wiped (kind, existing): remember, then restore.

A real cluster has real kubelets and controllers, so a test cannot start from an empty API
server as on the simulator. :class:`ClusterBaseline` remembers what tests may change and a reset
puts back: each node's labels, annotations and taints (providerID is immutable once set, so it
is left alone) and the Services and Events of the namespaces tests use. On reset, every Service
created since is removed (without its finalizers, which no controller will remove once the
controller under test is stopped), every Event too, and each node is patched back. On a cluster
the lab made (kind: ``sweep_pods``) the Pods created since go too, at once (grace period 0, so
the next test may reuse their names), in ``default`` and in every namespace created since the
baseline; those namespaces stay, emptied (deleting one takes the namespace controller's time,
and a test that creates it again would meet it terminating). On an existing cluster nothing but
the tests' Services and the Events is removed: other people's pods and namespaces live there.

The nodes come back as they registered, the ``node.cloudprovider.kubernetes.io/uninitialized``
taint included (the sim's reset registers its nodes anew, with the same taint): a test that
needs schedulable nodes starts a controller first.

Used by ``lab.cluster.kind`` and ``lab.cluster.existing``; the sim provider resets by wiping the
simulator and registering its nodes again.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from lab.cluster.kubeapi import MERGE_PATCH, raw
from lab.kubeclient import NotFound, typed_api


@dataclasses.dataclass(frozen=True)
class NodeBaseline:
    labels: Mapping[str, str]
    annotations: Mapping[str, str]
    taints: tuple[Mapping[str, str], ...]


def _node_baseline(node: Mapping[str, Any]) -> NodeBaseline:
    meta = node.get("metadata") or {}
    spec = node.get("spec") or {}
    return NodeBaseline(
        labels=dict(meta.get("labels") or {}),
        annotations=dict(meta.get("annotations") or {}),
        taints=tuple(
            {k: str(t[k]) for k in ("key", "value", "effect") if t.get(k)}
            for t in spec.get("taints") or []
        ),
    )


def _names(response: Any) -> set[str]:
    return {str(item["metadata"]["name"]) for item in raw(response).get("items") or []}


def _sweep(
    listed: Mapping[str, Any],
    *,
    keep: set[str],
    unfinalize: Callable[..., Any],
    delete: Callable[..., Any],
    namespace: str,
    **options: Any,
) -> None:
    """Delete every listed object not in ``keep``, its finalizers dropped first (no controller
    will remove them once the controller under test is stopped); one gone meanwhile is fine."""
    for item in listed.get("items") or []:
        name = item["metadata"]["name"]
        if name in keep:
            continue
        with contextlib.suppress(NotFound):
            if item["metadata"].get("finalizers"):
                unfinalize(
                    name, namespace, {"metadata": {"finalizers": None}}, _content_type=MERGE_PATCH
                )
            delete(name, namespace, **options)


class ClusterBaseline:
    """What ``reset_objects()`` restores on a real cluster (see module docstring)."""

    def __init__(
        self, *, namespaces: Sequence[str] = ("default",), sweep_pods: bool = False
    ) -> None:
        self.namespaces = tuple(namespaces)
        #: also remove Pods (and empty namespaces created since): only on a cluster the lab made,
        #: where nobody else's objects live (kind); never on an existing cluster
        self.sweep_pods = sweep_pods
        self.nodes: dict[str, NodeBaseline] = {}
        self.services: dict[str, set[str]] = {}
        self.pods: dict[str, set[str]] = {}
        #: every namespace at the baseline: one created later is a test's, emptied on reset
        self.all_namespaces: set[str] = set()

    def take(self, api_client: Any) -> None:
        from kubernetes import client

        core = client.CoreV1Api(api_client)
        items = raw(core.list_node(_preload_content=False)).get("items") or []
        self.nodes = {n["metadata"]["name"]: _node_baseline(n) for n in items}
        self.all_namespaces = _names(core.list_namespace(_preload_content=False))
        self.services = {
            ns: _names(core.list_namespaced_service(ns, _preload_content=False))
            for ns in self.namespaces
        }
        self.pods = {
            ns: _names(core.list_namespaced_pod(ns, _preload_content=False))
            for ns in self.namespaces
        }

    def restore(self, api_client: Any) -> None:
        from kubernetes import client

        core = typed_api(client.CoreV1Api(api_client))
        created: list[str] = []
        if self.sweep_pods:
            listed_ns = _names(core.list_namespace(_preload_content=False))
            created = sorted(listed_ns - self.all_namespaces)
        for ns in (*self.namespaces, *created):
            _sweep(
                raw(core.list_namespaced_service(ns, _preload_content=False)),
                keep=self.services.get(ns, set()),
                unfinalize=core.patch_namespaced_service,
                delete=core.delete_namespaced_service,
                namespace=ns,
            )
            if self.sweep_pods:
                _sweep(
                    raw(core.list_namespaced_pod(ns, _preload_content=False)),
                    keep=self.pods.get(ns, set()),
                    unfinalize=core.patch_namespaced_pod,
                    delete=core.delete_namespaced_pod,
                    namespace=ns,
                    grace_period_seconds=0,
                )
            core.delete_collection_namespaced_event(ns)
        for name, wanted in self.nodes.items():
            try:
                current = _node_baseline(raw(core.read_node(name, _preload_content=False)))
            except NotFound:
                continue  # a node a test removed for good; nothing to restore it from
            patch: dict[str, Any] = {
                "metadata": {
                    field: {
                        **{k: None for k in getattr(current, field) if k not in want},
                        **want,
                    }
                    for field, want in (
                        ("labels", wanted.labels),
                        ("annotations", wanted.annotations),
                    )
                },
                "spec": {"taints": [dict(t) for t in wanted.taints]},
            }
            core.patch_node(name, patch, _content_type=MERGE_PATCH)
