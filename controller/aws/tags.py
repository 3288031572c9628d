"""Cluster ownership tags: which AWS resources belong to this cluster, and how we mark ours.

Neighbours: every module that creates or filters AWS resources (security groups, load
balancers, subnets, instances). Pure: tag lists in, booleans and tag lists out.

Design (upstream ``tags.go``): a resource is the cluster's when it carries the key
``kubernetes.io/cluster/<id>`` (any value) or, in legacy-tag mode, ``KubernetesCluster=<id>``;
it is *owned* (safe to delete) only with the value ``owned`` or the legacy tag. Everything the
controller creates gets the owned tag plus ``kubernetes.io/service-name`` so a restarted
controller can find it again.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

CLUSTER_TAG_PREFIX = "kubernetes.io/cluster/"
LEGACY_CLUSTER_TAG = "KubernetesCluster"
SERVICE_NAME_TAG = "kubernetes.io/service-name"
OWNED = "owned"


def tag_map(tags: Iterable[Mapping[str, str]] | None) -> dict[str, str]:
    """EC2/ELB ``[{"Key": k, "Value": v}]`` to a dict."""
    return {str(t["Key"]): str(t.get("Value", "")) for t in tags or ()}


def tag_list(tags: Mapping[str, str]) -> list[dict[str, str]]:
    return [{"Key": k, "Value": v} for k, v in tags.items()]


@dataclass(frozen=True)
class ClusterTags:
    """Tag rules for one cluster id (``legacy``: KubernetesClusterTag was configured)."""

    cluster_id: str
    legacy: bool = False

    @property
    def key(self) -> str:
        return CLUSTER_TAG_PREFIX + self.cluster_id

    def has_cluster_tag(self, tags: Mapping[str, str]) -> bool:
        if not self.cluster_id:
            return True
        return self.key in tags or tags.get(LEGACY_CLUSTER_TAG) == self.cluster_id

    def is_owned(self, tags: Mapping[str, str]) -> bool:
        if not self.cluster_id:
            return False
        return tags.get(self.key) == OWNED or tags.get(LEGACY_CLUSTER_TAG) == self.cluster_id

    def tagged_for_other_cluster(self, tags: Mapping[str, str]) -> bool:
        """Carries some ``kubernetes.io/cluster/*`` key, but not ours."""
        return not self.has_cluster_tag(tags) and any(
            k.startswith(CLUSTER_TAG_PREFIX) for k in tags
        )

    def owned_tags(self, extra: Iterable[tuple[str, str]] = ()) -> dict[str, str]:
        """Tags for a resource the controller creates: ``extra`` first, cluster tags win."""
        out = dict(extra)
        out[self.key] = OWNED
        if self.legacy:
            out[LEGACY_CLUSTER_TAG] = self.cluster_id
        return out


def find_cluster_ids(tags: Mapping[str, str]) -> list[str]:
    """Cluster ids named by ``kubernetes.io/cluster/<id>`` keys and ``KubernetesCluster``."""
    ids = [k[len(CLUSTER_TAG_PREFIX) :] for k in tags if k.startswith(CLUSTER_TAG_PREFIX)]
    legacy = tags.get(LEGACY_CLUSTER_TAG)
    if legacy and legacy not in ids:
        ids.append(legacy)
    return [i for i in ids if i]
