"""URL table and WSGI application of the metadata service.

Role: map (method, path) to an ``ImdsService`` method, and serialize every ``ImdsError`` in one
place (``error_response``). Two planes share the port:

* data plane, as the real service: ``PUT /latest/api/token``, ``GET /``, ``GET /latest/...``;
* control plane under ``/_lab/`` (JSON), whose routes and views are ``control``'s; given the
  lab's token (``token=``), it answers only requests carrying it as a bearer token (401,
  ``ControlUnauthorized``, otherwise). Metadata reads never need it: real clients make them.

Any other exception a view raises is a bug of the lab: it is answered as 500 and recorded in
``internal_errors`` (``ImdsServer.take_internal_errors``), so the test that hit it fails.

Hop-limit emulation lives here because it is about the socket: a withheld token response is
never written; the connection is held until the client gives up (as a client in a container
sees a dropped packet: a read timeout) or ``hold_seconds`` pass, then closed without a reply.

Neighbours: ``handlers`` (operations), ``control`` (the ``/_lab/`` routes), ``server`` (runs
this app on a threaded WSGI server).
"""

from __future__ import annotations

import contextlib
import logging
import select
import socket
import threading
import time
import traceback
from collections.abc import Callable, Iterable
from html import escape
from typing import Any

from werkzeug.exceptions import HTTPException
from werkzeug.routing import Map, Rule
from werkzeug.wrappers import Request, Response

from lab.component import InternalErrors
from lab.component.bearer import CHALLENGE, bearer_ok, refusal
from lab.imds.control import PREFIX, ControlRoutes
from lab.imds.control import RULES as CONTROL_RULES
from lab.imds.exceptions import ControlUnauthorized, ImdsError, MethodNotAllowed, NotFound
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

URL_MAP = Map(
    [
        *CONTROL_RULES,
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
        token: str | None = None,
    ) -> None:
        self.service = service
        self.token = token
        self.hold_seconds = hold_seconds
        self.stopping = stopping or threading.Event()
        self.internal_errors = InternalErrors()
        self._views: dict[str, Callable[..., Reply]] = {
            **ControlRoutes(service).views(),
            "token": self._token,
            "data": self._data,
        }

    def __call__(
        self, environ: dict[str, Any], start_response: Callable[..., Any]
    ) -> Iterable[bytes]:
        request = Request(environ)
        try:
            if request.path == PREFIX or request.path.startswith(PREFIX + "/"):
                authorization = request.headers.get("Authorization")
                if not bearer_ok(authorization, self.token):
                    raise ControlUnauthorized(
                        refusal("the metadata service's /_lab/", authorization)
                    )
            endpoint, args = URL_MAP.bind_to_environ(environ).match()
            reply = self._views[endpoint](request, **args)
        except ImdsError as error:
            if error.status >= 500:
                log.warning("%s %s -> %d %s", request.method, request.path, error.status, error)
            response = error_response(error)
            if isinstance(error, ControlUnauthorized):
                response.headers["WWW-Authenticate"] = CHALLENGE
            return response(environ, start_response)
        except HTTPException as error:
            return error(environ, start_response)
        except Exception as exc:  # a bug in the lab: answer 500, keep it for the test
            text = f"{request.method} {request.path}\n" + "".join(traceback.format_exception(exc))
            log.error("imds internal error: %s", text)
            self.internal_errors.record(text)
            return error_response(ImdsError(f"ccm-lab internal error: {exc}"))(
                environ, start_response
            )
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
        if request.method != "GET":
            raise MethodNotAllowed(f"{request.method} /{path}")
        return self.service.get(_caller(request), path, request.headers.get(TOKEN_HEADER))

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
