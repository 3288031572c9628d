"""CLI: serve the lab's AWS endpoint in the foreground.

    python -m lab.aws --port 0 --region us-east-1 --seed 7 --trail .lab/default/trail.jsonl

Prints exactly one line to stdout, ``ccm-lab aws endpoint ready at http://127.0.0.1:PORT``, once
``/_lab/health`` answers; logs go to stderr. With ``CCM_LAB_TOKEN`` set in its environment,
``/_lab/`` and ``/moto-api/`` require it as a bearer token. SIGTERM or SIGINT shut it down
cleanly (exit 0).
:class:`lab.aws.process.AwsProcess` starts this as a child process and waits for the line.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from lab.aws.app import DEFAULT_ACCOUNT
from lab.aws.server import AwsServer
from lab.clock import DEFAULT_SPEED
from lab.component import serve_until_signal
from lab.component.bearer import add_control_token_file, cli_control_token


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
    parser.add_argument(
        "--clock-speed",
        type=float,
        default=DEFAULT_SPEED,
        help=f"lab seconds per real second of ELB health checks (default {DEFAULT_SPEED:g}; "
        "1 = real time)",
    )
    parser.add_argument("--log-level", default="INFO", help="stderr log level (default INFO)")
    add_control_token_file(parser, plane="the control plane")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    token = cli_control_token(args.control_token_file, plane="the control plane")
    return serve_until_signal(
        lambda: AwsServer(
            args.region,
            args.seed,
            account=args.account or DEFAULT_ACCOUNT,
            fidelity=not args.no_fidelity,
            host=args.host,
            port=args.port,
            trail_path=args.trail,
            warm_up=not args.no_warm_up,
            clock_speed=args.clock_speed,
            token=token,
        ),
        log_level=args.log_level,
    )


if __name__ == "__main__":
    raise SystemExit(main())
