"""The parts every lab component shares: the readiness error, recent logs, caught errors.

Role: :class:`ComponentNotReady` is the one exception a component raises when it does not
become ready in time (or dies first); it carries the component's recent log (a
:class:`RecentLog` of its loggers for a thread, the tail of its log file for a process).
:class:`InternalErrors` collects the exceptions a server caught while serving, which a test
fixture takes after each test so a component bug fails the test that hit it.

Neighbours: used by :mod:`lab.component.server` and :mod:`lab.component.child`.
"""

from __future__ import annotations

import collections
import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path


class ComponentNotReady(RuntimeError):
    """A component did not become ready in time (or died first); carries its recent log."""

    def __init__(self, what: str, reason: str, *, log_text: str, log_path: Path | None = None):
        source = f"log {log_path}" if log_path is not None else "recent log"
        super().__init__(f"{what} not ready: {reason}; {source}:\n{log_text}")
        self.what = what
        self.reason = reason
        self.log = log_text
        self.log_path = log_path


class RecentLog(logging.Handler):
    """Keeps the last ``size`` records of the loggers it is added to, as text."""

    def __init__(self, size: int = 200) -> None:
        super().__init__(logging.DEBUG)
        self.lines: collections.deque[str] = collections.deque(maxlen=size)
        self.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(self.format(record))

    def text(self) -> str:
        return "\n".join(self.lines) or "(no log records)"


class InternalErrors:
    """Exceptions a component caught while serving (its own bugs); thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._items: list[str] = []

    def record(self, text: str) -> None:
        with self._lock:
            self._items.append(text)

    def peek(self) -> list[str]:
        with self._lock:
            return list(self._items)

    def take(self) -> list[str]:
        """Every recorded error, forgetting them."""
        with self._lock:
            items, self._items = self._items, []
        return items

    def clear(self) -> None:
        self.take()


def tail(path: Path | None, lines: int = 40) -> str:
    """The last ``lines`` lines of a log file, or a note saying why there are none."""
    if path is None:
        return "(no log file)"
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        return f"(log {path} unreadable: {exc})"
    return "\n".join(text.splitlines()[-lines:]) or "(empty log)"


def wait_until(predicate: Callable[[], object], *, timeout: float, interval: float = 0.02) -> bool:
    """Poll ``predicate`` until it is truthy (True) or ``timeout`` seconds pass (False)."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() >= deadline:
            return False
        time.sleep(interval)
    return True


def ready_line(what: str, url: str) -> str:
    """The one line a component's ``__main__`` prints on stdout once it serves."""
    return f"ccm-lab {what} ready at {url}"
