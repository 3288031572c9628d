"""Instance topology: the ``topology.k8s.aws/network-node-layer-N`` labels of a node.

Neighbours: :class:`controller.aws.instances.AWSInstances` asks :class:`TopologyManager` for
the node's network nodes while building ``InstanceMetadata`` and turns them into labels with
:func:`network_node_labels`; the pattern comes from ``[Global]
SupportedTopologyInstanceTypePattern`` (:mod:`controller.aws.config`).

Design (upstream ``pkg/providers/v1/topology.go`` and ``instances_v2.go``
``getAdditionalLabels``): one ``DescribeInstanceTopology`` per instance, by id, and only while
nothing says the answer would be empty. Three kinds of "no" are remembered for 24 hours in one
TTL store keyed by the string alone:

* the region, when EC2 answers ``UnsupportedOperation`` (the API is not offered there) or
  ``UnauthorizedOperation`` (the controller's role lacks ``ec2:DescribeInstanceTopology``);
* the instance type, when the answer lists nothing and the type is not one AWS documents as
  supported (``DoesInstanceTypeRequireResponse`` false);
* the instance id, when the answer lists nothing although the type is documented as supported
  (so other instances of that type still get asked).

``RequestLimitExceeded`` and any other error are returned and not remembered; the caller fails
the node's initialization only when the type is expected to have a topology, otherwise it
labels the node without the layers. A node that already carries ``...-layer-1`` is not asked
about at all.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

from botocore.exceptions import ClientError

from controller.aws.clients import AWSError, error_code

if TYPE_CHECKING:
    from mypy_boto3_ec2 import EC2Client

log = logging.getLogger(__name__)

NETWORK_NODE_LABEL_PREFIX = "topology.k8s.aws/network-node-layer-"
CACHE_TTL = 24 * 3600.0
#: Upstream's ``defaultSupportedTopologyInstanceTypePattern``: the families AWS documents as
#: answering with a topology (hpc*, trn*, p*), matched as Go's ``MatchString`` does (search).
DEFAULT_SUPPORTED_PATTERN = r"^(hpc|trn|p)[0-9]+[a-z]*(-[a-z0-9]+)?(\.[0-9a-z]*)$"


class TTLStore:
    """Upstream's ``cache.NewTTLStore`` as used here: a set of keys, each forgotten
    ``ttl`` seconds after it was (last) added; time from ``clock``."""

    def __init__(self, ttl: float, clock: Callable[[], float]) -> None:
        self.ttl = ttl
        self.clock = clock
        self._added: dict[str, float] = {}
        self._lock = threading.Lock()

    def add(self, key: str) -> None:
        with self._lock:
            self._added[key] = self.clock()

    def __contains__(self, key: object) -> bool:
        with self._lock:
            at = self._added.get(str(key))
            if at is None:
                return False
            if self.clock() - at >= self.ttl:
                del self._added[str(key)]
                return False
            return True


class TopologyManager:
    """Upstream ``instanceTopologyManager``."""

    def __init__(
        self,
        ec2: EC2Client,
        *,
        pattern: str = "",
        clock: Callable[[], float],
    ) -> None:
        self.ec2 = ec2
        self.pattern = re.compile(pattern or DEFAULT_SUPPORTED_PATTERN)
        self.unsupported = TTLStore(CACHE_TTL, clock)

    def requires_response(self, instance_type: str) -> bool:
        """Upstream ``DoesInstanceTypeRequireResponse``."""
        return self.pattern.search(instance_type) is not None

    def _might_support(self, instance_id: str, instance_type: str, region: str) -> bool:
        if not instance_type:
            return False
        return not any(k in self.unsupported for k in (region, instance_id, instance_type))

    def network_nodes(self, instance_type: str, region: str, instance_id: str) -> list[str] | None:
        """Upstream ``GetNodeTopology``: the instance's network nodes (top layer first), or
        ``None`` when there is no topology to have. Raises ``ClientError`` for throttling and
        errors it does not know."""
        if not self._might_support(instance_id, instance_type, region):
            return None
        try:
            resp = self.ec2.describe_instance_topology(InstanceIds=[instance_id])
        except ClientError as exc:
            code = error_code(exc)
            if code == "UnsupportedOperation":
                log.info("ec2:DescribeInstanceTopology is not available in %s: %s", region, exc)
                self.unsupported.add(region)
                return None
            if code == "UnauthorizedOperation":
                log.warning(
                    "Not authorized to perform: ec2:DescribeInstanceTopology, "
                    "permission missing: %s",
                    exc,
                )
                self.unsupported.add(region)
                return None
            if code == "RequestLimitExceeded":
                log.warning("Exceeded ec2:DescribeInstanceTopology request limits: %s", exc)
            else:
                log.error("Error describing instance topology: %s", exc)
            raise
        except AWSError as exc:
            # no answer, or one that is not AWS's (an endpoint that lacks the call): upstream
            # treats every error alike
            log.error("Error describing instance topology: %s", exc)
            raise
        found = resp.get("Instances", [])
        if not found:
            if self.requires_response(instance_type):
                log.warning(
                    "Instance %s of type %s has no instance topology listed but may be a "
                    "supported type",
                    instance_id,
                    instance_type,
                )
                self.unsupported.add(instance_id)
            else:
                log.info("Instance type %s unsupported for instance topology", instance_type)
                self.unsupported.add(instance_type)
            return None
        return list(found[0].get("NetworkNodes", []))


def network_node_labels(nodes: Sequence[str]) -> dict[str, str]:
    """``...-layer-1`` for the first network node, ``-2`` for the next, and so on."""
    return {f"{NETWORK_NODE_LABEL_PREFIX}{i}": n for i, n in enumerate(nodes, start=1)}


def topology_labels(
    manager: TopologyManager,
    *,
    instance_type: str,
    region: str,
    instance_id: str,
    existing: Mapping[str, str],
) -> dict[str, str]:
    """The network-node half of upstream ``getAdditionalLabels``: nothing when the node has
    ``...-layer-1`` already; an error only when the type is expected to have a topology."""
    if NETWORK_NODE_LABEL_PREFIX + "1" in existing:
        return {}
    try:
        nodes = manager.network_nodes(instance_type, region, instance_id)
    except AWSError as exc:  # upstream: any error
        if manager.requires_response(instance_type):
            log.error(
                "Failed to get node topology for instance type %s and one is expected: %s",
                instance_type,
                exc,
            )
            raise
        log.warning(
            "Failed to get node topology for instance type %s and ID %s; labelling without it: %s",
            instance_type,
            instance_id,
            exc,
        )
        return {}
    if nodes is None:
        return {}
    return network_node_labels(nodes)
