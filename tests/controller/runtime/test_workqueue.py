"""The rate-limited work queue and the retry loop, on fake time."""

from __future__ import annotations

import threading

import pytest

from controller.runtime.clock import FakeClock
from controller.runtime.retry import PermanentError, RetryAfter
from controller.runtime.workqueue import (
    ExponentialBackoff,
    RateLimitingQueue,
    process_next,
    run_worker,
)


def make_queue() -> tuple[RateLimitingQueue[str], FakeClock]:
    clock = FakeClock()
    return RateLimitingQueue("test", clock=clock), clock


def test_backoff_doubles_from_5s_and_caps_at_300s() -> None:
    b: ExponentialBackoff[str] = ExponentialBackoff()
    assert [b.when("k") for _ in range(9)] == [5, 10, 20, 40, 80, 160, 300, 300, 300]
    assert b.when("other") == 5  # per item
    b.forget("k")
    assert b.when("k") == 5
    with pytest.raises(ValueError, match="base"):
        ExponentialBackoff(0, 10)


def test_dedup_and_fifo() -> None:
    q, _ = make_queue()
    for item in ("a", "b", "a", "c", "b"):
        q.add(item)
    assert len(q) == 3
    assert [q.get(block=False) for _ in range(3)] == ["a", "b", "c"]
    assert q.get(block=False) is None


def test_item_added_while_processing_is_requeued_on_done_not_before() -> None:
    q, _ = make_queue()
    q.add("a")
    assert q.get(block=False) == "a"
    q.add("a")
    assert q.get(block=False) is None  # never handed to two workers at once
    q.done("a")
    assert q.get(block=False) == "a"


def test_add_after_waits_for_fake_time_and_earliest_wins() -> None:
    q, clock = make_queue()
    q.add_after("a", 10)
    q.add_after("a", 3)
    q.add_after("a", 30)
    assert q.get(block=False) is None
    clock.advance(2.9)
    assert q.get(block=False) is None
    clock.advance(0.1)
    assert q.get(block=False) == "a"
    q.done("a")
    clock.advance(100)
    assert q.get(block=False) is None  # the superseded later requests are gone


def test_process_next_interprets_outcomes() -> None:
    q, clock = make_queue()
    outcomes: list[Exception | None] = [ValueError("boom"), RetryAfter(7, "later"), None]
    errors: list[tuple[str, str]] = []

    def sync(item: str) -> None:
        exc = outcomes.pop(0)
        if exc is not None:
            raise exc

    q.add("k")
    r1 = process_next(q, sync, on_error=lambda k, e: errors.append((k, str(e))), block=False)
    assert r1 is not None
    assert (r1.outcome, r1.requeue_after) == ("error", 5.0)
    assert q.num_requeues("k") == 1
    clock.advance(5)
    r2 = process_next(q, sync, block=False)
    assert r2 is not None
    assert (r2.outcome, r2.requeue_after) == ("retry-after", 7)
    clock.advance(7)
    r3 = process_next(q, sync, block=False)
    assert r3 is not None
    assert r3.outcome == "success"
    assert q.num_requeues("k") == 0  # success forgets the backoff
    assert errors == [("k", "boom")]


def test_permanent_error_is_reported_and_forgotten_not_requeued() -> None:
    q, clock = make_queue()
    errors: list[tuple[str, str]] = []

    def failing(_k: str) -> None:
        raise ValueError("transient")

    def final(_k: str) -> None:
        raise PermanentError("cannot work until the object changes")

    q.add("k")
    process_next(q, failing, block=False)
    assert q.num_requeues("k") == 1
    clock.advance(5)
    r = process_next(q, final, on_error=lambda k, e: errors.append((k, str(e))), block=False)
    assert r is not None
    assert (r.outcome, r.requeue_after) == ("permanent", None)
    assert isinstance(r.error, PermanentError)
    assert errors == [("k", "cannot work until the object changes")]
    assert q.num_requeues("k") == 0  # the backoff is forgotten
    assert q.waiting() == {}
    clock.advance(1000)
    assert q.get(block=False) is None  # and nothing comes back by itself
    q.add("k")  # the object's next change enqueues it again
    assert q.get(block=False) == "k"


def test_retry_after_refuses_a_negative_delay() -> None:
    with pytest.raises(ValueError, match=r"delay must be >= 0 seconds, got -1"):
        RetryAfter(-1, "never")


def test_error_hook_failure_does_not_lose_the_requeue() -> None:
    q, _ = make_queue()
    q.add("k")

    def bad_hook(_k: str, _e: Exception) -> None:
        raise RuntimeError("recorder down")

    def sync(_k: str) -> None:
        raise ValueError("x")

    r = process_next(q, sync, on_error=bad_hook, block=False)
    assert r is not None
    assert r.outcome == "error"
    assert q.waiting() == {"k": 5.0}


def test_worker_thread_processes_and_stops() -> None:
    q: RateLimitingQueue[str] = RateLimitingQueue("real")
    seen: list[str] = []
    done = threading.Event()

    def sync(item: str) -> None:
        seen.append(item)
        if len(seen) == 3:
            done.set()

    stop = threading.Event()
    t = threading.Thread(target=run_worker, args=(q, sync, stop), daemon=True)
    t.start()
    for item in ("a", "b", "c"):
        q.add(item)
    assert done.wait(5)
    stop.set()
    q.shut_down()
    t.join(5)
    assert not t.is_alive()
    assert seen == ["a", "b", "c"]
