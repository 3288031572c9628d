"""The metadata service as a lab component: a context manager on a threaded WSGI server.

Usage::

    with ImdsServer(aws_endpoint=aws.url, region="us-east-1", instance_id="i-...") as imds:
        imds.url            # http://127.0.0.1:<port>
        imds.control.inject_spot(...)   # typed control-plane client

Lifecycle (the lab's component contract): binds 127.0.0.1 port 0 unless told otherwise and
reads the real port back; ``start()`` waits for ``/_lab/healthz`` with an explicit timeout and,
on failure, raises ``ImdsReadinessError`` carrying the component's recent log; ``stop()`` is
idempotent and releases held (hop-limited) connections first.

Neighbours: ``routes.ImdsApp`` (the app), ``handlers.ImdsService`` (state), ``ec2`` (reader),
``control`` (client), ``process`` (the same thing as a child process for ``invoke lab.up``).
"""

from __future__ import annotations

import logging
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from types import TracebackType
from typing import Self

from werkzeug.serving import BaseWSGIServer, WSGIRequestHandler, make_server

from lab.component import RecentLog
from lab.imds.control import ImdsControl
from lab.imds.ec2 import Boto3Ec2Reader, Ec2Reader
from lab.imds.exceptions import ImdsReadinessError
from lab.imds.handlers import ImdsService
from lab.imds.models import Clock, HttpTokens, InstanceID, Settings, TagExposure, TokenStore
from lab.imds.routes import ImdsApp

log = logging.getLogger(__name__)
access_log = logging.getLogger("lab.imds.access")


class _RequestHandler(WSGIRequestHandler):
    """Request lines go to ``lab.imds.access`` at DEBUG instead of werkzeug's stderr printer."""

    def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
        access_log.debug('%s "%s" %s %s', self.address_string(), self.requestline, code, size)

    def log(self, type: str, message: str, *args: object) -> None:
        level = logging.WARNING if type == "error" else logging.DEBUG
        access_log.log(level, message, *args)


class ImdsServer:
    """Instance metadata service backed by the EC2 state at ``aws_endpoint``."""

    def __init__(
        self,
        aws_endpoint: str | None = None,
        region: str = "us-east-1",
        *,
        instance_id: str | None = None,
        source_addresses: Mapping[str, str] | None = None,
        imdsv2: HttpTokens = "optional",
        client_hops: int = 1,
        metadata_tags: TagExposure = "from-instance",
        iam_role: str | None = "ccm-lab-node",
        host: str = "127.0.0.1",
        port: int = 0,
        cache_ttl: float = 0.2,
        hold_seconds: float = 5.0,
        reader: Ec2Reader | None = None,
        clock: Clock = time.monotonic,
        ready_timeout: float = 10.0,
    ) -> None:
        if reader is None and aws_endpoint is None:
            raise ValueError("ImdsServer needs aws_endpoint=<url> or reader=<Ec2Reader>")
        self.region = region
        self._host = host
        self._requested_port = port
        self._ready_timeout = ready_timeout
        self.reader: Ec2Reader = reader or Boto3Ec2Reader(
            aws_endpoint or "", region, cache_ttl=cache_ttl
        )
        settings = Settings(
            default_instance_id=InstanceID(instance_id) if instance_id else None,
            source_addresses={ip: InstanceID(iid) for ip, iid in (source_addresses or {}).items()},
            imdsv2_floor=imdsv2,
            client_hops=client_hops,
            metadata_tags=metadata_tags,
            iam_role=iam_role,
        )
        self.service = ImdsService(self.reader, settings, tokens=TokenStore(clock))
        self._stopping = threading.Event()
        self.app = ImdsApp(self.service, hold_seconds=hold_seconds, stopping=self._stopping)
        self._server: BaseWSGIServer | None = None
        self._thread: threading.Thread | None = None
        self._recent = RecentLog()
        self._lock = threading.Lock()

    # -- lifecycle ---------------------------------------------------------------------------

    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError("ImdsServer is not started")
        return int(self._server.server_port)

    @property
    def url(self) -> str:
        return f"http://{self._host}:{self.port}"

    @property
    def control(self) -> ImdsControl:
        return ImdsControl(self.url)

    def start(self) -> Self:
        with self._lock:
            if self._server is not None:
                return self
            logging.getLogger("lab.imds").addHandler(self._recent)
            self._stopping.clear()
            server = make_server(
                self._host,
                self._requested_port,
                self.app,
                threaded=True,
                request_handler=_RequestHandler,
            )
            self._server = server
            self._thread = threading.Thread(
                target=server.serve_forever,
                kwargs={"poll_interval": 0.05},
                name=f"imds-{server.server_port}",
                daemon=True,
            )
            self._thread.start()
        self._wait_ready()
        log.info("imds ready at %s", self.url)
        return self

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + self._ready_timeout
        last_error = "no attempt made"
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(f"{self.url}/_lab/healthz", timeout=1) as reply:
                    if reply.status == 200:
                        return
            except (urllib.error.URLError, OSError) as exc:
                last_error = str(exc)
            time.sleep(0.02)  # poll interval of a readiness loop, bounded by the deadline
        recent = self._recent.text()
        self.stop()
        raise ImdsReadinessError(
            f"imds at {self._host}:{self._requested_port} not ready after "
            f"{self._ready_timeout}s ({last_error}); recent log:\n{recent}"
        )

    def stop(self) -> None:
        with self._lock:
            server, thread = self._server, self._thread
            self._server = self._thread = None
        if server is None:
            return
        self._stopping.set()
        server.shutdown()
        server.server_close()
        if thread is not None:
            thread.join(timeout=5)
        logging.getLogger("lab.imds").removeHandler(self._recent)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
