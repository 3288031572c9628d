"""All-or-nothing security-group permission calls: a refused Authorize/Revoke changes nothing.

Role: EC2 applies ``AuthorizeSecurityGroupIngress``/``Egress`` and
``RevokeSecurityGroupIngress``/``Egress`` atomically: when one permission of the call is refused
(``InvalidPermission.Duplicate``, ``InvalidPermission.NotFound``,
``RulesPerSecurityGroupLimitExceeded``, ...) none of them is applied (the API reference's
``RevokeSecurityGroupIngress``: "If the rule does not exist, ... the request fails"; a call is one
change). moto 5.2.5 applies the permissions one after the other and stops at the first it
refuses, keeping the ones before it: 70 permissions stored 60 rules and answered the limit
error. The fidelity layer (:mod:`lab.aws.fidelity`, gap 17) takes a :class:`RulesSnapshot` of
the region's groups before such a call and puts it back when moto refuses it.

Design: a snapshot and not a dry run, so that whatever moto checks (and in which order) stays
moto's, and the answer is the error moto gave; the rules lists are copied (the rule objects are
never changed in place), and tags of rules a refused call created are dropped. Cheap: a lab has
tens of groups. Used under the endpoint's lock.

Neighbours: :mod:`lab.aws.fidelity` (takes and restores it).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

#: the calls EC2 applies as one change
PERMISSION_ACTIONS = frozenset(
    {
        "AuthorizeSecurityGroupIngress",
        "AuthorizeSecurityGroupEgress",
        "RevokeSecurityGroupIngress",
        "RevokeSecurityGroupEgress",
    }
)


@dataclass(frozen=True)
class RulesSnapshot:
    """Every security group's rules of one EC2 region backend, as they were."""

    backend: Any
    groups: tuple[tuple[Any, list[Any], list[Any]], ...]
    rule_ids: frozenset[str]

    @classmethod
    def take(cls, backend: Any) -> RulesSnapshot:
        groups = tuple(
            (group, list(group.ingress_rules), list(group.egress_rules))
            for by_id in backend.groups.values()
            for group in by_id.values()
        )
        return cls(backend, groups, _rule_ids(groups))

    def restore(self) -> None:
        """Put every group's rules back; drop the tags of rules created since."""
        added = _rule_ids(
            (group, group.ingress_rules, group.egress_rules) for group, _, _ in self.groups
        )
        for group, ingress, egress in self.groups:
            group.ingress_rules[:] = ingress
            group.egress_rules[:] = egress
        tags = getattr(self.backend, "tags", {})
        for rule_id in added - self.rule_ids:
            tags.pop(rule_id, None)


def _rule_ids(groups: Any) -> frozenset[str]:
    return frozenset(
        str(rule.id)
        for _, ingress, egress in groups
        for rule in (*ingress, *egress)
        if getattr(rule, "id", None)
    )
