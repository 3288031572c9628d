"""``invoke lab.up``: a :class:`~lab.spec.LabSpec` becomes a running lab.

Role: the front door's main path. :func:`up` takes the spec ``tasks.py`` built (already judged
by the rule table, ``lab.spec``), asks the machine what the spec needs (``lab.preflight``:
the kubeconfig and its API server, ``--backend auto`` resolved and the backend's rules run again
on the resolved spec, a LocalStack, a free VPC block), writes the final spec to the lab
directory (``spec.json``), starts ``lab.daemon`` on that directory and waits for its
``state.json``, then starts the controller the spec names (ours, another build, or a build's
image in-cluster) and waits until every node is initialized.

The front door's rules, kept here: input is judged before anything changes; a user mistake is a
:class:`~lab.state.LabError` whose one line names the flag, the value and the fix; a failed
``up`` (including Ctrl-C) takes down what it started, leaving nothing behind.

Neighbours: ``lab.frontdoor.processes`` (the daemon), ``.controller`` (the controller),
``.realaccount`` (``--aws real``, which shares :func:`usage_text` and
:func:`wait_nodes_initialized`).
"""

from __future__ import annotations

import contextlib
import importlib
import shutil
import threading
import time
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape

from lab.component.forkserver import ForkServer
from lab.controllerproc import CONTROLLER_PRELOAD
from lab.frontdoor.controller import ControllerStartError, deploy_image, replace_controller
from lab.frontdoor.processes import refuse_if_up, start_daemon, take_down
from lab.kubeclient import WireApi, new_api_client
from lab.labview import status_console
from lab.preflight import (
    check_kubeconfig_file,
    check_localstack_reachable,
    check_reachable,
    check_vpc_cidr_free,
    choose_backend,
)
from lab.spec import AUTO, AwsKind, Backend, LabSpec, Scope, check, write_spec
from lab.state import LabError, LabState, lab_dir, make_private_dir

UNINITIALIZED = "node.cloudprovider.kubernetes.io/uninitialized"


def up(
    spec: LabSpec,
    *,
    root: Path | None = None,
    console: Console | None = None,
    timeout: float = 60.0,
) -> LabState:
    """Bring the lab ``spec`` describes up and return its state; prints progress and how to
    use it. Any failure (including Ctrl-C) takes down what was started."""
    out = console or status_console()
    check(spec, Scope.UP)
    if spec.aws == AwsKind.REAL:
        raise LabError(
            "--aws real: lab.up's real-account path is up_real_aws (invoke lab.up --aws real)"
        )
    directory = lab_dir(spec.name, root)
    spec = preflight(spec, directory, out)
    timeout = _start_timeout(spec, timeout)
    shutil.rmtree(directory, ignore_errors=True)  # leftovers of a lab that is not up
    make_private_dir(directory)
    started = time.monotonic()
    launcher: ForkServer | None = None
    try:
        launcher = _controller_launcher(spec)
        if spec.controller or spec.controller_image is not None:
            _import_ahead("kubernetes.config", "kubernetes.client.api_client")  # the wait's
        write_spec(directory, _for_the_daemon(spec, directory))
        state = start_daemon(name=spec.name, directory=directory, console=out, timeout=timeout)
        out.print(f"[green]✓[/] servers up in {time.monotonic() - started:.1f}s")
        state = _start_controller(spec, state, root=root, console=out, timeout=timeout,
                                  launcher=launcher)  # fmt: skip
        if spec.controller or spec.controller_image is not None:
            out.print(
                f"[green]✓[/] nodes initialized ({time.monotonic() - started:.1f}s since start)"
            )
    except BaseException as exc:
        kept = (
            keep_start_log(exc.log_path, directory)
            if isinstance(exc, ControllerStartError)
            else None
        )
        take_down(directory)
        if isinstance(exc, ControllerStartError):
            raise LabError(
                f"{exc.naming(kept)}; the lab was taken down again (nothing is left but that log)"
            ) from None
        if isinstance(exc, LabError):
            raise LabError(f"{exc}; the lab was taken down again (nothing is left)") from None
        raise
    finally:
        if launcher is not None:
            launcher.stop()  # the controller it forked runs on (waits for a stop under way)
    out.print(usage_text(state))
    return state


def failed_start_dir(directory: Path) -> Path:
    """Where ``lab.up`` keeps the log of a controller that did not start (the lab directory
    goes with the rest of the lab): ``.lab/<name>.last-failed-start/``, replaced each time."""
    return directory.with_name(f"{directory.name}.last-failed-start")


def keep_start_log(log_path: Path, directory: Path) -> Path | None:
    """A copy of ``log_path`` in :func:`failed_start_dir` (None if it could not be copied)."""
    keep = failed_start_dir(directory)
    shutil.rmtree(keep, ignore_errors=True)
    try:
        make_private_dir(keep)
        return Path(shutil.copy2(log_path, keep / log_path.name))
    except OSError:
        return None


