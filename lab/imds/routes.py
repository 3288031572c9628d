"""URL table and WSGI application of the metadata service.

Role: map (method, path) to an ``ImdsService`` method, and serialize every ``ImdsError`` in one
place (``error_response``). Two planes share the port:

* data plane, as the real service: ``PUT /latest/api/token``, ``GET /``, ``GET /latest/...``;
* control plane under ``/_lab/`` (JSON): ``GET healthz``, ``GET state``, ``PATCH settings``,
  ``POST reset``, ``PUT|DELETE source-addresses/<ip>``,
  ``PUT|DELETE instances/<id>/{spot,events,rebalance}``. ``control.ImdsControl`` is its client.

Hop-limit emulation lives here because it is about the socket: a withheld token response is
never written; the connection is held until the client gives up (as a client in a container
sees a dropped packet: a read timeout) or ``hold_seconds`` pass, then closed without a reply.

Neighbours: ``handlers`` (operations), ``server`` (runs this app on a threaded WSGI server).
"""

from __future__ import annotations

import contextlib
import json
import logging
import select
import socket
import threading
import time
from collections.abc import Callable, Iterable
from html import escape
from typing import Any

from werkzeug.exceptions import HTTPException
from werkzeug.routing import Map, Rule
from werkzeug.wrappers import Request, Response

from lab.imds.exceptions import ImdsError, InvalidControlRequest, MethodNotAllowed, NotFound
from lab.imds.handlers import (
    HOPS_HEADER,
    INSTANCE_HEADER,
    TOKEN_HEADER,
    TTL_HEADER,
    VERSION,
    Caller,
    ImdsService,
    Reply,
)

log = logging.getLogger(__name__)

ERROR_HEADER = "X-Ccm-Lab-Error"
_CONTROL = "/_lab"

URL_MAP = Map(
    [
        Rule(f"{_CONTROL}/healthz", endpoint="healthz", methods=["GET"]),
        Rule(f"{_CONTROL}/state", endpoint="state", methods=["GET"]),
        Rule(f"{_CONTROL}/settings", endpoint="settings", methods=["PATCH", "PUT"]),
        Rule(f"{_CONTROL}/reset", endpoint="reset", methods=["POST"]),
        Rule(
            f"{_CONTROL}/source-addresses/<address>",
            endpoint="source_address",
            methods=["PUT", "DELETE"],
        ),
        Rule(
            f"{_CONTROL}/instances/<instance_id>/<any(spot, events, rebalance):kind>",
            endpoint="injection",
            methods=["PUT", "DELETE"],
        ),
        Rule("/<version>/api/token", endpoint="token"),
        Rule("/", endpoint="data", defaults={"path": ""}),
        Rule("/<path:path>", endpoint="data"),
    ],
    strict_slashes=False,
    merge_slashes=False,
)


def error_response(error: ImdsError) -> Response:
    """The one place an ``ImdsError`` becomes HTTP: status, IMDS-style HTML page, lab header."""
    title = f"{error.status} - {error.title}"
    body = (
        '<?xml version="1.0" encoding="iso-8859-1"?>\n'
        '<!DOCTYPE html PUBLIC "-//W3C//DTD XHTML 1.0 Transitional//EN"\n'
        '\t"http://www.w3.org/TR/xhtml1/DTD/xhtml1-transitional.dtd">\n'
        '<html xmlns="http://www.w3.org/1999/xhtml" xml:lang="en" lang="en">\n'
        f" <head>\n  <title>{title}</title>\n </head>\n"
        f" <body>\n  <h1>{title}</h1>\n  <p>{escape(error.message)}</p>\n </body>\n</html>\n"
    )
    response = Response(body, status=error.status, content_type="text/html")
    response.headers[ERROR_HEADER] = error.code
    return response


