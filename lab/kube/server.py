"""HTTP/1.1 transport and the :class:`KubeServer` component.

A stdlib ``ThreadingHTTPServer`` (one thread per connection, persistent connections,
``Content-Length`` replies, chunked watch streams flushed per event, optional TLS) in front of
``handlers.Api``. :class:`KubeServer` is the lab component, with the lifecycle of
:class:`lab.component.ServerComponent` (port 0, readiness on ``/readyz`` with an explicit
timeout, idempotent stop, handler exceptions handed out by ``take_internal_errors``), plus
kubeconfig generation, a typed control client and a ready-made ``kubernetes.client.ApiClient``.
``process.KubeProcess`` runs it as a child process (``__main__.py``).

The transport enforces kube-apiserver's limits the way Go's ``net/http`` and the apiserver's
``limitedReadBody`` do: a 3 MiB body limit (413, then close), a plain 400 and close for a bad
``Content-Length``, the chunked reader's error for bad framing; the door itself (deadlines for
the head and the body, the TLS handshake in each connection's thread, strict request lines and
headers, Go's 501 for a transfer coding other than chunked) is :mod:`lab.component.transport`.
"""

from __future__ import annotations

import base64
import contextlib
import json
import logging
import secrets
import select
import socket
import ssl
import sys
import tempfile
from collections.abc import Iterable, Iterator
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any

import yaml

from lab.component import ServerComponent
from lab.component.bearer import auth_headers
from lab.component.transport import Deadlines, GuardedHandler
from lab.kube import exceptions as E
from lab.kube.control_client import KubeControlClient
from lab.kube.handlers import Api
from lab.kube.registry import Registry
from lab.kube.store import WatchWindow
from lab.kube.tls import ServingCerts, make_certs
from lab.kube.watch import dumps
from lab.kube.wire import Request
from lab.versions.release import DEFAULT_K8S_VERSION

log = logging.getLogger(__name__)


# kube-apiserver's --max-request-bytes default (3 MiB): larger bodies get 413 unread
MAX_BODY_BYTES = 3 * 1024 * 1024
_TOO_LARGE = ("RequestEntityTooLarge", f"Request entity too large: limit is {MAX_BODY_BYTES}")


class _BodyError(Exception):
    def __init__(self, code: int, reason: str, message: str) -> None:
        super().__init__(message)
        self.code, self.reason, self.message = code, reason, message


