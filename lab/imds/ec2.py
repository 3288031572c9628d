"""Reads the EC2 state behind the metadata service (boto3 against the lab's AWS endpoint).

Role: turn DescribeInstances (plus DescribeAvailabilityZones for zone ids, DescribeSubnets and
DescribeVpcs for CIDRs, DescribeInstanceAttribute for user data) into ``models.InstanceView``.

Freshness: instance state is read live so a stopped, terminated or re-tagged instance shows up
on the next request. An optional per-instance cache (``cache_ttl`` seconds, default 0.2 s, 0 to
disable) absorbs bursts such as botocore's token-then-GET pairs; ``benchmarks/imds.py``
measures both settings. Values that cannot change for a given id (zone id of a zone name, a
subnet's CIDR) are cached for the life of the reader.

Neighbours: ``handlers`` calls ``Ec2Reader``; tests may pass any object with the same shape.
Design reason: a Protocol seam keeps boto3 out of the models, and errors from the endpoint are
mapped here (unknown instance -> ``None``, an error reply -> ``Ec2Error``, transport failure
-> ``Ec2Unreachable``; both are 502s). Calls carry ``ccm-lab-imds`` in their User-Agent so the
AWS trail can separate them from the controller's.
"""

from __future__ import annotations

import base64
import logging
import threading
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Protocol

import boto3
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError

from lab.imds.exceptions import Ec2Error, Ec2Unreachable
from lab.imds.models import Clock, HttpTokens, InstanceID, InstanceView, InterfaceView

if TYPE_CHECKING:
    from mypy_boto3_ec2.client import EC2Client
    from mypy_boto3_ec2.type_defs import InstanceTypeDef, ReservationTypeDef

log = logging.getLogger(__name__)

#: Added to the User-Agent of every EC2 call the IMDS makes, so the AWS trail can tell them
#: apart from the controller's calls (``TrailEvent.user_agent``).
USER_AGENT_EXTRA = "ccm-lab-imds"


class Ec2Reader(Protocol):
    """What the handlers need from EC2."""

    def instance(self, instance_id: InstanceID) -> InstanceView | None:
        """The instance's view, or None when EC2 does not know it."""
        ...

    def user_data(self, instance_id: InstanceID) -> bytes | None:
        """Decoded user data, or None when the instance has none."""
        ...


@dataclass(frozen=True)
class _Cached:
    view: InstanceView | None
    at: float


