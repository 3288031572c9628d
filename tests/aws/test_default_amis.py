"""moto's default AMI catalogue, shared between a process's EC2 backends (``lab.aws.motopatches``).

A reset rebuilds moto's backends; the lab copies the first backend's pristine catalogue instead
of building ~1,300 AMIs again. These tests hold it to what stock moto builds, and to a reset
undoing what a test did to an AMI.
"""

from __future__ import annotations

from typing import Any

import pytest

from lab.aws import AwsServer

ACCOUNT = "123456789012"


def _images(aws: AwsServer) -> dict[str, dict[str, Any]]:
    ec2 = aws.client("ec2")
    found = ec2.describe_images(
        Owners=["amazon"], Filters=[{"Name": "name", "Values": ["amzn2-ami-hvm-*"]}]
    )["Images"]
    assert found, "no Amazon Linux 2 image in the default catalogue"
    return {i["ImageId"]: i for i in found}


def _without_snapshot_ids(image: dict[str, Any]) -> dict[str, Any]:
    out = dict(image)
    out["BlockDeviceMappings"] = [
        {**m, "Ebs": {k: v for k, v in m.get("Ebs", {}).items() if k != "SnapshotId"}}
        for m in image.get("BlockDeviceMappings", [])
    ]
    return out


def test_catalogue_after_a_reset_is_stock_motos(aws: AwsServer) -> None:
    """Same images and attributes as a backend moto builds itself, each with its snapshot."""
    from moto.ec2.models import EC2Backend
    from moto.ec2.models.amis import AmiBackend

    shared = EC2Backend("us-east-1", ACCOUNT)
    loader = AmiBackend._load_amis
    assert getattr(loader, "ccm_lab_shared", False), "the lab's loader is not installed"
    stock_loader = loader.__wrapped__  # type: ignore[attr-defined]
    real = AmiBackend._load_amis
    try:
        AmiBackend._load_amis = stock_loader  # type: ignore[method-assign]
        stock = EC2Backend("us-east-1", ACCOUNT)
    finally:
        AmiBackend._load_amis = real  # type: ignore[method-assign]

    assert len(stock.amis) > 1000
    assert set(shared.amis) == set(stock.amis)
    # an AMI without a creation date in moto's catalogue gets the time it was built: in the
    # shared catalogue, the first backend's
    skip = {"ec2_backend", "ebs_snapshot", "creation_date"}
    for ami_id, ami in stock.amis.items():
        mine = shared.amis[ami_id]
        assert mine.creation_date <= ami.creation_date
        assert {k: v for k, v in vars(mine).items() if k not in skip} == {
            k: v for k, v in vars(ami).items() if k not in skip
        }, ami_id
        assert mine.ec2_backend is shared
        assert shared.snapshots[mine.ebs_snapshot.id] is mine.ebs_snapshot
        assert mine.ebs_snapshot.ec2_backend is shared
        assert mine.ebs_snapshot.description == ami.ebs_snapshot.description
        assert mine.ebs_snapshot.from_ami == ami_id
    assert len(shared.snapshots) == len(stock.snapshots)


def test_reset_gives_the_same_catalogue_through_the_api(aws: AwsServer) -> None:
    before = _images(aws)
    aws.reset()
    after = _images(aws)
    assert {k: _without_snapshot_ids(v) for k, v in after.items()} == {
        k: _without_snapshot_ids(v) for k, v in before.items()
    }
    some = sorted(after)[:20]
    wanted = {after[i]["BlockDeviceMappings"][0]["Ebs"]["SnapshotId"] for i in some}
    found = aws.client("ec2").describe_snapshots(SnapshotIds=sorted(wanted))["Snapshots"]
    assert {s["SnapshotId"] for s in found} == wanted


@pytest.mark.parametrize(
    "change", ["launch-permission", "deregister", "tag", "snapshot-permission"]
)
def test_reset_undoes_a_change_to_a_default_ami(aws: AwsServer, change: str) -> None:
    ec2 = aws.client("ec2")
    images = _images(aws)
    image = images[sorted(images)[0]]
    image_id = image["ImageId"]
    snapshot_id = image["BlockDeviceMappings"][0]["Ebs"]["SnapshotId"]
    if change == "launch-permission":
        ec2.modify_image_attribute(
            ImageId=image_id, LaunchPermission={"Add": [{"UserId": "111122223333"}]}
        )
    elif change == "deregister":
        ec2.deregister_image(ImageId=image_id)
    elif change == "tag":
        ec2.create_tags(Resources=[image_id], Tags=[{"Key": "team", "Value": "a"}])
    else:
        ec2.modify_snapshot_attribute(
            SnapshotId=snapshot_id,
            Attribute="createVolumePermission",
            OperationType="add",
            UserIds=["111122223333"],
        )
    if change == "launch-permission":
        perms = ec2.describe_image_attribute(ImageId=image_id, Attribute="launchPermission")
        assert {"UserId": "111122223333"} in perms["LaunchPermissions"]
    elif change == "snapshot-permission":
        snap = ec2.describe_snapshot_attribute(
            SnapshotId=snapshot_id, Attribute="createVolumePermission"
        )
        assert snap["CreateVolumePermissions"] == [{"UserId": "111122223333"}]
    else:
        assert _images(aws).get(image_id) != image
    aws.reset()
    restored = _images(aws)[image_id]
    assert _without_snapshot_ids(restored) == _without_snapshot_ids(image)
    perms = ec2.describe_image_attribute(ImageId=image_id, Attribute="launchPermission")
    assert perms["LaunchPermissions"] == [{"Group": "all"}] or perms["LaunchPermissions"] == []
    assert "111122223333" not in str(perms)
    snap = ec2.describe_snapshot_attribute(
        SnapshotId=restored["BlockDeviceMappings"][0]["Ebs"]["SnapshotId"],
        Attribute="createVolumePermission",
    )
    assert snap["CreateVolumePermissions"] == []


def test_the_first_backends_changes_do_not_reach_the_catalogue(aws: AwsServer) -> None:
    """The catalogue is copied from the first backend of an account and region; what a call
    then changes on that backend's images (launch permissions, product codes, snapshot
    permissions, all changed in place by moto) must not reach the backends built after it."""
    from moto.ec2.models import EC2Backend

    first = EC2Backend("ap-south-2", "999988887777")  # the first of its key: the template
    ami = first.amis[sorted(first.amis)[0]]
    before = (list(ami.launch_permissions), set(ami.product_codes))
    ami.launch_permissions.append({"UserId": "111122223333"})
    ami.product_codes.add("changed")
    ami.ebs_snapshot.create_volume_permission_userids.add("111122223333")
    later = EC2Backend("ap-south-2", "999988887777")
    twin = later.amis[ami.id]
    assert (twin.launch_permissions, twin.product_codes) == before
    assert twin.ebs_snapshot.create_volume_permission_userids == set()
