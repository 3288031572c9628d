"""Rules of the metadata service without HTTP: tokens, IMDSv2 floor, tag exposure, EC2 cache."""

from __future__ import annotations

import dataclasses

import pytest

from lab.imds.ec2 import Boto3Ec2Reader
from lab.imds.exceptions import BadRequest
from lab.imds.models import (
    InstanceID,
    Settings,
    TokenStore,
    effective_http_tokens,
    parse_token_ttl,
)
from tests.imds.conftest import FakeClock, SeededInstance, World

A = InstanceID("i-aaaaaaaaaaaaaaaaa")
B = InstanceID("i-bbbbbbbbbbbbbbbbb")


def test_token_store_expiry_binding_and_bound(clock: FakeClock) -> None:
    store = TokenStore(clock, max_tokens=3)
    tok = store.mint(A, 10)
    assert store.remaining(tok, A) == 10
    assert store.remaining(tok, B) is None  # bound to A
    clock.advance(9.5)
    assert store.remaining(tok, A) == 1  # rounds up, never 0 while valid
    clock.advance(0.5)
    assert store.remaining(tok, A) is None
    assert len(store) == 0  # expired tokens are dropped on use
    tokens = [store.mint(A, 100 + i) for i in range(4)]
    assert len(store) == 3
    assert store.remaining(tokens[0], A) is None  # the soonest-expiring one was evicted
    assert store.remaining(tokens[3], A) == 103


def test_parse_token_ttl() -> None:
    assert parse_token_ttl(" 60 ") == 60
    for raw in (None, "0", "21601", "1.5", "x"):
        with pytest.raises(BadRequest):
            parse_token_ttl(raw)


def test_imdsv2_strictest_wins(world: World, node: SeededInstance) -> None:
    reader = Boto3Ec2Reader(world.ec2.meta.endpoint_url, "us-east-1", cache_ttl=0)
    view = reader.instance(InstanceID(node.instance_id))
    assert view is not None
    required = dataclasses.replace(view, http_tokens="required")
    assert effective_http_tokens(view, Settings()) == "optional"
    assert effective_http_tokens(view, Settings(imdsv2_floor="required")) == "required"
    assert effective_http_tokens(required, Settings(imdsv2_floor="optional")) == "required"


def test_reader_cache_window(world: World, node: SeededInstance, clock: FakeClock) -> None:
    reader = Boto3Ec2Reader(world.ec2.meta.endpoint_url, "us-east-1", cache_ttl=0.5, clock=clock)
    iid = InstanceID(node.instance_id)
    first = reader.instance(iid)
    assert first is not None
    assert first.tags["Name"] == "node-1"
    world.ec2.create_tags(Resources=[node.instance_id], Tags=[{"Key": "Name", "Value": "renamed"}])
    cached = reader.instance(iid)
    assert cached is not None
    assert cached.tags["Name"] == "node-1"  # inside the window: the cached view
    clock.advance(0.5)
    fresh = reader.instance(iid)
    assert fresh is not None
    assert fresh.tags["Name"] == "renamed"
    assert reader.instance(InstanceID("i-0000000000000dead")) is None
