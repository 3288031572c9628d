"""Readable rendering of the call trail (``invoke lab.trail``, test failure messages).

Role: turn :class:`lab.aws.trail.TrailEvent` lists into a rich table — one row per call with
time, service, action, the key parameters, outcome (HTTP status and AWS error code, marked when a
fault or a fidelity rule answered) and latency — or into plain text for logs and assertion
messages. Filtering is the caller's business (``Trail.calls`` / ``AwsControlClient.trail``).

Neighbours: reads :mod:`lab.aws.trail`; used by ``tasks.py`` and tests.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from datetime import UTC, datetime

from rich.console import Console
from rich.table import Table
from rich.text import Text

from lab.aws.trail import TrailEvent, TrailValue


def _params_text(params: dict[str, TrailValue], *, limit: int) -> str:
    parts: list[str] = []
    for key, value in params.items():
        shown = ", ".join(value) if isinstance(value, list) else value
        parts.append(f"{key}={shown}")
    text = "  ".join(parts)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _outcome(event: TrailEvent) -> Text:
    if event.ok:
        label = Text(str(event.status), style="green")
    else:
        label = Text(f"{event.status} {event.error_code or ''}".rstrip(), style="bold red")
    if event.injected:
        label.append(" [fault]", style="magenta")
    elif event.answered_by.startswith("fidelity:"):
        label.append(" [fidelity]", style="cyan")
    return label


def _clock(event: TrailEvent) -> str:
    return datetime.fromtimestamp(event.time, tz=UTC).strftime("%H:%M:%S.%f")[:-3]


def render_trail(
    events: Sequence[TrailEvent],
    *,
    title: str | None = "AWS call trail",
    show_caller: bool = False,
    show_response: bool = True,
    params_width: int = 90,
) -> Table:
    """A rich :class:`~rich.table.Table` of ``events`` (print it with a rich Console)."""
    table = Table(title=title, show_lines=False, header_style="bold")
    table.add_column("#", justify="right", style="dim")
    table.add_column("time (UTC)", style="dim")
    table.add_column("service")
    table.add_column("action", style="bold")
    table.add_column("parameters", overflow="fold")
    table.add_column("outcome")
    table.add_column("ms", justify="right")
    if show_response:
        table.add_column("response", overflow="fold")
    if show_caller:
        table.add_column("caller", overflow="fold")
    for event in events:
        row: list[str | Text] = [
            str(event.seq),
            _clock(event),
            event.service,
            event.action,
            _params_text(event.params, limit=params_width),
            _outcome(event),
            f"{event.latency_ms:.1f}",
        ]
        if show_response:
            row.append(_params_text(event.response, limit=params_width))
        if show_caller:
            row.append(f"{event.source} {event.user_agent.split(' ', 1)[0]}")
        table.add_row(*row)
    return table


def format_trail(events: Sequence[TrailEvent], *, width: int = 160) -> str:
    """The same table as plain text (no colours), e.g. for assertion messages and logs."""
    console = Console(width=width, no_color=True, record=True, file=io.StringIO())
    console.print(render_trail(events, title=None))
    return console.export_text()
