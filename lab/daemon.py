"""The background process behind ``invoke lab.up``: hosts one :class:`lab.compose.Lab`.

``python -m lab.daemon --state-dir .lab/N`` reads the lab's :class:`~lab.spec.LabSpec` from
``<state-dir>/spec.json`` (the front door wrote it; nothing else is on the command line),
starts the lab's servers (AWS endpoint, metadata service, API simulator, kubelet stand-in) in
this process, writes ``<state-dir>/state.json`` and serves a tiny control API on loopback for
what only this process can do (kubelet stand-in heartbeats, the traffic probe): the route
table and messages of ``lab.daemon_client``, one handler per route here, a bad body answered
400 with a JSON error. It exits cleanly on SIGTERM/SIGINT, stopping
every server it started. The control API, like every control plane of the lab, answers only
requests carrying the lab's token (``LabState.token``) as a bearer token; its transport is
:mod:`lab.component.transport`'s (deadlines for a request's head and body, strict framing, a
body over ``MAX_BODY_BYTES`` refused 413 unread). The controller is
*not* a child of this process: ``lab.frontdoor`` starts it separately so it can be restarted with
other flags without touching the lab.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import gc
import json
import logging
import os
import signal
import sys
import threading
from collections.abc import Callable
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlparse

from lab.cluster.steps import LoggingProgress
from lab.component import ProcessRef
from lab.component.bearer import CHALLENGE, bearer_ok, refusal
from lab.component.heap import collector_paused, exit_now, settle_heap
from lab.component.transport import DEFAULT_DEADLINES, Deadlines, GuardedHandler
from lab.daemon_client import (
    HEALTHZ,
    RESUME_HEARTBEAT,
    STOP_HEARTBEAT,
    TRAFFIC,
    BadRequest,
    Empty,
    HeartbeatAnswer,
    NodeRequest,
    Route,
    TrafficAnswer,
    TrafficRequest,
    find_route,
    parse_request,
)
from lab.spec import SPEC_FILE, LabSpec, read_spec
from lab.state import STATE_FILE, DaemonState, LabError, write_state

if TYPE_CHECKING:
    from lab.compose import Lab

log = logging.getLogger("lab.daemon")

#: The largest control request served (its messages are a few hundred bytes of JSON).
MAX_BODY_BYTES = 1 << 20


def _healthz(lab: Lab, request: Empty) -> tuple[int, dict[str, Any]]:
    return 200, {"ok": True}


def _heartbeat(lab: Lab, request: NodeRequest, *, stop: bool) -> tuple[int, dict[str, Any]]:
    if not lab.capabilities.kubelet_stand_in:
        return 404, {"error": f"the {lab.config.backend} backend has no kubelet stand-in"}
    kubelet = lab.sim.stand_in
    if request.node not in kubelet.node_names:
        known = ", ".join(kubelet.node_names)
        return 404, {"error": f"no node {request.node!r} in this lab; nodes: {known}"}
    if stop:
        kubelet.stop_heartbeat(request.node)
    else:
        kubelet.resume_heartbeat(request.node)
    answer = HeartbeatAnswer(request.node, "stop" if stop else "resume")
    return 200, dataclasses.asdict(answer)


def _traffic(lab: Lab, request: TrafficRequest) -> tuple[int, dict[str, Any]]:
    """``lab.traffic``: the probe runs here, next to the data plane and the AWS state."""
    from lab.compose import LabNotReady
    from lab.traffic.report import TrafficError

    try:
        probe = lab.traffic_probe(settle=False)
        note = _settle_for_traffic(lab)
        report = probe.send(
            request.service,
            requests=request.requests,
            source=request.source,
            port=request.port,
            seed=request.seed,
        )
    except (TrafficError, LabNotReady, ValueError) as exc:
        return 400, {"error": str(exc)}
    return 200, TrafficAnswer(report.to_json(), note).to_json()


def _settle_for_traffic(lab: Lab) -> str:
    """Settle the lab before modelling requests (``Lab.settle``); a user's lab that does not
    settle within 10 s (a pod told to take minutes to start) is modelled as it is, and the
    answer says so."""
    from lab.settle import SettleTimeout

    try:
        lab.settle(timeout=10)
    except SettleTimeout as exc:
        busy = "; ".join(exc.busy) or "the API kept changing"
        return f"modelled without waiting for the lab to settle ({busy})"
    return ""


#: one handler per route of ``lab.daemon_client.ROUTES``
HANDLERS: dict[Route, Callable[[Lab, Any], tuple[int, dict[str, Any]]]] = {
    HEALTHZ: _healthz,
    STOP_HEARTBEAT: functools.partial(_heartbeat, stop=True),
    RESUME_HEARTBEAT: functools.partial(_heartbeat, stop=False),
    TRAFFIC: _traffic,
}


class _Control(GuardedHandler):
    lab: Lab
    max_body = MAX_BODY_BYTES
    chunked_ok = False

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("control: " + format, *args)

    def _reply(self, status: int, body: dict[str, Any], **headers: str) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in headers.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def _authorized(self) -> bool:
        """The lab's token is required on every route; answers 401 when it is missing."""
        authorization = self.headers.get("Authorization")
        if bearer_ok(authorization, self.lab.token):
            return True
        error = refusal("the lab daemon's control API", authorization)
        self._reply(401, {"error": error}, **{"WWW-Authenticate": CHALLENGE})
        return False

    def _dispatch(self, method: str) -> None:
        if not self._authorized():
            return
        path = urlparse(self.path).path
        route = find_route(method, path)
        if route is None:
            self._reply(404, {"error": f"no such path {path} ({method})"})
            return
        try:
            length = self.content_length()
            request = parse_request(route, self.rfile.read(length) if length > 0 else b"")
        except (BadRequest, ValueError) as exc:
            self._reply(400, {"error": f"{method} {path}: {exc}"})
            return
        try:
            answer = HANDLERS[route](self.lab, request)
        except Exception as exc:  # a lab bug: answered, never a dropped connection
            log.exception("%s %s failed", method, path)
            answer = 500, {"error": f"{method} {path}: {type(exc).__name__}: {exc}"}
        self._reply(*answer)

    def too_large(self, length: int) -> None:
        self.close_connection = True
        self._reply(413, {"error": f"a control request is at most {MAX_BODY_BYTES} bytes"})
        self.drain()

    def do_GET(self) -> None:
        self._dispatch("GET")

    def do_POST(self) -> None:
        self._dispatch("POST")


