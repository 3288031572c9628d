"""The request pipeline of every AWS-facing server of the lab: one ordered list of named stages.

Role: the moto endpoint (:mod:`lab.aws.app`) and the recording proxy (:mod:`lab.aws.proxy`)
take an AWS call through the same stages, in the order of :data:`ORDER`; each composes the
subsequence it needs, and they differ only in their dispatch stage and in what they skip:

==============  =====================================================  =========  =======
stage           what it does                                           endpoint   proxy
==============  =====================================================  =========  =======
identify        read the body; the call is parsed and redacted         yes        yes
                (:func:`lab.aws.protocol.parse_request`) when a stage
                first reads it (always first)
authenticate    the caller's SigV4 signature against the proxy's key   --         yes*
route           the service of a call that names none, from its        yes        --
                ``Action``; moto's routing hints
faults          the fault rules (:class:`lab.aws.calls.CallRecorder`):  yes        yes
                latency slept, an injected error answers
refuse          a malformed signature, an unroutable call              yes        --
session         the endpoint's lock, due time-based behaviour          yes        --
health          the health models before and after the call            yes        --
validate        AWS's answers to malformed calls                       yes        --
fidelity        the fidelity layer's own answers and fixes             yes        --
guard           the run guard (``lab.up --aws real``)                  --         yes*
dispatch        moto in-process, or the upstream over HTTP             yes        yes
record          one trail event (always last)                          yes        yes
==============  =====================================================  =========  =======

(* when configured.) :class:`Pipeline` checks that a composition keeps this order.

A stage is an onion layer (:class:`Stage`): it may answer the call (:meth:`Call.answer`),
raise an :class:`lab.aws.exceptions.AwsError` that answers it, or call ``proceed()`` to run
the stages after it and then look at their answer (the health models and the fidelity layer
fix moto's answer on the way back). The first answer ends the way in; the call is then
recorded in the trail and rendered.

Design: this module is the one place an :class:`~lab.aws.exceptions.AwsError` the lab raises
becomes a wire answer (:meth:`Pipeline.refusal`, through
:func:`lab.aws.protocol.error_response`): the service's XML shape, the status the error
carries, a new request id. The moto endpoint's own refusals are XML even for JSON-protocol
calls (moto answers those itself); the proxy answers every call in its own protocol's shape;
an injected fault answers in the call's protocol everywhere (:attr:`Pipeline.json_errors`).
An exception that is not an AWS error is a bug in the lab: it is answered with a 500
``InternalError`` (in the call's shape, recorded in the trail with ``answered_by:
"internal-error"``) and kept (:class:`lab.component.InternalErrors`) for the test to see.

A server hands a call over as a WSGI environ (:meth:`Pipeline.wsgi`: recorded, then answered)
or as the request it read (:meth:`Pipeline.handle_raw`, the recording proxy's way: the
environ is built only when a stage reads it, and the record runs after the answer is written,
the trail's readers waiting for it).

Neighbours: :mod:`lab.aws.motostages` (the moto endpoint's stages), :mod:`lab.aws.proxy.stages`
(the proxy's), :mod:`lab.aws.calls` (faults and trail), :mod:`lab.aws.protocol` (the wire).
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from lab.aws.calls import CallRecorder, Prepared
from lab.aws.exceptions import AwsError, InternalError
from lab.aws.keepalive import RawRequest, headers_of, target_of
from lab.aws.protocol import (
    AwsRequest,
    WireResponse,
    error_response,
    new_request_id,
    parse_request,
    read_body,
)
from lab.component import InternalErrors

log = logging.getLogger(__name__)

StartResponse = Callable[..., Any]

#: Every stage a call may pass, in the order it passes them (see the module docstring).
ORDER = (
    "identify",
    "authenticate",
    "route",
    "faults",
    "refuse",
    "session",
    "health",
    "validate",
    "fidelity",
    "guard",
    "dispatch",
    "record",
)


@dataclass
class Call:
    """One AWS call on its way through the pipeline."""

    source: dict[str, Any] | RawRequest
    """The request as the server gave it: a WSGI environ, or the request as read (whose
    environ is built when a stage first reads :attr:`environ`)."""
    body: bytes
    """The request body as read (stages may replace what the dispatch sends)."""
    parse: Callable[[], AwsRequest]
    """Parses the call as it came (:attr:`request` calls it once, when first read)."""
    started_wall: float
    started: float
    answered_by: str
    """What the trail says answered the call (``moto``, ``fault:<id>``, ...)."""
    response: WireResponse | None = None
    injected: bool = False
    """A fault rule fired on the call (an error, added latency, or both)."""
    fault: str = ""
    """``fault:<id>`` of the rule that fired, if one did."""
    deferred: AwsError | None = None
    """A refusal an early stage found and a later one answers with (``route`` → ``refuse``:
    the fault rules come between)."""
    prepared: Prepared | None = None
    """The trail's reading of the call, made ahead (by a dispatch waiting on its upstream)."""
    _request: AwsRequest | None = field(default=None, repr=False)
    _environ: dict[str, Any] | None = field(default=None, repr=False)

    @property
    def environ(self) -> dict[str, Any]:
        """The WSGI environ; stages may adapt it for the dispatch (moto's routing hints)."""
        if self._environ is None:
            source = self.source
            self._environ = source if isinstance(source, dict) else source.environ()
        return self._environ

    @property
    def method(self) -> str:
        source = self.source
        return (
            source.method
            if isinstance(source, RawRequest)
            else str(source.get("REQUEST_METHOD", "GET"))
        )

    @property
    def target(self) -> str:
        """Path and query as the caller sent them."""
        source = self.source
        return source.target if isinstance(source, RawRequest) else target_of(source)

    @property
    def query(self) -> str:
        source = self.source
        return (
            source.query if isinstance(source, RawRequest) else str(source.get("QUERY_STRING", ""))
        )

    @property
    def headers(self) -> list[tuple[str, str]]:
        """The request's header lines as the caller sent them (:func:`headers_of`)."""
        source = self.source
        return list(source.headers) if isinstance(source, RawRequest) else headers_of(source)

    @property
    def request(self) -> AwsRequest:
        """The parsed, redacted call (stages may replace it: ``route`` fills in the service).
        Parsed when first read: a stage that needs nothing of it before the dispatch (the
        proxy's, with no fault rule, caller check or guard) lets the parse wait until the
        call is on its way to the upstream."""
        if self._request is None:
            self._request = self.parse()
        return self._request

    @request.setter
    def request(self, value: AwsRequest) -> None:
        self._request = value

    def answer(self, response: WireResponse, *, by: str | None = None) -> None:
        """Answer the call (``by``: what the trail names as the answerer, when it changes)."""
        self.response = response
        if by:
            self.answered_by = by


