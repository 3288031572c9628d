"""``invoke lab.down``: stop every process of a lab, verify nothing is left, remove it.

Role: :func:`down` stops the processes ``state.json`` names (checked by pid and start time),
verifies that no process or port is left before it says so (else keeps the state and logs and
names what is left), and removes ``.lab/<name>``. A kind cluster whose daemon died is deleted
from here; an existing cluster keeps everything (the lab created nothing in it); a real-account
lab (``--aws real``) is handed to ``lab.frontdoor.realaccount.down_real``.

Neighbours: ``lab.frontdoor.processes`` (stopping and checking), ``.realaccount``.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from rich.console import Console
from rich.markup import escape

from lab.frontdoor.processes import REAL_RUN_FILE, check_stopped, stop_processes, take_down
from lab.frontdoor.realaccount import down_real
from lab.labview import status_console
from lab.spec import Backend, validate_name
from lab.state import LabError, LabState, lab_dir, read_state


def down(
    *,
    name: str = "default",
    dry_run: bool = False,
    root: Path | None = None,
    console: Console | None = None,
) -> None:
    """Stop every process of the lab, verify nothing is left, then remove ``.lab/<name>``.

    A real-account lab (``--aws real``): remove what carries its run's tag and list it
    (``dry_run``: list only). An existing cluster keeps everything: the lab created nothing
    in it."""
    out = console or status_console()
    validate_name(name)
    directory = lab_dir(name, root)
    if (directory / REAL_RUN_FILE).exists():
        state = read_state(directory)
        if state is not None and dry_run:
            out.print(f"lab {name!r} would stop: " + ", ".join(
                f"{label} (pid {ref.pid})" for label, ref in state.processes()
            ))  # fmt: skip
        elif state is not None:  # the controller first: it could create while the run goes
            with out.status(f"stopping lab {name!r}"):
                stop_processes(state)
            check_stopped(state, directory, name)
            (directory / "state.json").unlink(missing_ok=True)
        down_real(directory, name, dry_run=dry_run, out=out)
        return
    if dry_run:
        raise LabError(
            f"--dry-run: lists what lab.down would remove from a real AWS account; lab {name!r} "
            "is not an --aws real lab (a moto lab leaves nothing behind): drop --dry-run"
        )
    state = read_state(directory)
    if state is None:
        if directory.exists():
            take_down(directory)
        out.print(f"lab {name!r} is not up; nothing to do")
        return
    daemon_was_alive = state.daemon is not None and state.daemon.process.alive()
    with out.status(f"stopping lab {name!r}"):
        stop_processes(state)
        if state.backend == Backend.KIND and not daemon_was_alive:
            _delete_orphaned_cluster(state)
        if state.localstack_container and not daemon_was_alive:
            from lab.aws.localstack_docker import stop_localstack

            stop_localstack(state.localstack_container)
    check_stopped(state, directory, name)
    shutil.rmtree(directory, ignore_errors=True)
    if state.backend == Backend.EXISTING:
        out.print(
            f"the existing cluster ({state.kube_endpoint}) keeps every object: the lab created "
            "nothing in it and deleted nothing"
        )
        for change in state.cluster_changes:
            out.print(f"  - {escape(change)}")
    out.print(f"[green]✓[/] lab {name!r} is down (no process, port or state left)")


def _delete_orphaned_cluster(state: LabState) -> None:
    """The daemon died without deleting its kind cluster: delete it from here."""
    from lab.cluster.factory import make_provider

    name = f"{state.cluster_id}-{state.name}"
    provider = make_provider("kind", name=name, state_dir=Path(state.directory) / "kind")
    provider.delete()
