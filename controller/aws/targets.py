"""NLB target-group membership as data: the targets a group should have, the difference with
what it has, and the request-sized chunks that difference is sent in.

Follows kubernetes/cloud-provider-aws v1.33.0 (40f1f7ac) ``pkg/providers/v1/aws_loadbalancer.go``
``computeTargetGroupExpectedTargets``, ``diffTargetGroupTargets`` and
``chunkTargetDescriptions`` (used by ``ensureTargetGroupTargets`` with chunks of 100 for both
``RegisterTargets`` and ``DeregisterTargets``). :meth:`controller.aws.nlb.NetworkLoadBalancers`
sends what these return; upstream's tables run against them in
``tests/controller/upstream/test_upstream_targets.py``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

#: Upstream ``defaultRegisterTargetsChunkSize`` and ``defaultDeregisterTargetsChunkSize``.
CHUNK = 100

#: A target as ``RegisterTargets`` takes it: (instance id, port).
Target = tuple[str, int]


def expected_targets(instance_ids: Iterable[str], port: int) -> list[Target]:
    """One target per instance, all on ``port`` (the node port), in the order given."""
    return [(i, port) for i in instance_ids]


def actual_targets(descriptions: Iterable[Any]) -> list[Target]:
    """``TargetDescription`` dicts (``Id``, ``Port``) as targets."""
    return [(str(t.get("Id", "")), int(t.get("Port", 0))) for t in descriptions]


def _uid(target: Target) -> str:
    return f"{target[0]}:{target[1]}"


def diff_targets(
    expected: Iterable[Target], actual: Iterable[Target]
) -> tuple[list[Target], list[Target]]:
    """(to register, to deregister): set differences by id and port, each in upstream's order
    (sorted by the text ``id:port``); a target listed twice counts once."""
    want = {_uid(t): t for t in expected}
    have = {_uid(t): t for t in actual}
    register = [want[k] for k in sorted(want.keys() - have.keys())]
    deregister = [have[k] for k in sorted(have.keys() - want.keys())]
    return register, deregister


def chunk_targets(targets: Sequence[Target], size: int = CHUNK) -> list[list[Target]]:
    """``targets`` in consecutive pieces of at most ``size``; none for no targets."""
    if size < 1:
        raise ValueError(f"chunk size must be positive, got {size}")
    return [list(targets[i : i + size]) for i in range(0, len(targets), size)]


def payload(targets: Iterable[Target]) -> list[dict[str, Any]]:
    """Targets as the ``Targets`` parameter of ``RegisterTargets`` / ``DeregisterTargets``."""
    return [{"Id": i, "Port": p} for i, p in targets]
