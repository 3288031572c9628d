"""The simulator's resource table: every kind it serves, as data.

One entry per resource type. The store, the HTTP routes, discovery, the OpenAPI document
and Table printing all read this table, so adding a kind is one entry here plus (where it
needs one) a strategy in ``strategies.py``. Names, verbs, short names and subresources follow
a real v1.31 API server (``shared/docs/apiserver-spec.md`` §1.3).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

FULL_VERBS: tuple[str, ...] = (
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "update",
    "watch",
)
STATUS_VERBS: tuple[str, ...] = ("get", "patch", "update")


@dataclass(frozen=True)
class ResourceType:
    group: str  # "" for core
    version: str
    kind: str
    plural: str
    singular: str
    namespaced: bool
    verbs: tuple[str, ...] = FULL_VERBS
    short_names: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    subresources: tuple[str, ...] = ()  # e.g. ("status",)

    @property
    def group_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def api_version(self) -> str:
        """The ``apiVersion`` objects of this type carry."""
        return self.group_version

    @property
    def list_kind(self) -> str:
        return f"{self.kind}List"

    def path_prefix(self) -> str:
        """``/api/v1`` or ``/apis/<group>/<version>``."""
        return f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"


RESOURCES: tuple[ResourceType, ...] = (
    ResourceType(
        "",
        "v1",
        "Namespace",
        "namespaces",
        "namespace",
        namespaced=False,
        verbs=("create", "delete", "get", "list", "patch", "update", "watch"),
        short_names=("ns",),
        subresources=("finalize", "status"),
    ),
    ResourceType(
        "",
        "v1",
        "Node",
        "nodes",
        "node",
        namespaced=False,
        short_names=("no",),
        subresources=("status",),
    ),
    ResourceType(
        "",
        "v1",
        "Service",
        "services",
        "service",
        namespaced=True,
        short_names=("svc",),
        categories=("all",),
        subresources=("status",),
    ),
    ResourceType(
        "",
        "v1",
        "Pod",
        "pods",
        "pod",
        namespaced=True,
        short_names=("po",),
        categories=("all",),
        subresources=("binding", "status"),
    ),
    ResourceType(
        "", "v1", "Endpoints", "endpoints", "endpoints", namespaced=True, short_names=("ep",)
    ),
    ResourceType("", "v1", "Event", "events", "event", namespaced=True, short_names=("ev",)),
    ResourceType(
        "", "v1", "ConfigMap", "configmaps", "configmap", namespaced=True, short_names=("cm",)
    ),
    ResourceType("", "v1", "Secret", "secrets", "secret", namespaced=True),
    ResourceType(
        "",
        "v1",
        "ServiceAccount",
        "serviceaccounts",
        "serviceaccount",
        namespaced=True,
        short_names=("sa",),
    ),
    ResourceType(
        "discovery.k8s.io",
        "v1",
        "EndpointSlice",
        "endpointslices",
        "endpointslice",
        namespaced=True,
    ),
    ResourceType("coordination.k8s.io", "v1", "Lease", "leases", "lease", namespaced=True),
    ResourceType(
        "events.k8s.io", "v1", "Event", "events", "event", namespaced=True, short_names=("ev",)
    ),
    ResourceType(
        "apps",
        "v1",
        "Deployment",
        "deployments",
        "deployment",
        namespaced=True,
        short_names=("deploy",),
        categories=("all",),
        subresources=("status",),
    ),
    ResourceType(
        "apps",
        "v1",
        "ReplicaSet",
        "replicasets",
        "replicaset",
        namespaced=True,
        short_names=("rs",),
        categories=("all",),
        subresources=("status",),
    ),
)


def groups() -> dict[str, list[str]]:
    """Group name -> versions served, in table order (core group is ``""``)."""
    out: dict[str, list[str]] = {}
    for rt in RESOURCES:
        versions = out.setdefault(rt.group, [])
        if rt.version not in versions:
            versions.append(rt.version)
    return out


def in_group_version(group: str, version: str) -> Iterator[ResourceType]:
    return (rt for rt in RESOURCES if rt.group == group and rt.version == version)


def lookup(group: str, version: str, plural: str) -> ResourceType | None:
    for rt in RESOURCES:
        if rt.group == group and rt.version == version and rt.plural == plural:
            return rt
    return None
