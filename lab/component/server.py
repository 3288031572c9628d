"""The threaded-server flavour of a lab component, and the ``__main__`` skeleton that serves one.

Role: the AWS endpoint, the metadata service and the API simulator are HTTP servers in a
background thread of the process that uses them. :class:`ServerComponent` holds their one
lifecycle: bind (port 0 unless told otherwise) and read the real port back, serve in a thread,
poll ``ready_path`` until it answers 200 (explicit timeout), raise
:class:`~lab.component.base.ComponentNotReady` with the recent log otherwise; ``start()``
returns the component and is idempotent, so is ``stop()``; a context manager. A subclass binds
its server and says where readiness shows. :func:`serve_until_signal` is what
``python -m lab.aws|imds|kube`` run: start, print the ready line, serve until SIGTERM/SIGINT.

Neighbours: :mod:`lab.component.child` runs those ``__main__`` modules as child processes and
reads the ready line.
"""

from __future__ import annotations

import abc
import logging
import signal
import ssl
import sys
import threading
import urllib.error
import urllib.request
from collections.abc import Callable
from http.server import HTTPServer
from types import FrameType
from typing import ClassVar, Self, TypeVar

from lab.component.base import ComponentNotReady, RecentLog, ready_line, wait_until
from lab.component.heap import settle_heap

log = logging.getLogger(__name__)

#: How the components' ``__main__`` modules format their stderr log.
LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


class ServerComponent(abc.ABC):
    """An HTTP server in a background thread (see the module docstring for the contract)."""

    #: Names the component in messages, thread names and its ``__main__``'s ready line.
    what: ClassVar[str]
    #: Loggers whose records a readiness error carries.
    log_names: ClassVar[tuple[str, ...]]
    #: The path that answers 200 once the component serves.
    ready_path: ClassVar[str]

    def __init__(self, *, host: str, port: int, ready_timeout: float) -> None:
        self.host = host
        self.requested_port = port
        self.ready_timeout = ready_timeout
        self._server: HTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._lock = threading.RLock()
        self._recent = RecentLog()

    # -- what a component provides ---------------------------------------------------------

    @abc.abstractmethod
    def _bind(self) -> HTTPServer:
        """Build the serving state and a bound (not yet serving) server; undo both on error."""

    @abc.abstractmethod
    def take_internal_errors(self) -> list[str]:
        """Exceptions caught while serving since the last call (a test should see none)."""

    def _on_ready(self) -> None:
        """After the readiness check passed (e.g. write client configuration)."""
        return None

    def _on_stopping(self) -> None:
        """Before the server shuts down (e.g. release held connections and streams)."""
        return None

    def _release(self) -> None:
        """After the server is closed, or when ``_bind`` failed: drop the serving state."""
        return None

    def _probe_context(self) -> ssl.SSLContext | None:
        """TLS context for the readiness probe (None: plain HTTP)."""
        return None

    def _probe_headers(self) -> dict[str, str]:
        """Headers the readiness probe sends (e.g. the lab's bearer token)."""
        return {}

    @property
    def scheme(self) -> str:
        return "http"

    # -- lifecycle -------------------------------------------------------------------------

    def start(self) -> Self:
        """Bind, serve in a thread and wait for readiness (idempotent)."""
        with self._lock:
            if self._server is not None:
                return self
            self._attach_log(True)
            try:
                server = self._bind()
            except Exception as exc:
                recent = self._recent.text()
                self._release()
                self._attach_log(False)
                where = f"{self.host}:{self.requested_port}"
                raise ComponentNotReady(
                    self.what, f"could not start on {where}: {exc}", log_text=recent
                ) from exc
            self._server = server
            self._thread = threading.Thread(
                target=server.serve_forever,
                kwargs={"poll_interval": 0.05},  # what shutdown() waits for at most
                name=f"{self.what}-{server.server_port}",
                daemon=True,
            )
            self._thread.start()
        try:
            self._wait_ready()
            self._on_ready()
        except BaseException:
            self.stop()
            raise
        log.info("%s ready at %s", self.what, self.url)
        return self

    def _wait_ready(self) -> None:
        url = self.url + self.ready_path
        context = self._probe_context()
        probe = urllib.request.Request(url, headers=self._probe_headers())
        last = "no answer yet"

        def ready() -> bool:
            nonlocal last
            try:
                with urllib.request.urlopen(probe, timeout=1.0, context=context) as reply:
                    return int(reply.status) == 200
            except (urllib.error.URLError, OSError) as exc:
                last = str(exc)
                return False

        if not wait_until(ready, timeout=self.ready_timeout):
            raise ComponentNotReady(
                self.what,
                f"{url} did not answer 200 within {self.ready_timeout}s ({last})",
                log_text=self._recent.text(),
            )

    def stop(self) -> None:
        """Shut the server down and release the port (idempotent)."""
        with self._lock:
            server, thread = self._server, self._thread
            self._server = self._thread = None
            if server is None:
                return
            self._on_stopping()
            server.shutdown()
            server.server_close()
            if thread is not None:
                thread.join(timeout=10)
            self._release()
            self._attach_log(False)

    def _attach_log(self, attach: bool) -> None:
        for name in self.log_names:
            logger = logging.getLogger(name)
            if attach:
                logger.addHandler(self._recent)
            else:
                logger.removeHandler(self._recent)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- access ----------------------------------------------------------------------------

    @property
    def running(self) -> bool:
        return self._server is not None

    @property
    def port(self) -> int:
        server = self._server
        if server is None:
            raise RuntimeError(f"{type(self).__name__} is not started")
        return int(server.server_port)

    @property
    def url(self) -> str:
        return f"{self.scheme}://{self.host}:{self.port}"


C = TypeVar("C", bound=ServerComponent)


def serve_until_signal(
    build: Callable[[], C],
    *,
    log_level: str = "WARNING",
    on_ready: Callable[[C], object] | None = None,
) -> int:
    """The ``__main__`` of a server component.

    Log to stderr at ``log_level``, build the component, start it, run ``on_ready``, print the
    ready line, serve until SIGTERM or SIGINT, stop. Exit status: 0 after a clean stop, 1 when
    the component never became ready, 2 when it could not be built (a bad argument).
    """
    logging.basicConfig(level=log_level.upper(), stream=sys.stderr, format=LOG_FORMAT)
    try:
        component = build()
    except ValueError as exc:
        log.error("%s", exc)
        return 2
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        log.info("signal %s: shutting down", signum)
        stop.set()

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        try:
            component.start()
        except ComponentNotReady as exc:
            log.error("%s", exc)
            return 1
        try:
            if on_ready is not None:
                on_ready(component)
            if not stop.is_set():
                print(ready_line(component.what, component.url), flush=True)
            # the start's objects live as long as the server: no collection walks them again
            # (after the ready line, so whoever waits for it does not wait for this too)
            settle_heap()
            stop.wait()
        finally:
            component.stop()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return 0
