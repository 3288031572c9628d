"""Start ``python -m <module>`` processes by forking a server that has already imported it.

Role: a Python program that imports a lot (the controller: botocore, the Kubernetes client,
prometheus_client) spends most of its start in ``import``; a harness that restarts it dozens of
times (the e2e catalog starts our controller about fifty times) pays that every time. A
:class:`ForkServer` is one helper process that imports the named modules once and then, per
request, forks a child that runs ``<module>`` as ``__main__`` with the argv, environment, log
file and working directory of the request, exactly as ``python -m <module> ...`` would from
there on. :class:`ForkedProcess` is the caller's handle, shaped like the ``subprocess.Popen``
methods :class:`~lab.component.child.ChildProcess` uses (``pid``, ``poll``, ``wait``,
``returncode``), so a component chooses fork or exec without anything else changing.

What differs from a fresh ``exec`` (how a caller notices; lab/README.md lists it): the child's
parent is the server, not the caller (the caller learns the exit code from the server over the
request's socket); its command line (``ps``, ``/proc/<pid>/cmdline``) is the server's; modules
imported before the fork saw the server's environment at import time, not the request's (the
environment is replaced before ``<module>`` runs, which is what reads it); every child shares
the server's string-hash seed (``PYTHONHASHSEED``), so set iteration orders repeat between runs;
interpreter options (``-X``, ``-W``, ``PYTHON*`` variables that act at start-up) are the
server's. The child leads its own session, its stdin is ``/dev/null``, stdout and stderr append
to the request's log file, its umask is the caller's, ``random`` is re-seeded (CPython does that
after every fork).

The server is single-threaded (forking a threaded process is unsafe): one ``selectors`` loop
accepts requests on a Unix socket in a private directory (0700), forks, answers
``{"pid": N}``, reaps children and answers ``{"exit": code}`` on the same connection. It exits
on SIGTERM or SIGINT, or when the process that started it is gone; children outlive it (they
are their callers' to stop). Protocol: one JSON object per line, both ways.

Neighbours: :mod:`lab.component.child` (``ChildProcess(..., launcher=...)``) and
``lab.controllerproc`` (the controller's launcher). A bottom-layer module: nothing of the lab.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import json
import os
import runpy
import selectors
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from lab.component.base import tail
from lab.component.heap import collector_paused, settle_heap
from lab.component.processes import pid_alive, with_repo_on_path

READY_PREFIX = "ccm-lab forkserver ready at "
#: a child's exit code when the server exited first (nobody reaped it for us to ask)
UNKNOWN_EXIT = 255


# --- the server (runs in its own process: ``python -m lab.component.forkserver``) ------------


def _child(request: Mapping[str, Any], started: int, inherited: Sequence[Any]) -> None:
    """In the forked child: become ``python -m <module> <args>``; never returns."""
    code = 1
    try:
        for obj in inherited:  # the server's selector and sockets are not the child's
            obj.close()
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        os.setsid()
        os.close(started)  # the server answers the caller now
        null = os.open(os.devnull, os.O_RDONLY)
        out = os.open(request["log_path"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        os.dup2(null, 0)
        os.dup2(out, 1)
        os.dup2(out, 2)
        os.close(null)
        os.close(out)
        os.umask(request.get("umask", 0o022))
        os.environ.clear()
        os.environ.update(request["env"])
        if request.get("cwd"):
            os.chdir(request["cwd"])
        sys.stdout.reconfigure(line_buffering=True)  # type: ignore[union-attr]
        sys.argv = [request["module"], *request["args"]]
        runpy.run_module(request["module"], run_name="__main__", alter_sys=True)
        code = 0
    except SystemExit as exc:
        if exc.code is None:
            code = 0
        elif isinstance(exc.code, int):
            code = exc.code
        else:
            print(exc.code, file=sys.stderr)
            code = 1
    except BaseException:
        traceback.print_exc()
        code = 1
    finally:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code)


def _send(conn: socket.socket, message: Mapping[str, Any]) -> None:
    with contextlib.suppress(OSError):
        conn.sendall(json.dumps(message).encode() + b"\n")


def serve(socket_path: str, preload: Sequence[str]) -> int:
    """Import ``preload``, print the ready line, serve until told to stop."""
    with collector_paused():  # the heap only grows meanwhile: nothing to collect
        for name in preload:
            importlib.import_module(name)
    # What the preload made lives as long as every child: out of the collector's sight, a
    # child's first full collection does not walk (and copy, page by page) the whole heap.
    settle_heap()
    parent = os.getppid()
    stop = False

    def on_signal(_signum: int, _frame: object) -> None:
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(socket_path)
    listener.listen(16)
    print(READY_PREFIX + socket_path, flush=True)
    with selectors.DefaultSelector() as selector:
        selector.register(listener, selectors.EVENT_READ)
        server = _Server(listener, selector)
        while not stop and os.getppid() == parent:
            for key, _ in selector.select(timeout=0.02):
                if key.fileobj is listener:
                    server.accept()
                else:
                    server.read(key.fileobj)  # type: ignore[arg-type]
            server.reap()
    listener.close()
    for conn in server.waiting.values():
        conn.close()
    return 0


class _Server:
    """The fork server's connections: callers' requests being read, and the callers waiting
    for the exit status of the child each asked for."""

    def __init__(self, listener: socket.socket, selector: selectors.BaseSelector) -> None:
        self.listener = listener
        self.selector = selector
        self.waiting: dict[int, socket.socket] = {}  # child pid -> the connection that asked
        self.buffers: dict[socket.socket, bytes] = {}

    def accept(self) -> None:
        conn, _addr = self.listener.accept()
        self.buffers[conn] = b""
        self.selector.register(conn, selectors.EVENT_READ)

    def read(self, conn: socket.socket) -> None:
        """Read what ``conn`` sent; a whole request line starts its child."""
        chunk = b""
        with contextlib.suppress(OSError):
            chunk = conn.recv(1 << 20)
        if not chunk:  # the caller let go of its handle (or never asked)
            self.selector.unregister(conn)
            self.buffers.pop(conn, None)
            conn.close()
            return
        self.buffers[conn] += chunk
        if b"\n" not in self.buffers[conn]:
            return
        line = self.buffers.pop(conn).split(b"\n", 1)[0]
        self.selector.unregister(conn)
        self._fork(conn, line)

    def _fork(self, conn: socket.socket, line: bytes) -> None:
        try:
            request = json.loads(line)
            started_r, started_w = os.pipe()
            pid = os.fork()
        except (ValueError, OSError) as exc:
            _send(conn, {"error": f"{type(exc).__name__}: {exc}"})
            conn.close()
            return
        if pid == 0:
            os.close(started_r)
            inherited = [self.selector, self.listener, conn, *self.waiting.values()]
            _child(request, started_w, [*inherited, *self.buffers])
        # answer once the child leads its own session, so the caller can signal its process
        # group straight away
        os.close(started_w)
        os.read(started_r, 1)
        os.close(started_r)
        self.waiting[pid] = conn
        _send(conn, {"pid": pid})

    def reap(self) -> None:
        """Reap every child that ended, answering whoever asked for it."""
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            asker = self.waiting.pop(pid, None)
            if asker is not None:
                _send(asker, {"exit": os.waitstatus_to_exitcode(status)})
                asker.close()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m lab.component.forkserver", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--socket", required=True, help="Unix socket path to listen on")
    parser.add_argument(
        "--preload", action="append", default=[], help="a module to import before serving"
    )
    args = parser.parse_args(argv)
    return serve(args.socket, args.preload)


# --- the caller's side ------------------------------------------------------------------------


class ForkServerError(RuntimeError):
    """The fork server could not be started or did not answer a request."""


class ForkedProcess:
    """A child the fork server started for us: the ``Popen`` methods ``ChildProcess`` uses."""

    def __init__(self, conn: socket.socket, pid: int, argv: Sequence[str]) -> None:
        self._conn = conn
        self._buffer = b""
        self.pid = pid
        self.args = list(argv)
        #: the exit code as ``Popen`` reports it (negative: killed by that signal);
        #: :data:`UNKNOWN_EXIT` when the server exited before the child did
        self.returncode: int | None = None
        self._server_gone = False

    def _read(self, timeout: float) -> None:
        """Take the server's ``{"exit": code}`` if it comes within ``timeout`` seconds."""
        if self.returncode is not None:
            return
        if self._server_gone:  # nobody will tell us: watch the pid instead
            if not pid_alive(self.pid):
                self.returncode = UNKNOWN_EXIT
            else:
                time.sleep(min(timeout, 0.02))
            return
        self._conn.settimeout(timeout)
        try:
            while b"\n" not in self._buffer:
                chunk = self._conn.recv(4096)
                if not chunk:
                    self._server_gone = True
                    self._conn.close()
                    return
                self._buffer += chunk
        except (TimeoutError, BlockingIOError):
            return
        message = json.loads(self._buffer.split(b"\n", 1)[0])
        self.returncode = int(message["exit"])
        self._conn.close()

    def release(self) -> None:
        """Let go of the child: its exit code is nobody's to learn (a detached process,
        watched by its pid and start time from now on)."""
        self._server_gone = True
        self._conn.close()

    def poll(self) -> int | None:
        self._read(0.0)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.returncode is None:
            remaining = 0.5 if deadline is None else deadline - time.monotonic()
            if remaining <= 0:
                raise subprocess.TimeoutExpired(self.args, timeout or 0.0)
            self._read(min(remaining, 0.5))
        return self.returncode


