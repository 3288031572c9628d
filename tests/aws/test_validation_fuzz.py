"""Bounded fuzzing of the calls the controller makes: never a 5xx, a refusal changes nothing.

The actions are the controller's own boto3 calls (read from ``controller/aws/`` and mapped to
operation names through botocore); each request is generated from the operation's input shape
in botocore's model, mixing valid values (ids that exist, enum members, in-range numbers),
constraint violations (out-of-range numbers, wrong types, bad enum values, over-long strings)
and garbage, and sent on the wire as the query protocol serializes it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import botocore.session
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from lab.aws import AwsServer
from tests.aws.builders import classic_elb, first_subnet, group, instance
from tests.aws.wire import call, snapshot

CONTROLLER = Path(__file__).parents[2] / "controller" / "aws"
_CALL = re.compile(r"\.(ec2|elb)\.([a-z_]+)\(")
_PAGINATOR = re.compile(r"(ec2|elb)\.get_paginator\(\s*\"([a-z_]+)\"")


def controller_actions() -> list[tuple[str, str]]:
    """(service, Operation) of every boto3 call in ``controller/aws/``."""
    session = botocore.session.get_session()
    found: set[tuple[str, str]] = set()
    for path in CONTROLLER.glob("*.py"):
        text = path.read_text()
        for service, method in _CALL.findall(text) + _PAGINATOR.findall(text):
            model = session.get_service_model(service)
            names = {_snake(op): op for op in model.operation_names}
            if method in names:
                found.add((service, names[method]))
    return sorted(found)


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z][a-z])|(?<=[a-z0-9])(?=[A-Z])", "_", name).lower()


ACTIONS = controller_actions()
GARBAGE = st.sampled_from(["", "abc", "-1", "0", "70000", "wéb", "x" * 300, "sg-", "1e3", " "])


def _scalar(
    shape: Any, pool: dict[str, list[str]], name: str, valid: bool
) -> st.SearchStrategy[str]:
    """A member's value; ``valid``: only values the model allows (enum members, numbers in
    range, the world's names and ids), else garbage and violations mixed in."""
    kind = shape.type_name
    meta = shape.metadata
    options: list[st.SearchStrategy[str]] = [] if valid else [GARBAGE]
    if kind in ("integer", "long"):
        low = int(meta.get("min", 0 if valid else -5))
        high = int(meta.get("max", 65535 if valid else 70000))
        options.append(st.integers(low, high).map(str))
        if not valid:
            options.append(st.integers(-10, 100000).map(str))
    elif kind == "boolean":
        options.append(st.sampled_from(["true", "false"] if valid else ["true", "false", "yes"]))
    elif kind == "string":
        if meta.get("enum"):
            enum = st.sampled_from(list(meta["enum"]))
            if valid:
                return enum
            options.append(enum)
        lowered = name.lower()
        for key, values in pool.items():
            if key in lowered and values:
                options += [st.sampled_from(values)] * 3
        if not valid:
            options.append(
                st.sampled_from(["tcp", "udp", "-1", "icmp", "10.0.0.0/8", "::/0", "80"])
            )
        if not options or not valid:
            options.append(st.text(alphabet="abcXYZ019", min_size=1, max_size=12))
    if not options:
        options.append(st.just("1"))
    return st.one_of(options)


def _params(
    service: str,
    shape: Any,
    prefix: str,
    pool: dict[str, list[str]],
    depth: int,
    valid: bool = False,
) -> st.SearchStrategy[dict[str, str]]:
    ec2 = service == "ec2"
    parts: list[st.SearchStrategy[dict[str, str]]] = []
    required = set(shape.required_members)
    for name, member in shape.members.items():
        if ec2:
            ser = member.serialization
            wire = ser.get("queryName") or (
                ser["name"][0].upper() + ser["name"][1:] if "name" in ser else name
            )
        else:
            wire = member.serialization.get("name", name)
        key = f"{prefix}.{wire}" if prefix else wire
        value = _member(service, member, key, pool, depth, name, valid)
        if valid and name in required:
            parts.append(value)
        else:
            parts.append(_maybe(value, 0.85 if name in required else 0.35))
    return st.tuples(*parts).map(lambda ds: {k: v for d in ds for k, v in d.items()})


