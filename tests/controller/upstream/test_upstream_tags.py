"""Upstream's ``hasNoClusterPrefixTag`` table and the ``findSubnets`` rule it serves."""

from __future__ import annotations

import pytest

from controller.aws.tags import CLUSTER_TAG_PREFIX, LEGACY_CLUSTER_TAG, ClusterTags, tag_map
from lab.aws import AwsServer
from tests.controller.aws.conftest import MakeCloud
from tests.controller.aws.topology import Topology
from tests.controller.upstream.tags_tables import (
    HAS_CLUSTER_TAG_OWNED,
    HAS_NO_CLUSTER_PREFIX_TAG,
    TEST_CLUSTER_ID,
)

TAGS = ClusterTags(TEST_CLUSTER_ID)


def _upstream_keeps_subnet(tags: dict[str, str], has_no_prefix_tag: bool) -> bool:
    """Upstream ``findSubnets``: ``hasClusterTag || hasNoClusterPrefixTag``."""
    has_cluster_tag = CLUSTER_TAG_PREFIX + TEST_CLUSTER_ID in tags or (
        tags.get(LEGACY_CLUSTER_TAG) == TEST_CLUSTER_ID
    )
    return has_cluster_tag or has_no_prefix_tag


@pytest.mark.parametrize(
    ("case", "tags", "want"),
    HAS_NO_CLUSTER_PREFIX_TAG,
    ids=[row[0] for row in HAS_NO_CLUSTER_PREFIX_TAG],
)
def test_has_no_cluster_prefix_tag(case: str, tags: dict[str, str], want: bool) -> None:
    """TestHasNoClusterPrefixTag, through the rule ours keeps subnets by."""
    assert (not TAGS.tagged_for_other_cluster(tags)) is _upstream_keeps_subnet(tags, want)
    # and the other way round: a cluster tag of our own keeps the subnet whatever else it has
    ours = {**tags, CLUSTER_TAG_PREFIX + TEST_CLUSTER_ID: "shared"}
    assert not TAGS.tagged_for_other_cluster(ours)


def test_find_subnets_keeps_ours_and_untagged_drops_other_clusters(
    aws: AwsServer, topo: Topology, make_cloud: MakeCloud
) -> None:
    """Upstream ``findSubnets`` end to end: subnets tagged for another cluster are not
    candidates; untagged ones and one carrying only the legacy ``KubernetesCluster`` tag of
    another cluster (no ``kubernetes.io/cluster/`` key) are, as upstream keeps them."""
    ec2 = aws.client("ec2")

    def subnet(cidr: str, zone: str, tags: dict[str, str]) -> str:
        spec = [
            {"ResourceType": "subnet", "Tags": [{"Key": k, "Value": v} for k, v in tags.items()]}
        ]
        return ec2.create_subnet(
            VpcId=topo.vpc,
            CidrBlock=cidr,
            AvailabilityZone=zone,
            **({"TagSpecifications": spec} if tags else {}),  # type: ignore[arg-type]
        )["Subnet"]["SubnetId"]

    untagged = subnet("10.20.20.0/24", "us-east-1c", {})
    other = subnet("10.20.21.0/24", "us-east-1d", {CLUSTER_TAG_PREFIX + "other": "owned"})
    legacy_other = subnet("10.20.22.0/24", "us-east-1e", {LEGACY_CLUSTER_TAG: "other"})
    subnets = make_cloud().load_balancer().classic.subnets
    chosen = subnets.for_load_balancer(internal=True, annotated=[])
    assert untagged in chosen
    assert legacy_other in chosen
    assert other not in chosen


@pytest.mark.parametrize(
    ("case", "cluster_id", "tags", "expected", "error"),
    HAS_CLUSTER_TAG_OWNED,
    ids=[row[0] for row in HAS_CLUSTER_TAG_OWNED],
)
def test_has_cluster_tag_owned(
    case: str,
    cluster_id: str,
    tags: list[tuple[str | None, str | None]],
    expected: bool,
    error: str,
) -> None:
    """TestHasClusterTagOwned. "empty cluster ID returns error" is a deliberate deviation
    (controller/DEVIATIONS.md): upstream's error fails every deletion of an NLB with security
    groups; ours answers "not owned", so no group is deleted as ours and the NLB goes."""
    described: list[dict[str, str]] = [
        {k: v for k, v in (("Key", key), ("Value", value)) if v is not None} for key, value in tags
    ]
    owned = ClusterTags(cluster_id).is_owned(tag_map(described))  # type: ignore[arg-type]
    assert owned is expected
    if error:
        assert not cluster_id  # the one case upstream refuses: ours answers False
