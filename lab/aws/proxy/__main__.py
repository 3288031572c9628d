"""CLI: serve the recording proxy in the foreground, in front of an upstream AWS endpoint.

    python -m lab.aws.proxy --upstream http://127.0.0.1:4566 --trail trail.jsonl

Prints exactly one line to stdout, ``ccm-lab aws proxy ready at http://127.0.0.1:PORT``, once
``/_lab/health`` answers; logs go to stderr. The proxy signs forwarded calls with the AWS
credentials botocore finds in its environment (``AWS_ACCESS_KEY_ID``/``AWS_SECRET_ACCESS_KEY``
[/``AWS_SESSION_TOKEN``], ``AWS_PROFILE``, ...; never a command-line flag);
``--no-resign`` forwards calls as their callers signed them (moto, LocalStack). The control
token comes from ``CCM_LAB_TOKEN`` or ``--control-token-file``, as for ``python -m lab.aws``.
With ``CCM_LAB_CALLER_ACCESS_KEY_ID`` and ``CCM_LAB_CALLER_SECRET_ACCESS_KEY`` set (both or
neither; environment only, never a flag) the proxy accepts only AWS calls signed with that key
pair (:mod:`lab.aws.proxy.callerauth`).
SIGTERM or SIGINT shut it down cleanly (exit 0); a bad argument exits 2.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from botocore.credentials import Credentials

from lab.aws.proxy.callerauth import CALLER_ENV
from lab.aws.proxy.server import AwsProxyServer
from lab.component import serve_until_signal
from lab.component.bearer import add_control_token_file, cli_control_token


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m lab.aws.proxy",
        description="Serve the ccm-lab recording proxy (trail and fault injection) in front of "
        "an AWS endpoint.",
    )
    parser.add_argument(
        "--upstream",
        required=True,
        help="base URL calls go to (moto, LocalStack: http://host:port), or 'aws' for AWS's "
        "regional endpoint of each call's service (https://<service>.<region>.amazonaws.com)",
    )
    parser.add_argument("--host", default="127.0.0.1", help="bind address (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=0, help="port; 0 picks a free one")
    parser.add_argument(
        "--region", default="us-east-1", help="region of calls that carry no signing scope"
    )
    parser.add_argument("--account", default="", help="the upstream's account id, for health")
    parser.add_argument("--trail", type=Path, default=None, help="append trail JSON lines here")
    parser.add_argument(
        "--no-resign",
        action="store_true",
        help="forward calls as their callers signed them (upstreams that check no signature)",
    )
    parser.add_argument(
        "--timeout", type=float, default=60.0, help="seconds to wait for the upstream (60)"
    )
    parser.add_argument("--upstream-ca", default=None, help="CA bundle for an https upstream")
    parser.add_argument("--log-level", default="INFO", help="stderr log level (default INFO)")
    add_control_token_file(parser, plane="the proxy's control plane")
    return parser.parse_args(argv)


def environment_credentials() -> Credentials | None:
    """The credentials botocore's default chain finds (environment, profile, ...), or None."""
    import botocore.session

    found: Credentials | None = botocore.session.get_session().get_credentials()
    return found


def caller_credentials() -> tuple[str, str] | None:
    """The caller key pair from :data:`CALLER_ENV`; None when neither is set."""
    key_id, secret = (os.environ.get(name, "") for name in CALLER_ENV)
    if not key_id and not secret:
        return None
    if not key_id or not secret:
        missing = CALLER_ENV[0] if not key_id else CALLER_ENV[1]
        raise ValueError(f"{missing} is empty or unset; set both of {' and '.join(CALLER_ENV)}")
    return key_id, secret


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        callers = caller_credentials()
    except ValueError as exc:
        print(str(exc), file=sys.stderr)
        return 2
    credentials = None
    if not args.no_resign:
        credentials = environment_credentials()
        if credentials is None:
            print(
                "--upstream: the proxy signs forwarded calls, but botocore finds no AWS "
                "credentials (set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or AWS_PROFILE; "
                "or pass --no-resign for an upstream that checks no signature)",
                file=sys.stderr,
            )
            return 2
    token = cli_control_token(args.control_token_file, plane="the proxy's control plane")
    return serve_until_signal(
        lambda: AwsProxyServer(
            args.upstream,
            credentials=credentials,
            region=args.region,
            account=args.account,
            host=args.host,
            port=args.port,
            trail_path=args.trail,
            timeout=args.timeout,
            ca_file=args.upstream_ca,
            token=token,
            caller_credentials=callers,
        ),
        log_level=args.log_level,
    )


if __name__ == "__main__":
    raise SystemExit(main())
