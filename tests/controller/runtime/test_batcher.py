"""The time-window batcher (upstream ``pkg/providers/v1/batcher``): concurrent requests become
one call per group, every caller gets its own answer or error, windows close as upstream's."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence

import pytest

from controller.runtime.batcher import Batcher, BatchError, Result


class Recorder:
    """An executor that records every batch it is given and answers ``answer(item)``."""

    def __init__(self, answer: Callable[[str], Result[str]] | None = None) -> None:
        self.batches: list[list[str]] = []
        self.answer = answer or (lambda item: Result(output=item.upper()))
        self._lock = threading.Lock()

    def __call__(self, items: list[str]) -> Sequence[Result[str]]:
        with self._lock:
            self.batches.append(list(items))
        return [self.answer(i) for i in items]


def add_concurrently(
    batcher: Batcher[str, str], items: Sequence[str]
) -> dict[str, str | BaseException | None]:
    out: dict[str, str | BaseException | None] = {}
    start = threading.Barrier(len(items))

    def call(item: str) -> None:
        start.wait()
        try:
            out[item] = batcher.add(item)
        except Exception as exc:
            out[item] = exc

    threads = [threading.Thread(target=call, args=(i,)) for i in items]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    return out


def test_concurrent_requests_become_one_call_and_each_caller_gets_its_answer() -> None:
    rec = Recorder()
    batcher: Batcher[str, str] = Batcher("t", rec, idle=0.1)
    items = [f"i-{n}" for n in range(20)]
    out = add_concurrently(batcher, items)
    assert len(rec.batches) == 1
    assert sorted(rec.batches[0]) == sorted(items)
    assert out == {i: i.upper() for i in items}


def test_one_callers_error_fails_only_that_caller() -> None:
    def answer(item: str) -> Result[str]:
        return Result(error=KeyError(item)) if item == "i-bad" else Result(output=item)

    rec = Recorder(answer)
    out = add_concurrently(Batcher("t", rec, idle=0.1), ["i-1", "i-bad", "i-2"])
    assert len(rec.batches) == 1
    assert out["i-1"] == "i-1"
    assert out["i-2"] == "i-2"
    assert isinstance(out["i-bad"], KeyError)


def test_a_missing_answer_fails_its_caller_and_an_executor_failure_fails_all() -> None:
    short: Batcher[str, str] = Batcher("t", lambda items: [Result(output="first")], idle=0.05)
    out = add_concurrently(short, ["a", "b"])
    answered = [v for v in out.values() if v == "first"]
    missing = [v for v in out.values() if isinstance(v, BatchError)]
    assert len(answered) == 1
    assert len(missing) == 1

    def boom(items: list[str]) -> list[Result[str]]:
        raise RuntimeError("no")

    failed = add_concurrently(Batcher("t", boom, idle=0.05), ["a", "b"])
    assert all(isinstance(v, RuntimeError) for v in failed.values())


def test_groups_by_key_and_cuts_at_max_items() -> None:
    rec = Recorder()
    keyed: Batcher[str, str] = Batcher("t", rec, key=lambda i: i[0], idle=0.1)
    add_concurrently(keyed, ["a1", "a2", "b1", "b2", "b3"])
    assert sorted(sorted(b) for b in rec.batches) == [["a1", "a2"], ["b1", "b2", "b3"]]

    rec = Recorder()
    small: Batcher[str, str] = Batcher("t", rec, idle=0.1, max_items=3)
    out = add_concurrently(small, [f"i-{n}" for n in range(7)])
    assert all(len(b) <= 3 for b in rec.batches)
    assert sorted(x for b in rec.batches for x in b) == sorted(out)
    assert len(rec.batches) >= 3


def test_requests_further_apart_than_the_idle_window_are_separate_calls() -> None:
    rec = Recorder()
    batcher: Batcher[str, str] = Batcher("t", rec, idle=0.05)
    assert batcher.add("a") == "A"
    assert batcher.add("b") == "B"
    assert rec.batches == [["a"], ["b"]]


def test_the_window_closes_at_max_wait_even_while_requests_keep_coming() -> None:
    rec = Recorder()
    batcher: Batcher[str, str] = Batcher("t", rec, idle=0.5, max_wait=0.6)
    stop = threading.Event()
    callers: list[threading.Thread] = []

    def trickle() -> None:  # a request every 50 ms keeps the 500 ms idle window open
        n = 0
        while not stop.is_set() and n < 60:
            caller = threading.Thread(target=batcher.add, args=(f"x{n}",))
            caller.start()
            callers.append(caller)
            n += 1
            time.sleep(0.05)

    started = time.monotonic()
    t = threading.Thread(target=trickle)
    t.start()
    while not rec.batches and time.monotonic() - started < 5:
        time.sleep(0.01)
    stop.set()
    t.join()
    for caller in callers:
        caller.join(5)
    assert rec.batches, "no batch ran"
    # the first batch ran although a request arrived every 50 ms: max_wait closed it
    assert 1 < len(rec.batches[0]) < 60
    assert sum(len(b) for b in rec.batches) == len(callers)


def test_rejects_a_bad_window() -> None:
    with pytest.raises(ValueError, match="idle"):
        Batcher("t", Recorder(), idle=0.5, max_wait=0.1)


def test_a_leader_that_dies_fails_its_whole_window_instead_of_leaving_it_waiting() -> None:
    """The caller that runs a window can die of a ``BaseException`` the executor raises
    (``_run`` hands on only ``Exception``s); the other callers of its window get it too
    instead of waiting forever."""
    import threading

    class Boom(BaseException):
        pass

    def execute(items: list[int]) -> list[Result[int]]:
        raise Boom("executor died")

    batcher: Batcher[int, int] = Batcher("t", execute, idle=0.2, max_wait=1.0)
    got: list[BaseException] = []

    def call(item: int) -> None:
        try:
            batcher.add(item)
        except BaseException as exc:
            got.append(exc)

    callers = [threading.Thread(target=call, args=(i,)) for i in range(3)]
    for t in callers:
        t.start()
    for t in callers:
        t.join(timeout=5)
    assert not any(t.is_alive() for t in callers), "a caller of the dead window still waits"
    assert len(got) == 3
    assert all(isinstance(e, Boom) for e in got)
