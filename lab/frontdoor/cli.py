"""How ``invoke lab.*`` reads its command line, the same for every task (``tasks.py`` declares
each task with :func:`lab_task`, which makes a :class:`LabTask`):

* **Numbers are judged while invoke parses**, before any task runs: a numeric flag (its
  default an ``int`` or a ``float``) given something that is not a number, or a negative one
  (no numeric flag of the lab means anything below 0), ends in one line naming the flag, the
  value and what to give instead, exit 1 (invoke's own handling of a parse error), instead of
  invoke's ``ValueError`` traceback. A new numeric flag is judged so by being declared.
* **One short flag**: ``-n`` is ``--name`` (the lab) in every task that has one, and no other
  flag has a short form (invoke's automatic ones gave ``-c`` and ``-n`` different meanings in
  different tasks, and ``--no-controller`` the short flag ``--``).
* **Help shows what a flag takes and its default**: a float flag is shown taking a value
  (invoke shows none for a float, as if it were a switch), and ``(default: X)`` is appended
  where the help does not say it.
* **A closed pipe ends a task quietly** (``lab.trail --json | head -3``): standard output is
  pointed at ``/dev/null`` at the first write that finds the reader gone, so clean-up that
  prints still runs, and the task exits 141 (128 + SIGPIPE, what a shell reports for a tool the
  signal ended) with nothing on standard error.
* ``lab.kubectl get nodes`` (without ``--``) says in one line to put kubectl's words after
  ``--`` rather than invoke's "No idea what 'get' is!".
"""

from __future__ import annotations

import inspect
import os
import sys
from collections.abc import Callable
from typing import Any

from invoke.exceptions import Exit, ParseError
from invoke.parser.argument import Argument
from invoke.tasks import Task, task

#: the exit status of a task whose reader went away (as ``seq 1000000 | head -1`` reports)
CLOSED_PIPE_EXIT = 141
#: the one short flag: ``-n`` means the lab's name wherever a task takes one
SHORT_FLAGS = {"name": "n"}
#: what each numeric kind is called in help and in a refusal
NUMBER_WORDS = {int: "a whole number", float: "a number"}


def number_value(flag: str, kind: type, raw: str) -> int | float:
    """``raw`` read as the flag's kind, or a ParseError naming the flag, the value and the fix."""
    words = NUMBER_WORDS[kind]
    example = "2" if kind is int else "2.5"
    try:
        value: int | float = kind(raw)
    except ValueError:
        raise ParseError(
            f"error: --{flag} {raw!r}: not {words}; give {words} (e.g. --{flag} {example})"
        ) from None
    if value < 0:
        raise ParseError(f"error: --{flag} {raw}: must not be negative; give 0 or more")
    return value


class NumberArgument(Argument):
    """A numeric flag whose value is judged by :func:`number_value`. A float flag is of kind
    ``str`` to invoke, so that its help shows that it takes a value (``--clock-speed=STRING``;
    invoke names only strings and ints), and is read as a float here."""

    def __init__(self, *, number: type, **kwargs: Any) -> None:
        super().__init__(kind=int if number is int else str, **kwargs)
        self.number = number

    def set_value(self, value: Any, cast: bool = True) -> None:
        if cast and isinstance(value, str):
            value, cast = number_value(self.names[0], self.number, value), False
        super().set_value(value, cast=cast)


