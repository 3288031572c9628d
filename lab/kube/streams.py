"""Watch streams: start a watch on the store and turn its events into chunked JSON lines.

``WatchStreams.respond`` validates the watch options, registers with the store (history replay
or initial state, or an in-stream ``ERROR 410`` when the resourceVersion is too old) and
returns a generator that ``server.py`` writes chunk by chunk. The generator keeps the stream
open until ``timeoutSeconds`` (default: random between ``minRequestTimeout`` and twice that),
the client goes away, the store closes the watch or the server stops; it sends bookmarks when
asked (every minute and 2 s before the deadline) and encodes Table events for kubectl
(``apiserver-spec.md`` §4).
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable, Generator, Iterator
from typing import Any

from lab.kube import exceptions as E
from lab.kube import tables
from lab.kube.resources import ResourceType
from lab.kube.routes import Route
from lab.kube.store import Store
from lab.kube.watch import CLOSED, Event, ExpiredError, Watcher, dumps
from lab.kube.wire import Request, Response, bool_param, int64_param, list_options, selection

MAX_EVENTS_PER_CHUNK = 64


class WatchStreams:
    def __init__(self, store: Store, stopping: threading.Event) -> None:
        self.store = store
        self.stopping = stopping
        self.min_request_timeout = 1800

    def respond(self, req: Request, route: Route) -> Response:
        """The streaming response to a watch request (or a 200 stream holding one ERROR)."""
        rt, q = route.rt, req.query
        list_options(q, watch=True)
        sel = selection(self.store, q, rt, route.name)
        rv = q.get("resourceVersion", "")
        if rv not in ("", "0"):
            try:
                int(rv)
            except ValueError:
                raise E.bad_request(f"invalid resource version: {rv}") from None
        # the parameter codec's strconv.ParseInt into int64 (400 past it); 0 or none: the
        # server's random default, as in handlers/watch.go
        timeout = float(int64_param(q, "timeoutSeconds"))
        if not timeout:
            timeout = random.uniform(self.min_request_timeout, 2 * self.min_request_timeout)
        initial = bool_param(q, "sendInitialEvents") if "sendInitialEvents" in q else None
        bookmarks = bool_param(q, "allowWatchBookmarks")
        table = tables.wants_table(req.headers.get("accept", ""))
        try:
            watcher, _ = self.store.watch(
                rt, route.namespace, sel, resource_version=rv, initial_events=initial
            )
        except ExpiredError as exc:
            status = E.expired(exc.message).status()
            line = dumps({"type": "ERROR", "object": status}) + b"\n"
            return Response(200, stream=iter([line]))
        return Response(
            200,
            stream=self._stream(
                req,
                rt,
                watcher,
                timeout=timeout,
                bookmarks=bookmarks,
                initial_end=bool(initial),
                table=table,
            ),
        )

    def _bookmark(
        self, rt: ResourceType, watcher: Watcher, *, initial_end: bool = False
    ) -> bytes | None:
        with self.store.lock:
            if not watcher.empty():
                return None
            rv = self.store.rv
        meta: dict[str, Any] = {"resourceVersion": str(rv)}
        if initial_end:
            meta["annotations"] = {"k8s.io/initial-events-end": "true"}
        return (
            dumps(
                {
                    "type": "BOOKMARK",
                    "object": {"kind": rt.kind, "apiVersion": rt.api_version, "metadata": meta},
                }
            )
            + b"\n"
        )

    def _stream(
        self,
        req: Request,
        rt: ResourceType,
        watcher: Watcher,
        *,
        timeout: float,
        bookmarks: bool,
        initial_end: bool,
        table: bool,
    ) -> Iterator[bytes]:
        deadline = time.monotonic() + timeout
        next_bookmark = min(time.monotonic() + 60.0, deadline - 2.0) if bookmarks else None
        encode = self._encoder(req, rt, watcher, table)
        try:
            if initial_end:
                closed = yield from self._initial_events(rt, watcher, encode)
                if closed:
                    return
            yield from self._live_events(req, rt, watcher, encode, deadline, next_bookmark)
        finally:
            watcher.close()

    def _encoder(
        self, req: Request, rt: ResourceType, watcher: Watcher, table: bool
    ) -> Callable[[Event], bytes | None]:
        """One stream's event encoder (a Table stream's first row carries the columns)."""
        first = True

        def encode(item: Event) -> bytes | None:
            nonlocal first
            out = self._encode(req, rt, watcher, item, table, first=first)
            if out is not None:
                first = False
            return out

        return encode

    def _initial_events(
        self, rt: ResourceType, watcher: Watcher, encode: Callable[[Event], bytes | None]
    ) -> Generator[bytes, None, bool]:
        """``sendInitialEvents``: the initial ADDED events (already queued), then the
        initial-events-end bookmark; True when the watch closed first."""
        while True:
            item = watcher.next(0)
            if item is None:
                break
            if item is CLOSED:
                return True
            assert isinstance(item, Event)
            out = encode(item)
            if out is not None:
                yield out
        mark = self._bookmark(rt, watcher, initial_end=True)
        while mark is None:
            item = watcher.next(0)
            if isinstance(item, Event):
                out = encode(item)
                if out is not None:
                    yield out
            mark = self._bookmark(rt, watcher, initial_end=True)
        yield mark
        return False

    def _live_events(
        self,
        req: Request,
        rt: ResourceType,
        watcher: Watcher,
        encode: Callable[[Event], bytes | None],
        deadline: float,
        next_bookmark: float | None,
    ) -> Iterator[bytes]:
        """Events as they come, in bursts, with periodic bookmarks, until the deadline, the
        watch closes, the client goes or the server stops."""
        while not self.stopping.is_set():
            now = time.monotonic()
            if now >= deadline:
                return
            wake = deadline if next_bookmark is None else min(deadline, next_bookmark)
            item = watcher.next(min(wake - now, 1.0))
            if item is CLOSED:
                return
            if item is None:
                if not req.alive():
                    return
                if next_bookmark is not None and time.monotonic() >= next_bookmark:
                    mark = self._bookmark(rt, watcher)
                    if mark is not None:
                        yield mark
                        next_bookmark = (
                            deadline + 1.0
                            if next_bookmark >= deadline - 2.0
                            else min(time.monotonic() + 60.0, deadline - 2.0)
                        )
                continue
            lines, closed = _burst(watcher, item, encode)
            if lines:
                yield b"".join(lines)
            if closed:
                return

    def _encode(
        self,
        req: Request,
        rt: ResourceType,
        watcher: Watcher,
        ev: Event,
        table: bool,
        *,
        first: bool,
    ) -> bytes | None:
        if not table:
            return watcher.translate(ev)
        got = watcher.translate_object(ev)
        if got is None:
            return None
        etype, obj = got
        full = ev.full_object(obj)
        version = tables.table_version(req.headers.get("accept", "")) or "v1"
        t = tables.to_table(
            rt,
            [full],
            list_meta=None,
            include_object=req.query.get("includeObject", ""),
            version=version,
            column_definitions=first,
        )
        return dumps({"type": etype, "object": t}) + b"\n"


def _burst(
    watcher: Watcher, item: Any, encode: Callable[[Event], bytes | None]
) -> tuple[list[bytes], bool]:
    """``item`` and what is already queued behind it, encoded for one chunk (one write per
    burst, not per event, at most :data:`MAX_EVENTS_PER_CHUNK`); and whether the watch closed."""
    lines: list[bytes] = []
    closed = False
    while isinstance(item, Event) and len(lines) < MAX_EVENTS_PER_CHUNK:
        out = encode(item)
        if out is not None:
            lines.append(out)
        item = watcher.next(0) if len(lines) < MAX_EVENTS_PER_CHUNK else None
        closed = item is CLOSED
    return lines, closed
