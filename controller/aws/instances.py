"""Nodes to EC2 instances: providerIDs, lookups, existence, shutdown, metadata (InstancesV2).

Neighbours: the generic node and node-lifecycle controllers call :class:`AWSInstances` through
``controller.cloud.InstancesV2``; :mod:`controller.aws.loadbalancer` uses
:class:`InstanceCache` to turn the Service's nodes into registrable instances.

Design (upstream ``instances_v2.go``, §5): a node is found by ``spec.providerID`` first, by a
resource-based name (``i-…``, with or without a domain) next, and by an exact
``PrivateDnsName`` match last; the legacy ``node-name-private-dns`` switch keeps only the last
for node initialization (existence checks keep using the providerID). "Not found" is never
"gone": only ``InvalidInstanceID.NotFound`` or a terminated instance makes
:meth:`AWSInstances.instance_exists` answer ``False``; a failed name lookup raises
:class:`InstanceNotFound` so the lifecycle controller deletes nothing.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, cast

from botocore.exceptions import ClientError

from controller.aws.batch import DescribeInstanceBatcher
from controller.aws.clients import aws_errors, error_code
from controller.aws.context import AWSContext
from controller.aws.providerid import (
    FARGATE_PREFIX,
    InvalidProviderID,
    build_provider_id,
    instance_id_from_name,
    parse_provider_id,
)
from controller.aws.tags import tag_map
from controller.aws.topology import TopologyManager, topology_labels
from controller.cloud import (
    CloudError,
    InstanceMetadata,
    InstanceNotFound,
    Node,
    NodeAddress,
    ProviderID,
)

if TYPE_CHECKING:
    from mypy_boto3_ec2.type_defs import InstanceTypeDef, NetworkInterfaceTypeDef

log = logging.getLogger(__name__)

ZONE_ID_LABEL = "topology.k8s.aws/zone-id"
_LIVE_STATES = ["pending", "running", "shutting-down", "stopping", "stopped"]
CACHE_MAX_AGE = 600.0
#: ``MaxResults`` of a DescribeInstances that names no instance ids, whose ``NextToken`` is
#: then followed (upstream v1.33.0 ``pkg/providers/v1/aws_ec2.go`` ``DescribeInstances``);
#: EC2 refuses ``MaxResults`` together with ``InstanceIds``, so by-id calls send none.
DESCRIBE_PAGE_SIZE = 1000


def node_addresses(instance: InstanceTypeDef, families: Sequence[str]) -> tuple[NodeAddress, ...]:
    """Upstream ``getInstanceNodeAddress`` for the configured families, in order
    (``extractIPv4NodeAddresses``, ``extractIPv6NodeAddresses`` in kubernetes/cloud-provider-aws
    v1.33.0 ``pkg/providers/v1/aws.go``)."""
    out: list[NodeAddress] = []

    def add(kind: str, value: str | None) -> None:
        if value and NodeAddress(kind, value) not in out:
            out.append(NodeAddress(kind, value))

    enis = sorted(
        instance.get("NetworkInterfaces", []),
        key=lambda e: (
            "Attachment" not in e,
            e.get("Attachment", {}).get("DeviceIndex", 0),
        ),
    )
    # only in-use interfaces give internal IPs; an instance EC2 lists without one (none
    # attached, or every one detaching) has no InternalIP, not its PrivateIpAddress
    in_use = [e for e in enis if e.get("Status") == "in-use"]
    for family in families:
        if family == "ipv4":
            for eni in in_use:
                for ip in eni.get("PrivateIpAddresses", []):
                    add("InternalIP", ip.get("PrivateIpAddress"))
            add("ExternalIP", instance.get("PublicIpAddress"))
            add("InternalDNS", instance.get("PrivateDnsName"))
            add("Hostname", instance.get("PrivateDnsName"))
            add("ExternalDNS", instance.get("PublicDnsName"))
        elif family == "ipv6":
            for eni in in_use:
                v6 = eni.get("Ipv6Addresses", [])
                if v6:
                    add("InternalIP", v6[0].get("Ipv6Address"))
    return tuple(out)


def fargate_eni_address(instance_id: str) -> str:
    """Upstream's Fargate variant: ``fargate-<ip>`` names its ENI's private IP directly,
    ``fargate-ip-10-0-55-27.<domain>`` through the ``ip-…`` host name's dashes."""
    endpoint = instance_id.removeprefix(FARGATE_PREFIX)
    if endpoint.startswith("ip-"):
        endpoint = endpoint.removeprefix("ip-").split(".")[0].replace("-", ".")
    return endpoint


