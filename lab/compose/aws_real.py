"""A real AWS account as the lab's AWS side: one run's world, behind the guarded proxy.

Role: :class:`RealAccountAws` implements ``lab.compose.aws_side.AwsSide`` for ``aws="real"``:
the account of boto3's usual chain behind the recording proxy, which signs each call again with
that chain's credentials and passes it through the run's guard (``lab.aws.runproxy``). The
controller holds the lab's own key pair (fresh per lab, the only one the proxy accepts), never
the account's. Nothing is created or deleted here: the run's world exists (``lab.up`` created
it, ``lab.aws.realaccount``) and is read back instead of seeded; it stays until ``lab.down``,
so a lab in an account cannot be reset.

Neighbours: ``lab.compose.aws_proxied`` (the shared half), ``lab.aws.realaccount`` (the run),
``lab.aws.proxy.callerauth`` (the lab's key pair).

Design: every real-account branch of the old ``Lab`` in one class.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from lab.aws.proxied import ProxiedAws
from lab.cluster.base import Role
from lab.compose.aws_proxied import ProxiedSide
from lab.compose.aws_side import AwsStart
from lab.compose.base import LabNotReady
from lab.compose.node import LabNode
from lab.compose.world import PlannedNode, World
from lab.spec import LabSpec

NO_RESET = (
    "a lab in a real account cannot be reset: what the controller created there is "
    "the run's until lab.down removes it (by the run's tag)"
)


class RealAccountAws(ProxiedSide):
    """``aws="real"`` (see the module doc)."""

    def __init__(self, cfg: LabSpec) -> None:
        super().__init__(cfg)
        self.caller_credentials: tuple[str, str] | None = None

    @property
    def run_id(self) -> str:
        assert self.cfg.run_id is not None  # LabSpec checks it
        return self.cfg.run_id

    def start(self, how: AwsStart) -> None:
        from lab.aws import realaccount
        from lab.aws.proxy.callerauth import new_caller_credentials
        from lab.aws.runproxy import ProxyRunGuard

        region = self.cfg.region
        clients = realaccount.account_clients(region, self.run_id)
        endpoint = clients.ec2.meta.endpoint_url
        credentials = realaccount.account_credentials()
        # the proxy signs with the user's credentials, so it must not sign for just anyone
        # who reaches its port: callers sign with this lab's own key pair, checked first
        self.caller_credentials = new_caller_credentials()
        proxy = ProxiedAws(
            "aws" if realaccount.is_amazon_endpoint(endpoint) else endpoint,
            lacks={
                "fidelity": "a real account is AWS itself; the lab adds nothing to it",
                "elb-model": "a real account's load balancers check the real instances; the "
                "lab's model of them (lab.traffic, modelled health) is not there",
            },
            describe=f"the AWS account at {endpoint} (run {self.run_id})",
            region=region,
            host=how.host,
            token=how.token,
            credentials=credentials,
            caller_credentials=self.caller_credentials,
            guard=ProxyRunGuard(clients.guard, region=region),
        )
        self.proxy = proxy
        proxy.start()

    def stop(self) -> None:
        """Only the proxy stops: the run's world stays until ``lab.down``."""
        proxy, self.proxy = self.proxy, None
        if proxy is not None:
            proxy.stop()

    def seed(self, cfg: LabSpec, plan: Sequence[PlannedNode]) -> World:
        """The nodes are the run's instances, read back (through the proxy) as the run
        created them: ids, private IPs and DNS names, zones (``plan`` is not seeded)."""
        from lab.aws import realaccount
        from lab.aws.seeding import describe_topology

        spec = realaccount.run_spec(self.run_id, cfg.region, nodes=cfg.nodes, vpc_cidr=cfg.vpc_cidr)
        ec2 = self._running().client("ec2", max_attempts=3)
        first = ec2.describe_instances(
            Filters=[
                {"Name": f"tag:{realaccount.RUN_TAG}", "Values": [self.run_id]},
                {"Name": "tag:Name", "Values": [spec.nodes[0].name]},
            ]
        )["Reservations"]
        image = next((i.get("ImageId", "") for r in first for i in r.get("Instances", [])), "")
        if not image:
            raise RuntimeError(
                f"run {self.run_id}: no instance {spec.nodes[0].name} in "
                f"{self.describe()}; was it removed (lab.down)?"
            )
        topology = describe_topology(ec2, dataclasses.replace(spec, image_id=image))
        nodes = [
            LabNode(
                name=node.name,
                role=Role.CONTROL_PLANE if index == 0 else Role.WORKER,
                private_ip=info.private_ip,
                zone=info.zone,
                instance_id=info.instance_id,
                private_dns_name=info.private_dns_name,
            )
            for index, node in enumerate(spec.nodes)
            for info in [topology.instances[node.name]]
        ]
        return World(topology=topology, nodes=nodes)

    def reseed(self, cfg: LabSpec, plan: Sequence[PlannedNode]) -> World:
        raise LabNotReady(NO_RESET)

    def check_reset(self) -> None:
        raise LabNotReady(NO_RESET)

    def reset(self, cfg: LabSpec, world: World) -> World:
        raise LabNotReady(NO_RESET)
