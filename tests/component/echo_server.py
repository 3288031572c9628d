"""A minimal server component and its ``__main__``, for the lifecycle tests.

``python -m tests.component.echo_server [--fail-ready | --exit N | --silent]`` serves ``/ready``
and ``/boom`` (a handler bug, recorded as an internal error) through
``lab.component.serve_until_signal``, or misbehaves as told.
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
import traceback
from http.server import BaseHTTPRequestHandler, HTTPServer, ThreadingHTTPServer
from typing import Any

from lab.component import InternalErrors, ServerComponent, serve_until_signal

log = logging.getLogger("tests.echo")


class EchoServer(ServerComponent):
    what = "echo server"
    log_names = ("tests.echo",)
    ready_path = "/ready"

    def __init__(
        self, *, port: int = 0, ready_status: int = 200, ready_timeout: float = 5.0
    ) -> None:
        super().__init__(host="127.0.0.1", port=port, ready_timeout=ready_timeout)
        self.ready_status = ready_status
        self.errors = InternalErrors()
        self.released = 0

    def _bind(self) -> HTTPServer:
        component = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                log.info("request %s", format % args)

            def do_GET(self) -> None:
                try:
                    if self.path == "/boom":
                        raise RuntimeError("boom")
                    status = component.ready_status if self.path == "/ready" else 404
                except RuntimeError as exc:
                    component.errors.record("".join(traceback.format_exception(exc)))
                    status = 500
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

        log.warning("binding port %s", self.requested_port)  # the recent log keeps WARNING+
        return ThreadingHTTPServer((self.host, self.requested_port), Handler)

    def _release(self) -> None:
        self.released += 1

    def take_internal_errors(self) -> list[str]:
        return self.errors.take()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--exit", type=int, default=None)
    parser.add_argument("--silent", action="store_true")
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args(argv)
    if args.exit is not None:
        print("giving up as told", file=sys.stderr)
        return int(args.exit)
    if args.silent:
        time.sleep(60)
        return 0
    return serve_until_signal(lambda: EchoServer(port=args.port), log_level="INFO")


if __name__ == "__main__":
    raise SystemExit(main())