def fargate_addresses(
    eni: NetworkInterfaceTypeDef, families: Sequence[str]
) -> tuple[NodeAddress, ...]:
    """Upstream ``getNodeAddressesForFargateNode`` per family: the ENI's IP (its first IPv6
    for ``ipv6``) as InternalIP, then its private DNS name as InternalDNS when it has one."""
    out: list[NodeAddress] = []
    dns = eni.get("PrivateDnsName", "")
    for family in families:
        if family == "ipv4":
            ip = eni.get("PrivateIpAddress", "")
        else:
            v6 = eni.get("Ipv6Addresses", [])
            if not v6:
                log.error("no Ipv6Addresses associated with the eni")
                continue
            ip = v6[0].get("Ipv6Address", "")
        out.append(NodeAddress("InternalIP", ip))
        if dns:
            out.append(NodeAddress("InternalDNS", dns))
    return tuple(out)


class AWSInstances:
    """``controller.cloud.InstancesV2`` on EC2."""

    def __init__(self, ctx: AWSContext) -> None:
        self.ctx = ctx
        self.ec2 = ctx.clients.ec2
        self.by_id = DescribeInstanceBatcher(self.ec2)
        self.topology = TopologyManager(
            self.ec2,
            pattern=ctx.config.supported_topology_instance_type_pattern,
            clock=ctx.clock,
        )

    # -- lookup --------------------------------------------------------------------------

    def _by_id(self, instance_id: str) -> InstanceTypeDef | None:
        """The instance, or ``None`` when EC2 positively says it does not exist.

        Batched with the other threads' lookups by id (upstream's ``describeInstanceBatcher``,
        :mod:`controller.aws.batch`): one ``DescribeInstances`` per 100 ms window."""
        try:
            return self.by_id.get(instance_id)
        except ClientError as exc:
            if error_code(exc) == "InvalidInstanceID.NotFound":
                return None
            raise

    def _by_private_dns(self, name: str) -> InstanceTypeDef:
        pages = self.ec2.get_paginator("describe_instances").paginate(
            Filters=[
                {"Name": "private-dns-name", "Values": [name]},
                {"Name": "instance-state-name", "Values": _LIVE_STATES},
            ],
            PaginationConfig={"PageSize": DESCRIBE_PAGE_SIZE},
        )
        found = [
            inst
            for page in pages
            for res in page.get("Reservations", [])
            for inst in res.get("Instances", [])
            if self.ctx.tags.has_cluster_tag(tag_map(cast(Any, inst.get("Tags"))))
        ]
        if not found:
            raise InstanceNotFound(
                f"instance not found: no cluster instance has PrivateDnsName {name!r} "
                "(set spec.providerID or name the node after the instance)"
            )
        if len(found) > 1:
            raise CloudError(f"found {len(found)} instances with PrivateDnsName {name!r}")
        return found[0]

    def find(self, node: Node, *, for_metadata: bool = False) -> InstanceTypeDef | None:
        """The node's instance; ``None`` only when EC2 says the id does not exist.

        Raises :class:`InstanceNotFound` when no id can be determined for the node.
        """
        if for_metadata and self.ctx.legacy.enabled("node-name-private-dns"):
            # LEGACY cloud-provider-aws #63/#335/#384: node initialization maps the node name
            # to an instance by PrivateDnsName only; providerID and i-… names are not used.
            return self._by_private_dns(node.name)
        # FIXED: providerID first; resource-based names are instance ids; PrivateDnsName last.
        # (Existence and shutdown checks always went by providerID, legacy or not.)
        if node.provider_id:
            return self._by_id(parse_provider_id(node.provider_id))
        rbn = instance_id_from_name(node.name)
        if rbn is not None and not self.ctx.legacy.enabled("node-name-private-dns"):
            return self._by_id(rbn)
        return self._by_private_dns(node.name)

    # -- Fargate (upstream's variant) ------------------------------------------------------

    @staticmethod
    def fargate_id(node: Node) -> str | None:
        """The ``fargate-…`` id of the node's providerID, or ``None`` for any other node."""
        if not node.provider_id:
            return None
        try:
            iid = parse_provider_id(node.provider_id)
        except InvalidProviderID:
            return None
        return iid if iid.startswith(FARGATE_PREFIX) else None

    def fargate_eni(self, instance_id: str) -> NetworkInterfaceTypeDef | None:
        """Upstream ``DescribeNetworkInterfaces`` of the Fargate variant: the attached ENI in
        our VPC with the node's private IP; ``None`` when there is none."""
        resp = self.ec2.describe_network_interfaces(
            Filters=[
                {"Name": "attachment.status", "Values": ["attached"]},
                {"Name": "vpc-id", "Values": [self.ctx.vpc_id]},
                {"Name": "private-ip-address", "Values": [fargate_eni_address(instance_id)]},
            ]
        )
        enis = resp.get("NetworkInterfaces", [])
        if not enis:
            return None
        if len(enis) != 1:
            ids = [e.get("NetworkInterfaceId", "") for e in enis]
            raise CloudError(f"multiple interfaces found with the address of {instance_id}: {ids}")
        return enis[0]

    def _fargate_metadata(self, node: Node, instance_id: str) -> InstanceMetadata:
        eni = self.fargate_eni(instance_id)
        if eni is None:
            raise InstanceNotFound(
                f"no attached network interface in {self.ctx.vpc_id} for Fargate node {node.name}"
            )
        zone = eni.get("AvailabilityZone", "")
        labels = self._zone_id_label(node, zone)
        # upstream asks for the topology with an empty instance type, which it never sends
        return InstanceMetadata(
            provider_id=ProviderID(node.provider_id),
            instance_type=self.instance_type_by_provider_id(node.provider_id),
            node_addresses=fargate_addresses(eni, self.ctx.config.node_ip_families),
            zone=zone,
            region=self.ctx.region,
            additional_labels=labels,
        )

    @aws_errors
    def instance_type_by_provider_id(self, provider_id: str) -> str:
        """Upstream ``InstanceTypeByProviderID``: a Fargate node's type is empty, answered
        without a lookup (the variant's); an instance's is EC2's ``InstanceType``."""
        instance_id = parse_provider_id(provider_id)
        if instance_id.startswith(FARGATE_PREFIX):
            return ""
        inst = self._by_id(instance_id)
        if inst is None:
            raise InstanceNotFound(f"instance {instance_id} does not exist")
        return inst.get("InstanceType", "")

    def _zone_id_label(self, node: Node, zone: str) -> dict[str, str]:
        """Upstream ``getAdditionalLabels``: the zone-id label unless the node has it; a zone
        EC2 does not list is an error (``ZoneNotFound``), the node is not initialized."""
        if ZONE_ID_LABEL in node.labels:
            return {}
        return {ZONE_ID_LABEL: self.ctx.zones.zone_id(zone)}

    # -- InstancesV2 ---------------------------------------------------------------------

    @aws_errors
    def instance_exists(self, node: Node) -> bool:
        fargate = self.fargate_id(node)
        if fargate is not None:
            return self.fargate_eni(fargate) is not None
        inst = self.find(node)
        if inst is None:
            return False
        state = inst.get("State", {}).get("Name")
        return state is not None and state != "terminated"

    @aws_errors
    def instance_shutdown(self, node: Node) -> bool:
        fargate = self.fargate_id(node)
        if fargate is not None:
            # upstream's Fargate variant answers "shut down" whenever the ENI exists
            # (TestInstanceShutdownByProviderIDForFargate); kept as upstream behaves
            return self.fargate_eni(fargate) is not None
        inst = self.find(node)
        return inst is not None and inst.get("State", {}).get("Name") == "stopped"

    @aws_errors
    def instance_metadata(self, node: Node) -> InstanceMetadata:
        fargate = self.fargate_id(node)
        if fargate is not None:
            return self._fargate_metadata(node, fargate)
        inst = self.find(node, for_metadata=True)
        if inst is None:
            raise InstanceNotFound(f"instance for node {node.name} does not exist")
        zone = inst.get("Placement", {}).get("AvailabilityZone", "")
        labels = self._zone_id_label(node, zone)
        instance_type = inst.get("InstanceType", "")
        labels.update(
            topology_labels(
                self.topology,
                instance_type=instance_type,
                region=self.ctx.region,
                instance_id=inst.get("InstanceId", ""),
                existing=node.labels,
            )
        )
        return InstanceMetadata(
            # upstream getProviderID: the node's own, as given; built only when it has none
            provider_id=ProviderID(node.provider_id)
            or build_provider_id(zone, inst.get("InstanceId", "")),
            instance_type=instance_type,
            node_addresses=node_addresses(inst, self.ctx.config.node_ip_families),
            zone=zone,
            region=self.ctx.region,
            additional_labels=labels,
        )


