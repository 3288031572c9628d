"""The IMDS wire protocol: tokens, status codes, directory listings and values from EC2."""

from __future__ import annotations

import http.client as http_client
import json
from typing import Any

import pytest

from lab.imds import INSTANCE_HEADER, ImdsServer
from tests.imds.conftest import (
    REGION,
    FakeClock,
    SeededInstance,
    World,
    get,
    http,
    run_node,
    token,
)

TTL = "X-aws-ec2-metadata-token-ttl-seconds"


# -- IMDSv2 tokens -------------------------------------------------------------------------------


def test_token_ttl_out_of_bounds_or_missing_is_400(imds: ImdsServer) -> None:
    for ttl in ("0", "21601", "-1", "abc", "", None):
        headers: dict[str, str] = {} if ttl is None else {TTL: ttl}
        reply = http("PUT", f"{imds.url}/latest/api/token", headers=headers)
        assert (reply.status, reply.headers["X-Ccm-Lab-Error"]) == (400, "BadRequest"), ttl
        assert "X-aws-ec2-metadata-token-ttl-seconds" in reply.body, ttl
    assert imds.control.state()["tokens"] == 0


def test_token_ttl_bounds_accepted_and_echoed(imds: ImdsServer) -> None:
    for ttl in (1, 21600):
        reply = http("PUT", f"{imds.url}/latest/api/token", headers={TTL: str(ttl)})
        assert reply.status == 200
        assert reply.headers[TTL] == str(ttl)
        assert len(reply.body) >= 40
    assert imds.control.state()["tokens"] == 2


def test_token_put_with_x_forwarded_for_is_403(imds: ImdsServer) -> None:
    reply = http(
        "PUT",
        f"{imds.url}/latest/api/token",
        headers={TTL: "60", "X-Forwarded-For": "203.0.113.7"},
    )
    assert reply.status == 403
    assert imds.control.state()["tokens"] == 0


def test_token_expires_on_the_clock(imds: ImdsServer, clock: FakeClock) -> None:
    tok = token(imds.url, ttl=30)
    first = get(imds.url, "latest/meta-data/instance-id", tok)
    assert first.status == 200
    assert first.headers[TTL] == "30"
    clock.advance(20)
    assert get(imds.url, "latest/meta-data/instance-id", tok).headers[TTL] == "10"
    clock.advance(10)
    assert get(imds.url, "latest/meta-data/instance-id", tok).status == 401


def test_invalid_token_is_401_even_when_v1_allowed(imds: ImdsServer) -> None:
    assert get(imds.url, "latest/meta-data/instance-id").status == 200  # v1 allowed
    reply = get(imds.url, "latest/meta-data/instance-id", "not-a-token")
    assert reply.status == 401
    assert reply.headers["X-Ccm-Lab-Error"] == "Unauthorized"


def test_token_is_bound_to_its_instance(imds: ImdsServer, world: World) -> None:
    other = run_node(world)
    tok = token(imds.url)
    mine = get(imds.url, "latest/meta-data/instance-id", tok)
    theirs = get(
        imds.url, "latest/meta-data/instance-id", tok, **{INSTANCE_HEADER: other.instance_id}
    )
    assert mine.status == 200
    assert theirs.status == 401


def test_required_instance_refuses_v1(aws_url: str, world: World) -> None:
    node = run_node(world, http_tokens="required")
    with ImdsServer(aws_url, REGION, instance_id=node.instance_id, cache_ttl=0) as imds:
        assert get(imds.url, "latest/meta-data/instance-id").status == 401
        tok = token(imds.url)
        assert get(imds.url, "latest/meta-data/instance-id", tok).body == node.instance_id


def test_instance_switched_to_required_at_run_time(
    imds: ImdsServer, ec2: Any, node: SeededInstance
) -> None:
    assert get(imds.url, "latest/meta-data/instance-id").status == 200
    ec2.modify_instance_metadata_options(InstanceId=node.instance_id, HttpTokens="required")
    assert get(imds.url, "latest/meta-data/instance-id").status == 401


def test_wrong_methods(imds: ImdsServer) -> None:
    assert http("GET", f"{imds.url}/latest/api/token").status == 405
    assert http("POST", f"{imds.url}/latest/meta-data/instance-id").status == 405
    assert http("PUT", f"{imds.url}/v9/api/token", headers={TTL: "60"}).status == 404


