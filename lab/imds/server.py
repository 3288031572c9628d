"""The metadata service as a lab component: a context manager on a threaded WSGI server.

Usage::

    with ImdsServer(aws_endpoint=aws.url, region="us-east-1", instance_id="i-...") as imds:
        imds.url            # http://127.0.0.1:<port>
        imds.control.inject_spot(...)   # typed control-plane client

The lifecycle is :class:`lab.component.ServerComponent`'s (port 0 read back, readiness on
``/_lab/healthz`` with an explicit timeout, ``ComponentNotReady`` with the recent log, an
idempotent ``stop()`` that releases held, hop-limited connections first);
``take_internal_errors()`` hands out the exceptions the app caught while serving.

The request handler is werkzeug's under :class:`lab.component.transport.GuardedHandler`:
deadlines for a request's head and body (``deadlines``), strict request lines and headers, a
bad or negative ``Content-Length`` refused 400, a body over ``MAX_BODY_BYTES`` refused 413
unread and a chunked one 411 (no metadata client sends either). The body is read before the
app runs, under the body deadline, so a client that stalls mid-body is dropped by the
transport, never seen by a view as an error of the lab.

Neighbours: ``routes.ImdsApp`` (the app), ``handlers.ImdsService`` (state), ``ec2`` (reader),
``control_client`` (client), ``process`` (the same thing as a child process).
"""

from __future__ import annotations

import io
import logging
import threading
import time
from collections.abc import Mapping
from typing import Any

from werkzeug.serving import BaseWSGIServer, WSGIRequestHandler, make_server

from lab.component import ServerComponent
from lab.component.bearer import auth_headers
from lab.component.transport import DEFAULT_DEADLINES, Deadlines, GuardedHandler
from lab.imds.control_client import ImdsControlClient
from lab.imds.ec2 import Boto3Ec2Reader, Ec2Reader
from lab.imds.handlers import ImdsService
from lab.imds.models import Clock, HttpTokens, InstanceID, Settings, TagExposure, TokenStore
from lab.imds.routes import ImdsApp

log = logging.getLogger(__name__)
access_log = logging.getLogger("lab.imds.access")

#: The largest request body served (IMDS requests carry none; the token PUT is empty).
MAX_BODY_BYTES = 1 << 20


class _RequestHandler(GuardedHandler, WSGIRequestHandler):
    """werkzeug's handler behind the lab's transport (deadlines, strict framing, size at the
    door); request lines go to ``lab.imds.access`` at DEBUG instead of werkzeug's printer."""

    max_body = MAX_BODY_BYTES
    chunked_ok = False

    def make_environ(self) -> Any:
        """werkzeug's environ with the body already read, under the body deadline."""
        environ = super().make_environ()
        length = self.content_length()
        body = self.rfile.read(length) if length else b""
        if len(body) < length:
            raise ConnectionError("the client closed before sending its body")
        environ["wsgi.input"] = io.BytesIO(body)
        return environ

    def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
        access_log.debug('%s "%s" %s %s', self.address_string(), self.requestline, code, size)

    def log(self, type: str, message: str, *args: object) -> None:
        level = logging.WARNING if type == "error" else logging.DEBUG
        access_log.log(level, message, *args)


class ImdsServer(ServerComponent):
    """Instance metadata service backed by the EC2 state at ``aws_endpoint``."""

    what = "imds"
    log_names = ("lab.imds",)
    ready_path = "/_lab/healthz"

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
        token: str | None = None,
        aws_credentials: tuple[str, str] | None = None,
        deadlines: Deadlines = DEFAULT_DEADLINES,
    ) -> None:
        """``aws_credentials``: the key pair the EC2 endpoint wants (a lab in a real account:
        the recording proxy's caller key); None: dummies, which moto and LocalStack accept.
        ``deadlines``: what a client has for a request's head, its body, and between requests."""
        if reader is None and aws_endpoint is None:
            raise ValueError("ImdsServer needs aws_endpoint=<url> or reader=<Ec2Reader>")
        super().__init__(host=host, port=port, ready_timeout=ready_timeout)
        self.deadlines = deadlines
        self.region = region
        access, secret = aws_credentials or ("ccm-lab", "ccm-lab")
        self.reader: Ec2Reader = reader or Boto3Ec2Reader(
            aws_endpoint or "", region, cache_ttl=cache_ttl, access_key=access, secret_key=secret
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
        #: the lab's bearer token, required on ``/_lab/`` (None: open, outside a lab)
        self.token = token
        self.app = ImdsApp(
            self.service, hold_seconds=hold_seconds, stopping=self._stopping, token=token
        )

    @property
    def control(self) -> ImdsControlClient:
        return ImdsControlClient(self.url, token=self.token)

    def _probe_headers(self) -> dict[str, str]:
        return auth_headers(self.token)

    # -- lifecycle (see lab.component.ServerComponent) ----------------------------------------

    def _bind(self) -> BaseWSGIServer:
        self._stopping.clear()
        server = make_server(
            self.host,
            self.requested_port,
            self.app,
            threaded=True,
            request_handler=_RequestHandler,
        )
        server.deadlines = self.deadlines  # type: ignore[attr-defined]  # read per connection
        return server

    def _on_stopping(self) -> None:
        self._stopping.set()  # release connections held by the hop-limit emulation

    def forget_cache(self) -> None:
        """Drop the instance cache: the next answer reads EC2 as it is now (``Lab.settle``)."""
        invalidate = getattr(self.reader, "invalidate", None)
        if callable(invalidate):
            invalidate()

    def take_internal_errors(self) -> list[str]:
        return self.app.internal_errors.take()
