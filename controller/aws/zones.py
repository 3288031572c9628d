"""Availability zones by name: id and type, from one ``DescribeAvailabilityZones``.

Neighbours: :attr:`controller.aws.context.AWSContext.zones` holds the one cache of a controller
run; :mod:`controller.aws.instances` reads a node's zone id (the ``topology.k8s.aws/zone-id``
label) and :mod:`controller.aws.subnets` the zone types (only regular zones get load
balancers).

Upstream ``zoneCache`` (kubernetes/cloud-provider-aws ``pkg/providers/v1/zones.go`` at
63ec440c): the zones are described on first use and again whenever a name is asked that the
cache does not hold (an account gains access to a zone), the answer merged into what is held;
a name EC2 does not list is left out of the answer; its id is an error.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from controller.cloud import CloudError

if TYPE_CHECKING:
    from mypy_boto3_ec2 import EC2Client

log = logging.getLogger(__name__)

REGULAR_ZONE = "availability-zone"


@dataclass(frozen=True)
class ZoneDetails:
    name: str
    zone_id: str
    zone_type: str


class ZoneNotFound(CloudError):
    """EC2 does not list the zone, even after describing the zones again."""


class ZoneCache:
    def __init__(self, ec2: EC2Client) -> None:
        self.ec2 = ec2
        self._lock = threading.Lock()
        self._details: dict[str, ZoneDetails] = {}

    def _populate(self) -> None:
        zones = self.ec2.describe_availability_zones().get("AvailabilityZones", [])
        with self._lock:
            for z in zones:
                name = z.get("ZoneName", "")
                self._details[name] = ZoneDetails(name, z.get("ZoneId", ""), z.get("ZoneType", ""))

    def details(self, names: Sequence[str]) -> dict[str, ZoneDetails]:
        """Upstream ``getZoneDetailsByNames``: the details of each name EC2 lists."""
        if not names:
            return {}
        with self._lock:
            stale = not self._details or any(n not in self._details for n in names)
        if stale:
            self._populate()
        with self._lock:
            found = {n: self._details[n] for n in names if n in self._details}
        for name in names:
            if name not in found:
                log.warning("could not find zone %s", name)
        return found

    def zone_id(self, name: str) -> str:
        """Upstream ``getZoneIDByZoneName``: raises :class:`ZoneNotFound` for a zone EC2 does
        not list (so a node in it is not initialized without its zone-id label)."""
        found = self.details([name]).get(name)
        if found is None:
            raise ZoneNotFound(f"Could not get zone ID from zone name {name}")
        return found.zone_id
