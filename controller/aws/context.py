"""What every AWS capability module shares for one controller run.

Neighbours: built once by :func:`controller.aws.new_cloud`; read by the security-group,
subnet, load-balancer and instance modules. Holds clients and resolved identity, never state
about individual Services (the load balancer code is stateless between calls except for
caches that are safe to lose).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property

from controller.aws.clients import Clients
from controller.aws.config import CloudConfig
from controller.aws.tags import ClusterTags
from controller.aws.wave import WaveCache
from controller.aws.zones import ZoneCache
from controller.legacy import LegacyFlags


@dataclass(frozen=True)
class AWSContext:
    clients: Clients
    config: CloudConfig
    tags: ClusterTags
    vpc_id: str
    self_subnet_id: str
    legacy: LegacyFlags = field(default_factory=LegacyFlags)
    sg_delete_interval: float = 5.0
    sg_delete_timeout: float = 600.0
    sleep: Callable[[float], None] = field(default=time.sleep)
    clock: Callable[[], float] = field(default=time.monotonic)
    #: reads shared by one sync wave (inactive, so a pass-through, outside a wave)
    wave: WaveCache = field(default_factory=WaveCache)

    @property
    def region(self) -> str:
        return self.clients.region

    @cached_property
    def zones(self) -> ZoneCache:
        """The run's one zone cache (upstream ``Cloud.zoneCache``), made on first use."""
        return ZoneCache(self.clients.ec2)
