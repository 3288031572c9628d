"""Upstream's zone-cache tables (``zones_tables``) against ``ZoneCache``, and the zone-id
label of ``InstanceMetadata`` for a zone EC2 does not list."""

from __future__ import annotations

from typing import Any

import pytest

from controller.aws.zones import ZoneCache, ZoneDetails, ZoneNotFound
from controller.cloud import Node
from lab.aws import AwsServer
from tests.controller.aws.conftest import MakeCloud
from tests.controller.aws.topology import AMI, CLUSTER_TAG, Topology
from tests.controller.upstream.zones_tables import (
    GET_ZONE_DETAILS_BY_NAMES,
    GET_ZONE_ID_BY_ZONE_NAME,
    ZONES,
)


class _ZonesEC2:
    """Answers DescribeAvailabilityZones with the zones given, counting the calls."""

    def __init__(self, zones: list[dict[str, str]]) -> None:
        self.zones = zones
        self.calls = 0

    def describe_availability_zones(self, **_: Any) -> dict[str, Any]:
        self.calls += 1
        return {"AvailabilityZones": self.zones}


@pytest.mark.parametrize(
    ("case", "name", "expected", "fails"),
    GET_ZONE_ID_BY_ZONE_NAME,
    ids=[r[0] for r in GET_ZONE_ID_BY_ZONE_NAME],
)
def test_get_zone_id_by_zone_name(case: str, name: str, expected: str, fails: bool) -> None:
    """TestGetZoneIDByZoneName. The unknown zone failed before: ours answered ''."""
    cache = ZoneCache(_ZonesEC2(ZONES))  # type: ignore[arg-type]
    if fails:
        with pytest.raises(ZoneNotFound, match=f"zone name {name}"):
            cache.zone_id(name)
    else:
        assert cache.zone_id(name) == expected


@pytest.mark.parametrize(
    ("case", "names", "expected", "calls"),
    GET_ZONE_DETAILS_BY_NAMES,
    ids=[r[0] for r in GET_ZONE_DETAILS_BY_NAMES],
)
def test_get_zone_details_by_names(
    case: str, names: list[str], expected: dict[str, tuple[str, str]], calls: int
) -> None:
    """TestGetZoneDetailsByNames: asked twice; an unknown zone describes the zones again
    (before, ours described them once and never again)."""
    ec2 = _ZonesEC2(ZONES)
    cache = ZoneCache(ec2)  # type: ignore[arg-type]
    want = {n: ZoneDetails(n, zid, ztype) for n, (zid, ztype) in expected.items()}
    assert cache.details(names) == want
    assert cache.details(names) == want
    assert ec2.calls == calls


def test_a_zone_gained_later_is_found_by_describing_again() -> None:
    """Upstream's populate merges: an account that gains a zone finds it on the next ask."""
    ec2 = _ZonesEC2(ZONES[:1])
    cache = ZoneCache(ec2)  # type: ignore[arg-type]
    assert cache.details(["az1", "az2"]) == {
        "az1": ZoneDetails("az1", "az1-id", ZONES[0]["ZoneType"])
    }
    ec2.zones = ZONES
    assert cache.zone_id("az2") == "az2-id"
    assert ec2.calls == 2


def test_instance_metadata_of_a_node_in_a_zone_ec2_does_not_list_fails(
    aws: AwsServer, topo: Topology, make_cloud: MakeCloud
) -> None:
    """Upstream getAdditionalLabels: the zone id lookup's error fails InstanceMetadata (the
    node is not initialized, and retried); before, ours labelled nothing and went on. A node
    that already has the label is not looked up."""
    inst = aws.client("ec2").run_instances(
        ImageId=AMI,
        InstanceType="m5.large",
        MinCount=1,
        MaxCount=1,
        SubnetId=topo.public_subnets[0],
        TagSpecifications=[{"ResourceType": "instance", "Tags": [CLUSTER_TAG]}],
    )["Instances"][0]
    node = Node(name="n1", provider_id=f"aws:///us-east-1a/{inst['InstanceId']}")
    instances = make_cloud().instances_v2()
    # the run's zone cache, answered by an EC2 that lists no zone
    instances.ctx.__dict__["zones"] = ZoneCache(_ZonesEC2([]))  # type: ignore[attr-defined,arg-type]
    with pytest.raises(ZoneNotFound, match=inst["Placement"]["AvailabilityZone"]):
        instances.instance_metadata(node)
    labelled = Node(
        name="n1", provider_id=node.provider_id, labels={"topology.k8s.aws/zone-id": "z"}
    )
    assert "topology.k8s.aws/zone-id" not in instances.instance_metadata(labelled).additional_labels