def test_withheld_token_response_sends_nothing(imds: ImdsServer) -> None:
    # no status line ever arrives: the client times out, or sees the connection closed
    with pytest.raises((TimeoutError, http_client.RemoteDisconnected, ConnectionError)):
        http(
            "PUT",
            f"{imds.url}/latest/api/token",
            headers={TTL: "60", "X-Ccm-Lab-Client-Hops": "2"},
            timeout=0.3,
        )
    assert imds.control.state()["tokens"] == 0


# -- paths and values ----------------------------------------------------------------------------


def test_listings(imds: ImdsServer) -> None:
    assert get(imds.url, "/").body == "latest"
    assert get(imds.url, "latest").body.splitlines() == ["dynamic", "meta-data", "user-data"]
    entries = get(imds.url, "latest/meta-data/").body.splitlines()
    for entry in (
        "ami-id",
        "hostname",
        "instance-id",
        "instance-type",
        "local-hostname",
        "local-ipv4",
        "mac",
        "placement/",
        "network/",
        "security-groups",
        "services/",
        "events/",
        "iam/",
    ):
        assert entry in entries
    assert "spot/" not in entries  # only once an interruption is injected
    assert "tags/" not in entries  # InstanceMetadataTags is disabled on this instance
    assert get(imds.url, "latest/meta-data/placement").body.splitlines() == [
        "availability-zone",
        "availability-zone-id",
        "region",
    ]


def test_values_match_ec2(imds: ImdsServer, ec2: Any, node: SeededInstance) -> None:
    described = ec2.describe_instances(InstanceIds=[node.instance_id])
    inst = described["Reservations"][0]["Instances"][0]
    eni = inst["NetworkInterfaces"][0]
    zone_id = next(
        z["ZoneId"]
        for z in ec2.describe_availability_zones()["AvailabilityZones"]
        if z["ZoneName"] == node.zone
    )

    def md(path: str) -> str:
        reply = get(imds.url, f"latest/meta-data/{path}")
        assert reply.status == 200, (path, reply)
        return reply.body

    assert md("ami-id") == "ami-760aaa0f"
    assert md("instance-id") == node.instance_id
    assert md("instance-type") == "m5.large"
    assert md("local-ipv4") == node.private_ip
    assert (
        md("hostname")
        == md("local-hostname")
        == inst["PrivateDnsName"]
        == f"ip-{node.private_ip.replace('.', '-')}.ec2.internal"
    )
    assert md("mac") == eni["MacAddress"]
    assert md("placement/availability-zone") == node.zone
    assert md("placement/availability-zone/") == node.zone  # botocore asks with a slash
    assert md("placement/availability-zone-id") == zone_id
    assert md("placement/region") == REGION
    assert md("security-groups") == "nodes.lab"
    assert md("services/domain") == "amazonaws.com"
    assert md("reservation-id") == described["Reservations"][0]["ReservationId"]
    mac = eni["MacAddress"]
    assert md("network/interfaces/macs/") == f"{mac}/"
    base = f"network/interfaces/macs/{mac}"
    assert md(f"{base}/device-number") == "0"
    assert md(f"{base}/interface-id") == eni["NetworkInterfaceId"]
    assert md(f"{base}/local-ipv4s") == node.private_ip
    assert md(f"{base}/local-hostname") == inst["PrivateDnsName"]
    assert md(f"{base}/subnet-id") == node.subnet_id
    assert md(f"{base}/subnet-ipv4-cidr-block") == "10.0.1.0/24"
    assert md(f"{base}/vpc-id") == node.vpc_id
    assert md(f"{base}/vpc-ipv4-cidr-block") == "10.0.0.0/16"
    assert md(f"{base}/security-group-ids") == node.group_id
    assert md(f"{base}/owner-id") == described["Reservations"][0]["OwnerId"]
    assert md("events/maintenance/scheduled") == "[]"