class LabTask(Task[Any]):
    """A task with the lab's flag rules (this module's docstring)."""

    #: its positional ``args`` takes the words after ``--`` (``lab.kubectl``)
    pass_through = False

    def arg_opts(self, name: str, default: str, taken_names: set[str]) -> dict[str, Any]:
        opts = super().arg_opts(name, default, taken_names)
        long_name = opts["names"][0]
        opts["names"] = [long_name, *([SHORT_FLAGS[name]] if name in SHORT_FLAGS else [])]
        shown = default not in (None, "", inspect.Signature.empty) and not isinstance(default, bool)
        if shown and "help" in opts and "default" not in opts["help"]:
            opts["help"] = f"{opts['help']} (default: {default})"
        return opts

    def get_arguments(self, ignore_unknown_help: bool | None = None) -> list[Argument]:
        arguments = super().get_arguments(ignore_unknown_help=ignore_unknown_help)
        for index, argument in enumerate(arguments):
            if argument.kind in NUMBER_WORDS and not argument.positional:
                arguments[index] = NumberArgument(
                    names=argument.names,
                    number=argument.kind,
                    default=argument.default,
                    help=argument.help,
                    attr_name=argument.attr_name,
                )
            elif self.pass_through and argument.name == "args":
                arguments[index] = PassThroughWords(
                    names=argument.names, positional=True, help=argument.help
                )
        return arguments

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        guard = _PipeGuard(sys.stdout)
        sys.stdout = guard
        try:
            return super().__call__(*args, **kwargs)
        except BrokenPipeError:
            guard.closed()
            raise Exit(code=CLOSED_PIPE_EXIT) from None
        finally:
            sys.stdout = guard.inner
            if guard.broken:
                raise Exit(code=CLOSED_PIPE_EXIT)


def lab_task(*args: Any, **kwargs: Any) -> Callable[..., Any]:
    """invoke's ``@task`` (bare or with options) making a :class:`LabTask`."""
    made: Callable[..., Any] = task(*args, **{"klass": LabTask, **kwargs})
    return made


class _PipeGuard:
    """Standard output that, at the first write finding the reader gone, points the file
    descriptor at ``/dev/null`` (so later writes and the interpreter's last flush succeed) and
    raises ``BrokenPipeError`` once, so the task stops."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.broken = False

    def closed(self) -> None:
        if not self.broken:
            self.broken = True
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, self.inner.fileno())
            os.close(devnull)

    def _guarded(self, call: Callable[[], Any]) -> Any:
        try:
            return call()
        except BrokenPipeError:
            first = not self.broken
            self.closed()
            if first:
                raise
            return None

    def write(self, text: str) -> int:
        if self.broken:
            return len(text)
        result = self._guarded(lambda: self.inner.write(text))
        return len(text) if result is None else int(result)

    def flush(self) -> None:
        if not self.broken:
            self._guarded(self.inner.flush)

    def __getattr__(self, attribute: str) -> Any:
        return getattr(self.inner, attribute)


# --- the kubectl passthrough --------------------------------------------------------------


def stray_words(argv: list[str], task_name: str, flags: dict[str, bool]) -> list[str]:
    """The words after ``task_name`` in ``argv`` (up to ``--``) that are none of its ``flags``
    (flag -> takes a value) nor their values."""
    if task_name not in argv:
        return []
    words = argv[argv.index(task_name) + 1 :]
    words = words[: words.index("--")] if "--" in words else words
    stray, expect_value = [], False
    for word in words:
        if expect_value:
            expect_value = False
        elif word.split("=", 1)[0] in flags:
            expect_value = flags[word.split("=", 1)[0]] and "=" not in word
        else:
            stray.append(word)
    return stray


class PassThroughWords(Argument):
    """``lab.kubectl``'s ``ARGS`` positional: the words given without ``--`` are refused with
    the fix (invoke would say only "No idea what 'get' is!"); with ``--`` (or no words) it is
    satisfied and the task reads the words after ``--`` from ``sys.argv``."""

    task_name = "lab.kubectl"
    flags = {"--name": True, "-n": True, "--help": False, "-h": False}

    @property
    def value(self) -> Any:
        return None if stray_words(sys.argv, self.task_name, self.flags) else ""

    @value.setter
    def value(self, given: Any) -> None:
        self.set_value(given)

    def set_value(self, value: Any, cast: bool = True) -> None:
        raise ParseError(
            f"error: lab.kubectl {value}: kubectl's arguments go after `--` (so that kubectl's "
            "own -n is not read as the lab's --name): invoke lab.kubectl [--name N] -- get nodes"
        )


class PassThroughTask(LabTask):
    """A task whose positional ``args`` are the words after ``--`` (``lab.kubectl``)."""

    pass_through = True
