"""Subnets for a Classic ELB: the annotation, or discovery by tags and route tables.

Neighbours: :mod:`controller.aws.loadbalancer` calls :meth:`Subnets.for_load_balancer` before
creating or reconciling an ELB. :func:`pick_subnets` is the pure heart, unit-tested alone.

Design (upstream ``findELBSubnets``): candidates are the VPC's subnets tagged for this cluster
or for no cluster; an internet-facing ELB keeps only public subnets (route to an ``igw-``);
one subnet per availability zone, ties broken by the role tag, then the cluster tag, then the
smallest id; zones that are not ``availability-zone`` (local/wavelength) are dropped.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from botocore.exceptions import ClientError

from controller.aws.annotations import A_SUBNETS, is_subnet_id
from controller.aws.clients import error_code
from controller.aws.context import AWSContext
from controller.aws.tags import ClusterTags, tag_map
from controller.cloud import CloudError, InvalidServiceConfig

if TYPE_CHECKING:
    from mypy_boto3_ec2.type_defs import FilterTypeDef, RouteTableTypeDef, SubnetTypeDef

log = logging.getLogger(__name__)

ROLE_ELB = "kubernetes.io/role/elb"
ROLE_INTERNAL_ELB = "kubernetes.io/role/internal-elb"


class NoSuitableSubnets(CloudError):
    """No subnet qualifies for the load balancer."""


@dataclass(frozen=True)
class SubnetInfo:
    subnet_id: str
    zone: str
    tags: Mapping[str, str]
    public: bool


def public_subnet_ids(
    subnets: Sequence[SubnetTypeDef], route_tables: Sequence[RouteTableTypeDef]
) -> set[str]:
    """Subnets whose route table (explicit association, else the main table) has an igw."""

    def has_igw(rt: RouteTableTypeDef) -> bool:
        return any(str(r.get("GatewayId", "")).startswith("igw") for r in rt.get("Routes", []))

    explicit: dict[str, bool] = {}
    main_public = False
    for rt in route_tables:
        for assoc in rt.get("Associations", []):
            if assoc.get("Main"):
                main_public = has_igw(rt)
            elif assoc.get("SubnetId"):
                explicit[assoc["SubnetId"]] = has_igw(rt)
    return {s["SubnetId"] for s in subnets if explicit.get(s["SubnetId"], main_public)}


def pick_subnets(
    candidates: Sequence[SubnetInfo], *, internal: bool, tags: ClusterTags
) -> list[str]:
    """One subnet per zone, upstream tie-breaks; sorted by id."""
    role = ROLE_INTERNAL_ELB if internal else ROLE_ELB
    best: dict[str, SubnetInfo] = {}

    def score(s: SubnetInfo) -> tuple[int, int, str]:
        return (
            0 if role in s.tags else 1,
            0 if tags.cluster_id and tags.has_cluster_tag(s.tags) else 1,
            s.subnet_id,
        )

    for s in candidates:
        if not internal and not s.public:
            log.debug("ignoring private subnet %s for an internet-facing ELB", s.subnet_id)
            continue
        cur = best.get(s.zone)
        if cur is None or score(s) < score(cur):
            best[s.zone] = s
    return sorted(s.subnet_id for s in best.values())


def cluster_subnets(subnets: Sequence[SubnetTypeDef], tags: ClusterTags) -> list[SubnetTypeDef]:
    """Upstream ``findSubnets``' filter: the subnets tagged for this cluster or for none."""
    return [
        s for s in subnets if not tags.tagged_for_other_cluster(tag_map(cast(Any, s.get("Tags"))))
    ]


def choose_subnets(
    subnets: Sequence[SubnetTypeDef],
    route_tables: Sequence[RouteTableTypeDef],
    zone_types: Mapping[str, str],
    *,
    internal: bool,
    tags: ClusterTags,
) -> list[str]:
    """Upstream ``findELBSubnets`` after ``findSubnets``: subnets of regular availability
    zones only (``zone_types``: zone name -> ``ZoneType``; local and wavelength zones are
    left out), public ones only for an internet-facing load balancer, then
    :func:`pick_subnets`."""
    public = public_subnet_ids(subnets, route_tables)
    infos = [
        SubnetInfo(
            subnet_id=s["SubnetId"],
            zone=s.get("AvailabilityZone", ""),
            tags=tag_map(cast(Any, s.get("Tags"))),
            public=s["SubnetId"] in public,
        )
        for s in subnets
        if zone_types.get(s.get("AvailabilityZone", ""), "availability-zone") == "availability-zone"
    ]
    return pick_subnets(infos, internal=internal, tags=tags)