class Boto3Ec2Reader:
    """``Ec2Reader`` over boto3; thread-safe (boto3 clients are)."""

    def __init__(
        self,
        endpoint_url: str,
        region: str,
        *,
        cache_ttl: float = 0.2,
        clock: Clock = time.monotonic,
        access_key: str = "ccm-lab",
        secret_key: str = "ccm-lab",  # moto accepts any credentials
    ) -> None:
        self.endpoint_url = endpoint_url
        self.region = region
        self._cache_ttl = cache_ttl
        self._clock = clock
        self._client: EC2Client = boto3.client(
            "ec2",
            endpoint_url=endpoint_url,
            region_name=region,
            aws_access_key_id=access_key,
            aws_secret_access_key=secret_key,
            config=Config(
                user_agent_extra=USER_AGENT_EXTRA,
                retries={"total_max_attempts": 2, "mode": "standard"},
                connect_timeout=2,
                read_timeout=10,
            ),
        )
        self._lock = threading.Lock()
        self._cache: dict[InstanceID, _Cached] = {}
        self._zone_ids: dict[str, str] = {}
        self._subnet_cidrs: dict[str, str] = {}
        self._vpc_cidrs: dict[str, tuple[str, ...]] = {}

    def invalidate(self) -> None:
        with self._lock:
            self._cache.clear()

    # -- Ec2Reader ---------------------------------------------------------------------------

    def instance(self, instance_id: InstanceID) -> InstanceView | None:
        now = self._clock()
        if self._cache_ttl > 0:
            with self._lock:
                hit = self._cache.get(instance_id)
            if hit is not None and now - hit.at < self._cache_ttl:
                return hit.view
        view = self._describe(instance_id)
        if self._cache_ttl > 0:
            with self._lock:
                self._cache[instance_id] = _Cached(view, now)
        return view

    def user_data(self, instance_id: InstanceID) -> bytes | None:
        try:
            attr = self._client.describe_instance_attribute(
                InstanceId=instance_id, Attribute="userData"
            )
        except ClientError as exc:
            if _is_not_found(exc):
                return None
            raise Ec2Error(f"DescribeInstanceAttribute({instance_id}): {exc}") from exc
        except BotoCoreError as exc:
            raise Ec2Unreachable(f"{self.endpoint_url}: {exc}") from exc
        value = attr.get("UserData", {}).get("Value")
        return base64.b64decode(value) if value else None

    # -- reading -----------------------------------------------------------------------------

    def _describe(self, instance_id: InstanceID) -> InstanceView | None:
        try:
            reply = self._client.describe_instances(InstanceIds=[instance_id])
        except ClientError as exc:
            if _is_not_found(exc):
                return None
            raise Ec2Error(f"DescribeInstances({instance_id}): {exc}") from exc
        except BotoCoreError as exc:
            raise Ec2Unreachable(f"{self.endpoint_url}: {exc}") from exc
        for reservation in reply.get("Reservations", []):
            for instance in reservation.get("Instances", []):
                if instance.get("InstanceId") == instance_id:
                    return self._to_view(reservation, instance)
        return None

    def _to_view(self, reservation: ReservationTypeDef, raw: InstanceTypeDef) -> InstanceView:
        zone = raw.get("Placement", {}).get("AvailabilityZone", "")
        options = raw.get("MetadataOptions", {})
        tokens: HttpTokens = "required" if options.get("HttpTokens") == "required" else "optional"
        interfaces = tuple(
            self._to_interface(eni, owner=reservation.get("OwnerId", ""))
            for eni in raw.get("NetworkInterfaces", [])
            if eni.get("Attachment")
        )
        profile_arn = raw.get("IamInstanceProfile", {}).get("Arn")
        launch = raw.get("LaunchTime")
        return InstanceView(
            instance_id=InstanceID(raw.get("InstanceId", "")),
            state=raw.get("State", {}).get("Name", "unknown"),
            image_id=raw.get("ImageId", ""),
            instance_type=raw.get("InstanceType", ""),
            launch_index=raw.get("AmiLaunchIndex", 0),
            reservation_id=reservation.get("ReservationId", ""),
            account_id=reservation.get("OwnerId", ""),
            region=zone[:-1] if zone else self.region,
            availability_zone=zone,
            availability_zone_id=self._zone_id(zone),
            private_ip=raw.get("PrivateIpAddress", ""),
            private_dns_name=raw.get("PrivateDnsName", ""),
            architecture=raw.get("Architecture", "x86_64"),
            launch_time=launch if isinstance(launch, datetime) else datetime.now(UTC),
            security_group_names=tuple(
                g.get("GroupName", "") for g in raw.get("SecurityGroups", [])
            ),
            interfaces=interfaces,
            tags={t["Key"]: t.get("Value", "") for t in raw.get("Tags", []) if "Key" in t},
            http_tokens=tokens,
            hop_limit=int(options.get("HttpPutResponseHopLimit", 1)),
            metadata_tags_enabled=options.get("InstanceMetadataTags") == "enabled",
            lifecycle="spot" if raw.get("InstanceLifecycle") == "spot" else "on-demand",
            public_ip=raw.get("PublicIpAddress") or None,
            public_dns_name=raw.get("PublicDnsName") or None,
            placement_group=raw.get("Placement", {}).get("GroupName") or None,
            iam_role=profile_arn.rsplit("/", 1)[-1] if profile_arn else None,
            iam_instance_profile_arn=profile_arn,
        )

    def _to_interface(self, eni: Any, *, owner: str) -> InterfaceView:
        subnet_id = eni.get("SubnetId", "")
        vpc_id = eni.get("VpcId", "")
        groups = eni.get("Groups", [])
        assoc = eni.get("Association") or {}
        return InterfaceView(
            mac=eni.get("MacAddress", ""),
            interface_id=eni.get("NetworkInterfaceId", ""),
            device_number=int(eni.get("Attachment", {}).get("DeviceIndex", 0)),
            private_ips=tuple(
                p["PrivateIpAddress"]
                for p in eni.get("PrivateIpAddresses", [])
                if p.get("PrivateIpAddress")
            )
            or ((eni["PrivateIpAddress"],) if eni.get("PrivateIpAddress") else ()),
            private_dns_name=eni.get("PrivateDnsName")
            or self._dns_name(eni.get("PrivateIpAddress")),
            subnet_id=subnet_id,
            subnet_cidr=self._subnet_cidr(subnet_id),
            vpc_id=vpc_id,
            vpc_cidrs=self._vpc_cidr_blocks(vpc_id),
            security_group_ids=tuple(g.get("GroupId", "") for g in groups),
            security_group_names=tuple(g.get("GroupName", "") for g in groups),
            owner_id=eni.get("OwnerId", owner),
            public_ips=(assoc["PublicIp"],) if assoc.get("PublicIp") else (),
            ipv6s=tuple(
                a["Ipv6Address"] for a in eni.get("Ipv6Addresses", []) if "Ipv6Address" in a
            ),
        )

    def _dns_name(self, ip: str | None) -> str:
        """EC2's IP-based private DNS name (moto leaves it off network interfaces)."""
        if not ip:
            return ""
        domain = "ec2.internal" if self.region == "us-east-1" else f"{self.region}.compute.internal"
        return f"ip-{ip.replace('.', '-')}.{domain}"

    def _zone_id(self, zone: str) -> str:
        if not zone:
            return ""
        with self._lock:
            known = self._zone_ids.get(zone)
        if known is not None:
            return known
        try:
            reply = self._client.describe_availability_zones(AllAvailabilityZones=True)
        except (ClientError, BotoCoreError) as exc:
            log.warning("DescribeAvailabilityZones failed: %s", exc)
            return ""
        with self._lock:
            for entry in reply.get("AvailabilityZones", []):
                if "ZoneName" in entry and "ZoneId" in entry:
                    self._zone_ids[entry["ZoneName"]] = entry["ZoneId"]
            return self._zone_ids.get(zone, "")

    def _subnet_cidr(self, subnet_id: str) -> str:
        if not subnet_id:
            return ""
        with self._lock:
            if subnet_id in self._subnet_cidrs:
                return self._subnet_cidrs[subnet_id]
        try:
            subnets = self._client.describe_subnets(SubnetIds=[subnet_id]).get("Subnets", [])
        except ClientError as exc:
            log.warning("DescribeSubnets(%s) failed: %s", subnet_id, exc)
            return ""
        cidr = subnets[0].get("CidrBlock", "") if subnets else ""
        with self._lock:
            self._subnet_cidrs[subnet_id] = cidr
        return cidr

    def _vpc_cidr_blocks(self, vpc_id: str) -> tuple[str, ...]:
        if not vpc_id:
            return ()
        with self._lock:
            if vpc_id in self._vpc_cidrs:
                return self._vpc_cidrs[vpc_id]
        try:
            vpcs = self._client.describe_vpcs(VpcIds=[vpc_id]).get("Vpcs", [])
        except ClientError as exc:
            log.warning("DescribeVpcs(%s) failed: %s", vpc_id, exc)
            return ()
        blocks: tuple[str, ...] = ()
        if vpcs:
            vpc = vpcs[0]
            assoc = [
                a["CidrBlock"]
                for a in vpc.get("CidrBlockAssociationSet", [])
                if "CidrBlock" in a and a.get("CidrBlockState", {}).get("State") != "disassociated"
            ]
            blocks = tuple(assoc) or ((vpc["CidrBlock"],) if "CidrBlock" in vpc else ())
        with self._lock:
            self._vpc_cidrs[vpc_id] = blocks
        return blocks


def _is_not_found(exc: ClientError) -> bool:
    code = exc.response.get("Error", {}).get("Code", "")
    return code in {"InvalidInstanceID.NotFound", "InvalidInstanceID.Malformed"}
