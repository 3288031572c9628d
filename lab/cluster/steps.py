"""Provisioning as an ordered list of small steps, undone in reverse on failure.

Modelled on kind's ``create/actions`` (docs/reference/style-anchors.md §A4): a provider's
``provision`` builds a list of tiny :class:`Step` objects, each with ``execute(ctx)`` and
``undo(ctx)``, and :func:`run_steps` runs them in order. When a step raises, the failed step and
every completed step are undone in reverse order — unless ``retain=True``, which leaves
everything in place for a post-mortem (kind's ``--retain``). Undo methods must therefore
tolerate a partially executed or never-executed step (deleting something absent is fine).

Progress goes to a :class:`ProgressReporter`; :class:`LoggingProgress` is the default and the
task layer plugs in a rich progress bar implementing the same protocol.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from typing import Generic, Protocol, TypeVar

log = logging.getLogger(__name__)

CtxT = TypeVar("CtxT")
CtxT_contra = TypeVar("CtxT_contra", contravariant=True)


class Step(Protocol[CtxT_contra]):
    """One provisioning step. ``name`` is short and kebab-case (``create-cluster``)."""

    @property
    def name(self) -> str: ...

    def execute(self, ctx: CtxT_contra) -> None: ...

    def undo(self, ctx: CtxT_contra) -> None: ...


class ProgressReporter(Protocol):
    """Told about every step transition; must not raise."""

    def step_started(self, name: str, index: int, total: int) -> None: ...

    def step_finished(self, name: str, index: int, total: int, elapsed: float) -> None: ...

    def step_failed(self, name: str, error: BaseException) -> None: ...

    def undo_started(self, name: str) -> None: ...


class LoggingProgress:
    """Default reporter: one log line per transition."""

    def step_started(self, name: str, index: int, total: int) -> None:
        log.info("[%d/%d] %s ...", index + 1, total, name)

    def step_finished(self, name: str, index: int, total: int, elapsed: float) -> None:
        log.info("[%d/%d] %s done in %.1fs", index + 1, total, name, elapsed)

    def step_failed(self, name: str, error: BaseException) -> None:
        log.error("step %s failed: %s", name, error)

    def undo_started(self, name: str) -> None:
        log.info("undoing %s", name)


class ProvisionError(Exception):
    """A step failed. Carries which step, whether the rest was retained, and undo failures."""

    def __init__(
        self,
        step: str,
        cause: BaseException,
        *,
        undone: Sequence[str],
        undo_errors: Sequence[tuple[str, BaseException]],
        retained: bool,
    ) -> None:
        self.step = step
        self.cause = cause
        self.undone = tuple(undone)
        self.undo_errors = tuple(undo_errors)
        self.retained = retained
        lines = [f"provisioning step {step!r} failed: {cause}"]
        if retained:
            lines.append("retain=True: nothing was undone; clean up with the provider's delete()")
        else:
            lines.append("undone in reverse: " + (", ".join(self.undone) or "(nothing)"))
        lines.extend(f"undo of {name!r} also failed: {err}" for name, err in self.undo_errors)
        super().__init__("\n".join(lines))


class StepRun(Generic[CtxT]):
    """Runs steps in order and remembers which ones executed (for a later full teardown)."""

    def __init__(
        self,
        steps: Sequence[Step[CtxT]],
        *,
        progress: ProgressReporter | None = None,
    ) -> None:
        names = [s.name for s in steps]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"step names must be unique, repeated: {dupes}")
        self.steps = list(steps)
        self.progress = progress or LoggingProgress()
        self.executed: list[Step[CtxT]] = []
        #: the step that failed under ``retain`` (possibly half done; undone by undo_all)
        self.failed: Step[CtxT] | None = None

    def run(self, ctx: CtxT, *, retain: bool = False) -> None:
        total = len(self.steps)
        for index, step in enumerate(self.steps):
            self.progress.step_started(step.name, index, total)
            started = time.monotonic()
            try:
                step.execute(ctx)
            except BaseException as exc:
                self.progress.step_failed(step.name, exc)
                if retain:
                    self.failed = step
                    raise ProvisionError(
                        step.name, exc, undone=(), undo_errors=(), retained=True
                    ) from exc
                undone, errors = self._undo([*self.executed, step], ctx)
                self.executed.clear()
                raise ProvisionError(
                    step.name, exc, undone=undone, undo_errors=errors, retained=False
                ) from exc
            self.executed.append(step)
            self.progress.step_finished(step.name, index, total, time.monotonic() - started)

    def undo_all(self, ctx: CtxT) -> list[tuple[str, BaseException]]:
        """Undo every executed step — and a step that failed under ``retain`` — in reverse
        (a teardown); returns undo failures."""
        steps = [*self.executed, *([self.failed] if self.failed is not None else [])]
        _, errors = self._undo(steps, ctx)
        self.executed.clear()
        self.failed = None
        return errors

    def _undo(
        self, steps: Sequence[Step[CtxT]], ctx: CtxT
    ) -> tuple[list[str], list[tuple[str, BaseException]]]:
        undone: list[str] = []
        errors: list[tuple[str, BaseException]] = []
        for step in reversed(steps):
            self.progress.undo_started(step.name)
            try:
                step.undo(ctx)
            except Exception as err:  # keep undoing the rest; report every failure
                log.warning("undo of %s failed: %s", step.name, err)
                errors.append((step.name, err))
            else:
                undone.append(step.name)
        return undone, errors


def run_steps(
    steps: Sequence[Step[CtxT]],
    ctx: CtxT,
    *,
    retain: bool = False,
    progress: ProgressReporter | None = None,
) -> StepRun[CtxT]:
    """Run ``steps`` in order; on failure undo (unless ``retain``) and raise ProvisionError."""
    run = StepRun(steps, progress=progress)
    run.run(ctx, retain=retain)
    return run
