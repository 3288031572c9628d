"""lab.cluster.steps: order, undo in reverse on failure, retain, undo failures reported."""

from __future__ import annotations

import dataclasses

import pytest

from lab.cluster.steps import ProvisionError, StepRun, run_steps


@dataclasses.dataclass
class Journal:
    events: list[str] = dataclasses.field(default_factory=list)


@dataclasses.dataclass
class FakeStep:
    name: str
    fail: bool = False
    undo_fails: bool = False

    def execute(self, ctx: Journal) -> None:
        ctx.events.append(f"do {self.name}")
        if self.fail:
            raise RuntimeError(f"{self.name} broke")

    def undo(self, ctx: Journal) -> None:
        ctx.events.append(f"undo {self.name}")
        if self.undo_fails:
            raise OSError(f"cannot undo {self.name}")


@dataclasses.dataclass
class RecordingProgress:
    events: list[str] = dataclasses.field(default_factory=list)

    def step_started(self, name: str, index: int, total: int) -> None:
        self.events.append(f"start {name} {index + 1}/{total}")

    def step_finished(self, name: str, index: int, total: int, elapsed: float) -> None:
        assert elapsed >= 0
        self.events.append(f"finish {name}")

    def step_failed(self, name: str, error: BaseException) -> None:
        self.events.append(f"failed {name}: {error}")

    def undo_started(self, name: str) -> None:
        self.events.append(f"undo {name}")


def test_runs_in_order_and_reports_progress() -> None:
    ctx, progress = Journal(), RecordingProgress()
    run = run_steps([FakeStep("a"), FakeStep("b")], ctx, progress=progress)
    assert ctx.events == ["do a", "do b"]
    assert progress.events == ["start a 1/2", "finish a", "start b 2/2", "finish b"]
    assert [s.name for s in run.executed] == ["a", "b"]


def test_failure_undoes_failed_and_completed_steps_in_reverse() -> None:
    ctx = Journal()
    steps = [FakeStep("a"), FakeStep("b"), FakeStep("c", fail=True), FakeStep("d")]
    with pytest.raises(ProvisionError) as info:
        run_steps(steps, ctx)
    assert ctx.events == ["do a", "do b", "do c", "undo c", "undo b", "undo a"]
    err = info.value
    assert err.step == "c"
    assert err.undone == ("c", "b", "a")
    assert not err.retained
    assert isinstance(err.__cause__, RuntimeError)
    assert "provisioning step 'c' failed: c broke" in str(err)


def test_retain_leaves_everything_in_place() -> None:
    ctx = Journal()
    with pytest.raises(ProvisionError) as info:
        run_steps([FakeStep("a"), FakeStep("b", fail=True)], ctx, retain=True)
    assert ctx.events == ["do a", "do b"]
    assert info.value.retained
    assert "nothing was undone" in str(info.value)


def test_undo_failure_does_not_stop_the_rest_and_is_reported() -> None:
    ctx = Journal()
    steps = [FakeStep("a"), FakeStep("b", undo_fails=True), FakeStep("c", fail=True)]
    with pytest.raises(ProvisionError) as info:
        run_steps(steps, ctx)
    assert ctx.events == ["do a", "do b", "do c", "undo c", "undo b", "undo a"]
    assert info.value.undone == ("c", "a")
    assert [name for name, _ in info.value.undo_errors] == ["b"]
    assert "undo of 'b' also failed: cannot undo b" in str(info.value)


def test_undo_all_tears_down_a_successful_run() -> None:
    ctx = Journal()
    run = StepRun([FakeStep("a"), FakeStep("b")])
    run.run(ctx)
    assert run.undo_all(ctx) == []
    assert ctx.events == ["do a", "do b", "undo b", "undo a"]
    assert run.executed == []


def test_duplicate_step_names_rejected() -> None:
    with pytest.raises(ValueError, match=r"repeated: \['a'\]"):
        StepRun([FakeStep("a"), FakeStep("a")])


def test_undo_all_after_retained_failure_includes_the_failed_step() -> None:
    ctx = Journal()
    run = StepRun([FakeStep("a"), FakeStep("b", fail=True)])
    with pytest.raises(ProvisionError):
        run.run(ctx, retain=True)
    assert run.undo_all(ctx) == []
    assert ctx.events == ["do a", "do b", "undo b", "undo a"]


def test_rich_progress_prints_one_line_per_transition() -> None:
    import io

    from rich.console import Console

    from lab.cluster.progress import RichProgress

    out = io.StringIO()
    progress = RichProgress(Console(file=out, force_terminal=False, width=120))
    with pytest.raises(ProvisionError):
        run_steps([FakeStep("a"), FakeStep("b[x]", fail=True)], Journal(), progress=progress)
    lines = out.getvalue().splitlines()
    assert lines[0].startswith("✓ [1/2] a  ")
    assert lines[0].endswith("s")
    assert lines[1] == "✗ [2/2] b[x]  b[x] broke"  # markup in names is escaped
    assert lines[2:] == ["↶ undo b[x]", "↶ undo a"]