def preflight(spec: LabSpec, directory: Path, out: Console) -> LabSpec:
    """What the spec needs of this machine, before anything changes; the spec on the backend
    chosen (``auto``: said, with the reason), judged again by the rules that depend on it."""
    if spec.kubeconfig is not None:
        check_kubeconfig_file(spec.kubeconfig)
    refuse_if_up(
        directory,
        spec.name,
        f"`invoke lab.status --name {spec.name}` shows it, "
        f"`invoke lab.down --name {spec.name}` removes it",
    )
    if spec.kubeconfig is not None:
        version = check_reachable(spec.kubeconfig)
        where = escape(str(spec.kubeconfig))
        out.print(f"backend: [bold]existing[/] ({where}, Kubernetes {version})")
    choice = choose_backend(spec.backend)
    if spec.backend == AUTO:
        out.print(f"backend: [bold]{choice.backend}[/] ({escape(choice.reason)})")
    spec = spec.resolve(choice.backend)
    if spec.aws == AwsKind.LOCALSTACK:
        check_localstack_reachable(spec.aws_endpoint)
    if spec.backend == Backend.KIND and spec.vpc_cidr is not None:
        check_vpc_cidr_free(spec.vpc_cidr, docker=spec.docker_binary)
    return spec


def _start_timeout(spec: LabSpec, timeout: float) -> float:
    if spec.backend == Backend.KIND:
        timeout = max(timeout, 900.0)  # image pull and kubeadm take minutes
    if spec.aws == AwsKind.LOCALSTACK and spec.aws_endpoint is None:
        timeout = max(timeout, 900.0)  # the first start pulls the LocalStack image
    return timeout


def _for_the_daemon(spec: LabSpec, directory: Path) -> LabSpec:
    """The spec as ``spec.json`` holds it: the lab directory and absolute paths."""
    kubeconfig = spec.kubeconfig.expanduser().resolve() if spec.kubeconfig else None
    return spec.replace(state_dir=directory, kubeconfig=kubeconfig)


def _import_ahead(*modules: str) -> None:
    """Import ``modules`` in a background thread while this process waits for the daemon (a
    failure is met again, and reported, where the module is used)."""

    def load() -> None:
        with contextlib.suppress(Exception):
            for module in modules:
                importlib.import_module(module)

    threading.Thread(target=load, name="import-ahead", daemon=True).start()


def _controller_launcher(spec: LabSpec) -> ForkServer | None:
    """For our controller: a fork server importing it now, while the daemon starts the lab
    (``lab.component.forkserver``; the controller is forked from it once the lab is up)."""
    if not spec.controller or spec.controller_command or spec.controller_image is not None:
        return None
    launcher = ForkServer(CONTROLLER_PRELOAD)
    launcher.launch()
    return launcher


def _start_controller(
    spec: LabSpec,
    state: LabState,
    *,
    root: Path | None,
    console: Console,
    timeout: float,
    launcher: ForkServer | None,
) -> LabState:
    """The controller the spec names (a build's image in-cluster, ours or another build as a
    local process, or none), then every node initialized by it."""
    if spec.controller_image is not None:
        state = deploy_image(state, spec.controller_image, root=root, console=console)
        what = "the in-cluster controller"
    elif spec.controller:
        state = replace_controller(
            state,
            legacy=spec.legacy,
            args=spec.extra_args,
            command=spec.controller_command,
            console=console,
            launcher=launcher,
        )
        if launcher is not None:  # forked from: it exits while the nodes are initialized
            threading.Thread(target=launcher.stop, name="launcher-stop", daemon=True).start()
        what = "the controller"
    else:
        return state
    with console.status(f"waiting for {what} to initialize every node"):
        wait_nodes_initialized(state, timeout=timeout)
    return state


def usage_text(state: LabState) -> str:
    name = state.name
    flag = "" if name == "default" else f" --name {name}"
    return "\n".join(
        [
            "",
            f"lab [bold]{name}[/] is up:",
            f"  kubectl    invoke lab.kubectl{flag} -- get nodes",
            f'  shell      eval "$(invoke lab.env{flag})"   (KUBECONFIG, AWS endpoint, '
            "region, credentials, metadata)",
            f"  status     invoke lab.status{flag}",
            f"  AWS trail  invoke lab.trail{flag}",
            f"  debug      invoke lab.debug{flag}",
            f"  down       invoke lab.down{flag}",
        ]
    )


def wait_nodes_initialized(state: LabState, *, timeout: float) -> None:
    """Until no Node carries the uninitialized taint (the wire JSON of ``list_node``:
    ``WireApi`` spares this process the client's generated API classes and models)."""
    api_client = new_api_client(state.kubeconfig)
    wire = WireApi(api_client)
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            nodes = wire.call("GET", "/api/v1/nodes").get("items") or []
            if nodes and not any(map(_uninitialized, nodes)):
                return
            time.sleep(0.1)
    finally:
        api_client.close()
    log = state.controller.log if state.controller else "(no controller)"
    raise LabError(
        f"nodes still carry the uninitialized taint after {timeout:.0f}s; "
        f"see the controller log {log}"
    )


def _uninitialized(node: dict[str, Any]) -> bool:
    taints = (node.get("spec") or {}).get("taints") or []
    return any(taint.get("key") == UNINITIALIZED for taint in taints)