def _maybe(
    value: st.SearchStrategy[dict[str, str]], chance: float
) -> st.SearchStrategy[dict[str, str]]:
    """``value`` with probability ``chance``, else no parameter at all."""
    empty: dict[str, str] = {}

    def pick(draw: float) -> st.SearchStrategy[dict[str, str]]:
        return value if draw < chance else st.just(empty)

    return st.floats(0, 1).flatmap(pick)


def _member(
    service: str,
    shape: Any,
    key: str,
    pool: dict[str, list[str]],
    depth: int,
    name: str,
    valid: bool = False,
) -> st.SearchStrategy[dict[str, str]]:
    kind = shape.type_name
    if kind == "structure":
        if depth > 3:
            return st.just({})
        return _params(service, shape, key, pool, depth + 1, valid)
    if kind == "list":
        if depth > 3:
            return st.just({})
        level = "" if service == "ec2" else ".member"
        element = _member(service, shape.member, "{}", pool, depth + 1, name, valid)

        def expand(items: list[dict[str, str]]) -> dict[str, str]:
            out: dict[str, str] = {}
            for index, item in enumerate(items, 1):
                for k, v in item.items():
                    out[k.replace("{}", f"{key}{level}.{index}", 1)] = v
            return out

        return st.lists(element, max_size=2).map(expand)
    if kind == "map":
        return st.just({})
    return _scalar(shape, pool, name, valid).map(lambda v: {key: v})


@pytest.fixture
def pool(aws: AwsServer) -> dict[str, list[str]]:
    return build_world(aws)


def build_world(aws: AwsServer) -> dict[str, list[str]]:
    """A node group, an ELB group, an instance and a Classic ELB; the names and ids a
    request may use (some of them missing on purpose)."""
    ec2 = aws.client("ec2")
    nodes = group(ec2, "nodes")
    lb_group = group(ec2, "k8s-elb-a1")
    node = instance(ec2, nodes)
    classic_elb(aws.client("elb"), ec2, "a1", [lb_group])
    vpc = ec2.describe_vpcs()["Vpcs"][0]["VpcId"]
    return {
        "group": [nodes, lb_group, "sg-0000000000000dead"],
        "instance": [node, "i-0000000000000dead"],
        "subnet": [first_subnet(ec2), "subnet-garbage"],
        "vpc": [vpc, "vpc-garbage"],
        "loadbalancername": ["a1", "a2", "a" * 40],
        "name": ["a1", "tag:KubernetesCluster", "vpc-id", "group-id", "frob"],
        "cidr": ["10.0.0.0/8", "10.0.0.300/8", "::/0"],
        "protocol": ["tcp", "udp", "icmp", "-1", "frob", "HTTP", "TCP"],
        "port": ["80", "30080", "0", "-1", "70000", "abc"],
        "policy": ["p1", "ELBSecurityPolicy-2016-08"],
        "token": ["garbage"],
        "key": ["KubernetesCluster", "kubernetes.io/cluster/c1"],
        "value": ["owned", "c1", "x,y"],
        "zone": ["us-east-1a", "us-east-1z"],
    }


@settings(
    max_examples=15,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    derandomize=True,
)
@given(data=st.data())
def test_controller_calls_never_5xx_and_refusals_change_nothing(
    aws: AwsServer, pool: dict[str, list[str]], data: st.DataObject
) -> None:
    session = botocore.session.get_session()
    service, action = data.draw(st.sampled_from(ACTIONS), label="action")
    shape = session.get_service_model(service).operation_model(action).input_shape
    params = data.draw(_params(service, shape, "", pool, 0), label="params")
    before = snapshot(aws)
    answer = call(aws, service, action, params)
    assert answer.status < 500, (action, params, answer.body)
    if answer.status >= 400:
        assert snapshot(aws) == before, (action, params, answer.code, answer.message)
    assert not aws.take_internal_errors()


def test_the_controller_actions_were_found() -> None:
    services = {service for service, _ in ACTIONS}
    actions = {action for _, action in ACTIONS}
    assert services == {"ec2", "elb"}
    assert {"RevokeSecurityGroupIngress", "CreateLoadBalancer", "DescribeInstances"} <= actions


