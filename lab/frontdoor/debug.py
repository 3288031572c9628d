"""``invoke lab.debug``: the lab's controller under debugpy, waiting for a debugger.

Role: replace a lab's local controller with ours under debugpy (``lab.debug``), record the
session in ``state.json`` while it runs (``lab.status`` shows it, ``lab.down`` stops it), and
when it ends (the program exits, or Ctrl-C) start the controller the lab had before with its
flags. A lab whose controller is another build, or a build's image in-cluster, is refused in
one line: a second controller beside it would reconcile the same cluster.

Neighbours: ``lab.frontdoor.controller`` (the controller it replaces and restores),
``lab.debug`` (debugpy and its adapter).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rich.console import Console

from lab.component import ProcessRef
from lab.frontdoor.controller import (
    controller_free,
    controller_spec,
    describe_controller,
    replace_controller,
)
from lab.frontdoor.processes import private_files
from lab.labview import status_console
from lab.state import DebugState, LabError, LabState, load_state, read_state, write_state


def debug_controller(
    *,
    name: str = "default",
    legacy: Sequence[str] = (),
    args: Sequence[str] = (),
    port: int = 0,
    root: Path | None = None,
    console: Console | None = None,
) -> int:
    """Replace the lab's controller with one under debugpy, waiting for a client; when the
    session ends, the controller the lab had before runs again with its flags."""
    from lab.debug import run_foreground

    out = console or status_console()
    if not 0 <= port < 65536:
        raise LabError(f"--port {port}: a TCP port is 0 to 65535 (0 lets the kernel choose)")
    state = controller_free(name, root)
    _check_debuggable(state)
    previous = state.controller
    restore = (
        tuple(previous.legacy_behavior) if previous else (),
        tuple(previous.extra_args) if previous else (),
    )
    if previous is not None:
        previous.process.terminate()
    state = state.replace(controller=None)
    write_state(state)
    directory = Path(state.directory)
    spec = controller_spec(state, legacy=legacy, args=args, log_name="controller-debug.log")
    argv = spec.argv(address_file=directory / "controller-debug.address")

    def started(session: Any) -> None:
        write_state(load_state(name, root).replace(debug=_debug_state(session, restore)))

    out.print("[bold]the controller waits for your debugger before it starts syncing[/]")
    code = 1
    try:
        with private_files():
            code = run_foreground(
                argv[1:],
                directory / "debug",
                remote_root=Path.cwd(),
                port=port,
                env=spec.environ(),
                console=out,
                on_started=started,
            )
    finally:
        _restore(directory, code, restore, out)
    return code


def _check_debuggable(state: LabState) -> None:
    """Our Python controller runs here as a local process: not beside an image or another
    build (one line each, naming what to do)."""
    name = state.name
    if state.controller_image is not None:
        raise LabError(
            f"lab {name!r} runs its controller in-cluster from --controller-image "
            f"{state.controller_image}; lab.debug runs our Python controller as a local "
            "process, which would make two controllers: attach your build's own debugger in "
            f"its pod, or `invoke lab.down --name {name}` and `lab.up` without the image"
        )
    previous = state.controller
    if previous is not None and previous.command:
        raise LabError(
            f"lab {name!r} runs another controller build ({describe_controller(previous)}); "
            "lab.debug runs our Python controller under debugpy: attach your build's own "
            "debugger to pid "
            f"{previous.process.pid}, or switch to ours first with "
            f"`invoke lab.controller.restart --name {name}`"
        )


def _debug_state(session: Any, restore: tuple[tuple[str, ...], tuple[str, ...]]) -> DebugState:
    """The running session as ``state.json`` records it (the debuggee, its adapter, where to
    attach, and the flags to restore)."""
    debuggee = session.debuggee
    adapters = (ProcessRef.of(p) for p in debuggee.adapter_pids())
    return DebugState(
        process=ProcessRef.of(debuggee.pid) or ProcessRef(debuggee.pid, 0),
        adapter=next((ref for ref in adapters if ref is not None), None),
        address=debuggee.endpoint.address,
        log_dir=str(debuggee.log_dir),
        log=str(debuggee.log_path),
        restore_legacy=restore[0],
        restore_args=restore[1],
    )


def _restore(
    directory: Path, code: int, restore: tuple[tuple[str, ...], tuple[str, ...]], out: Console
) -> None:
    """The session ended: forget it and, while the lab runs, start its controller again."""
    after = read_state(directory)
    if after is None:
        return
    after = after.replace(debug=None)
    write_state(after)
    out.print(f"debug session ended ({code}); starting the lab's controller again")
    if after.daemon is not None and after.daemon.process.alive():
        replace_controller(after, legacy=restore[0], args=restore[1], console=out)