Proceed = Callable[[], None]


def _parse_raw(raw: RawRequest, *, default_region: str) -> AwsRequest:
    """The call as it came (its own environ: stages may adapt the call's)."""
    return parse_request(raw.environ(), raw.body, default_region=default_region)


class Stage(Protocol):
    """One named step of the pipeline (an onion layer, see the module docstring)."""

    name: str

    def __call__(self, call: Call, proceed: Proceed) -> None:
        """Answer ``call``, raise an AWS error that answers it, or ``proceed()``."""
        ...


class Faults:
    """``faults``: the fault rules (shared by both servers). An injected error answers the
    call in its protocol's shape; injected latency is slept, then the call goes on."""

    name = "faults"

    def __init__(self, calls: CallRecorder, *, actions_only: bool = False) -> None:
        self.calls = calls
        #: consult the rules only for AWS calls (the proxy forwards other requests untouched)
        self.actions_only = actions_only

    def __call__(self, call: Call, proceed: Proceed) -> None:
        if not self.calls.faults:  # no rule: nothing to consult (nor to parse the call for)
            proceed()
            return
        request = call.request
        if self.actions_only and not request.action:
            proceed()
            return
        interception = self.calls.intercept(request)
        if interception.injected:
            call.injected = True
            call.fault = call.answered_by = interception.answered_by
        if interception.error is not None:
            call.answer(Pipeline.refusal(request, interception.error, injected=True))
            return
        proceed()


