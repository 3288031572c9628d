"""The tagging controller's own pieces: its token bucket (golang.org/x/time/rate reservation
arithmetic) and option parsing; the upstream table is in ``upstream/test_upstream_tagging.py``."""

from __future__ import annotations

import pytest

from controller.runtime.clock import FakeClock
from controller.tagging import TaggingOptionsError, TokenBucket, parse_tags


def test_token_bucket_spends_the_burst_then_paces_at_the_rate() -> None:
    clock = FakeClock()
    bucket = TokenBucket(10.0, 2, clock=clock)
    assert [round(bucket.reserve(), 3) for _ in range(4)] == [0.0, 0.0, 0.1, 0.2]
    clock.advance(1.0)  # the debt of two is repaid and the bucket refills up to the burst
    assert [round(bucket.reserve(), 3) for _ in range(3)] == [0.0, 0.0, 0.1]


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("a=1", {"a": "1"}),
        ("a=1,b=2", {"a": "1", "b": "2"}),
        ("a=x=y,b=", {"a": "x=y", "b": ""}),
        ('"a=1,2",b=3', {"a": "1,2", "b": "3"}),
        ("a=1,b", {"a": "1,b"}),  # one "=": the whole value is one pair, as in pflag
        ('"a=1"', {"a": "1"}),
    ],
)
def test_parse_tags_as_pflag_string_to_string(text: str, want: dict[str, str]) -> None:
    assert parse_tags(text) == want


@pytest.mark.parametrize(("text", "bad"), [("a=1,b,c=2", "b"), ("team", "team"), ("", "")])
def test_parse_tags_refuses_an_item_without_equals(text: str, bad: str) -> None:
    with pytest.raises(TaggingOptionsError, match=f"'{bad}' must be formatted as key=value"):
        parse_tags(text)