class ImdsApp:
    """WSGI callable. ``hold_seconds`` bounds a withheld token response."""

    def __init__(
        self,
        service: ImdsService,
        *,
        hold_seconds: float = 5.0,
        stopping: threading.Event | None = None,
    ) -> None:
        self.service = service
        self.hold_seconds = hold_seconds
        self.stopping = stopping or threading.Event()
        self._views: dict[str, Callable[..., Reply]] = {
            "healthz": lambda req: Reply(200, b"ok"),
            "state": lambda req: service.state(),
            "settings": lambda req: service.update_settings(_json_object(req) or {}),
            "reset": lambda req: service.reset(),
            "source_address": self._source_address,
            "injection": self._injection,
            "token": self._token,
            "data": self._data,
        }

    def __call__(
        self, environ: dict[str, Any], start_response: Callable[..., Any]
    ) -> Iterable[bytes]:
        request = Request(environ)
        try:
            endpoint, args = URL_MAP.bind_to_environ(environ).match()
            reply = self._views[endpoint](request, **args)
        except ImdsError as error:
            if error.status >= 500:
                log.warning("%s %s -> %d %s", request.method, request.path, error.status, error)
            return error_response(error)(environ, start_response)
        except HTTPException as error:
            return error(environ, start_response)
        if reply.withheld:
            self._withhold(environ)
        response = Response(reply.body, status=reply.status, content_type=reply.content_type)
        for key, value in reply.headers.items():
            response.headers[key] = value
        return response(environ, start_response)

    # -- views -------------------------------------------------------------------------------

    def _token(self, request: Request, version: str) -> Reply:
        if not VERSION.match(version):
            raise NotFound(f"/{version}/api/token")
        if request.method != "PUT":
            raise MethodNotAllowed(f"{request.method} /{version}/api/token: use PUT")
        return self.service.put_token(_caller(request), request.headers.get(TTL_HEADER))

    def _data(self, request: Request, path: str) -> Reply:
        if request.method not in ("GET", "HEAD"):
            raise MethodNotAllowed(f"{request.method} /{path}")
        return self.service.get(_caller(request), path, request.headers.get(TOKEN_HEADER))

    def _source_address(self, request: Request, address: str) -> Reply:
        if request.method == "DELETE":
            return self.service.map_source_address(address, None)
        body = _json_object(request) or {}
        instance_id = body.get("instance_id")
        if not isinstance(instance_id, str) or not instance_id:
            raise InvalidControlRequest(f"instance_id={instance_id!r}: expected an instance id")
        return self.service.map_source_address(address, instance_id)

    def _injection(self, request: Request, instance_id: str, kind: str) -> Reply:
        body = None if request.method == "DELETE" else (_json_object(request) or {})
        setter = {
            "spot": self.service.set_spot,
            "events": self.service.set_events,
            "rebalance": self.service.set_rebalance,
        }[kind]
        return setter(instance_id, body)

    # -- hop limit ---------------------------------------------------------------------------

    def _withhold(self, environ: dict[str, Any]) -> None:
        """Hold the connection without answering, then close it (no bytes are ever sent)."""
        sock = environ.get("werkzeug.socket")
        if not isinstance(sock, socket.socket):
            return
        deadline = time.monotonic() + self.hold_seconds
        while not self.stopping.is_set() and time.monotonic() < deadline:
            readable, _, _ = select.select([sock], [], [], 0.05)
            if readable:
                try:
                    if sock.recv(1, socket.MSG_PEEK) == b"":
                        break  # the client gave up and closed
                except OSError:
                    break
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)


def _caller(request: Request) -> Caller:
    return Caller(
        remote_addr=request.remote_addr or "",
        instance_header=request.headers.get(INSTANCE_HEADER),
        hops_header=request.headers.get(HOPS_HEADER),
        forwarded_for=request.headers.get("X-Forwarded-For"),
    )


def _json_object(request: Request) -> dict[str, Any] | None:
    raw = request.get_data(as_text=True)
    if not raw.strip():
        return None
    try:
        body = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise InvalidControlRequest(f"request body is not JSON: {exc}") from None
    if not isinstance(body, dict):
        raise InvalidControlRequest(f"request body={body!r}: expected a JSON object")
    return body