class Pipeline:
    """The stages of one server, run for each AWS call (see the module docstring)."""

    def __init__(
        self,
        name: str,
        stages: Sequence[Stage],
        *,
        calls: CallRecorder,
        internal_errors: InternalErrors,
        default_region: str,
        answered_by: str,
        json_errors: bool,
    ) -> None:
        names = ["identify", *(stage.name for stage in stages), "record"]
        if names != [n for n in ORDER if n in names] or len(set(names)) != len(names):
            raise ValueError(f"{name}: stages {names} are not in the pipeline's order {ORDER}")
        self.name = name
        self.stages = tuple(stages)
        self.calls = calls
        self.internal_errors = internal_errors
        self.default_region = default_region
        #: the trail's ``answered_by`` when no stage names another (``moto``, the upstream)
        self.answered_by = answered_by
        #: the lab's own refusals answer a JSON-protocol call in JSON (the proxy) or XML
        self.json_errors = json_errors

    # --- render ---------------------------------------------------------------------------

    def wsgi(self, environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        """Run the pipeline for one request and write its answer (500 on a bug of the lab)."""
        try:
            response = self.handle(environ)
        except Exception as exc:  # a bug in the lab before the call was parsed
            response = error_response("ec2", self.internal(exc), request_id=new_request_id())
        start_response(response.status_line, response.headers)
        return [response.body]

    def internal(self, exc: Exception) -> InternalError:
        """The 500 answering a bug of the lab (not the caller's), kept for the test to see."""
        log.error("aws %s internal error", self.name, exc_info=exc)
        self.internal_errors.record(f"{type(exc).__name__}: {exc}")
        who = "ccm-lab" if self.name == "endpoint" else f"ccm-lab {self.name}"
        return InternalError(f"{who} internal error: {exc}", source="internal-error")

    # --- identify, the stages, record -------------------------------------------------------

    def handle(self, environ: dict[str, Any]) -> WireResponse:
        """The answer to one request, recorded in the trail."""
        call = self.identify(environ)
        response = self._answer(call)
        self._record(call, response)
        return response

    def handle_raw(self, raw: RawRequest) -> tuple[WireResponse, Callable[[], None]]:
        """The answer to one request as the server read it (no WSGI environ unless a stage
        reads one), and what records it in the trail: the server runs that once the answer is
        on its way, and the trail's readers wait for it (:meth:`lab.aws.trail.Trail.expect`),
        so no reader that has the answer misses its event. A bug while recording is kept as
        any other (:meth:`internal`); the caller has its answer by then."""
        started_wall = time.time()
        started = time.perf_counter()
        try:
            parse = functools.partial(_parse_raw, raw, default_region=self.default_region)
            call = Call(raw, raw.body, parse, started_wall, started, self.answered_by)
            response = self._answer(call)
        except Exception as exc:  # a bug in the lab before the call was parsed (as wsgi())
            bug = error_response("ec2", self.internal(exc), request_id=new_request_id())
            return bug, lambda: None
        ticket = self.calls.trail.expect()

        def record() -> None:
            try:
                self._record(call, response, ticket)
            except Exception as exc:  # a bug in the lab, after the answer left
                self.internal(exc)
            finally:  # no event made (none is kept for the call, or a bug): none owed
                self.calls.trail.settle(ticket)

        return response, record

    def _answer(self, call: Call) -> WireResponse:
        try:
            self._run(call, 0)
        except AwsError as error:  # raised by a stage: it answers the call, skipping the way back
            call.answer(self.refusal(call.request, error, json=self.json_errors), by=error.source)
        except Exception as exc:  # a bug in the lab: answered 500 and still in the trail
            bug = self.internal(exc)
            call.answer(self.refusal(call.request, bug, json=self.json_errors), by=bug.source)
        response = call.response
        if response is None:  # the dispatch stage always answers
            raise RuntimeError(f"aws {self.name}: no stage answered {call.request.action}")
        return response

    def _record(self, call: Call, response: WireResponse, ticket: int | None = None) -> None:
        self.calls.record(
            call.request,
            response,
            started_wall=call.started_wall,
            started=call.started,
            injected=call.injected,
            answered_by=call.answered_by,
            prepared=call.prepared,
            ticket=ticket,
        )

    def identify(self, environ: dict[str, Any]) -> Call:
        """``identify``: the body read once and the call parsed (and redacted)."""
        started_wall = time.time()
        started = time.perf_counter()
        body = read_body(environ)
        # as the call came: a stage may adapt the environ for the dispatch before it is parsed
        parse = functools.partial(
            parse_request, dict(environ), body, default_region=self.default_region
        )
        return Call(environ, body, parse, started_wall, started, self.answered_by)

    def _run(self, call: Call, index: int) -> None:
        if index < len(self.stages):
            self.stages[index](call, lambda: self._run(call, index + 1))

    @staticmethod
    def refusal(
        request: AwsRequest, error: AwsError, *, json: bool = True, injected: bool = False
    ) -> WireResponse:
        """The wire answer to ``error`` raised answering ``request`` (the only place the lab's
        AWS errors become answers). An injected fault keeps the call's service as parsed
        (none: ELB's shape); the lab's own refusals fall back to EC2's."""
        service = request.service if injected else request.service or "ec2"
        protocol = request.protocol if json or injected else "query"
        return error_response(service, error, request_id=new_request_id(), protocol=protocol)
