"""The lab's controller from the front door: (re)start ours or another build, or its image.

Role: ``lab.controller.restart`` (:func:`restart_controller`): stop the lab's controller and
start one with other flags or another build (``--controller-cmd``), bringing the previous one
back when the new one does not become ready; a lab whose controller is a build's image
in-cluster (``--controller-image``) restarts that DaemonSet instead. :func:`replace_controller`
is the one way the front door starts a local controller (``lab.up``, restarts, the end of a
debug session); :func:`deploy_image` the in-cluster one. Every start is recorded in
``state.json`` with what a later restore needs (:func:`command_of`, :func:`describe_controller`).

Neighbours: ``lab.controllerproc`` (the process), ``lab.incluster_image`` (the image),
``lab.frontdoor.up`` and ``.debug`` (callers).
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from pathlib import Path

from rich.console import Console
from rich.markup import escape

from lab.component import ComponentNotReady, tail
from lab.component.forkserver import ForkServer
from lab.controllerproc import ControllerCommand, ControllerProcess, ControllerSpec
from lab.frontdoor.processes import private_files
from lab.labview import require_daemon, status_console
from lab.spec import LabSpec, validate_name
from lab.state import ControllerState, LabError, LabState, load_state, write_state

#: how many of a failed controller's last output lines its error quotes
LAST_LINES = 3


class ControllerStartError(LabError):
    """The controller did not become ready: why (its exit status, when it ended), its last
    lines of output, and the log holding the rest (``lab.up`` keeps it when it takes the lab
    down again: :meth:`naming` the kept copy)."""

    def __init__(self, reason: str, last_lines: str, log_path: Path) -> None:
        self.reason = reason
        self.last_lines = last_lines
        self.log_path = log_path
        super().__init__(self.naming(log_path))

    def naming(self, log_path: Path | None) -> str:
        """The one-line error, naming the log at ``log_path`` (None: the log is lost)."""
        where = f"log: {log_path}" if log_path is not None else "its log could not be kept"
        return (
            f"the controller did not start: {self.reason}; its last output: {self.last_lines} "
            f"({where})"
        )

    @classmethod
    def of(cls, exc: ComponentNotReady, log_path: Path) -> ControllerStartError:
        lines = [ln.strip() for ln in tail(log_path, 200).splitlines() if ln.strip()]
        quoted = [ln if len(ln) <= 300 else ln[:297] + "..." for ln in lines[-LAST_LINES:]]
        return cls(exc.reason, " | ".join(quoted) or "(none)", log_path)


def restart_controller(
    *,
    name: str = "default",
    legacy: Sequence[str] = (),
    args: Sequence[str] = (),
    command: ControllerCommand | None = None,
    root: Path | None = None,
    console: Console | None = None,
) -> LabState:
    """(Re)start only the controller with these flags (or ``command``: another build); the
    lab stays as it is.

    If the new controller does not become ready, the previous one is started again with its
    flags and the error says so.
    """
    out = console or status_console()
    check_controller_flags(command, legacy, args)
    validate_name(name)
    image = load_state(name, root).controller_image
    if image is not None:
        return _restart_image(name, image, legacy=legacy, args=args, command=command, root=root)
    state = controller_free(name, root)
    previous = state.controller
    try:
        return replace_controller(state, legacy=legacy, args=args, command=command, console=out)
    except LabError as exc:
        if previous is None:
            raise
        state = replace_controller(
            load_state(name, root),
            legacy=previous.legacy_behavior,
            args=previous.extra_args,
            command=command_of(previous),
            console=out,
        )
        pid = state.controller.process.pid if state.controller else "?"
        flags = describe_controller(previous)
        raise LabError(
            f"{exc}; the previous controller ({flags}) runs again as pid {pid}"
        ) from None


def _restart_image(
    name: str,
    image: str,
    *,
    legacy: Sequence[str],
    args: Sequence[str],
    command: ControllerCommand | None,
    root: Path | None,
) -> LabState:
    """``lab.controller.restart`` of a lab whose controller is ``image`` in-cluster: the same
    image restarted (its flags are the DaemonSet's); a flag for another controller is refused
    in one line, since starting a local one too would give the cluster two controllers."""
    from lab.incluster_image import restart_image_in_lab

    if legacy or args or command is not None:
        given = (
            "--controller-cmd/--controller" if command is not None else "--legacy-behavior/--args"
        )
        raise LabError(
            f"{given}: lab {name!r} runs its controller in-cluster from --controller-image "
            f"{image}, whose flags are its DaemonSet's; restart it without them, or "
            f"`invoke lab.down --name {name}` and `lab.up` again with the controller you want"
        )
    state = load_state(name, root)
    require_daemon(state)
    restart_image_in_lab(name, root=root)
    return load_state(name, root)


def controller_free(name: str, root: Path | None) -> LabState:
    """The state of a running lab whose controller is not under a debugger."""
    validate_name(name)
    state = load_state(name, root)
    require_daemon(state)
    if state.debug is not None and state.debug.process.alive():
        raise LabError(
            f"the controller of lab {name!r} is under the debugger (lab.debug, pid "
            f"{state.debug.process.pid}, attach at {state.debug.address}); end that session "
            "first (Ctrl-C in its terminal)"
        )
    return state


def deploy_image(state: LabState, image: str, *, root: Path | None, console: Console) -> LabState:
    """Run ``image`` in-cluster (``lab.incluster_image``) and record it in the state."""
    from lab.incluster_image import NAME, NAMESPACE, deploy_image_to_lab

    with console.status(f"loading {image} into the nodes and deploying it"):
        deploy_image_to_lab(state.name, image, root=root)
    state = state.replace(controller_image=image)
    write_state(state)
    console.print(
        f"[green]✓[/] controller image {escape(image)} runs as DaemonSet "
        f"{NAMESPACE}/{NAME} on the control plane"
    )
    return state


def check_controller_flags(
    command: ControllerCommand | None, legacy: Sequence[str], args: Sequence[str]
) -> None:
    """Another build takes no flags of ours: the rule table's ``command-with-our-flags``,
    judged on the spec of a controller choice (a :class:`~lab.spec.SpecError` otherwise)."""
    LabSpec(controller_command=command, legacy=tuple(legacy), extra_args=tuple(args))


def command_of(ctl: ControllerState) -> ControllerCommand | None:
    """The other build a recorded controller ran, or None for ours."""
    if not ctl.command:
        return None
    return ControllerCommand(
        ctl.command,
        ready_log=ctl.ready_log,
        ready_url=ctl.ready_url or ControllerCommand.ready_url,
        name=ctl.command_name or "custom",
    )


def describe_controller(ctl: ControllerState) -> str:
    """One line naming a recorded controller: its build and flags."""
    if ctl.command:
        return f"{ctl.command_name or 'custom'}: {shlex.join(ctl.command)}"
    return " ".join([*ctl.legacy_behavior, *ctl.extra_args]) or "default flags"


def controller_spec(
    state: LabState,
    *,
    legacy: Sequence[str],
    args: Sequence[str],
    log_name: str,
    command: ControllerCommand | None = None,
) -> ControllerSpec:
    return ControllerSpec(
        kubeconfig=Path(state.kubeconfig),
        cloud_config=Path(state.cloud_config),
        log_path=Path(state.directory) / log_name,
        imds_endpoint=state.imds_endpoint,
        legacy=tuple(legacy),
        extra_args=tuple(args),
        command=command,
        aws_endpoint=state.aws_endpoint,
        region=state.region,
        aws_credentials=state.aws_credentials,
    )


def replace_controller(
    state: LabState,
    *,
    legacy: Sequence[str],
    args: Sequence[str],
    console: Console,
    command: ControllerCommand | None = None,
    launcher: ForkServer | None = None,
) -> LabState:
    """Stop the lab's controller (if any) and start one with these flags (ours forked from
    ``launcher``, when given: ``lab.up``'s, which imported it while the lab started)."""
    if state.controller is not None:
        state.controller.process.terminate()
        state = state.replace(controller=None)
        write_state(state)
    runs = len(list(Path(state.directory).glob("controller-*.log"))) + 1
    spec = controller_spec(
        state, legacy=legacy, args=args, log_name=f"controller-{runs}.log", command=command
    )
    fork = launcher if command is None else None
    proc = ControllerProcess(spec, detach=True, ready_timeout=30, launcher=fork)
    with console.status("starting the controller"), private_files():
        try:
            proc.start()
        except ComponentNotReady as exc:
            proc.stop()
            raise ControllerStartError.of(exc, spec.log_path) from None
    ref = proc.ref
    state = state.replace(
        controller=ControllerState(
            process=ref,
            log=str(spec.log_path),
            flags=tuple(proc.command[1:] if command else spec.argv(address_file=Path("-"))[3:]),
            legacy_behavior=tuple(legacy),
            extra_args=tuple(args),
            health_url=proc.health_url,
            metrics_url=proc.metrics_url,
            command=command.template if command else (),
            command_name=command.name if command else "",
            ready_log=command.ready_log if command else None,
            ready_url=command.ready_url if command else None,
        )
    )
    write_state(state)
    console.print(
        f"[green]✓[/] controller pid {ref.pid} ready at {proc.url}"
        + (f" (legacy: {', '.join(legacy)})" if legacy else "")
        + (f" ({command.name}: {escape(proc.command[0])})" if command else "")
    )
    return state