class _Handler(GuardedHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body leave together; no 40 ms delayed-ACK stalls
    wbufsize = 64 * 1024
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("%s %s", self.address_string(), format % args)

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        """What the stdlib refuses while reading the request line and headers (a line over
        64 KiB, over 100 headers) is answered as Go's net/http answers a request it cannot
        read: plain text, then close. Go's only header-size answer is 431 (past
        ``MaxHeaderBytes``), so the stdlib's 414 becomes 431 too."""
        if code in (400, 414, 431):
            self.refuse(431 if code == 414 else code)
            return
        super().send_error(code, message, explain)

    def unknown_method(self) -> None:
        """A method Go's net/http lets through (a valid token: ``OPTIONS``, ``FOO``, ``get``)
        reaches kube-apiserver's handler chain, which answers it (405 on a resource)."""
        self._serve()

    def _read_body(self) -> bytes:
        """The request body, at most MAX_BODY_BYTES; :class:`_BodyError` when it cannot be read
        or is too large (kube-apiserver's limitedReadBody)."""
        limit = MAX_BODY_BYTES
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            chunks: list[bytes] = []
            total = 0
            while True:
                line = self.rfile.readline(1024).split(b";")[0].strip()
                try:
                    if not line or not all(c in b"0123456789abcdefABCDEF" for c in line):
                        raise ValueError
                    size = int(line, 16)
                except ValueError:
                    raise _BodyError(500, "", "invalid byte in chunk length") from None
                if size == 0:
                    while self.rfile.readline(1024) not in (b"\r\n", b"\n", b""):
                        pass  # trailers
                    break
                total += size
                if total > limit:
                    raise _BodyError(413, *_TOO_LARGE)
                chunk = self.rfile.read(size)
                if len(chunk) < size or self.rfile.readline(1024) not in (b"\r\n", b"\n"):
                    raise _BodyError(500, "", "unexpected EOF")
                chunks.append(chunk)
            return b"".join(chunks)
        length = self.content_length()
        if length > limit:
            raise _BodyError(413, *_TOO_LARGE)
        data = self.rfile.read(length) if length else b""
        if len(data) < length:
            raise _BodyError(500, "", "unexpected EOF")
        return data

    def _alive(self) -> bool:
        """False once the client has gone (used to end idle watch streams early)."""
        sock = self.connection
        try:
            readable, _, _ = select.select([sock], [], [], 0)
            if not readable:
                return True
            if not isinstance(sock, ssl.SSLSocket):
                return bool(sock.recv(1, socket.MSG_PEEK))
            # a watch client sends nothing but a close; peeking is not possible under TLS
            sock.setblocking(False)
            try:
                return bool(sock.recv(1))
            except ssl.SSLWantReadError:
                return True
            finally:
                sock.setblocking(True)
        except (OSError, ValueError):
            return False

    def _serve(self) -> None:
        # Content-Length and Transfer-Encoding were checked at the door (GuardedHandler)
        if self.headers.get("Transfer-Encoding") and self.headers.get("Content-Length"):
            return self.refuse(400)
        try:
            body = self._read_body()
        except _BodyError as err:  # answered as a Status; what is left of the body is unread
            self._refuse_body(err)
            return
        host = self.server.server_address
        host_s = host[0].decode() if isinstance(host[0], bytes) else host[0]
        req = Request(
            method=self.command,
            target=self.path,
            headers=_first_values(self.headers.items()),
            body=body,
            server_address=f"{host_s}:{host[1]}",
            alive=self._alive,
        )
        resp = self.server.api.handle(req)
        self.send_response(resp.status)
        self.send_header("Content-Type", resp.content_type)
        self.send_header("Cache-Control", "no-cache, private")
        self.send_header("Audit-Id", secrets.token_hex(8))
        for k, v in resp.headers.items():
            self.send_header(k, v)
        if resp.stream is None:
            self.send_header("Content-Length", str(len(resp.body)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(resp.body)
            return
        self._write_stream(req, resp.stream)

    def _refuse_body(self, err: _BodyError) -> None:
        """Answer a body that could not be read with its Status and close the connection."""
        self.close_connection = True
        status = E.ApiError(err.code, err.reason, err.message).status()
        payload = dumps(status) + b"\n"
        self.send_response(err.code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(payload)
        self.drain(8 * MAX_BODY_BYTES)

    def _write_stream(self, req: Request, stream: Iterator[bytes]) -> None:
        """A streamed answer (a watch, logs) in HTTP chunks, one per piece the stream yields;
        a client that went away or a bug while streaming drops the connection."""
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        self.wfile.flush()
        try:
            for chunk in stream:
                self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                self.wfile.flush()
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError, ssl.SSLError, OSError):
            self.close_connection = True
        except Exception as exc:  # a bug while streaming: record it, drop the connection
            self.server.api.record_error(req, exc)
            self.close_connection = True
        finally:
            close = getattr(stream, "close", None)
            if close is not None:
                close()

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = _serve


def _first_values(items: Iterable[tuple[str, str]]) -> dict[str, str]:
    """Headers by lower-case name, the first value of a repeated one (Go's ``Header.Get``:
    of two ``Authorization`` headers, the first is the one authenticated)."""
    headers: dict[str, str] = {}
    for name, value in items:
        headers.setdefault(name.lower(), value)
    return headers


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128

    def __init__(self, address: tuple[str, int], api: Api, *, deadlines: Deadlines) -> None:
        self.api = api
        self.deadlines = deadlines
        #: set for HTTPS: each connection's thread runs its own handshake (GuardedHandler)
        self.tls_context: ssl.SSLContext | None = None
        super().__init__(address, _Handler)

    def handle_error(self, request: Any, client_address: Any) -> None:
        exc = sys.exc_info()[1]
        if exc is None or isinstance(exc, OSError):
            return  # a client went away mid-request
        self.api.record_error(Request("?", "?", {}), exc)


class KubeServer(ServerComponent):
    """The embedded API server as a lab component.

    ``with KubeServer() as kube: client = kube.api_client()``. ``version`` is the Kubernetes
    version ``/version`` and the OpenAPI documents report. ``tls=True`` serves HTTPS with a
    fresh CA and requires a bearer token (both in the kubeconfig; ``token`` or a fresh one).
    ``control_token`` is what ``/_lab`` requires (default: ``token``), so a lab can keep its
    control plane closed on a simulator whose API is open (plain HTTP, no token).
    ``state_file`` loads state at start when the file exists and saves it at stop.
    ``fake_kubelet=True`` confirms graceful pod deletion at once (there is no kubelet to do it).
    ``authorization`` is ``"allow"`` (AlwaysAllow, the default) or ``"rbac"`` (the stored RBAC
    objects decide; ``auth.py``).
    """

    what = "kube simulator"
    log_names = ("lab.kube",)
    ready_path = "/readyz"

    def __init__(
        self,
        *,
        version: str = DEFAULT_K8S_VERSION,
        host: str = "127.0.0.1",
        port: int = 0,
        tls: bool = False,
        token: str | None = None,
        control_token: str | None = None,
        state_file: str | Path | None = None,
        service_cidr: str = "10.96.0.0/16",
        node_port_range: tuple[int, int] = (30000, 32767),
        history: int = 20000,
        window: WatchWindow | None = None,
        fake_kubelet: bool = False,
        workdir: str | Path | None = None,
        ready_timeout: float = 10.0,
        read_timeout: float = 32.0,
        idle_timeout: float = 90.0,
        body_timeout: float | None = None,
        authorization: str = "allow",
    ) -> None:
        super().__init__(host=host, port=port, ready_timeout=ready_timeout)
        #: what a client has for a request's line and headers (and a TLS handshake), its body
        #: (default: as long as for the head), and between requests: deadlines, whatever its
        #: pace (lab.component.transport)
        body = read_timeout if body_timeout is None else body_timeout
        self.deadlines = Deadlines(header=read_timeout, body=body, idle=idle_timeout)
        self.version = version
        self.tls = tls
        self.token = token if token is not None else (secrets.token_urlsafe(24) if tls else None)
        #: what ``/_lab`` requires: the lab's token, also on a simulator whose API is open
        self.control_token = control_token if control_token is not None else self.token
        self.state_file = Path(state_file) if state_file else None
        self.store = Registry(
            service_cidr=service_cidr,
            node_port_range=node_port_range,
            history=history,
            window=window,
            fake_kubelet=fake_kubelet,
        )
        self.api = Api(
            self.store,
            token=self.token,
            control_token=self.control_token,
            version=version,
            authorization=authorization,
        )
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        self._workdir = Path(workdir) if workdir else None
        self._certs: ServingCerts | None = None
        self._kubeconfig: Path | None = None
        self._clients: list[Any] = []

    @property
    def workdir(self) -> Path:
        if self._workdir is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="ccm-lab-kube-")
            self._workdir = Path(self._tmp.name)
        self._workdir.mkdir(parents=True, exist_ok=True)
        return self._workdir

    # ------------------------------------------------------------------ lifecycle
    def _bind(self) -> _Server:
        if self.state_file and self.state_file.exists():
            self.store.load(json.loads(self.state_file.read_text()))
        self.api.stopping.clear()
        server = _Server((self.host, self.requested_port), self.api, deadlines=self.deadlines)
        if self.tls:
            try:
                self._certs = make_certs((self.host, "localhost"))
                _, cert, key = self._certs.write(self.workdir / "pki")
                ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
                ctx.load_cert_chain(str(cert), str(key))
                server.tls_context = ctx  # the handshake is each connection's, off the accept path
            except BaseException:
                server.server_close()
                raise
            self.store.ca_pem = self._certs.ca_pem.decode()
        self.store.publish_ca()
        return server

    @property
    def scheme(self) -> str:
        return "https" if self.tls else "http"

    def _probe_context(self) -> ssl.SSLContext | None:
        if self._certs is None:
            return None
        return ssl.create_default_context(cadata=self._certs.ca_pem.decode())

    def _probe_headers(self) -> dict[str, str]:
        return auth_headers(self.token)

    def _on_ready(self) -> None:
        self._kubeconfig = self.write_kubeconfig(self.workdir / "kubeconfig")

    def _on_stopping(self) -> None:
        self.api.stopping.set()
        self.store.close_watches()

    def _release(self) -> None:
        for client in self._clients:
            with contextlib.suppress(Exception):
                client.close()
        self._clients.clear()
        if self.state_file:
            self.save_state(self.state_file)
        self._kubeconfig = None
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None
            self._workdir = None

    def save_state(self, path: str | Path) -> None:
        target = Path(path)
        tmp = target.with_suffix(target.suffix + ".tmp")
        tmp.write_text(json.dumps(self.store.dump()))
        tmp.replace(target)

    def attach_lab(self, holder: str | None) -> None:
        """A lab's stand-ins run against this simulator (``holder`` names it; None: no longer):
        ``/_lab/reset`` is refused meanwhile (``control.py``)."""
        self.api.control.attach(holder)

    def take_internal_errors(self) -> list[str]:
        return self.api.errors.take()

    def internal_errors(self) -> list[str]:
        """The handler exceptions caught so far, without forgetting them."""
        return self.api.errors.peek()

    # ------------------------------------------------------------------ endpoints
    @property
    def kubeconfig_path(self) -> Path:
        if self._kubeconfig is None:
            raise RuntimeError("KubeServer is not started")
        return self._kubeconfig

    @property
    def ca_pem(self) -> bytes | None:
        return self._certs.ca_pem if self._certs else None

    def kubeconfig(self) -> dict[str, Any]:
        cluster: dict[str, Any] = {"server": self.url}
        if self._certs is not None:
            cluster["certificate-authority-data"] = base64.b64encode(self._certs.ca_pem).decode()
        user: dict[str, Any] = {"token": self.token} if self.token else {}
        return {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "ccm-lab-sim", "cluster": cluster}],
            "contexts": [
                {
                    "name": "ccm-lab-sim",
                    "context": {
                        "cluster": "ccm-lab-sim",
                        "user": "ccm-lab-admin",
                        "namespace": "default",
                    },
                }
            ],
            "current-context": "ccm-lab-sim",
            "users": [{"name": "ccm-lab-admin", "user": user}],
            "preferences": {},
        }

    def write_kubeconfig(self, path: str | Path) -> Path:
        target = Path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(yaml.safe_dump(self.kubeconfig(), sort_keys=False))
        target.chmod(0o600)
        return target

    @property
    def control(self) -> KubeControlClient:
        ca_file = None
        if self._certs is not None:
            ca_file = str(self.workdir / "pki" / "ca.crt")
        return KubeControlClient(self.url, token=self.control_token, ca_file=ca_file)

    def api_client(self) -> Any:
        """A ``kubernetes.client.ApiClient`` for this server (what its kubeconfig says)."""
        ca_file = str(self.workdir / "pki" / "ca.crt") if self._certs is not None else None
        api = new_api_client(self.url, token=self.token, ca_file=ca_file)
        self._clients.append(api)
        return api


def new_api_client(url: str, *, token: str | None, ca_file: str | None) -> Any:
    """A ``kubernetes.client.ApiClient`` for a simulator at ``url`` (bearer token, CA file)."""
    from kubernetes import client

    configuration = client.Configuration(host=url)
    if token:
        configuration.api_key = {"authorization": f"Bearer {token}"}
    if ca_file is not None:
        configuration.ssl_ca_cert = ca_file
    return client.ApiClient(configuration)
