"""Registry of documented legacy behaviours the controller can switch back on.

Each entry is a catalog scenario id from ``shared/docs/failure-catalog.md``. All are off by
default; ``--legacy-behavior=ID[,ID]`` switches them on so the lab can reproduce the
documented failure, and switching them off verifies the fix. The code path for each legacy
branch sits next to the fixed one and names the upstream issue; call sites ask
``flags.enabled("k8s-84926")``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class LegacyBehavior:
    id: str
    upstream: str
    summary: str


BEHAVIORS: dict[str, LegacyBehavior] = {
    b.id: b
    for b in (
        LegacyBehavior(
            "k8s-84926",
            "kubernetes#84926 (fixed by PR #92224, #84265; cloud-provider-aws PR #752)",
            "the ELB's own security group is whichever group comes last in the ELB description",
        ),
        LegacyBehavior(
            "k8s-84256",
            "kubernetes#84256, cloud-provider-aws#67 (fixed by PR #84265)",
            "groups named in the security-groups annotations are deleted with the Service",
        ),
        LegacyBehavior(
            "legacy-node-role",
            "LegacyNodeRoleBehavior feature gate (on by default before 1.21, PR #97543)",
            "nodes labelled node-role.kubernetes.io/master are excluded from load balancers",
        ),
        LegacyBehavior(
            "node-name-private-dns",
            "cloud-provider-aws #63, #335, #384, #1471",
            "instances are looked up by PrivateDnsName only (no providerID, no i-... names)",
        ),
        LegacyBehavior(
            "k8s-81636",
            "kubernetes#81636 (#58334, #63226)",
            "a lookup miss right after registration deletes the node",
        ),
        LegacyBehavior(
            "transient-node-predicates",
            "kubernetes#110195, KEP-3458 (StableLoadBalancerNodeSet)",
            "NotReady or ToBeDeletedByClusterAutoscaler nodes are dropped from the ELB at once",
        ),
        LegacyBehavior(
            "k8s-57568",
            "kubernetes#57568 (v1.9.0; fixed by PR #57569)",
            "NLB deletion revokes the node rules with an empty Ipv6Ranges list, which EC2 "
            "refuses after the NLB is gone; the retry finds no NLB and the rules stay open",
        ),
        LegacyBehavior(
            "k8s-70421",
            "kubernetes#70421, #60825, #64148 (v1.9-v1.12; fixed by PR #68422, #74692)",
            "a node group listed once per NLB rule cancels the revoke of a changed port's "
            "rules, and revokes unchanged ones on a node sync",
        ),
        LegacyBehavior(
            "k8s-98278",
            "kubernetes#98278 (upstream since PR #74692, still in v1.33.0)",
            "revoking an NLB rule also revokes the group and prefix-list sources EC2 lists "
            "in the same permission, e.g. a node group's all-traffic self rule",
        ),
        LegacyBehavior(
            "shared-elb-sg",
            "kops#4197, kops#6583, kubernetes#62489",
            "deleting one Service revokes a shared ElbSecurityGroup's node rule other ELBs need",
        ),
    )
}


class UnknownLegacyBehavior(ValueError):
    def __init__(self, name: str) -> None:
        known = ", ".join(sorted(BEHAVIORS))
        super().__init__(f"--legacy-behavior: unknown id {name!r}; known ids: {known}")
        self.name = name


@dataclass(frozen=True)
class LegacyFlags:
    """The set of legacy behaviours switched on for one controller run."""

    on: frozenset[str] = frozenset()

    @classmethod
    def parse(cls, values: Iterable[str]) -> LegacyFlags:
        """Parse ``--legacy-behavior`` values (each may be comma-separated)."""
        ids: set[str] = set()
        for value in values:
            for raw in value.split(","):
                name = raw.strip()
                if not name:
                    continue
                if name not in BEHAVIORS:
                    raise UnknownLegacyBehavior(name)
                ids.add(name)
        return cls(frozenset(ids))

    def enabled(self, behavior_id: str) -> bool:
        if behavior_id not in BEHAVIORS:
            raise UnknownLegacyBehavior(behavior_id)
        return behavior_id in self.on
