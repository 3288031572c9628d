"""Upstream's tagging controller tables against ours: the controller on the fake apiserver and
fake time, our EC2 tagging code (:class:`AWSInstanceTags`) on a stub EC2 client that answers as
upstream's fake does."""

from __future__ import annotations

import logging
import threading
from typing import Any

import pytest
from botocore.exceptions import ClientError

from controller.aws.tags import AWSInstanceTags
from controller.fake import FakeKube
from controller.runtime.clock import FakeClock
from controller.tagging import (
    ADD,
    TAGGING_LABEL,
    TaggingController,
    TaggingOptions,
    tags_checksum,
)
from tests.controller.builders import created_at, labelled, make_node, provider_id
from tests.controller.upstream.tagging_tables import (
    ATTEMPTS_BEFORE_GIVING_UP,
    CHECKSUM_BOTH,
    CHECKSUM_KEY1,
    MULTIPLE_ENQUEUES,
    NODES_JOINING_AND_LEAVING,
    NOW,
    TAGS,
    JoinLeaveCase,
)


def _error(code: str, message: str, op: str) -> ClientError:
    return ClientError({"Error": {"Code": code, "Message": message}}, op)


class UpstreamFakeEC2:
    """``CreateTags`` / ``DeleteTags`` of upstream's ``FakeEC2Impl``, answering by id."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, list[str], dict[str, str]]] = []
        self._counts: dict[str, int] = {}
        self._lock = threading.Lock()

    def _answer(self, op: str, resources: list[str], tags: list[dict[str, str]]) -> None:
        with self._lock:
            self.calls.append((op, list(resources), {t["Key"]: t["Value"] for t in tags}))
            for rid in resources:
                self._counts[op + rid] = count = self._counts.get(op + rid, 0) + 1
                if rid == "i-error":  # upstream's fake: CreateTags and DeleteTags differ
                    text = "Unable to tag" if op == "CreateTags" else "Unable to remove tag"
                    raise _error("InternalError", text, op)
                if rid == "i-not-found" or (
                    op == "CreateTags"
                    and rid.startswith("i-not-found-count-")
                    and count < int(rid.split("-")[4])
                ):
                    raise _error("InvalidInstanceID.NotFound", "Instance not found", op)
                if rid.startswith("i-invalid-id"):
                    raise _error("InvalidID", f"The ID '{rid}' is not valid", op)

    def create_tags(self, *, Resources: list[str], Tags: list[dict[str, str]]) -> None:
        self._answer("CreateTags", Resources, Tags)

    def delete_tags(self, *, Resources: list[str], Tags: list[dict[str, str]]) -> None:
        self._answer("DeleteTags", Resources, Tags)

    def count(self, op: str) -> int:
        return sum(1 for c in self.calls if c[0] == op)


class TagsCloud:
    provider_name = "aws"

    def __init__(self, tags: AWSInstanceTags) -> None:
        self.tags = tags

    def load_balancer(self) -> None:
        return None

    def instances_v2(self) -> None:
        return None

    def instance_tags(self) -> AWSInstanceTags:
        return self.tags


class Harness:
    def __init__(self, *, rate_limited: bool = False, batching: bool = False) -> None:
        self.clock = FakeClock()
        self.kube = FakeKube()
        self.ec2 = UpstreamFakeEC2()
        tags = AWSInstanceTags(self.ec2, batch_idle=0.01)  # type: ignore[arg-type]
        options = TaggingOptions(
            tags=TAGS,
            resources=("instance",),
            rate_limit=10.0 if rate_limited else 0.0,
            burst_limit=100 if rate_limited else 0,
            batching=batching,
        )
        self.ctrl = TaggingController(
            self.kube,
            TagsCloud(tags),  # type: ignore[arg-type]
            nodes=self.kube.stores["nodes"],
            options=options,
            clock=self.clock,
        )

    def run_until_idle(self) -> int:
        """Process everything, moving fake time over backoff waits (upstream's loop)."""
        processed = 0
        for _ in range(100):
            processed += len(self.ctrl.drain())
            waiting = self.ctrl.queue.waiting()
            if not waiting and len(self.ctrl.queue) == 0:
                return processed
            self.clock.advance(max(0.0, min(waiting.values(), default=0.0)) + 0.001)
        raise AssertionError("the queue never drained")


def test_checksums_match_upstream() -> None:
    assert tags_checksum({"key1": "value1"}) == CHECKSUM_KEY1
    assert tags_checksum(TAGS) == CHECKSUM_BOTH


@pytest.mark.parametrize("batching", [True, False], ids=["batching", "no-batching"])
@pytest.mark.parametrize("case", NODES_JOINING_AND_LEAVING, ids=lambda c: c.name)
def test_nodes_joining_and_leaving(
    case: JoinLeaveCase, batching: bool, caplog: pytest.LogCaptureFixture
) -> None:
    """Test_NodesJoiningAndLeaving: upstream's expected log lines (``strings.Contains`` on
    the log), its requeue checks when the fake's "Unable to tag" / "Unable to untag" shows,
    and what those lines mean: the calls made and the Node's label."""
    caplog.set_level(logging.INFO)
    h = Harness(rate_limited=case.rate_limited, batching=batching)
    created = h.clock.now().isoformat() if case.created == NOW else case.created
    tweaks: list[Any] = [provider_id(case.provider_id), created_at(created)]
    if case.label is not None:
        tweaks.append(labelled(TAGGING_LABEL, case.label))
    obj = h.kube.create("nodes", make_node(case.node, *tweaks))
    h.ctrl.enqueue(obj, case.action)
    if case.rate_limited:  # enqueued through the limiter: parked, not ready at once
        assert h.ctrl.queue.waiting()
    processed = h.run_until_idle()

    op = "CreateTags" if case.action == ADD else "DeleteTags"
    assert h.ec2.count(op) == case.calls, h.ec2.calls
    assert processed == max(1, case.calls)
    assert all(c[2] == TAGS for c in h.ec2.calls)  # every call names all tags with values
    labels = h.kube.get("nodes", case.node)["metadata"].get("labels") or {}
    assert labels.get(TAGGING_LABEL) == case.final_label

    logged = "\n".join(r.getMessage() for r in caplog.records)
    for message in case.upstream_messages:
        assert message in logged, logged
        if "Unable to tag" in logged or "Unable to untag" in logged:
            assert ", requeuing count " in logged, logged
            assert "requeuing count exceeded" in logged, logged
            assert processed == ATTEMPTS_BEFORE_GIVING_UP


def test_multiple_enqueues() -> None:
    h = Harness()
    objs = {
        name: h.kube.create(
            "nodes", make_node(name, provider_id(pid), created_at("2012-01-01T00:00:00Z"))
        )
        for name, pid in {(n, p) for n, p, _, _ in MULTIPLE_ENQUEUES}
    }
    for name, _pid, action, length in MULTIPLE_ENQUEUES:
        h.ctrl.enqueue(objs[name], action)
        assert len(h.ctrl.queue) == length
    assert h.ctrl.drain(limit=1)[0].outcome == "success"
    assert len(h.ctrl.queue) == 2
    assert h.ctrl.drain(limit=1)[0].outcome == "success"
    assert len(h.ctrl.queue) == 1


def test_update_enqueues_only_nodes_not_tagged_with_these_tags() -> None:
    """Upstream's UpdateFunc: a Node already labelled with the checksum is not queued."""
    h = Harness()
    h.ctrl.register(h.kube.stores["nodes"])
    obj = h.kube.create(
        "nodes", make_node("n", provider_id("i-0001"), created_at("2012-01-01T00:00:00Z"))
    )
    assert h.run_until_idle() == 1
    assert h.kube.get("nodes", "n")["metadata"]["labels"][TAGGING_LABEL] == CHECKSUM_BOTH
    obj = h.kube.get("nodes", "n")
    obj["metadata"]["annotations"] = {"x": "y"}
    h.kube.update("nodes", obj)
    assert len(h.ctrl.queue) == 0
    h.kube.delete("nodes", "n")
    assert h.run_until_idle() == 1
    assert h.ec2.count("DeleteTags") == 1
