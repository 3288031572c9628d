"""Run the simulator as a process: ``python -m lab.kube --port N --kubeconfig PATH``.

Serves in the foreground, writes the kubeconfig, prints exactly one line
``ccm-lab kube simulator ready at <URL>`` once ready, and exits cleanly on SIGTERM/SIGINT
(saving state first when ``--state`` is given); ``lab.component.serve_until_signal`` is the
loop. ``process.KubeProcess`` starts it as a child process. With ``CCM_LAB_TOKEN`` in its
environment (or ``--control-token-file``), ``/_lab`` requires that token (and with ``--tls``
it is the API's token too).
"""

from __future__ import annotations

import argparse

from lab.component import serve_until_signal
from lab.component.bearer import add_control_token_file, cli_control_token
from lab.kube.server import KubeServer
from lab.versions.release import DEFAULT_K8S_VERSION


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lab.kube", description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument("--kubeconfig", required=True, help="where to write the kubeconfig")
    parser.add_argument(
        "--version",
        default=DEFAULT_K8S_VERSION,
        help=f"Kubernetes version to report (default {DEFAULT_K8S_VERSION})",
    )
    parser.add_argument("--state", help="load state from this file at start, save it at exit")
    parser.add_argument("--tls", action="store_true", help="serve HTTPS with a fresh CA and token")
    parser.add_argument("--service-cidr", default="10.96.0.0/16")
    parser.add_argument(
        "--fake-kubelet", action="store_true", help="confirm graceful pod deletion at once"
    )
    parser.add_argument(
        "--authorization",
        choices=("allow", "rbac"),
        default="allow",
        help="AlwaysAllow (default) or RBAC over the stored Roles and bindings",
    )
    parser.add_argument("--log-level", default="WARNING")
    add_control_token_file(parser, plane="/_lab")
    args = parser.parse_args(argv)
    # the lab's token: /_lab needs it, and with --tls the API too
    token = cli_control_token(args.control_token_file, plane="/_lab")
    return serve_until_signal(
        lambda: KubeServer(
            version=args.version,
            host=args.host,
            port=args.port,
            tls=args.tls,
            token=token if args.tls else None,
            control_token=token,
            state_file=args.state,
            service_cidr=args.service_cidr,
            fake_kubelet=args.fake_kubelet,
            authorization=args.authorization,
        ),
        log_level=args.log_level,
        on_ready=lambda server: server.write_kubeconfig(args.kubeconfig),
    )


if __name__ == "__main__":
    raise SystemExit(main())