def test_identity_document_consistent_with_metadata(imds: ImdsServer) -> None:
    doc = json.loads(get(imds.url, "latest/dynamic/instance-identity/document").body)

    def md(path: str) -> str:
        return get(imds.url, f"latest/meta-data/{path}").body

    assert doc["instanceId"] == md("instance-id")
    assert doc["availabilityZone"] == md("placement/availability-zone")
    assert doc["region"] == md("placement/region")
    assert doc["privateIp"] == md("local-ipv4")
    assert doc["imageId"] == md("ami-id")
    assert doc["instanceType"] == md("instance-type")
    assert doc["accountId"] == md(f"network/interfaces/macs/{md('mac')}/owner-id")
    assert doc["version"] == "2017-09-30"
    assert get(imds.url, "latest/dynamic/instance-identity/").body.splitlines() == [
        "document",
        "pkcs7",
        "signature",
        "rsa2048",
    ]


def test_user_data(imds: ImdsServer, aws_url: str, world: World) -> None:
    assert get(imds.url, "latest/user-data").body == "#!/bin/sh\necho ccm-lab\n"
    bare = run_node(world, user_data=None)
    assert get(imds.url, "latest/user-data", **{INSTANCE_HEADER: bare.instance_id}).status == 404
    listing = get(imds.url, "latest", **{INSTANCE_HEADER: bare.instance_id}).body
    assert listing.splitlines() == ["dynamic", "meta-data"]


def test_unknown_paths_are_404(imds: ImdsServer) -> None:
    for path in (
        "latest/meta-data/nope",
        "latest/meta-data/ami-id/deeper",
        "v9/meta-data",
        "latest/x",
    ):
        assert get(imds.url, path).status == 404, path


def test_dated_version_aliases_latest(imds: ImdsServer, node: SeededInstance) -> None:
    assert get(imds.url, "2021-07-15/meta-data/instance-id").body == node.instance_id


def test_tags_follow_instance_option_and_retagging(aws_url: str, ec2: Any, world: World) -> None:
    node = run_node(world, metadata_tags="enabled", tags={"team": "ccm"})
    with ImdsServer(aws_url, REGION, instance_id=node.instance_id, cache_ttl=0) as imds:
        listing = get(imds.url, "latest/meta-data/tags/instance").body.splitlines()
        # keys containing "/" (the cluster tag) are not exposed by AWS either
        assert listing == ["Name", "team"]
        ec2.create_tags(Resources=[node.instance_id], Tags=[{"Key": "team", "Value": "sig-cloud"}])
        assert get(imds.url, "latest/meta-data/tags/instance/team").body == "sig-cloud"
        ec2.delete_tags(Resources=[node.instance_id], Tags=[{"Key": "team"}])
        assert get(imds.url, "latest/meta-data/tags/instance/team").status == 404


def test_server_can_expose_tags_regardless_of_instance(imds: ImdsServer) -> None:
    assert get(imds.url, "latest/meta-data/tags/instance/Name").status == 404
    imds.control.configure({"metadata_tags": "enabled"})
    assert get(imds.url, "latest/meta-data/tags/instance/Name").body == "node-1"


# -- caller -> instance ---------------------------------------------------------------------------


def test_caller_mapping_header_source_default(
    imds: ImdsServer, node: SeededInstance, world: World
) -> None:
    other = run_node(world)
    path = "latest/meta-data/local-ipv4"
    assert get(imds.url, path).body == node.private_ip  # default instance
    assert get(imds.url, path, **{INSTANCE_HEADER: other.instance_id}).body == other.private_ip
    imds.control.map_source_address("127.0.0.1", other.instance_id)
    assert get(imds.url, path).body == other.private_ip  # source address beats default
    imds.control.map_source_address("127.0.0.1", None)
    assert get(imds.url, path).body == node.private_ip
    imds.control.configure({"trust_instance_header": False})
    assert get(imds.url, path, **{INSTANCE_HEADER: other.instance_id}).body == node.private_ip


def test_unmapped_caller_is_503(imds: ImdsServer) -> None:
    imds.control.set_default_instance(None)
    reply = get(imds.url, "latest/meta-data/instance-id")
    assert reply.status == 503
    assert "no default instance" in reply.body


def test_terminated_and_unknown_instances_are_503(
    imds: ImdsServer, ec2: Any, node: SeededInstance
) -> None:
    ghost = get(
        imds.url, "latest/meta-data/instance-id", **{INSTANCE_HEADER: "i-0000000000000dead"}
    )
    assert ghost.status == 503
    assert "does not exist" in ghost.body
    ec2.terminate_instances(InstanceIds=[node.instance_id])
    reply = get(imds.url, "latest/meta-data/instance-id")
    assert reply.status == 503
    assert "terminated" in reply.body
