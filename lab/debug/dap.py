"""A small Debug Adapter Protocol client, enough to drive debugpy (or dlv) from a test.

Role: the e2e scenario ``debug-attach`` and ``tests/debug`` use it to attach to a debuggee
started by ``launcher.py``, set breakpoints, wait for ``stopped``, inspect frames and continue.
It speaks DAP over TCP: each message is ``Content-Length: N\\r\\n\\r\\n`` followed by N bytes of
JSON. Nothing here is debugpy-specific except the defaults of ``attach``.

Design:

* One reader thread owns the socket's input. It routes responses to the request that is waiting
  for them (matched by ``request_seq``), appends events to a queue, and answers reverse requests
  from the adapter with an error (this client implements none).
* Every wait has a timeout; a timeout or an error response raises an exception that names the
  request (or event) concerned, and a lost connection fails every pending wait at once instead
  of leaving it to its timeout.
* ``send_request`` returns a ``PendingResponse`` because debugpy defers the ``attach`` response
  until after ``configurationDone`` (see ``reference/peers.md`` §8.1); blocking on it before
  configuring would deadlock. ``request`` is the blocking form for everything else.
* Payloads are ``TypedDict``s for the fields we read; everything else stays as JSON.
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
import socket
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from types import TracebackType
from typing import Any, Self, cast

from lab.debug.dap_types import (
    Breakpoint,
    DapConnectionError,
    DapError,
    DapProtocolError,
    DapRequestError,
    DapTimeoutError,
    EvaluateResult,
    Event,
    JSONObject,
    PathMapping,
    Request,
    Response,
    Scope,
    StackFrame,
    StoppedEventBody,
    Thread,
    Variable,
)

logger = logging.getLogger(__name__)

DEFAULT_TIMEOUT = 10.0
_HEADER_LIMIT = 16 * 1024
_BODY_LIMIT = 64 * 1024 * 1024


# -- the client ------------------------------------------------------------------------------


class PendingResponse:
    """The answer to one request, delivered by the reader thread."""

    def __init__(self, client: DapClient, command: str, seq: int) -> None:
        self._client = client
        self.command = command
        self.seq = seq
        self._done = threading.Event()
        self._response: Response | None = None
        self._error: DapError | None = None

    def _resolve(self, response: Response) -> None:
        self._response = response
        self._done.set()

    def _fail(self, error: DapError) -> None:
        if not self._done.is_set():
            self._error = error
            self._done.set()

    def done(self) -> bool:
        return self._done.is_set()

    def result(self, timeout: float = DEFAULT_TIMEOUT) -> JSONObject:
        """The response body; raises if the request failed or no answer came in ``timeout``."""
        if not self._done.wait(timeout):
            raise DapTimeoutError(
                f"no response to DAP request {self.command!r} (seq {self.seq}) within "
                f"{timeout:.1f}s; recent traffic: {self._client.recent_traffic()}"
            )
        if self._error is not None:
            raise self._error
        assert self._response is not None
        if not self._response["success"]:
            raise DapRequestError(
                self.command,
                self._response.get("message", "(no message)"),
                self._response.get("body"),
            )
        return self._response.get("body", {})


class DapClient:
    """A DAP client over one TCP connection. Use ``DapClient.connect`` and a ``with`` block."""

    def __init__(self, sock: socket.socket, *, name: str = "ccm-lab") -> None:
        self._sock = sock
        self._name = name
        self._send_lock = threading.Lock()
        self._cond = threading.Condition()
        self._seq = 0
        self._pending: dict[int, PendingResponse] = {}
        self._events: list[Event] = []
        self._traffic: list[str] = []
        self._closed_reason: str | None = None
        self._reader = threading.Thread(target=self._read_loop, name=f"dap-reader-{name}")
        self._reader.daemon = True
        self._reader.start()

    # -- connection ------------------------------------------------------------------------

    @classmethod
    def connect(
        cls, host: str, port: int, *, timeout: float = DEFAULT_TIMEOUT, name: str = "ccm-lab"
    ) -> DapClient:
        """Connect, retrying refused connections until ``timeout`` (the adapter may be starting)."""
        deadline = time.monotonic() + timeout
        last: OSError | None = None
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise DapConnectionError(
                    f"cannot connect to debug adapter at {host}:{port} within {timeout:.1f}s: "
                    f"{last}"
                )
            try:
                sock = socket.create_connection((host, port), timeout=min(remaining, 2.0))
            except OSError as exc:
                last = exc
                time.sleep(min(0.05, max(remaining, 0)))
                continue
            sock.settimeout(None)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            return cls(sock, name=name)

    def close(self) -> None:
        """Close the socket (idempotent) and fail whatever is still waiting."""
        with contextlib.suppress(OSError):
            self._sock.shutdown(socket.SHUT_RDWR)
        self._sock.close()
        self._reader.join(timeout=2.0)
        self._connection_lost("client closed the connection")

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    @property
    def closed(self) -> bool:
        with self._cond:
            return self._closed_reason is not None

    # -- framing ---------------------------------------------------------------------------

    def _send(self, message: JSONObject) -> None:
        data = json.dumps(message).encode("utf-8")
        header = f"Content-Length: {len(data)}\r\n\r\n".encode("ascii")
        with self._send_lock:
            try:
                self._sock.sendall(header + data)
            except OSError as exc:
                raise DapConnectionError(
                    f"cannot send DAP {message.get('type')} "
                    f"{message.get('command', message.get('event'))!r}: {exc}"
                ) from exc
        self._note("->", message)

    def _read_exactly(self, stream: io.BufferedReader, n: int) -> bytes:
        data: bytes = stream.read(n)
        if len(data) != n:
            raise EOFError(f"connection closed mid-message ({len(data)} of {n} bytes)")
        return data

    def _read_message(self, stream: io.BufferedReader) -> JSONObject | None:
        length: int | None = None
        seen = 0
        while True:
            line: bytes = stream.readline(_HEADER_LIMIT)
            if not line:
                return None  # clean end of stream between messages
            seen += len(line)
            if seen > _HEADER_LIMIT or not line.endswith(b"\n"):
                raise DapProtocolError("DAP header section too long or truncated")
            text = line.decode("ascii", errors="replace").strip()
            if not text:
                break
            key, _, value = text.partition(":")
            if key.strip().lower() == "content-length":
                try:
                    length = int(value.strip())
                except ValueError as exc:
                    raise DapProtocolError(f"bad Content-Length header {text!r}") from exc
        if length is None or not 0 <= length <= _BODY_LIMIT:
            raise DapProtocolError(f"missing or invalid Content-Length ({length!r})")
        try:
            message = json.loads(self._read_exactly(stream, length))
        except ValueError as exc:
            raise DapProtocolError(f"DAP body is not JSON: {exc}") from exc
        if not isinstance(message, dict) or not isinstance(message.get("type"), str):
            raise DapProtocolError(f"DAP message without a type: {message!r:.200}")
        return cast(JSONObject, message)

    def _read_loop(self) -> None:
        reason = "adapter closed the connection"
        try:
            with self._sock.makefile("rb") as stream:
                while True:
                    message = self._read_message(stream)
                    if message is None:
                        break
                    self._note("<-", message)
                    self._dispatch(message)
        except (OSError, EOFError, ValueError, DapProtocolError) as exc:
            reason = f"connection lost: {exc}"
        self._connection_lost(reason)

    def _dispatch(self, message: JSONObject) -> None:
        kind = message["type"]
        if kind == "response":
            response = cast(Response, message)
            with self._cond:
                pending = self._pending.pop(int(response.get("request_seq", -1)), None)
            if pending is None:
                logger.warning("DAP response to unknown request: %.200r", message)
            else:
                pending._resolve(response)
        elif kind == "event":
            with self._cond:
                self._events.append(cast(Event, message))
                self._cond.notify_all()
        elif kind == "request":
            # Reverse requests (runInTerminal, startDebugging): not supported by this client.
            with contextlib.suppress(DapConnectionError):
                self._send(
                    {
                        "seq": self._next_seq(),
                        "type": "response",
                        "request_seq": message.get("seq"),
                        "command": message.get("command"),
                        "success": False,
                        "message": "not supported by the ccm-lab DAP client",
                    }
                )

    def _connection_lost(self, reason: str) -> None:
        with self._cond:
            if self._closed_reason is None:
                self._closed_reason = reason
            pending = list(self._pending.values())
            self._pending.clear()
            self._cond.notify_all()
        for p in pending:
            p._fail(DapConnectionError(f"DAP request {p.command!r} got no response: {reason}"))

    def _note(self, direction: str, message: JSONObject) -> None:
        what = message.get("command") or message.get("event") or "?"
        entry = f"{direction} {message.get('type')} {what}"
        logger.debug("%s %.500s", entry, json.dumps(message))
        with self._cond:
            self._traffic.append(entry)
            del self._traffic[:-20]

    def recent_traffic(self) -> str:
        """The last messages in both directions, for error messages."""
        with self._cond:
            return ", ".join(self._traffic) or "(none)"

    def _next_seq(self) -> int:
        with self._cond:
            self._seq += 1
            return self._seq

    # -- requests and events ---------------------------------------------------------------

    def send_request(self, command: str, arguments: JSONObject | None = None) -> PendingResponse:
        """Send a request without waiting; ``.result(timeout)`` on the handle waits."""
        seq = self._next_seq()
        pending = PendingResponse(self, command, seq)
        with self._cond:
            if self._closed_reason is not None:
                raise DapConnectionError(
                    f"cannot send DAP request {command!r}: {self._closed_reason}"
                )
            self._pending[seq] = pending
        request: Request = {"seq": seq, "type": "request", "command": command}
        if arguments is not None:
            request["arguments"] = arguments
        try:
            self._send(cast(JSONObject, request))
        except DapConnectionError:
            with self._cond:
                self._pending.pop(seq, None)
            raise
        return pending

    def request(
        self, command: str, arguments: JSONObject | None = None, *, timeout: float = DEFAULT_TIMEOUT
    ) -> JSONObject:
        """Send a request and return its response body (raises ``DapRequestError`` on failure)."""
        return self.send_request(command, arguments).result(timeout)

    def wait_for_event(
        self,
        event: str,
        *,
        timeout: float = DEFAULT_TIMEOUT,
        predicate: Callable[[JSONObject], bool] | None = None,
    ) -> JSONObject:
        """Remove and return the body of the oldest queued ``event`` (matching ``predicate``).

        Events that arrived before the call count: nothing is lost between a request and the
        wait for its consequence.
        """
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                for i, queued in enumerate(self._events):
                    body = queued.get("body", {})
                    if queued["event"] == event and (predicate is None or predicate(body)):
                        del self._events[i]
                        return body
                if self._closed_reason is not None:
                    raise DapConnectionError(
                        f"DAP event {event!r} will not arrive: {self._closed_reason}"
                    )
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    seen = ", ".join(e["event"] for e in self._events) or "none"
                    raise DapTimeoutError(
                        f"no DAP event {event!r} within {timeout:.1f}s (queued events: {seen})"
                    )
                self._cond.wait(remaining)

    def events(self) -> list[Event]:
        """A copy of the events received and not yet consumed by ``wait_for_event``."""
        with self._cond:
            return list(self._events)

    # -- the DAP requests we use -----------------------------------------------------------

    def initialize(
        self, *, adapter_id: str = "debugpy", timeout: float = DEFAULT_TIMEOUT
    ) -> JSONObject:
        """``initialize``; returns the adapter's capabilities."""
        return self.request(
            "initialize",
            {
                "clientID": self._name,
                "clientName": self._name,
                "adapterID": adapter_id,
                "pathFormat": "path",
                "linesStartAt1": True,
                "columnsStartAt1": True,
                "supportsVariableType": True,
                "supportsRunInTerminalRequest": False,
            },
            timeout=timeout,
        )

    def attach(
        self,
        *,
        path_mappings: Iterable[PathMapping] = (),
        just_my_code: bool = False,
        extra: Mapping[str, Any] | None = None,
        timeout: float = DEFAULT_TIMEOUT,
    ) -> PendingResponse:
        """Send ``attach`` and wait for the ``initialized`` event.

        Returns the pending ``attach`` response: debugpy answers it only after
        ``configurationDone``, so wait on it after ``configuration_done``.
        """
        arguments: JSONObject = {
            "justMyCode": just_my_code,
            "pathMappings": [dict(m) for m in path_mappings],
            **(extra or {}),
        }
        pending = self.send_request("attach", arguments)
        try:
            self.wait_for_event("initialized", timeout=timeout)
        except DapTimeoutError as exc:
            if pending.done():
                pending.result(0)  # an attach failure explains the missing event better
            raise DapTimeoutError(f"DAP request 'attach': {exc}") from exc
        return pending

    def set_breakpoints(
        self,
        path: str | Path,
        lines: Iterable[int],
        *,
        condition: str | None = None,
        timeout: float = DEFAULT_TIMEOUT,
    ) -> list[Breakpoint]:
        """Set the breakpoints of ``path`` to ``lines``; returns the adapter's view of them."""
        source_breakpoints: list[JSONObject] = []
        for line in lines:
            bp: JSONObject = {"line": int(line)}
            if condition is not None:
                bp["condition"] = condition
            source_breakpoints.append(bp)
        body = self.request(
            "setBreakpoints",
            {
                "source": {"path": str(path), "name": Path(path).name},
                "breakpoints": source_breakpoints,
            },
            timeout=timeout,
        )
        return cast(list[Breakpoint], body.get("breakpoints", []))

    def configuration_done(self, *, timeout: float = DEFAULT_TIMEOUT) -> None:
        self.request("configurationDone", {}, timeout=timeout)

    def threads(self, *, timeout: float = DEFAULT_TIMEOUT) -> list[Thread]:
        return cast(list[Thread], self.request("threads", timeout=timeout).get("threads", []))

    def stack_trace(
        self, thread_id: int, *, levels: int = 20, timeout: float = DEFAULT_TIMEOUT
    ) -> list[StackFrame]:
        body = self.request(
            "stackTrace",
            {"threadId": thread_id, "startFrame": 0, "levels": levels},
            timeout=timeout,
        )
        return cast(list[StackFrame], body.get("stackFrames", []))

    def top_frame(self, thread_id: int, *, timeout: float = DEFAULT_TIMEOUT) -> StackFrame:
        frames = self.stack_trace(thread_id, levels=1, timeout=timeout)
        if not frames:
            raise DapRequestError("stackTrace", f"thread {thread_id} has no frames")
        return frames[0]

    def scopes(self, frame_id: int, *, timeout: float = DEFAULT_TIMEOUT) -> list[Scope]:
        body = self.request("scopes", {"frameId": frame_id}, timeout=timeout)
        return cast(list[Scope], body.get("scopes", []))

    def variables(
        self, variables_reference: int, *, timeout: float = DEFAULT_TIMEOUT
    ) -> list[Variable]:
        body = self.request(
            "variables", {"variablesReference": variables_reference}, timeout=timeout
        )
        return cast(list[Variable], body.get("variables", []))

    def evaluate(
        self,
        expression: str,
        frame_id: int,
        *,
        context: str = "repl",
        timeout: float = DEFAULT_TIMEOUT,
    ) -> EvaluateResult:
        body = self.request(
            "evaluate",
            {"expression": expression, "frameId": frame_id, "context": context},
            timeout=timeout,
        )
        return cast(EvaluateResult, body)

    def continue_(self, thread_id: int, *, timeout: float = DEFAULT_TIMEOUT) -> None:
        self.request("continue", {"threadId": thread_id}, timeout=timeout)

    def disconnect(
        self, *, terminate_debuggee: bool = False, timeout: float = DEFAULT_TIMEOUT
    ) -> None:
        """``disconnect``; tolerates the adapter closing the socket as its answer."""
        try:
            self.request("disconnect", {"terminateDebuggee": terminate_debuggee}, timeout=timeout)
        except DapConnectionError:
            logger.debug("adapter closed the connection in answer to 'disconnect'")

    # -- composite steps -------------------------------------------------------------------

    def wait_for_stop(
        self, *, reason: str | None = None, timeout: float = DEFAULT_TIMEOUT
    ) -> StoppedEventBody:
        """Wait for a ``stopped`` event (optionally with this ``reason``)."""
        body = self.wait_for_event(
            "stopped",
            timeout=timeout,
            predicate=None if reason is None else (lambda b: b.get("reason") == reason),
        )
        return cast(StoppedEventBody, body)


def attach_session(
    host: str,
    port: int,
    *,
    breakpoints: Mapping[str | Path, Iterable[int]],
    path_mappings: Iterable[PathMapping] = (),
    just_my_code: bool = False,
    timeout: float = DEFAULT_TIMEOUT,
) -> DapClient:
    """Connect, ``initialize``, ``attach``, set ``breakpoints``, ``configurationDone``.

    The returned client is attached and the debuggee is running (or released from
    ``wait_for_client``). Every breakpoint must be verified, else ``DapRequestError``.
    """
    client = DapClient.connect(host, port, timeout=timeout)
    try:
        client.initialize(timeout=timeout)
        attached = client.attach(
            path_mappings=path_mappings, just_my_code=just_my_code, timeout=timeout
        )
        for path, lines in breakpoints.items():
            wanted = list(lines)
            got = client.set_breakpoints(path, wanted, timeout=timeout)
            unverified = [b for b in got if not b.get("verified", False)]
            if len(got) != len(wanted) or unverified:
                raise DapRequestError(
                    "setBreakpoints",
                    f"breakpoints at {path}:{wanted} not verified: {got!r}",
                )
        client.configuration_done(timeout=timeout)
        attached.result(timeout)
    except BaseException:
        client.close()
        raise
    return client
