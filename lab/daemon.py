"""The background process behind ``invoke lab.up``: hosts one :class:`lab.compose.Lab`.

``python -m lab.daemon --name N --state-dir .lab/N [...]`` starts the lab's servers (AWS
endpoint, metadata service, API simulator, kubelet stand-in) in this process, writes
``<state-dir>/state.json`` and serves a tiny control API on loopback for what only this
process can do (kubelet stand-in heartbeats). It exits cleanly on SIGTERM/SIGINT, stopping
every server it started. The control API, like every control plane of the lab, answers only
requests carrying the lab's token (``LabState.token``) as a bearer token. The controller is
*not* a child of this process: ``lab.labctl`` starts it separately so it can be restarted with
other flags without touching the lab.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

from lab.clock import DEFAULT_SPEED
from lab.cluster.steps import LoggingProgress
from lab.component import ProcessRef
from lab.component.bearer import CHALLENGE, bearer_ok, refusal
from lab.compose import Lab, LabConfig
from lab.kube.version import DEFAULT_K8S_VERSION
from lab.state import STATE_FILE, DaemonState, write_state

log = logging.getLogger("lab.daemon")


class _Control(BaseHTTPRequestHandler):
    lab: Lab

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("control: " + format, *args)

    def _reply(self, status: int, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _authorized(self) -> bool:
        """The lab's token is required on every route; answers 401 when it is missing."""
        authorization = self.headers.get("Authorization")
        if bearer_ok(authorization, self.lab.token):
            return True
        data = json.dumps({"error": refusal("the lab daemon's control API", authorization)})
        self.send_response(401)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("WWW-Authenticate", CHALLENGE)
        self.end_headers()
        self.wfile.write(data.encode())
        return False

    def do_GET(self) -> None:
        if not self._authorized():
            return
        if urlparse(self.path).path == "/healthz":
            self._reply(200, {"ok": True})
        else:
            self._reply(404, {"error": f"no such path {self.path}"})

    def do_POST(self) -> None:
        if not self._authorized():
            return
        url = urlparse(self.path)
        if url.path == "/traffic":
            self._traffic()
            return
        node = (parse_qs(url.query).get("node") or [""])[0]
        kubelet = self.lab.sim.kubelet if self.lab.capabilities.kubelet_stand_in else None
        actions = {"/kubelet/stop-heartbeat": "stop", "/kubelet/resume-heartbeat": "resume"}
        action = actions.get(url.path)
        if action is None or kubelet is None:
            self._reply(404, {"error": f"no such action {url.path}"})
            return
        if node not in kubelet.node_names:
            known = ", ".join(kubelet.node_names)
            self._reply(404, {"error": f"no node {node!r} in this lab; nodes: {known}"})
            return
        if action == "stop":
            kubelet.stop_heartbeat(node)
        else:
            kubelet.resume_heartbeat(node)
        self._reply(200, {"node": node, "heartbeat": action})

    def _traffic(self) -> None:
        """``lab.traffic``: the probe runs here, next to the data plane and the AWS state."""
        from lab.compose import LabNotReady
        from lab.traffic import TrafficError

        try:
            length = int(self.headers.get("Content-Length") or 0)
            ask = json.loads(self.rfile.read(length) or b"{}")
            if not isinstance(ask, dict) or not isinstance(ask.get("service"), str):
                raise TrafficError("give a JSON object with a 'service' string")
            probe = self.lab.traffic_probe(settle=False)
            note = self._settle_for_traffic()
            report = probe.send(
                ask["service"],
                requests=int(ask.get("requests") or 100),
                source=ask.get("source") or None,
                port=int(ask["port"]) if ask.get("port") else None,
                seed=int(ask.get("seed") or 0),
            )
        except (TrafficError, LabNotReady, ValueError) as exc:
            self._reply(400, {"error": str(exc)})
            return
        self._reply(200, {**report.to_json(), **({"note": note} if note else {})})

    def _settle_for_traffic(self) -> str:
        """Settle the lab before modelling requests (``Lab.settle``); a user's lab that does
        not settle within 10 s (a pod told to take minutes to start) is modelled as it is,
        and the answer says so."""
        from lab.settle import SettleTimeout

        try:
            self.lab.settle(timeout=10)
        except SettleTimeout as exc:
            busy = "; ".join(exc.busy) or "the API kept changing"
            return f"modelled without waiting for the lab to settle ({busy})"
        return ""


