"""The simulator's resource table: every kind it serves, as data.

One entry per resource type. The store, the HTTP routes, discovery, the OpenAPI document
and Table printing all read this table, so adding a kind is one entry here plus (where it
needs one) a strategy in ``strategies.py``. Names, verbs, short names and subresources follow
a real v1.33 API server (``shared/docs/apiserver-spec.md`` §1.3).
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
CREATE_ONLY: tuple[str, ...] = ("create",)


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
        subresources=("attach", "binding", "exec", "log", "portforward", "status"),
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
        subresources=("token",),
    ),
    ResourceType(
        "",
        "v1",
        "ReplicationController",
        "replicationcontrollers",
        "replicationcontroller",
        namespaced=True,
        short_names=("rc",),
        categories=("all",),
        subresources=("scale", "status"),
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
        subresources=("scale", "status"),
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
        subresources=("scale", "status"),
    ),
    ResourceType(
        "apps",
        "v1",
        "DaemonSet",
        "daemonsets",
        "daemonset",
        namespaced=True,
        short_names=("ds",),
        categories=("all",),
        subresources=("status",),
    ),
    ResourceType(
        "apps",
        "v1",
        "StatefulSet",
        "statefulsets",
        "statefulset",
        namespaced=True,
        short_names=("sts",),
        categories=("all",),
        subresources=("scale", "status"),
    ),
    ResourceType(
        "batch",
        "v1",
        "Job",
        "jobs",
        "job",
        namespaced=True,
        categories=("all",),
        subresources=("status",),
    ),
    ResourceType(
        "batch",
        "v1",
        "CronJob",
        "cronjobs",
        "cronjob",
        namespaced=True,
        short_names=("cj",),
        categories=("all",),
        subresources=("status",),
    ),
    ResourceType(
        "rbac.authorization.k8s.io",
        "v1",
        "ClusterRoleBinding",
        "clusterrolebindings",
        "clusterrolebinding",
        namespaced=False,
    ),
    ResourceType(
        "rbac.authorization.k8s.io",
        "v1",
        "ClusterRole",
        "clusterroles",
        "clusterrole",
        namespaced=False,
    ),
    ResourceType(
        "rbac.authorization.k8s.io",
        "v1",
        "RoleBinding",
        "rolebindings",
        "rolebinding",
        namespaced=True,
    ),
    ResourceType("rbac.authorization.k8s.io", "v1", "Role", "roles", "role", namespaced=True),
    ResourceType(
        "apiregistration.k8s.io",
        "v1",
        "APIService",
        "apiservices",
        "apiservice",
        namespaced=False,
        categories=("api-extensions",),
        subresources=("status",),
    ),
    # Create-only review kinds: answered, never stored (review.py).
    ResourceType(
        "authentication.k8s.io",
        "v1",
        "SelfSubjectReview",
        "selfsubjectreviews",
        "selfsubjectreview",
        namespaced=False,
        verbs=CREATE_ONLY,
    ),
    ResourceType(
        "authentication.k8s.io",
        "v1",
        "TokenReview",
        "tokenreviews",
        "tokenreview",
        namespaced=False,
        verbs=CREATE_ONLY,
    ),
    ResourceType(
        "authorization.k8s.io",
        "v1",
        "LocalSubjectAccessReview",
        "localsubjectaccessreviews",
        "localsubjectaccessreview",
        namespaced=True,
        verbs=CREATE_ONLY,
    ),
    ResourceType(
        "authorization.k8s.io",
        "v1",
        "SelfSubjectAccessReview",
        "selfsubjectaccessreviews",
        "selfsubjectaccessreview",
        namespaced=False,
        verbs=CREATE_ONLY,
    ),
    ResourceType(
        "authorization.k8s.io",
        "v1",
        "SelfSubjectRulesReview",
        "selfsubjectrulesreviews",
        "selfsubjectrulesreview",
        namespaced=False,
        verbs=CREATE_ONLY,
    ),
    ResourceType(
        "authorization.k8s.io",
        "v1",
        "SubjectAccessReview",
        "subjectaccessreviews",
        "subjectaccessreview",
        namespaced=False,
        verbs=CREATE_ONLY,
    ),
)

#: Kinds whose create is answered and never stored (authentication / authorization reviews).
REVIEW_GROUPS: frozenset[str] = frozenset({"authentication.k8s.io", "authorization.k8s.io"})

#: A subresource whose object is of another kind: (group, version, kind) as discovery says.
SUBRESOURCE_KINDS: dict[str, tuple[str, str, str]] = {
    "scale": ("autoscaling", "v1", "Scale"),
    "token": ("authentication.k8s.io", "v1", "TokenRequest"),
    "binding": ("", "v1", "Binding"),
    "attach": ("", "v1", "PodAttachOptions"),
    "exec": ("", "v1", "PodExecOptions"),
    "portforward": ("", "v1", "PodPortForwardOptions"),
}


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
