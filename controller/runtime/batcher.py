"""Merge concurrent requests into one call: upstream's time-window batcher.

Follows kubernetes/cloud-provider-aws ``pkg/providers/v1/batcher/batcher.go`` (63ec440c,
same at v1.33.0): a request waits in a window that closes when no new request arrived for
``idle`` seconds, ``max_wait`` seconds after it opened, or once ``max_items`` requests are
waiting, whichever comes first; the requests are grouped by ``key`` (upstream's
``RequestHasher``) and each group goes to ``execute`` (upstream's ``BatchExecutor``) as one
list, which answers with one :class:`Result` per input, in order. A result missing from the
answer fails its caller (upstream: ``error making call``).

Two differences in mechanics, none a caller sees: no background goroutine; the first caller
of a window waits it out and runs the batch for everyone (other groups on threads of their
own), so an idle batcher holds no thread; and a group is cut into lists of at most
``max_items`` (upstream's count is racy and can slightly exceed it).

Generic: it knows no AWS type; ``controller.aws`` gives it the DescribeInstances executor.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Hashable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Generic, TypeVar

log = logging.getLogger(__name__)

In = TypeVar("In")
Out = TypeVar("Out")


@dataclass(frozen=True)
class Result(Generic[Out]):
    """One caller's answer: ``error`` when set, else ``output`` (which may be ``None``)."""

    output: Out | None = None
    error: BaseException | None = None


class BatchError(Exception):
    """The executor gave no answer for this request."""


@dataclass
class _Request(Generic[In, Out]):
    key: Hashable
    item: In
    future: Future[Out | None]


class Batcher(Generic[In, Out]):
    """Collects :meth:`add` calls from many threads into batches for ``execute``."""

    def __init__(
        self,
        name: str,
        execute: Callable[[list[In]], Sequence[Result[Out]]],
        *,
        key: Callable[[In], Hashable] = lambda _item: 0,
        idle: float = 0.1,
        max_wait: float = 1.0,
        max_items: int = 500,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        if idle <= 0 or max_wait < idle or max_items < 1:
            raise ValueError(
                f"batcher {name}: need 0 < idle ({idle}) <= max_wait ({max_wait}) "
                f"and max_items ({max_items}) >= 1"
            )
        self.name = name
        self.execute = execute
        self.key = key
        self.idle = idle
        self.max_wait = max_wait
        self.max_items = max_items
        self._monotonic = monotonic
        self._cond = threading.Condition()
        self._pending: list[_Request[In, Out]] = []
        self._last_add = 0.0

    def add(self, item: In) -> Out | None:
        """Queue ``item``, wait for its batch, and return its output or raise its error."""
        request: _Request[In, Out] = _Request(self.key(item), item, Future())
        with self._cond:
            self._pending.append(request)
            self._last_add = self._monotonic()
            leader = len(self._pending) == 1
            self._cond.notify_all()
        if leader:
            window: list[_Request[In, Out]] = []
            try:
                self._close_window(window)
            except BaseException as exc:  # nobody else would answer this window's callers
                if not window:  # failed before taking its window: take it now
                    with self._cond:
                        window, self._pending = self._pending, []
                for waiting in window:
                    if not waiting.future.done():
                        waiting.future.set_exception(exc)
                raise
        return request.future.result()

    def _close_window(self, window: list[_Request[In, Out]]) -> None:
        """Wait until the window closes, take the waiting requests (into ``window``, so a
        failure can answer them) and run them."""
        opened = self._monotonic()
        with self._cond:
            while len(self._pending) < self.max_items:
                now = self._monotonic()
                left = min(self._last_add + self.idle, opened + self.max_wait) - now
                if left <= 0:
                    break
                self._cond.wait(left)
            taken, self._pending = self._pending, []
            window.extend(taken)
        groups: dict[Hashable, list[_Request[In, Out]]] = {}
        for request in taken:
            groups.setdefault(request.key, []).append(request)
        chunks = [
            group[i : i + self.max_items]
            for group in groups.values()
            for i in range(0, len(group), self.max_items)
        ]
        helpers = [
            threading.Thread(target=self._run, args=(chunk,), name=f"batch-{self.name}")
            for chunk in chunks[1:]
        ]
        for t in helpers:
            t.start()
        self._run(chunks[0])
        for t in helpers:
            t.join()

    def _run(self, requests: list[_Request[In, Out]]) -> None:
        log.debug("batch %s: %d request(s)", self.name, len(requests))
        try:
            results = list(self.execute([r.item for r in requests]))
        except Exception as exc:  # the executor failed as a whole: every caller gets it
            results = [Result(error=exc)] * len(requests)
        for i, request in enumerate(requests):
            if i >= len(results):
                request.future.set_exception(BatchError(f"batch {self.name}: no answer"))
            elif results[i].error is not None:
                request.future.set_exception(results[i].error)
            else:
                request.future.set_result(results[i].output)