def _current_umask() -> int:
    """This process's umask (which an exec'd child would inherit)."""
    mask = os.umask(0o077)
    os.umask(mask)
    return mask


class ForkServer:
    """One fork server process, started on first use (see the module docstring)."""

    def __init__(self, preload: Sequence[str], *, ready_timeout: float = 30.0) -> None:
        self.preload = tuple(preload)
        self.ready_timeout = ready_timeout
        self._lock = threading.Lock()
        self._proc: subprocess.Popen[bytes] | None = None
        self._dir: tempfile.TemporaryDirectory[str] | None = None
        self._socket = ""  # set once the server said it is ready
        self._pending = ""  # the socket of the server launched last
        self._log: Path | None = None

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def launch(self) -> None:
        """Start the server now without waiting for it (its imports overlap what the caller
        does meanwhile); the first :meth:`spawn` waits for its ready line. Idempotent."""
        with self._lock:
            self._launch()

    def _launch(self) -> subprocess.Popen[bytes]:
        if self._proc is not None and self._proc.poll() is None:
            return self._proc
        self._close()
        self._dir = tempfile.TemporaryDirectory(prefix="ccm-lab-forkserver-")
        path = str(Path(self._dir.name) / "sock")
        env = with_repo_on_path(os.environ)
        cmd = [sys.executable, "-m", "lab.component.forkserver", "--socket", path]
        for name in self.preload:
            cmd += ["--preload", name]
        self._log = Path(self._dir.name) / "server.log"
        with open(self._log, "ab") as errors:
            self._proc = subprocess.Popen(
                cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=errors, env=env
            )
        self._socket = ""
        self._pending = path
        return self._proc

    def _ensure(self) -> str:
        with self._lock:
            proc = self._launch()
            if self._socket:
                return self._socket
            assert proc.stdout is not None
            assert self._log is not None
            with selectors.DefaultSelector() as sel:
                sel.register(proc.stdout, selectors.EVENT_READ)
                if not sel.select(timeout=self.ready_timeout):
                    errors_text = tail(self._log)
                    self._close()
                    raise ForkServerError(
                        f"no ready line within {self.ready_timeout:.0f}s; its log:\n{errors_text}"
                    )
            line = proc.stdout.readline().decode(errors="replace").strip()
            if not line.startswith(READY_PREFIX):
                code = proc.wait(5)
                errors_text = tail(self._log)
                self._close()
                raise ForkServerError(
                    f"did not start (exit {code}; first line {line!r}); preload "
                    f"{', '.join(self.preload)}; its log:\n{errors_text}"
                )
            proc.stdout.close()
            self._socket = self._pending
            return self._socket

    def spawn(
        self,
        module: str,
        args: Sequence[str],
        *,
        env: Mapping[str, str],
        log_path: Path,
        cwd: Path | None = None,
    ) -> ForkedProcess:
        """Fork a child running ``python -m module args`` (see the module docstring)."""
        path = self._ensure()
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            conn.settimeout(self.ready_timeout)
            conn.connect(path)
            request = {
                "module": module,
                "args": list(args),
                "env": dict(env),
                "log_path": str(log_path),
                "cwd": str(cwd) if cwd else "",
                "umask": _current_umask(),
            }
            conn.sendall(json.dumps(request).encode() + b"\n")
            buffer = b""
            while b"\n" not in buffer:
                chunk = conn.recv(4096)
                if not chunk:
                    raise ForkServerError("the fork server closed the request unanswered")
                buffer += chunk
        except OSError as exc:
            conn.close()
            raise ForkServerError(f"the fork server did not answer: {exc}") from exc
        line, rest = buffer.split(b"\n", 1)
        answer = json.loads(line)
        if "pid" not in answer:
            conn.close()
            raise ForkServerError(f"the fork server refused: {answer.get('error')}")
        handle = ForkedProcess(conn, int(answer["pid"]), [sys.executable, "-m", module, *args])
        handle._buffer = rest
        return handle

    def _close(self) -> None:
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)
        if proc is not None and proc.stdout is not None and not proc.stdout.closed:
            proc.stdout.close()
        if self._dir is not None:
            self._dir.cleanup()
            self._dir = None

    def stop(self) -> None:
        """Stop the server (its children run on); idempotent."""
        with self._lock:
            self._close()


if __name__ == "__main__":
    sys.exit(main())
