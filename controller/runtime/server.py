"""The health and metrics HTTP server: ``/healthz``, ``/readyz``, ``/metrics``.

A :class:`HealthServer` binds ``host:port`` (port 0 picks a free port; :attr:`address`
reads the real one back), serves on a daemon thread, and stops idempotently. Health is a
set of named checks (callables returning ``None`` when fine or a reason string): ``/healthz``
runs the liveness checks, ``/readyz`` the readiness ones; ``?verbose`` lists each check as
``[+]name ok`` / ``[-]name failed: reason`` like the Kubernetes components do.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

log = logging.getLogger(__name__)

Check = Callable[[], str | None]


class HealthServer:
    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        metrics: Callable[[], bytes] | None = None,
    ) -> None:
        self.host = host
        self.port = port
        self.live: dict[str, Check] = {"ping": lambda: None}
        self.ready: dict[str, Check] = {"ping": lambda: None}
        self._metrics = metrics
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def address(self) -> tuple[str, int]:
        if self._httpd is None:
            raise RuntimeError("health server is not running")
        host, port = self._httpd.server_address[:2]
        return str(host), int(port)

    @property
    def url(self) -> str:
        host, port = self.address
        return f"http://{host}:{port}"

    def start(self) -> HealthServer:
        if self._httpd is not None:
            return self
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                parts = urlsplit(self.path)
                if parts.path == "/metrics" and server._metrics is not None:
                    self._send(200, server._metrics(), "text/plain; version=0.0.4")
                elif parts.path in ("/healthz", "/livez"):
                    self._health(server.live, "verbose" in parts.query)
                elif parts.path == "/readyz":
                    self._health({**server.live, **server.ready}, "verbose" in parts.query)
                else:
                    self._send(404, b"404 page not found\n", "text/plain")

            def _health(self, checks: dict[str, Check], verbose: bool) -> None:
                lines, ok = [], True
                for name, check in sorted(checks.items()):
                    try:
                        problem = check()
                    except Exception as exc:
                        problem = f"{type(exc).__name__}: {exc}"
                    ok = ok and problem is None
                    lines.append(
                        f"[+]{name} ok" if problem is None else f"[-]{name} failed: {problem}"
                    )
                if verbose or not ok:
                    body = "\n".join([*lines, "healthz check " + ("passed" if ok else "failed")])
                else:
                    body = "ok"
                self._send(200 if ok else 500, (body + "\n").encode(), "text/plain")

            def _send(self, code: int, body: bytes, ctype: str) -> None:
                self.send_response(code)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:
                log.debug("http: " + format, *args)

        self._httpd = ThreadingHTTPServer((self.host, self.port), Handler)
        self._httpd.daemon_threads = True
        httpd = self._httpd
        # a short poll: stop() (SIGTERM) waits for the loop to notice, which at the default
        # 0.5 s made every shutdown half a second longer
        self._thread = threading.Thread(
            target=lambda: httpd.serve_forever(poll_interval=0.05),
            name="health-server",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        httpd, self._httpd = self._httpd, None
        if httpd is None:
            return
        httpd.shutdown()
        httpd.server_close()
        if self._thread is not None:
            self._thread.join(5)

    def __enter__(self) -> HealthServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
