"""``DescribeNetworkInterfaces`` filter ``attachment.status``: moto 5.2.5 does not implement
it (upstream's Fargate lookup uses it); the lab answers it (``lab/aws/app.py``)."""

from __future__ import annotations

import pytest

from lab.aws import AwsServer
from lab.aws.fidelity import MotoView
from tests.aws import builders as b


def test_stock_moto_lacks_the_attachment_status_filter(aws: AwsServer) -> None:
    from moto.ec2.exceptions import FilterNotImplementedError
    from moto.ec2.models.elastic_network_interfaces import NetworkInterface

    aws.client("ec2").describe_network_interfaces()  # the endpoint has patched moto by now
    original = NetworkInterface.get_filter_value.moto_original  # type: ignore[attr-defined]
    eni = aws.client("ec2").create_network_interface(SubnetId=b.first_subnet(aws.client("ec2")))
    settings = aws.lab.settings
    model = MotoView(settings.account, settings.region).ec2.get_network_interface(
        eni["NetworkInterface"]["NetworkInterfaceId"]
    )
    with pytest.raises(FilterNotImplementedError):
        original(model, "attachment.status", "DescribeNetworkInterfaces")


def test_attachment_status_filter(aws: AwsServer) -> None:
    ec2 = aws.client("ec2")
    subnet = b.first_subnet(ec2)
    attached = ec2.create_network_interface(SubnetId=subnet)["NetworkInterface"]
    loose = ec2.create_network_interface(SubnetId=subnet)["NetworkInterface"]
    host = ec2.run_instances(ImageId="ami-12c6146b", MinCount=1, MaxCount=1, SubnetId=subnet)
    host_id = host["Instances"][0]["InstanceId"]
    ec2.attach_network_interface(
        NetworkInterfaceId=attached["NetworkInterfaceId"], InstanceId=host_id, DeviceIndex=1
    )

    def ids(status: str) -> set[str]:
        found = ec2.describe_network_interfaces(
            Filters=[{"Name": "attachment.status", "Values": [status]}]
        )["NetworkInterfaces"]
        return {e["NetworkInterfaceId"] for e in found}

    assert attached["NetworkInterfaceId"] in ids("attached")
    assert loose["NetworkInterfaceId"] not in ids("attached")
    assert not ids("detached") & {attached["NetworkInterfaceId"], loose["NetworkInterfaceId"]}
