"""A LocalStack as the lab's AWS side, behind the recording proxy.

Role: :class:`LocalStackAws` implements ``lab.compose.aws_side.AwsSide`` for
``aws="localstack"``: the LocalStack ``aws_endpoint`` names, or a container started through
Docker now (``lab.aws.localstack_docker``), reached through ``lab.aws.proxied.ProxiedAws`` so
the trail and faults work as on moto. LocalStack keeps its state between runs, so what a lab of
this cluster id left there is deleted at start and, when the lab does not own the container, at
stop; a reset cannot wipe it: the proxy forgets its trail and faults, and seeding finds the
topology again by its tags.

Neighbours: ``lab.compose.aws_proxied`` (the shared half), ``lab.aws.localstack`` (the probe
and what this LocalStack lacks), ``lab.compose.aws_moto`` (the default side).

Design: every LocalStack branch of the old ``Lab`` in one class.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from lab.aws.proxied import ProxiedAws
from lab.aws.topology import delete_topology
from lab.compose.aws_proxied import ProxiedSide
from lab.compose.aws_side import AwsStart
from lab.compose.world import PlannedNode, World
from lab.spec import LabSpec

log = logging.getLogger(__name__)


class LocalStackAws(ProxiedSide):
    """``aws="localstack"`` (see the module doc)."""

    def __init__(self, cfg: LabSpec) -> None:
        super().__init__(cfg)
        #: the LocalStack container this lab started (no ``aws_endpoint`` given)
        self.container: str | None = None

    def start(self, how: AwsStart) -> None:
        """A LocalStack (the one named, or a container started now) behind the recording
        proxy; what a previous lab of this cluster id left there is deleted first."""
        from lab.aws.localstack import connect_localstack_at, lacks
        from lab.aws.localstack_docker import start_localstack

        cfg = self.cfg
        if cfg.aws_endpoint is not None:
            endpoint = connect_localstack_at(cfg.aws_endpoint, cfg.region, timeout=5.0)
        else:
            started = start_localstack(cfg.name, region=cfg.region, docker=cfg.docker_binary)
            self.container = started.container
            endpoint = started.endpoint
        edition = f" ({endpoint.edition})" if endpoint.edition else ""
        proxy = ProxiedAws(
            endpoint.url,
            lacks=lacks(endpoint),
            describe=f"LocalStack {endpoint.version or ''}{edition} at {endpoint.url}",
            region=cfg.region,
            host=how.host,
            token=how.token,
        )
        self.proxy = proxy
        proxy.start()
        removed = delete_topology(proxy.client("ec2"), cfg.cluster_id)
        if removed:
            log.info("deleted %d resources a previous lab left in %s", removed, proxy.describe)
        proxy.control.clear_trail()

    def stop(self) -> None:
        proxy, self.proxy = self.proxy, None
        if proxy is not None and self.container is None:
            # a LocalStack the lab does not own keeps its state: leave none of ours there
            try:
                delete_topology(proxy.client("ec2", max_attempts=3), self.cfg.cluster_id)
            except Exception as exc:  # the lab still stops; the next start deletes it
                log.warning("could not delete the lab's topology in %s: %s", proxy.describe, exc)
        if proxy is not None:
            proxy.stop()
        if self.container is not None:
            from lab.aws.localstack_docker import stop_localstack

            stop_localstack(self.container, docker=self.cfg.docker_binary)
            self.container = None

    def reseed(self, cfg: LabSpec, plan: Sequence[PlannedNode]) -> World:
        """The proxy forgets its trail and faults (the upstream cannot be wiped); seeding
        finds the topology again by its tags, creating only what is missing."""
        self._running().control.reset()
        return self.seed(cfg, plan)

    def check_reset(self) -> None:
        """A LocalStack lab can be reset (as far as the upstream allows)."""

    def reset(self, cfg: LabSpec, world: World) -> World:
        return self.reseed(cfg, world.plan())
