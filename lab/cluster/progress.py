"""A rich progress reporter for provisioning steps (``invoke lab.up`` and friends).

Implements ``lab.cluster.steps.ProgressReporter``: a spinner with the running step's name
while it runs, then one line per finished, failed or undone step::

    ✓ [1/4] start-apiserver  0.3s
    ✗ [4/4] register-nodes   node 'w1': ip '10.0.1' is not an IP address
    ↶ undo register-nodes

On a non-terminal console (CI logs, tests) the spinner is skipped and only the lines remain.
"""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.status import Status


class RichProgress:
    def __init__(self, console: Console | None = None) -> None:
        self.console = console or Console(stderr=True)
        self._status: Status | None = None
        self._label = ""

    def _stop_spinner(self) -> None:
        if self._status is not None:
            self._status.stop()
            self._status = None

    def step_started(self, name: str, index: int, total: int) -> None:
        self._label = f"[{index + 1}/{total}] {name}"
        if self.console.is_terminal:
            self._status = self.console.status(escape(self._label))
            self._status.start()

    def step_finished(self, name: str, index: int, total: int, elapsed: float) -> None:
        self._stop_spinner()
        self.console.print(f"[green]✓[/] {escape(self._label)}  [dim]{elapsed:.1f}s[/]")

    def step_failed(self, name: str, error: BaseException) -> None:
        self._stop_spinner()
        first_line = str(error).splitlines()[0] if str(error) else type(error).__name__
        self.console.print(f"[red]✗[/] {escape(self._label)}  {escape(first_line)}")

    def undo_started(self, name: str) -> None:
        self.console.print(f"[yellow]↶[/] undo {escape(name)}")