def node_targeted(node: Node, target_labels: Sequence[tuple[str, str]]) -> bool:
    """Upstream ``filterTargetNodes`` for one node: every ``target-node-labels`` item matches
    a label of the node (a key with an empty value: the key is present, with any value). No
    items target every node (kubernetes/cloud-provider-aws v1.33.0
    ``pkg/providers/v1/aws_loadbalancer.go``)."""
    return all(k in node.labels and (not v or node.labels[k] == v) for k, v in target_labels)


class InstanceCache:
    """Upstream ``describeAllInstancesCached``: all cluster instances, refreshed when older
    than ten minutes or missing a wanted id."""

    def __init__(self, ctx: AWSContext) -> None:
        self.ctx = ctx
        self._lock = threading.Lock()  # service workers may ensure concurrently
        self._at = 0.0
        self._instances: dict[str, InstanceTypeDef] = {}

    def _refresh(self) -> None:
        found: dict[str, InstanceTypeDef] = {}
        pages = self.ctx.clients.ec2.get_paginator("describe_instances").paginate(
            PaginationConfig={"PageSize": DESCRIBE_PAGE_SIZE}
        )
        for page in pages:
            for res in page.get("Reservations", []):
                for inst in res.get("Instances", []):
                    if self.ctx.tags.has_cluster_tag(tag_map(cast(Any, inst.get("Tags")))):
                        found[inst.get("InstanceId", "")] = inst
        self._instances = found
        self._at = self.ctx.clock()

    def get(self, ids: Iterable[str]) -> list[InstanceTypeDef]:
        wanted = list(dict.fromkeys(ids))
        with self._lock:
            stale = self.ctx.clock() - self._at > CACHE_MAX_AGE or not self._at
            if stale or any(i not in self._instances for i in wanted):
                self._refresh()
            return [self._instances[i] for i in wanted if i in self._instances]

    def for_nodes(
        self, nodes: Sequence[Node], *, target_labels: Sequence[tuple[str, str]] = ()
    ) -> list[InstanceTypeDef]:
        """Upstream ``findInstancesForELB``: label filter, providerID, cluster instances.

        Nodes without a parsable providerID and instances that are not the cluster's (no
        cluster tag) or not running are skipped with a log line, like upstream.
        """
        ids: list[str] = []
        for node in nodes:
            if not node_targeted(node, target_labels):
                continue
            if not node.provider_id:
                log.warning("node %s has no providerID; not registering it", node.name)
                continue
            try:
                ids.append(parse_provider_id(node.provider_id))
            except InvalidProviderID as exc:
                log.warning("node %s: %s; not registering it", node.name, exc)
        found = self.get(ids)
        missing = set(ids) - {i.get("InstanceId", "") for i in found}
        if missing:
            log.warning("instances %s not found among cluster instances", sorted(missing))
        return [i for i in found if i.get("State", {}).get("Name") != "terminated"]
