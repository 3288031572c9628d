"""Debug Adapter Protocol message and body types, and the client's errors.

Role: the vocabulary of ``dap.py`` (the client) and of its callers (tests, the ``debug-attach``
e2e scenario). Only the fields the lab reads are typed; the protocol's full schema lives in the
DAP specification. Errors name the request or event concerned, so a failing test says which
step of the debug session broke.
"""

from __future__ import annotations

from typing import Any, Literal, NotRequired, TypedDict

JSONObject = dict[str, Any]

# -- wire messages ---------------------------------------------------------------------------


class Request(TypedDict):
    seq: int
    type: Literal["request"]
    command: str
    arguments: NotRequired[JSONObject]


class Response(TypedDict):
    seq: int
    type: Literal["response"]
    request_seq: int
    success: bool
    command: str
    message: NotRequired[str]
    body: NotRequired[JSONObject]


class Event(TypedDict):
    seq: int
    type: Literal["event"]
    event: str
    body: NotRequired[JSONObject]


# -- bodies we read --------------------------------------------------------------------------


class Source(TypedDict, total=False):
    name: str
    path: str
    sourceReference: int


class Breakpoint(TypedDict, total=False):
    id: int
    verified: bool
    message: str
    line: int
    source: Source


class Thread(TypedDict):
    id: int
    name: str


class StackFrame(TypedDict):
    id: int
    name: str
    line: int
    column: int
    source: NotRequired[Source]


class Scope(TypedDict):
    name: str
    variablesReference: int
    expensive: bool


class Variable(TypedDict):
    name: str
    value: str
    variablesReference: int
    type: NotRequired[str]


class EvaluateResult(TypedDict):
    result: str
    variablesReference: int
    type: NotRequired[str]


class StoppedEventBody(TypedDict):
    reason: str
    threadId: NotRequired[int]
    description: NotRequired[str]
    allThreadsStopped: NotRequired[bool]


class PathMapping(TypedDict):
    localRoot: str
    remoteRoot: str


# -- errors ----------------------------------------------------------------------------------


class DapError(Exception):
    """Base class: something went wrong talking to the debug adapter."""


class DapConnectionError(DapError):
    """The adapter could not be reached, or the connection was lost."""


class DapProtocolError(DapError):
    """The adapter sent bytes that are not a well-formed DAP message."""


class DapRequestError(DapError):
    """The adapter answered a request with ``success: false``."""

    def __init__(self, command: str, message: str, body: JSONObject | None = None) -> None:
        super().__init__(f"DAP request {command!r} failed: {message}")
        self.command = command
        self.message = message
        self.body = body or {}


class DapTimeoutError(DapError, TimeoutError):
    """A response or an event did not arrive in time; the message names which one."""
