"""A LocalStack Community stand-in: stock moto in a child process, plus its health route.

LocalStack's EC2 is moto with a few patches (``shared/docs/reference/peers.md`` §6), and its
gateway answers ``GET /_localstack/health`` with ``{"services": {...}, "edition": ...,
"version": ...}``. This module serves exactly that pair on ``127.0.0.1`` port 0: moto's own WSGI
app (no lab layer: no fidelity, no trail) for every AWS call, and a health report listing the
services LocalStack Community serves (``ec2``, ``sts``; no ``elb``/``elbv2``: Pro features)
for the health route. It runs as a **child process** so its moto state is not the test
process's (moto's backends are process-global, and an in-process lab's reset would wipe it).

    python -m tests.aws.localstack_standin      # prints "ready at http://127.0.0.1:PORT"

:func:`localstack_stand_in` starts it and yields its URL. What it is not: LocalStack's own
patches (its subnet and security-group overrides) and its persistence; the tests that use it
check the lab's wiring (proxy, trail, faults, seeding, skips), not LocalStack's fidelity.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

READY = "ccm-lab localstack stand-in ready at "
#: what LocalStack Community's health report lists for the services the lab uses
SERVICES = {"ec2": "available", "sts": "available", "elb": "disabled", "elbv2": "disabled"}


def _app() -> Any:
    from moto.server import DomainDispatcherApplication, create_backend_app

    moto_app = DomainDispatcherApplication(create_backend_app)
    health = json.dumps(
        {"services": SERVICES, "edition": "community", "version": "stand-in (moto)"}
    ).encode()

    def app(environ: dict[str, Any], start_response: Any) -> Any:
        if environ.get("PATH_INFO") == "/_localstack/health":
            start_response(
                "200 OK",
                [("Content-Type", "application/json"), ("Content-Length", str(len(health)))],
            )
            return [health]
        return moto_app(environ, start_response)

    return app


def main() -> int:
    from moto.moto_server.werkzeug_app import MotoRequestHandler
    from werkzeug.serving import make_server

    server = make_server("127.0.0.1", 0, _app(), threaded=True, request_handler=MotoRequestHandler)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    print(f"{READY}http://127.0.0.1:{server.server_port}", flush=True)
    try:
        server.serve_forever()
    finally:
        server.server_close()
    return 0


@contextmanager
def localstack_stand_in(timeout: float = 60.0) -> Iterator[str]:
    """Start the stand-in as a child process; yields its URL; stops it after."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.aws.localstack_standin"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()  # the child prints one line, or exits (EOF)
        if not line.startswith(READY):
            raise RuntimeError(f"the LocalStack stand-in did not start (said {line!r})")
        yield line[len(READY) :].strip()
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()


if __name__ == "__main__":
    sys.exit(main())