def control_server(lab: Lab) -> ThreadingHTTPServer:
    """The daemon's control API for ``lab`` on 127.0.0.1 (a free port; not yet serving)."""
    handler = type("Control", (_Control,), {"lab": lab})
    control = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    control.daemon_threads = True
    return control


class _Interrupted(BaseException):
    """SIGTERM/SIGINT while the lab starts (a BaseException, so no step swallows it)."""

    def __init__(self, signal_name: str) -> None:
        super().__init__(f"interrupted by {signal_name}")


def serve(config: LabConfig) -> int:
    state_dir = config.state_dir
    if state_dir is None:
        raise ValueError("the daemon needs --state-dir")
    stop = threading.Event()

    def interrupt(signum: int, frame: Any) -> None:
        raise _Interrupted(signal.Signals(signum).name)

    # While starting, a signal interrupts the steps so that what was done is undone.
    signal.signal(signal.SIGTERM, interrupt)
    signal.signal(signal.SIGINT, interrupt)
    lab = Lab(config)
    try:
        lab.start(progress=LoggingProgress())
    except (Exception, _Interrupted) as exc:  # every step done so far was undone
        log.debug("lab start failed", exc_info=True)
        print(f"ccm-lab lab {config.name!r} failed to start: {exc}", file=sys.stderr, flush=True)
        return 1
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    control = control_server(lab)
    threading.Thread(target=control.serve_forever, name="lab-control", daemon=True).start()
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
        stop.wait()
    finally:
        control.shutdown()
        control.server_close()
        lab.stop()
        log.info("lab %s stopped", config.name)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lab.daemon", description=__doc__)
    parser.add_argument("--name", default="default")
    parser.add_argument("--state-dir", type=Path, required=True)
    parser.add_argument("--nodes", type=int, default=2)
    parser.add_argument("--k8s-version", default=DEFAULT_K8S_VERSION)
    parser.add_argument("--region", default="us-east-1")
    parser.add_argument("--cluster-id", default="ccm-lab")
    parser.add_argument("--backend", choices=("sim", "kind", "existing"), default="sim")
    parser.add_argument(
        "--kubeconfig", type=Path, default=None, help="existing: the cluster to attach to"
    )
    parser.add_argument("--clock-speed", type=float, default=DEFAULT_SPEED)
    parser.add_argument("--feature-gates", default="", help="sim: the data plane's gates")
    parser.add_argument(
        "--expose-to-nodes",
        action="store_true",
        help="kind: serve AWS and metadata on the nodes' gateway (for an in-cluster controller)",
    )
    parser.add_argument("--vpc-cidr", default=None, help="the VPC block (kind: its Docker network)")
    parser.add_argument("--aws", choices=("moto", "localstack", "real"), default="moto")
    parser.add_argument(
        "--run-id", default=None, help="real: the run whose instances are the nodes (lab.up)"
    )
    parser.add_argument(
        "--aws-endpoint", default=None, help="localstack: its URL (default: start one in Docker)"
    )
    parser.add_argument(
        "--insecure-api",
        action="store_true",
        help="sim: the API simulator over plain HTTP without a token (default: HTTPS + token)",
    )
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    args.state_dir.mkdir(parents=True, exist_ok=True)
    config = LabConfig(
        name=args.name,
        nodes=args.nodes,
        k8s_version=args.k8s_version,
        region=args.region,
        zones=(f"{args.region}a", f"{args.region}b"),
        cluster_id=args.cluster_id,
        backend=args.backend,
        kubeconfig=args.kubeconfig.resolve() if args.kubeconfig else None,
        clock_speed=args.clock_speed,
        feature_gates=args.feature_gates,
        expose_to_nodes=args.expose_to_nodes,
        state_dir=args.state_dir.resolve(),
        vpc_cidr=args.vpc_cidr,
        insecure_api=args.insecure_api,
        aws=args.aws,
        aws_endpoint=args.aws_endpoint,
        run_id=args.run_id,
    )
    return serve(config)


if __name__ == "__main__":
    sys.exit(main())
