"""Upstream's tag tests that decide which subnets are the cluster's, as data.

Source: kubernetes/cloud-provider-aws ``pkg/providers/v1/tags_test.go``
``TestHasNoClusterPrefixTag`` at commit 63ec440c3275321b55afa45480e2fdfd2b0e93c4. Upstream's
``findSubnets`` (``aws.go``) keeps a subnet when ``hasClusterTag`` or
``hasNoClusterPrefixTag``; ours keeps it unless ``tagged_for_other_cluster``. The test cloud's
cluster id is upstream's ``TestClusterID``.
"""

from __future__ import annotations

TEST_CLUSTER_ID = "clusterid.test"

#: (case, tags, hasNoClusterPrefixTag)
HAS_NO_CLUSTER_PREFIX_TAG: list[tuple[str, dict[str, str], bool]] = [
    ("no tags", {}, True),
    ("no cluster tags", {"not a cluster tag": "true"}, True),
    (
        "contains cluster tags",
        {"tag1": "value1", "kubernetes.io/cluster/test.cluster": "owned"},
        False,
    ),
]

#: ``TestHasClusterTagOwned`` (same file and commit): (case, cluster id, tags as (key, value)
#: with ``None`` for upstream's nil, expected, upstream's error). Tags go through ``tag_map``
#: (a nil key or value reads as "", as Go's ``aws.ToString``) into ``ClusterTags.is_owned``.
#: The first case is a deliberate deviation (``controller/DEVIATIONS.md``): with no cluster
#: id ours answers "not owned" instead of failing.
HAS_CLUSTER_TAG_OWNED: list[tuple[str, str, list[tuple[str | None, str | None]], bool, str]] = [
    ("empty cluster ID returns error", "", [("kubernetes.io/cluster/test-cluster", "owned")],
     False, "cannot check cluster tag owned: clusterID is empty"),
    ("legacy tag with matching cluster ID returns true", "test-cluster",
     [("KubernetesCluster", "test-cluster")], True, ""),
    ("legacy tag with non-matching cluster ID returns false", "test-cluster",
     [("KubernetesCluster", "other-cluster")], False, ""),
    ("new tag with owned value returns true", "test-cluster",
     [("kubernetes.io/cluster/test-cluster", "owned")], True, ""),
    ("new tag with shared value returns false", "test-cluster",
     [("kubernetes.io/cluster/test-cluster", "shared")], False, ""),
    ("new tag with wrong cluster ID returns false", "test-cluster",
     [("kubernetes.io/cluster/other-cluster", "owned")], False, ""),
    ("no matching tags returns false", "test-cluster", [("some-other-tag", "some-value")],
     False, ""),
    ("empty tags list returns false", "test-cluster", [], False, ""),
    ("both legacy and new tags present - legacy matches", "test-cluster",
     [("KubernetesCluster", "test-cluster"), ("kubernetes.io/cluster/test-cluster", "shared")],
     True, ""),
    ("both legacy and new tags present - new matches", "test-cluster",
     [("KubernetesCluster", "other-cluster"), ("kubernetes.io/cluster/test-cluster", "owned")],
     True, ""),
    ("both legacy and new tags present - neither matches", "test-cluster",
     [("KubernetesCluster", "other-cluster"), ("kubernetes.io/cluster/test-cluster", "shared")],
     False, ""),
    ("tags with nil key returns false", "test-cluster", [(None, "test-cluster")], False, ""),
    ("tags with nil value returns false", "test-cluster", [("KubernetesCluster", None)],
     False, ""),
    ("legacy tag with empty value returns false", "test-cluster", [("KubernetesCluster", "")],
     False, ""),
    ("new tag with empty value returns false", "test-cluster",
     [("kubernetes.io/cluster/test-cluster", "")], False, ""),
    ("multiple tags with one legacy match", "test-cluster",
     [("some-tag", "some-value"), ("KubernetesCluster", "test-cluster"),
      ("other-tag", "other-value")], True, ""),
    ("multiple tags with one new match", "test-cluster",
     [("some-tag", "some-value"), ("kubernetes.io/cluster/test-cluster", "owned"),
      ("other-tag", "other-value")], True, ""),
    ("case sensitivity - legacy tag key case mismatch", "test-cluster",
     [("kubernetescluster", "test-cluster")], False, ""),
    ("case sensitivity - new tag key case mismatch", "test-cluster",
     [("Kubernetes.io/cluster/test-cluster", "owned")], False, ""),
    ("case sensitivity - new tag value case mismatch", "test-cluster",
     [("kubernetes.io/cluster/test-cluster", "Owned")], False, ""),
]  # fmt: skip
