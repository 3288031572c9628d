"""CLI: serve the lab's AWS endpoint in the foreground.

    python -m lab.aws --port 0 --region us-east-1 --seed 7 --trail .lab/default/trail.jsonl

Prints exactly one line to stdout, ``ccm-lab aws endpoint ready at http://127.0.0.1:PORT``, once
``/_lab/health`` answers; logs go to stderr. SIGTERM or SIGINT shut it down cleanly (exit 0).
:class:`lab.aws.process.AwsProcess` starts this as a child process and waits for the line.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading
from pathlib import Path
from types import FrameType


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m lab.aws", description="Serve the ccm-lab AWS endpoint (moto + fidelity)."
    )
    parser.add_argument("--host", default="127.0.0.1", help="bind address (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=0, help="port; 0 picks a free one")
    parser.add_argument("--region", default="us-east-1")
    parser.add_argument("--account", default=None, help="AWS account id (default 123456789012)")
    parser.add_argument("--seed", type=int, default=None, help="deterministic resource ids")
    parser.add_argument("--trail", type=Path, default=None, help="append trail JSON lines here")
    parser.add_argument(
        "--no-fidelity", action="store_true", help="start with the fidelity layer off (stock moto)"
    )
    parser.add_argument(
        "--no-warm-up", action="store_true", help="skip loading EC2/ELB before the ready line"
    )
    parser.add_argument("--log-level", default="INFO", help="stderr log level (default INFO)")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(
        level=args.log_level.upper(),
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    from lab.aws.app import DEFAULT_ACCOUNT, AwsApp, AwsLab, LabSettings
    from lab.aws.client import AwsControlClient, AwsControlUnavailable
    from lab.aws.endpoint import make_wsgi_server
    from lab.aws.fidelity import FidelityConfig
    from lab.aws.process import READY_PREFIX

    settings = LabSettings(
        region=args.region,
        account=args.account or DEFAULT_ACCOUNT,
        seed=args.seed,
        fidelity=FidelityConfig(enabled=not args.no_fidelity),
        trail_path=args.trail,
    )
    lab = AwsLab(settings)
    server = make_wsgi_server(AwsApp(lab), host=args.host, port=args.port)  # bind errors first
    if not args.no_warm_up:
        lab.warm_up()
    url = f"http://{args.host}:{server.port}"
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        logging.getLogger("lab.aws").info("signal %s: shutting down", signum)
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    thread = threading.Thread(target=server.serve_forever, name="aws-endpoint", daemon=True)
    thread.start()
    try:
        control = AwsControlClient(url, timeout=5)
        for _ in range(500):
            try:
                control.health()
                break
            except AwsControlUnavailable:
                if stop.wait(0.02):
                    break
        else:
            logging.getLogger("lab.aws").error("endpoint at %s never became healthy", url)
            return 1
        if not stop.is_set():
            print(f"{READY_PREFIX}{url}", flush=True)
        stop.wait()
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)
        lab.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
