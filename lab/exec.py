"""The one door through which the lab runs external commands (kind, docker, kubectl).

Every call site builds an argument list and hands it to a :class:`Runner`; nothing in the lab
calls :mod:`subprocess` directly and nothing ever uses ``shell=True``. A runner always has a
timeout, always captures output, and raises :class:`CommandError` whose message is a
shell-quoted command a user can paste into a terminal followed by the tail of its output (the
habit kind's ``pkg/exec.RunError`` taught: a failed step must say exactly what was run).

Two runners ship:

* :class:`SubprocessRunner`: the real thing, with an optional base environment (tests put a
  directory of fake ``kind``/``docker`` scripts first on ``PATH`` through it).
* :class:`RecordingRunner`: the dry-run/recording hook. It records every argv and answers from
  canned :class:`Reply` rules, so provider code can be exercised without spawning anything.

Neighbours: ``lab.cluster.*`` (providers and their steps) receive a runner by injection; the
task layer (``tasks.py``) uses the default :class:`SubprocessRunner`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import shlex
import signal
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Protocol

log = logging.getLogger(__name__)

#: How many trailing output lines a :class:`CommandError` message carries.
OUTPUT_TAIL_LINES = 25
#: Default timeout (seconds) when a call site does not pass one.
DEFAULT_TIMEOUT = 60.0


@dataclasses.dataclass(frozen=True)
class CommandResult:
    """What a finished command produced."""

    argv: tuple[str, ...]
    returncode: int
    stdout: str = ""
    stderr: str = ""
    duration: float = 0.0

    @property
    def ok(self) -> bool:
        return self.returncode == 0


def pasteable(argv: Sequence[str], *, env: Mapping[str, str] | None = None) -> str:
    """Render ``argv`` (and any extra environment) as one line a POSIX shell runs as-is."""
    prefix = " ".join(f"{k}={shlex.quote(v)}" for k, v in sorted((env or {}).items()))
    cmd = shlex.join(argv)
    return f"{prefix} {cmd}" if prefix else cmd


def _tail(text: str, lines: int = OUTPUT_TAIL_LINES) -> str:
    parts = text.rstrip("\n").splitlines()
    if len(parts) <= lines:
        return "\n".join(parts)
    return "\n".join([f"[... {len(parts) - lines} earlier lines]", *parts[-lines:]])


class CommandError(Exception):
    """An external command failed, timed out, or could not be started.

    ``str(error)`` is the pasteable command line followed by the tail of stdout and stderr.
    """

    def __init__(
        self,
        argv: Sequence[str],
        *,
        returncode: int | None,
        stdout: str = "",
        stderr: str = "",
        reason: str = "",
        env: Mapping[str, str] | None = None,
    ) -> None:
        self.argv = tuple(argv)
        self.returncode = returncode
        self.stdout = stdout
        self.stderr = stderr
        self.reason = reason or (
            f"exited with status {returncode}" if returncode is not None else "failed"
        )
        self.command = pasteable(argv, env=env)
        super().__init__(self._message())

    @property
    def timed_out(self) -> bool:
        return self.reason.startswith("timed out")

    def _message(self) -> str:
        lines = [f"command {self.reason}:", f"  $ {self.command}"]
        for label, text in (("stdout", self.stdout), ("stderr", self.stderr)):
            if text.strip():
                lines.append(f"--- {label} (tail) ---")
                lines.append(_tail(text))
        return "\n".join(lines)


class Runner(Protocol):
    """Runs one argument list. Implementations never go through a shell."""

    def run(
        self,
        argv: Sequence[str],
        *,
        timeout: float = DEFAULT_TIMEOUT,
        check: bool = True,
        input_text: str | None = None,
        env: Mapping[str, str] | None = None,
        cwd: Path | None = None,
    ) -> CommandResult: ...


def _validate_argv(argv: Sequence[str]) -> tuple[str, ...]:
    if isinstance(argv, str):
        raise TypeError(f"argv must be a list of arguments, not the string {argv!r}")
    items = tuple(argv)
    if not items:
        raise ValueError("argv must not be empty")
    for index, item in enumerate(items):
        if not isinstance(item, str):
            raise TypeError(f"argv[{index}] must be str, got {type(item).__name__}: {item!r}")
    return items


class SubprocessRunner:
    """Runs commands with :func:`subprocess.run` (list argv, captured text output, timeout).

    ``base_env`` replaces the inherited environment's entries of the same name for every call
    (per-call ``env`` is layered on top); only the per-call ``env`` appears in error messages,
    so a pasted command reproduces what the call site asked for.
    """

    def __init__(self, *, base_env: Mapping[str, str] | None = None) -> None:
        self._base_env = dict(base_env or {})

    def run(
        self,
        argv: Sequence[str],
        *,
        timeout: float = DEFAULT_TIMEOUT,
        check: bool = True,
        input_text: str | None = None,
        env: Mapping[str, str] | None = None,
        cwd: Path | None = None,
    ) -> CommandResult:
        items = _validate_argv(argv)
        full_env = {**os.environ, **self._base_env, **(env or {})}
        log.debug("exec: %s", pasteable(items, env=env))
        started = time.monotonic()
        try:
            # Own process group, so a timeout (or Ctrl-C) also ends the command's children
            # (kind runs docker, docker runs its plugins) instead of orphaning them.
            proc = subprocess.Popen(  # argv list, never a shell
                items,
                stdin=subprocess.PIPE if input_text is not None else subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                env=full_env,
                cwd=cwd,
                start_new_session=True,
            )
        except FileNotFoundError as exc:
            raise CommandError(
                items,
                returncode=None,
                reason=f"could not start: {items[0]!r} not found on PATH",
                env=env,
            ) from exc
        try:
            stdout, stderr = proc.communicate(input=input_text, timeout=timeout)
        except subprocess.TimeoutExpired as exc:
            stdout, stderr = _kill_group(proc)
            raise CommandError(
                items,
                returncode=None,
                stdout=stdout,
                stderr=stderr,
                reason=f"timed out after {timeout:g}s",
                env=env,
            ) from exc
        except BaseException:
            _kill_group(proc)
            raise
        result = CommandResult(items, proc.returncode, stdout, stderr, time.monotonic() - started)
        if check and not result.ok:
            raise CommandError(
                items, returncode=result.returncode, stdout=stdout, stderr=stderr, env=env
            )
        return result


def _kill_group(proc: subprocess.Popen[str]) -> tuple[str, str]:
    """SIGKILL the command's process group; return what it had written."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    try:
        stdout, stderr = proc.communicate(timeout=5)
    except subprocess.TimeoutExpired:  # a grandchild escaped the group and holds the pipes
        proc.kill()
        for pipe in (proc.stdin, proc.stdout, proc.stderr):
            if pipe is not None:
                pipe.close()
        proc.wait()
        return "", ""
    return stdout or "", stderr or ""


