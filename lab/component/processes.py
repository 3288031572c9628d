"""Process identity and detached spawning: a pid is only ours while its start time matches.

Role: processes the lab started and no longer holds (``invoke lab.up`` returns while the lab
runs on) are named by a :class:`ProcessRef`: the pid *and* the kernel's start time of that pid,
so a signal never reaches an unrelated process that reused the pid after ours died.
:func:`spawn_detached` starts such a process without leaving a ``Popen`` behind.

Neighbours: :mod:`lab.component.child` (the child-process flavour) and ``lab.frontdoor`` (which
stops what ``lab.up`` started, by the refs in ``state.json``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import signal
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)


#: the checkout's root: put first on a child's ``PYTHONPATH`` so ``python -m lab...`` and
#: ``python -m controller`` import this tree whatever the child's working directory
REPO_ROOT = str(Path(__file__).resolve().parents[2])


def with_repo_on_path(env: Mapping[str, str]) -> dict[str, str]:
    """A copy of ``env`` whose ``PYTHONPATH`` starts with :data:`REPO_ROOT`."""
    out = dict(env)
    out["PYTHONPATH"] = os.pathsep.join(p for p in (REPO_ROOT, out.get("PYTHONPATH")) if p)
    return out


def _stat_fields(pid: int) -> list[str] | None:
    """``/proc/<pid>/stat`` fields after the command name (field 3 onwards), or None."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    return stat.rpartition(")")[2].split()


def process_start_time(pid: int) -> int | None:
    """The kernel's start time of ``pid`` (clock ticks since boot), None when it is gone.

    Where ``/proc`` is absent (not Linux) 0 is returned for a live pid: identity then rests on
    the pid alone, which is what every other tool does there.
    """
    fields = _stat_fields(pid)
    if fields is None:
        return 0 if _kill0(pid) else None
    return int(fields[19])  # field 22 of the stat line; fields[0] is field 3 (state)


def _kill0(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def pid_alive(pid: int | None) -> bool:
    """True while ``pid`` runs (a zombie, exited but not reaped, counts as gone)."""
    if not pid or not _kill0(pid):
        return False
    fields = _stat_fields(pid)
    return fields is None or fields[0] != "Z"


@dataclasses.dataclass(frozen=True)
class ProcessRef:
    """A process by pid and start time; ``alive()`` is False once that pid is reused."""

    pid: int
    start_time: int

    @classmethod
    def of(cls, pid: int) -> ProcessRef | None:
        """The process now running as ``pid``, or None."""
        started = process_start_time(pid)
        return None if started is None else cls(pid, started)

    def alive(self) -> bool:
        if not pid_alive(self.pid):
            return False
        return self.start_time == 0 or process_start_time(self.pid) == self.start_time

    def signal(self, sig: signal.Signals, *, group: bool = False) -> bool:
        """Send ``sig`` (to the process group it leads when ``group``) if it is still ours."""
        if not self.alive():
            return False
        with contextlib.suppress(ProcessLookupError):
            if group:
                os.killpg(self.pid, sig)
            else:
                os.kill(self.pid, sig)
        return True

    def terminate(self, *, group: bool = True, timeout: float = 10.0) -> bool:
        """SIGTERM, then SIGKILL after ``timeout``; True when it is gone afterwards.

        For processes this one did not start or no longer holds (a child with a ``Popen`` is
        stopped through it instead, which also reaps it).
        """
        return terminate_ref(self, group=group, timeout=timeout)[0]

    def to_json(self) -> dict[str, int]:
        return {"pid": self.pid, "start_time": self.start_time}

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | None) -> ProcessRef | None:
        if not data or not isinstance(data.get("pid"), int):
            return None
        start = data.get("start_time")
        return cls(int(data["pid"]), int(start) if isinstance(start, int) else 0)


def wait_exit(ref: ProcessRef, timeout: float | None) -> tuple[bool, int | None]:
    """Wait up to ``timeout`` (None: no limit) for ``ref`` to end: (gone, exit code when it
    was our child)."""
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        try:
            pid, status = os.waitpid(ref.pid, os.WNOHANG)
        except ChildProcessError:  # not our child (or reaped already): watch it instead
            if not ref.alive():
                return True, None
        else:
            if pid:
                return True, os.waitstatus_to_exitcode(status)
        if deadline is not None and time.monotonic() >= deadline:
            return False, None
        time.sleep(0.02)


def terminate_ref(ref: ProcessRef, *, group: bool, timeout: float) -> tuple[bool, int | None]:
    ref.signal(signal.SIGTERM, group=group)
    gone, code = wait_exit(ref, timeout)
    if not gone:
        log.warning("process %d ignored SIGTERM for %.1fs; killing", ref.pid, timeout)
        ref.signal(signal.SIGKILL, group=group)
        gone, code = wait_exit(ref, 5.0)
    return gone, code


def spawn_detached(
    argv: Sequence[str], *, log_path: Path, env: Mapping[str, str], stdout: int | None = None
) -> ProcessRef:
    """Start ``argv`` in its own session, output appended to ``log_path`` (mode 0600).

    With ``stdout`` (a pipe's write end) only stderr goes to the log. For processes meant to
    outlive the one starting them (``invoke lab.up`` returns while the lab runs on): no
    ``Popen`` object is left to complain that its child still runs.
    """
    log_path.parent.mkdir(parents=True, exist_ok=True)
    flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND
    actions: list[tuple[Any, ...]] = [(os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0)]
    if stdout is None:
        actions += [
            (os.POSIX_SPAWN_OPEN, 1, str(log_path), flags, 0o600),
            (os.POSIX_SPAWN_DUP2, 1, 2),
        ]
    else:
        actions += [
            (os.POSIX_SPAWN_DUP2, stdout, 1),
            (os.POSIX_SPAWN_OPEN, 2, str(log_path), flags, 0o600),
        ]
    pid = os.posix_spawn(argv[0], list(argv), dict(env), file_actions=actions, setsid=True)
    return ProcessRef.of(pid) or ProcessRef(pid, 0)
