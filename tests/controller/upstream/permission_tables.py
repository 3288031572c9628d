"""Upstream's table test of its security-group permission splitting, as data.

Source: kubernetes/cloud-provider-aws ``pkg/providers/v1/sets_ippermissions_test.go``
``TestUngroup`` at v1.33.0 (40f1f7ac; added by 5e0e4a1f, unchanged since). Inputs and
expected outputs only, as EC2 ``IpPermissions`` dicts; the adapter that runs them against ours
is in ``test_upstream_permissions``.

The third case is the shape behind kubernetes#98278: every piece keeps its IPv4 range *and*
one group pair, so a revoke of the piece takes both.
"""

from __future__ import annotations

from typing import Any


def _perm(*cidrs: str, pairs: tuple[str, ...] = ()) -> dict[str, Any]:
    out: dict[str, Any] = {
        "IpProtocol": "tcp",
        "FromPort": 1,
        "ToPort": 2,
        "IpRanges": [{"CidrIp": c} for c in cidrs],
    }
    if pairs:
        out["UserIdGroupPairs"] = [
            {"GroupId": g, "GroupName": f"group-{g}", "UserId": "123", "VpcId": "123"}
            for g in pairs
        ]
    return out


#: ``TestUngroup``: (case, input permissions, expected permission set)
UNGROUP: list[tuple[str, list[dict[str, Any]], list[dict[str, Any]]]] = [
    ("Single IP range in input set", [_perm("10.0.0.0/16")], [_perm("10.0.0.0/16")]),
    (
        "Three ip ranges in input set",
        [_perm("10.0.0.0/16", "10.1.0.0/16", "10.2.0.0/16")],
        [_perm("10.0.0.0/16"), _perm("10.1.0.0/16"), _perm("10.2.0.0/16")],
    ),
    (
        "Three UserIdGroupPairs in input set",
        [_perm("10.0.0.0/16", pairs=("1", "2", "3"))],
        [_perm("10.0.0.0/16", pairs=(g,)) for g in ("1", "2", "3")],
    ),
]