def _as_text(data: str | bytes | None) -> str:
    if data is None:
        return ""
    return data.decode(errors="replace") if isinstance(data, bytes) else data


@dataclasses.dataclass(frozen=True)
class Reply:
    """A canned answer for :class:`RecordingRunner`: matches argv by prefix."""

    prefix: tuple[str, ...]
    returncode: int = 0
    stdout: str = ""
    stderr: str = ""
    timeout: bool = False


@dataclasses.dataclass(frozen=True)
class RecordedCall:
    argv: tuple[str, ...]
    env: Mapping[str, str]
    timeout: float
    input_text: str | None


class RecordingRunner:
    """Dry-run runner: records calls, answers from the first matching :class:`Reply`.

    Unmatched commands succeed with empty output (a plain dry run). ``on_call`` lets a test
    observe or fail a call as it happens.
    """

    def __init__(
        self,
        replies: Sequence[Reply] = (),
        *,
        on_call: Callable[[RecordedCall], None] | None = None,
    ) -> None:
        self.replies = list(replies)
        self.calls: list[RecordedCall] = []
        self._on_call = on_call

    @property
    def argvs(self) -> list[tuple[str, ...]]:
        return [call.argv for call in self.calls]

    def run(
        self,
        argv: Sequence[str],
        *,
        timeout: float = DEFAULT_TIMEOUT,
        check: bool = True,
        input_text: str | None = None,
        env: Mapping[str, str] | None = None,
        cwd: Path | None = None,
    ) -> CommandResult:
        items = _validate_argv(argv)
        call = RecordedCall(items, dict(env or {}), timeout, input_text)
        self.calls.append(call)
        if self._on_call is not None:
            self._on_call(call)
        reply = next((r for r in self.replies if items[: len(r.prefix)] == r.prefix), None)
        if reply is None:
            return CommandResult(items, 0)
        if reply.timeout:
            raise CommandError(items, returncode=None, reason=f"timed out after {timeout:g}s")
        result = CommandResult(items, reply.returncode, reply.stdout, reply.stderr)
        if check and not result.ok:
            raise CommandError(
                items, returncode=reply.returncode, stdout=reply.stdout, stderr=reply.stderr
            )
        return result
