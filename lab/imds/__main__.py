"""CLI: ``python -m lab.imds --port N --aws-endpoint URL --instance-id ID --imdsv2 MODE``.

MODE is ``required`` or ``optional``.

Serves in the foreground, prints exactly one line ``ccm-lab imds ready at http://HOST:PORT``
once ready (``process.ImdsProcess`` waits for it), and exits 0 on SIGTERM or SIGINT
(``lab.component.serve_until_signal``).
"""

from __future__ import annotations

import argparse
import sys

from lab.component import serve_until_signal
from lab.component.bearer import add_control_token_file, cli_control_token
from lab.imds.server import ImdsServer


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m lab.imds", description=__doc__)
    parser.add_argument("--host", default="127.0.0.1", help="bind address (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=0, help="port; 0 picks a free one")
    parser.add_argument("--aws-endpoint", required=True, help="EC2 endpoint URL (moto, LocalStack)")
    parser.add_argument("--region", default="us-east-1")
    parser.add_argument("--instance-id", default=None, help="default instance for any caller")
    parser.add_argument(
        "--imdsv2",
        choices=["required", "optional"],
        default="optional",
        help="IMDSv2 floor: 'required' forces tokens; 'optional' defers to each instance",
    )
    parser.add_argument(
        "--map",
        action="append",
        default=[],
        metavar="IP=INSTANCE_ID",
        help="answer callers from IP as INSTANCE_ID (repeatable)",
    )
    parser.add_argument("--client-hops", type=int, default=1, help="hops between caller and IMDS")
    parser.add_argument(
        "--metadata-tags", choices=["from-instance", "enabled", "disabled"], default="from-instance"
    )
    parser.add_argument("--cache-ttl", type=float, default=0.2, help="instance cache seconds")
    parser.add_argument("--log-level", default="WARNING")
    add_control_token_file(parser, plane="the control plane")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.client_hops < 1:
        print(f"--client-hops={args.client_hops}: must be >= 1", file=sys.stderr)
        return 2
    mapping: dict[str, str] = {}
    for item in args.map:
        address, sep, instance = item.partition("=")
        if not sep or not address or not instance:
            print(f"--map={item!r}: expected IP=INSTANCE_ID", file=sys.stderr)
            return 2
        mapping[address] = instance
    token = cli_control_token(args.control_token_file, plane="the control plane")
    return serve_until_signal(
        lambda: ImdsServer(
            args.aws_endpoint,
            args.region,
            instance_id=args.instance_id,
            source_addresses=mapping,
            imdsv2=args.imdsv2,
            client_hops=args.client_hops,
            metadata_tags=args.metadata_tags,
            host=args.host,
            port=args.port,
            cache_ttl=args.cache_ttl,
            token=token,
        ),
        log_level=args.log_level,
    )


if __name__ == "__main__":
    sys.exit(main())
