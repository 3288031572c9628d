"""The tagging controller against the lab's EC2 (boto3 through the cloud's own clients):
tags appear on the node's instance and the Node is labelled; on Node delete only the tags
still carrying our values go; batching merges concurrent nodes into one ``CreateTags``."""

from __future__ import annotations

import threading

import pytest

from controller.aws import AWSCloud
from controller.cloud import InstanceID
from controller.fake import FakeKube
from controller.tagging import TAGGING_LABEL, TaggingController, TaggingOptions, tags_checksum
from lab.aws import AwsServer
from tests.controller.aws.conftest import MakeCloud
from tests.controller.aws.topology import CLUSTER_TAG, Topology
from tests.controller.builders import make_node, provider_id

TAGS = {"team": "storage", "cost-center": "42"}


def instance_tags(aws: AwsServer, instance_id: str) -> dict[str, str]:
    resp = aws.client("ec2").describe_tags(
        Filters=[{"Name": "resource-id", "Values": [instance_id]}]
    )
    return {t["Key"]: t["Value"] for t in resp["Tags"]}


def controller(cloud: AWSCloud, kube: FakeKube, *, batching: bool = False) -> TaggingController:
    ctrl = TaggingController(
        kube,
        cloud,
        nodes=kube.stores["nodes"],
        options=TaggingOptions(tags=TAGS, resources=("instance",), batching=batching),
    )
    ctrl.register(kube.stores["nodes"])
    return ctrl


def test_node_instance_tagged_then_untagged_on_delete(
    aws: AwsServer, topo: Topology, make_cloud: MakeCloud
) -> None:
    kube = FakeKube()
    ctrl = controller(make_cloud(), kube)
    iid = topo.instances["node-0"]
    kube.create("nodes", make_node("node-0", provider_id(topo.provider_id("node-0"))))
    assert [r.outcome for r in ctrl.drain()] == ["success"]
    assert instance_tags(aws, iid) == {CLUSTER_TAG["Key"]: "owned", **TAGS}
    assert kube.get("nodes", "node-0")["metadata"]["labels"][TAGGING_LABEL] == tags_checksum(TAGS)
    assert aws.trail.count("CreateTags") == 1

    # someone changes one of our tags; a Node update does not retag (label still matches)
    aws.client("ec2").create_tags(Resources=[iid], Tags=[{"Key": "team", "Value": "infra"}])
    node = kube.get("nodes", "node-0")
    node["metadata"]["annotations"] = {"touched": "yes"}
    kube.update("nodes", node)
    assert ctrl.drain() == []

    kube.delete("nodes", "node-0")
    assert [r.outcome for r in ctrl.drain()] == ["success"]
    # DeleteTags names each tag with our value: the changed tag and the cluster tag stay
    assert instance_tags(aws, iid) == {CLUSTER_TAG["Key"]: "owned", "team": "infra"}
    assert aws.trail.count("DeleteTags") == 1


def test_a_node_without_instance_id_yet_is_tagged_once_it_has_one(
    aws: AwsServer, topo: Topology, make_cloud: MakeCloud
) -> None:
    kube = FakeKube()
    ctrl = controller(make_cloud(), kube)
    kube.create("nodes", make_node("node-1"))  # the kubelet registered; no providerID yet
    assert [r.outcome for r in ctrl.drain()] == ["success"]  # dropped, as upstream's error
    assert aws.trail.count("CreateTags") == 0
    node = kube.get("nodes", "node-1")
    node["spec"]["providerID"] = topo.provider_id("node-1")
    kube.update("nodes", node)
    ctrl.drain()
    assert TAGS.items() <= instance_tags(aws, topo.instances["node-1"]).items()


def test_batched_tagging_is_one_call_and_a_bad_id_fails_only_itself(
    aws: AwsServer, topo: Topology, make_cloud: MakeCloud
) -> None:
    tags = make_cloud().instance_tags()
    ids = [InstanceID(i) for i in topo.instances.values()]
    errors: dict[str, Exception] = {}

    def tag(iid: InstanceID) -> None:
        try:
            tags.tag_instance(iid, TAGS, batched=True)
        except Exception as exc:
            errors[iid] = exc

    def tag_all(batch: list[InstanceID]) -> None:
        threads = [threading.Thread(target=tag, args=(i,)) for i in batch]
        for t in threads:
            t.start()
        for t in threads:
            t.join(15)

    tag_all(ids)
    calls = aws.trail.calls("CreateTags")
    assert len(calls) == 1
    assert sorted(calls[0].params["ResourceIds"]) == sorted(ids)  # type: ignore[arg-type]
    assert errors == {}

    aws.control.clear_trail()
    bad = InstanceID("i-invalid-id-kwok-0001")
    tag_all([*ids, bad])
    calls = aws.trail.calls("CreateTags")
    assert calls[0].error_code == "InvalidID"  # the batch, failed whole by the bad id
    assert len(calls) == 1 + len(ids) + 1  # then each id on its own
    assert list(errors) == [bad]
    assert type(errors[bad]).__name__ == "InvalidInstanceID"
    for iid in ids:
        assert TAGS.items() <= instance_tags(aws, iid).items()


def test_an_instance_ec2_does_not_know_is_not_found_and_untagging_it_is_done(
    make_cloud: MakeCloud,
) -> None:
    """The lab answers ``InvalidInstanceID.NotFound`` as EC2 does (stock moto tagged it)."""
    from controller.cloud import InstanceNotFound

    tags = make_cloud().instance_tags()
    gone = InstanceID("i-0123456789abcdef0")
    with pytest.raises(InstanceNotFound, match=r"InvalidInstanceID\.NotFound"):
        tags.tag_instance(gone, TAGS)
    tags.untag_instance(gone, TAGS)  # nothing to remove: no error