class Subnets:
    def __init__(self, ctx: AWSContext) -> None:
        self.ctx = ctx
        self.ec2 = ctx.clients.ec2

    def _describe(self, **kwargs: Any) -> list[SubnetTypeDef]:
        out: list[SubnetTypeDef] = []
        for page in self.ec2.get_paginator("describe_subnets").paginate(**kwargs):
            out.extend(page.get("Subnets", []))
        return out

    def _vpc_filter(self) -> list[FilterTypeDef]:
        return [{"Name": "vpc-id", "Values": [self.ctx.vpc_id]}]

    def vpc_subnets(self) -> list[SubnetTypeDef]:
        """Every subnet of the VPC (asked once per sync wave)."""
        return self.ctx.wave.read(
            "ec2",
            ("DescribeSubnets", self.ctx.vpc_id),
            lambda: self._describe(Filters=self._vpc_filter()),
        )

    def route_tables(self) -> list[RouteTableTypeDef]:
        """Every route table of the VPC (asked once per sync wave)."""

        def fetch() -> list[RouteTableTypeDef]:
            out: list[RouteTableTypeDef] = []
            pages = self.ec2.get_paginator("describe_route_tables").paginate(
                Filters=self._vpc_filter()
            )
            for page in pages:
                out.extend(page.get("RouteTables", []))
            return out

        return self.ctx.wave.read("ec2", ("DescribeRouteTables", self.ctx.vpc_id), fetch)

    def known(self, subnet_ids: Sequence[str]) -> list[SubnetTypeDef] | None:
        """In a batched wave whose VPC listing holds every one of ``subnet_ids``: those
        subnets (as ``DescribeSubnets(SubnetIds=...)`` answers); else ``None``."""
        if not self.ctx.wave.batched:
            return None
        listed = self.ctx.wave.get("ec2", ("DescribeSubnets", self.ctx.vpc_id))
        if not isinstance(listed, list):
            return None
        by_id = {s.get("SubnetId", ""): s for s in listed}
        if not all(i in by_id for i in subnet_ids):
            return None
        return [by_id[i] for i in dict.fromkeys(subnet_ids)]

    def zone_types(self, subnets: Sequence[SubnetTypeDef]) -> dict[str, str]:
        """Zone name -> ZoneType of the subnets' zones, through the run's zone cache (upstream
        ``getZoneDetailsByNames``: described again when a zone is not known yet)."""
        names = sorted({s.get("AvailabilityZone", "") for s in subnets})
        return {n: d.zone_type for n, d in self.ctx.zones.details(names).items()}

    def zone_ids(self) -> dict[str, str]:
        resp = self.ec2.describe_availability_zones()
        return {
            z.get("ZoneName", ""): z.get("ZoneId", "") for z in resp.get("AvailabilityZones", [])
        }

    def resolve_annotation(self, refs: Sequence[str]) -> list[str]:
        """``aws-load-balancer-subnets``: ids and Name tag values, all must resolve."""
        ids = [r for r in refs if is_subnet_id(r)]
        names = [r for r in refs if not is_subnet_id(r)]
        found: list[SubnetTypeDef] = []
        if ids:
            try:
                found += self._describe(SubnetIds=ids)
            except ClientError as exc:
                if error_code(exc) != "InvalidSubnetID.NotFound":
                    raise
                raise InvalidServiceConfig(A_SUBNETS, ",".join(refs), str(exc)) from None
        if names:
            found += self._describe(
                Filters=[
                    {"Name": "tag:Name", "Values": names},
                    {"Name": "vpc-id", "Values": [self.ctx.vpc_id]},
                ]
            )
        unique = sorted({s["SubnetId"] for s in found})
        if len(unique) != len(refs):
            raise InvalidServiceConfig(
                A_SUBNETS,
                ",".join(refs),
                f"expected to find {len(refs)}, but found {len(unique)} subnets",
            )
        return unique

    def for_load_balancer(self, *, internal: bool, annotated: Sequence[str]) -> list[str]:
        if annotated:
            return self.resolve_annotation(annotated)
        subnets = cluster_subnets(self.vpc_subnets(), self.ctx.tags)
        if not subnets and self.ctx.self_subnet_id:
            log.warning("No tagged subnets found; will fall-back to the current subnet only")
            subnets = self._describe(
                Filters=[{"Name": "subnet-id", "Values": [self.ctx.self_subnet_id]}]
            )
        route_tables = self.route_tables()
        chosen = choose_subnets(
            subnets, route_tables, self.zone_types(subnets), internal=internal, tags=self.ctx.tags
        )
        if not chosen:
            raise NoSuitableSubnets(
                "could not find any suitable subnets for creating the ELB "
                f"(vpc {self.ctx.vpc_id}, {'internal' if internal else 'internet-facing'}: "
                f"tag subnets {ROLE_INTERNAL_ELB if internal else ROLE_ELB} or route to an igw)"
            )
        return chosen
