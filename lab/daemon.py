"""The background process behind ``invoke lab.up``: hosts one :class:`lab.compose.Lab`.

``python -m lab.daemon --name N --state-dir .lab/N [...]`` starts the lab's servers (AWS
endpoint, metadata service, API simulator, kubelet stand-in) in this process, writes
``<state-dir>/state.json`` and serves a tiny control API on loopback for what only this
process can do (kubelet stand-in heartbeats). It exits cleanly on SIGTERM/SIGINT, stopping
every server it started. The controller is *not* a child of this process: ``lab.labctl``
starts it separately so it can be restarted with other flags without touching the lab.
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

from lab.compose import Lab, LabConfig

log = logging.getLogger("lab.daemon")

STATE_FILE = "state.json"


def write_state(state_dir: Path, state: dict[str, Any]) -> Path:
    """Write ``state.json`` atomically (readers never see half a file)."""
    path = state_dir / STATE_FILE
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(state, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    tmp.replace(path)
    return path


def read_state(state_dir: Path) -> dict[str, Any] | None:
    try:
        data = json.loads((state_dir / STATE_FILE).read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    return data if isinstance(data, dict) else None


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

    def do_GET(self) -> None:
        if urlparse(self.path).path == "/healthz":
            self._reply(200, {"ok": True})
        else:
            self._reply(404, {"error": f"no such path {self.path}"})

    def do_POST(self) -> None:
        url = urlparse(self.path)
        node = (parse_qs(url.query).get("node") or [""])[0]
        kubelet = self.lab.kubelet
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


def serve(config: LabConfig) -> int:
    state_dir = config.state_dir
    if state_dir is None:
        raise ValueError("the daemon needs --state-dir")
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    lab = Lab(config)
    lab.start(progress=lambda msg: log.info("starting %s", msg))
    handler = type("Control", (_Control,), {"lab": lab})
    control = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    control.daemon_threads = True
    threading.Thread(target=control.serve_forever, name="lab-control", daemon=True).start()
    try:
        state = lab.state()
        state["daemon"] = {
            "pid": os.getpid(),
            "control_url": f"http://127.0.0.1:{control.server_address[1]}",
            "log": str(state_dir / "lab.log"),
        }
        write_state(state_dir, state)
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
    parser.add_argument("--k8s-version", default="1.33")
    parser.add_argument("--region", default="us-east-1")
    parser.add_argument("--cluster-id", default="ccm-lab")
    parser.add_argument("--backend", choices=("sim", "kind"), default="sim")
    parser.add_argument(
        "--expose-to-nodes",
        action="store_true",
        help="kind: serve AWS and metadata on the nodes' gateway (for an in-cluster controller)",
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
        expose_to_nodes=args.expose_to_nodes,
        state_dir=args.state_dir.resolve(),
    )
    return serve(config)


if __name__ == "__main__":
    sys.exit(main())
