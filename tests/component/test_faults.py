"""The shared fault-rule vocabulary (``lab.faults``): parsing, firing order, count, probability."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import pytest

from lab.faults import MAX_LATENCY_MS, Effect, FaultRule, FaultTable, InvalidFaultRule


@dataclasses.dataclass(frozen=True, kw_only=True)
class NamedRule(FaultRule):
    """A rule matching calls by name, for these tests."""

    name: str = "*"
    FIELDS = ("name",)
    ERROR_FIELDS = ()

    @classmethod
    def parse_own(cls, data: Mapping[str, Any], *, effect: Effect) -> dict[str, Any]:
        return {"name": cls.text(data, "name", default="*")}


def _table(*rules: Mapping[str, Any]) -> FaultTable[NamedRule]:
    table: FaultTable[NamedRule] = FaultTable()
    for rule in rules:
        table.add(NamedRule.parse(rule))
    return table


def _call(table: FaultTable[NamedRule], name: str) -> tuple[float, str | None, tuple[str, ...]]:
    firing = table.fire(lambda rule: rule.name in ("*", name))
    return firing.latency_ms, None if firing.error is None else firing.error.id, firing.fired


def test_latency_rules_add_up_and_the_first_error_rule_answers() -> None:
    table = _table(
        {"effect": "latency", "latency_ms": 10},
        {"name": "get", "latency_ms": 5},
        {"name": "get"},
        {"effect": "latency", "latency_ms": 1},
    )
    assert _call(table, "get") == (15.0, "f2", ("f1", "f2"))
    assert _call(table, "list") == (11.0, None, ("f1", "f4"))
    assert [r.fired for r in table.rules()] == [2, 1, 0, 1]  # f3 was never consulted


def test_count_retires_a_rule_that_stays_listed() -> None:
    table = _table({"count": 2})
    outcomes = [_call(table, "x")[1] for _ in range(3)]
    assert outcomes == ["f1", "f1", None]
    (rule,) = table.rules()
    assert (rule.fired, rule.exhausted) == (2, True)
    assert table.remove("f1")
    assert not table.remove("f1")
    assert len(table) == 0


def test_probability_is_seeded_and_combines_with_count() -> None:
    def run() -> list[bool]:
        table = _table({"probability": 0.5, "seed": 11})
        return [_call(table, "x")[1] is not None for _ in range(40)]

    first = run()
    assert first == run()
    assert 5 < sum(first) < 35
    capped = _table({"probability": 1, "count": 3})
    assert sum(_call(capped, "x")[1] is not None for _ in range(10)) == 3


def test_none_count_fires_until_cleared() -> None:
    table = _table({})
    assert all(_call(table, "x")[1] == "f1" for _ in range(50))
    table.clear()
    assert _call(table, "x") == (0.0, None, ())


@pytest.mark.parametrize(
    ("data", "field", "value"),
    [
        ({"effect": "drop"}, "effect", "drop"),
        ({"latency_ms": -1}, "latency_ms", -1),
        ({"latency_ms": MAX_LATENCY_MS + 1}, "latency_ms", MAX_LATENCY_MS + 1),
        ({"latency_ms": True}, "latency_ms", True),
        ({"effect": "latency"}, "latency_ms", 0),
        ({"count": 0}, "count", 0),
        ({"count": 1.5}, "count", 1.5),
        ({"probability": -0.1}, "probability", -0.1),
        ({"seed": "7"}, "seed", "7"),
        ({"name": ""}, "name", ""),
        ({"colour": "red"}, "colour", "red"),
    ],
)
def test_bad_fields_are_named_with_their_value(
    data: Mapping[str, Any], field: str, value: object
) -> None:
    with pytest.raises(InvalidFaultRule) as err:
        NamedRule.parse(data)
    assert (err.value.field, err.value.value) == (field, value)
    assert err.value.message.startswith(f"fault: {field}={value!r}: ")


def test_a_rule_round_trips_through_its_dict() -> None:
    rule = _table({"name": "get", "latency_ms": 3, "count": 2}).rules()[0]
    assert NamedRule.from_dict({**rule.to_dict(), "unknown": 1}) == rule
