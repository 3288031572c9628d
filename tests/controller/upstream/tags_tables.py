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