def _comparable(state: str) -> Any:
    """A snapshot without the moments resources were made at and boto3's idempotency tokens
    (two worlds built one after the other differ only there)."""

    def strip(value: Any) -> Any:
        if isinstance(value, dict):
            return {
                k: strip(v)
                for k, v in value.items()
                if "Time" not in k and "Date" not in k and k != "ClientToken"
            }
        if isinstance(value, list):
            return [strip(v) for v in value]
        return value

    return strip(json.loads(state))


def _two_worlds(
    aws: AwsServer, service: str, action: str, params_for: Callable[[dict[str, list[str]]], Any]
) -> tuple[dict[str, str], str]:
    """Send one request in two identical worlds, validation off then on; assert the second
    answer is what the first was unless validation refused the request. Returns the request
    and who answered it with validation on."""
    outcomes = []
    params: dict[str, str] | None = None
    for validating in (False, True):
        aws.reset()
        aws.control.seed(1157)
        world = build_world(aws)
        if params is None:
            params = params_for(world)
        aws.control.set_fidelity(validation=validating)
        answer = call(aws, service, action, params)
        answered_by = aws.trail.events()[-1].answered_by
        outcomes.append((answer.status, answer.code, _comparable(snapshot(aws)), answered_by))
    assert params is not None
    (s0, c0, state0, _), (s1, c1, state1, by) = outcomes
    assert s1 < 500, (action, params, c1)
    if s0 >= 500:  # stock moto crashes on it: the layer must answer it instead
        assert by.startswith("validation"), (action, params, c0)
    if by.startswith("validation"):
        assert s1 >= 400, (action, params, by)
        return params, by  # refused as AWS refuses it: the other test checks "no change"
    assert (s1, c1) == (s0, c0), (action, params)
    assert state1 == state0, (action, params)
    return params, by


@settings(
    max_examples=6,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    derandomize=True,
)
@given(data=st.data())
def test_a_request_validation_lets_through_behaves_as_without_it(
    aws: AwsServer, data: st.DataObject
) -> None:
    """Valid requests (model-conformant values, the world's ids) in two identical worlds,
    validation off then on: unless validation refuses one (a semantic rule AWS applies, e.g.
    a permission without a source), status, error code and the resulting state are the same.
    The layer answers or passes a call through; it never changes what moto is asked."""
    session = botocore.session.get_session()
    service, action = data.draw(st.sampled_from(ACTIONS), label="action")
    shape = session.get_service_model(service).operation_model(action).input_shape
    _, by = _two_worlds(
        aws,
        service,
        action,
        lambda world: data.draw(_params(service, shape, "", world, 0, valid=True), label="params"),
    )
    event(f"{action}: {by}")


def test_valid_controller_calls_pass_through_unchanged(aws: AwsServer) -> None:
    """The same comparison on calls the controller makes every day, so it is known to run
    past the layer (a fuzz example may be one validation rightly refuses)."""
    cases: list[tuple[str, str, Callable[[dict[str, list[str]]], dict[str, str]]]] = [
        (
            "ec2",
            "AuthorizeSecurityGroupIngress",
            lambda w: {
                "GroupId": w["group"][0],
                "IpPermissions.1.IpProtocol": "tcp",
                "IpPermissions.1.FromPort": "30080",
                "IpPermissions.1.ToPort": "30080",
                "IpPermissions.1.Groups.1.GroupId": w["group"][1],
            },
        ),
        (
            "ec2",
            "CreateTags",
            lambda w: {
                "ResourceId.1": w["instance"][0],
                "Tag.1.Key": "kubernetes.io/cluster/c1",
                "Tag.1.Value": "owned",
            },
        ),
        (
            "elb",
            "RegisterInstancesWithLoadBalancer",
            lambda w: {"LoadBalancerName": "a1", "Instances.member.1.InstanceId": w["instance"][0]},
        ),
    ]
    for service, action, params_for in cases:
        _, by = _two_worlds(aws, service, action, params_for)
        assert by == "moto", (action, by)
