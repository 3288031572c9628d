"""Reset for clusters that cannot be wiped (kind, existing): remember, then restore.

A real cluster has real kubelets and controllers, so a test cannot start from an empty API
server as on the simulator. :class:`ClusterBaseline` remembers what tests may change and a reset
puts back: each node's labels, annotations and taints (providerID is immutable once set, so it
is left alone) and the Services, with the Events, of the namespaces tests use. On reset, every
Service created since (and its finalizers, which no controller will remove once the controller
under test is stopped) and every Event is removed, and each node is patched back.

Used by ``lab.cluster.kind`` and ``lab.cluster.existing``; the sim provider resets by wiping the
simulator and registering its nodes again.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from lab.cluster.kubeapi import MERGE_PATCH, is_not_found, raw


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


class ClusterBaseline:
    """What ``reset_objects()`` restores on a real cluster (see module docstring)."""

    def __init__(self, *, namespaces: Sequence[str] = ("default",)) -> None:
        self.namespaces = tuple(namespaces)
        self.nodes: dict[str, NodeBaseline] = {}
        self.services: dict[str, set[str]] = {}

    def take(self, api_client: Any) -> None:
        from kubernetes import client

        core = client.CoreV1Api(api_client)
        items = raw(core.list_node(_preload_content=False)).get("items") or []
        self.nodes = {n["metadata"]["name"]: _node_baseline(n) for n in items}
        self.services = {
            ns: {
                s["metadata"]["name"]
                for s in raw(core.list_namespaced_service(ns, _preload_content=False)).get(
                    "items", []
                )
            }
            for ns in self.namespaces
        }

    def restore(self, api_client: Any) -> None:
        from kubernetes import client

        core = client.CoreV1Api(api_client)
        for ns in self.namespaces:
            listed = raw(core.list_namespaced_service(ns, _preload_content=False))
            for svc in listed.get("items") or []:
                name = svc["metadata"]["name"]
                if name in self.services.get(ns, set()):
                    continue
                try:
                    if svc["metadata"].get("finalizers"):
                        core.patch_namespaced_service(
                            name,
                            ns,
                            {"metadata": {"finalizers": None}},
                            _content_type=MERGE_PATCH,
                        )
                    core.delete_namespaced_service(name, ns)
                except Exception as exc:  # gone meanwhile is fine
                    if not is_not_found(exc):
                        raise
            core.delete_collection_namespaced_event(ns)
        for name, wanted in self.nodes.items():
            try:
                current = _node_baseline(raw(core.read_node(name, _preload_content=False)))
            except Exception as exc:
                if is_not_found(exc):
                    continue  # a node a test removed for good; nothing to restore it from
                raise
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
