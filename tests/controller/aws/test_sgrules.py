"""Security-group rule arithmetic: ungroup/regroup round trip and exact-sync diffs."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from controller.aws import sgrules
from controller.aws.sgrules import Rule

_rules = st.one_of(
    st.builds(
        lambda p, port, cidr: Rule(p, port, port, "cidr", cidr),
        st.sampled_from(["tcp", "udp"]),
        st.integers(min_value=1, max_value=65535),
        st.sampled_from(["0.0.0.0/0", "10.0.0.0/8", "1.2.3.4/32"]),
    ),
    st.builds(lambda cidr: Rule("icmp", 3, 4, "cidr", cidr), st.sampled_from(["0.0.0.0/0"])),
    st.builds(
        lambda g, u: Rule("-1", None, None, "group", g, u),
        st.sampled_from(["sg-a", "sg-b", "sg-c"]),
        st.sampled_from(["", "123456789012"]),
    ),
    st.builds(lambda c: Rule("tcp", 443, 443, "cidr6", c), st.sampled_from(["::/0"])),
)


@settings(max_examples=100, deadline=None)
@given(st.frozensets(_rules, max_size=12))
def test_regroup_then_ungroup_is_identity(rules: frozenset[Rule]) -> None:
    assert sgrules.ungroup(sgrules.regroup(rules)) == rules


@settings(max_examples=100, deadline=None)
@given(st.frozensets(_rules, max_size=10), st.frozensets(_rules, max_size=10))
def test_diff_makes_actual_equal_desired(desired: frozenset[Rule], actual: frozenset[Rule]) -> None:
    change = sgrules.diff(desired, actual)
    assert change.revoke <= actual
    assert not (change.authorize & actual)
    result = (actual - change.revoke) | change.authorize

    # group rules without an account match any account: compare ignoring unnamed accounts
    def norm(rs: frozenset[Rule]) -> set[tuple[object, ...]]:
        return {(r.protocol, r.from_port, r.to_port, r.kind, r.source) for r in rs}

    assert norm(result) == norm(desired)
    assert sgrules.diff(desired, result).empty  # idempotent: a second sync changes nothing


def test_diff_ignores_account_when_desired_names_none() -> None:
    actual = {Rule("-1", None, None, "group", "sg-a", "123")}
    assert sgrules.diff({sgrules.allow_all_from_group("sg-a")}, actual).empty


def test_ungroup_reads_described_permissions() -> None:
    described: list[dict[str, Any]] = [
        {
            "IpProtocol": "tcp",
            "FromPort": 80,
            "ToPort": 80,
            "IpRanges": [{"CidrIp": "0.0.0.0/0"}, {"CidrIp": "10.0.0.0/8"}],
        },
        {"IpProtocol": "-1", "UserIdGroupPairs": [{"GroupId": "sg-x", "UserId": "1"}]},
        {
            "IpProtocol": "6",
            "FromPort": 22,
            "ToPort": 22,
            "PrefixListIds": [{"PrefixListId": "pl-1"}],
        },
    ]
    assert sgrules.ungroup(described) == {
        Rule("tcp", 80, 80, "cidr", "0.0.0.0/0"),
        Rule("tcp", 80, 80, "cidr", "10.0.0.0/8"),
        Rule("-1", None, None, "group", "sg-x", "1"),
        Rule("tcp", 22, 22, "prefix", "pl-1"),
    }


def test_load_balancer_rules_are_ports_plus_icmp_3_4() -> None:
    assert sgrules.load_balancer_rules([80, 443], ["1.2.3.4/32"]) == {
        Rule("tcp", 80, 80, "cidr", "1.2.3.4/32"),
        Rule("tcp", 443, 443, "cidr", "1.2.3.4/32"),
        Rule("icmp", 3, 4, "cidr", "1.2.3.4/32"),
    }