def control_server(lab: Lab, *, deadlines: Deadlines = DEFAULT_DEADLINES) -> ThreadingHTTPServer:
    """The daemon's control API for ``lab`` on 127.0.0.1 (a free port; not yet serving);
    ``deadlines``: what a client has for a request's head, its body, and between requests."""
    handler = type("Control", (_Control,), {"lab": lab})
    control = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    control.daemon_threads = True
    control.deadlines = deadlines  # type: ignore[attr-defined]  # read per connection
    return control


class _Interrupted(BaseException):
    """SIGTERM/SIGINT while the lab starts (a BaseException, so no step swallows it)."""

    def __init__(self, signal_name: str) -> None:
        super().__init__(f"interrupted by {signal_name}")


def serve(config: LabSpec) -> int:
    state_dir = config.state_dir
    if state_dir is None:
        raise ValueError("the daemon needs --state-dir")
    stop = threading.Event()

    def interrupt(signum: int, frame: Any) -> None:
        raise _Interrupted(signal.Signals(signum).name)

    # While starting, a signal interrupts the steps so that what was done is undone.
    signal.signal(signal.SIGTERM, interrupt)
    signal.signal(signal.SIGINT, interrupt)
    try:
        with collector_paused():  # the lab's imports too (lab.compose imports everything)
            from lab.compose import Lab

            lab = Lab(config)
            lab.start(progress=LoggingProgress(), warm_controller=False)
    except (Exception, _Interrupted) as exc:  # every step done so far was undone
        log.debug("lab start failed", exc_info=True)
        print(f"ccm-lab lab {config.name!r} failed to start: {exc}", file=sys.stderr, flush=True)
        return 1
    try:
        signal.signal(signal.SIGTERM, lambda *_: stop.set())
        signal.signal(signal.SIGINT, lambda *_: stop.set())
    except _Interrupted:  # a signal between the start and the handlers: stop what started
        lab.stop()
        return 1
    control = control_server(lab)
    threading.Thread(  # shutdown() waits for the loop's next look: 50 ms at most
        target=control.serve_forever, kwargs={"poll_interval": 0.05}, name="lab-control",
        daemon=True,
    ).start()  # fmt: skip
    try:
        me = ProcessRef.of(os.getpid()) or ProcessRef(os.getpid(), 0)
        state = lab.state(state_dir).replace(
            daemon=DaemonState(
                process=me,
                control_url=f"http://127.0.0.1:{control.server_address[1]}",
                log=str(state_dir / "lab.log"),
            )
        )
        write_state(state)
        print(f"ccm-lab lab {config.name!r} ready; state in {state_dir / STATE_FILE}", flush=True)
        settle_heap()  # after the state: the front door goes on meanwhile
        stop.wait()
    finally:
        control.shutdown()
        control.server_close()
        lab.stop()
        log.info("lab %s stopped", config.name)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lab.daemon", description=__doc__)
    parser.add_argument(
        "--state-dir", type=Path, required=True, help="the lab directory, holding spec.json"
    )
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    state_dir = args.state_dir.resolve()
    try:
        spec = read_spec(state_dir)
    except LabError as exc:
        print(f"ccm-lab lab in {state_dir} failed to start: {exc}", file=sys.stderr, flush=True)
        return 1
    if spec is None:
        print(
            f"ccm-lab lab in {state_dir} failed to start: no {SPEC_FILE} there (`invoke lab.up` "
            "writes it)",
            file=sys.stderr,
            flush=True,
        )
        return 1
    return serve(spec.replace(state_dir=state_dir))


if __name__ == "__main__":
    # as a process: no collection while the lab's modules are imported and it starts (serve()
    # settles the heap once the lab is up), and no heap teardown once it is stopped
    gc.disable()
    exit_now(main())
