"""A running lab's ``state.json``, typed: the one module that reads and writes it.

``invoke lab.up`` leaves a lab running in the background; every later command (``lab.status``,
``lab.down``, ``lab.controller.restart``, ``lab.debug``, ``lab.controller.deploy``) finds it
through ``.lab/<name>/state.json``. :class:`LabState` is that document as frozen dataclasses
with a format ``version``: a file written by another format is refused with a message that says
what to do, instead of failing later on a missing key. Every process the lab started is in it as
a :class:`~lab.component.ProcessRef` (pid and start time), so nothing is signalled after its pid
was reused.

The lab directory is private to the user (0700, files 0600): it holds a kubeconfig with a
bearer token and the lab's logs. :class:`LabError` is the error every lab command raises for a
user-facing problem; its message names what went wrong and what to do next.

Neighbours: ``lab.daemon`` writes the first state, ``lab.frontdoor`` and ``lab.incluster`` read
and update it; the lab's description beside it (``spec.json``) is ``lab.spec``'s. This module
imports only ``lab.component``.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Self

from lab.component import ProcessRef

STATE_FILE = "state.json"
FORMAT_VERSION = 1
LAB_ROOT = Path(".lab")


class LabError(RuntimeError):
    """A lab operation failed for a reason the user can act on; the message says how."""


# --- the document ----------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class NodeState:
    name: str
    role: str
    instance_id: str
    private_ip: str
    zone: str
    provider_id: str


@dataclasses.dataclass(frozen=True)
class ControllerState:
    """The controller the lab runs: a local process, or one under a debugger (``debug``)."""

    process: ProcessRef
    log: str
    flags: tuple[str, ...] = ()
    legacy_behavior: tuple[str, ...] = ()
    extra_args: tuple[str, ...] = ()
    health_url: str | None = None
    metrics_url: str | None = None
    #: another controller build (``--controller-cmd``/``--controller``): its command template,
    #: preset name and readiness signal; empty for our controller
    command: tuple[str, ...] = ()
    command_name: str = ""
    ready_log: str | None = None
    ready_url: str | None = None


@dataclasses.dataclass(frozen=True)
class DebugState:
    """A ``lab.debug`` session: the debuggee, debugpy's adapter and where clients attach."""

    process: ProcessRef
    address: str
    log_dir: str
    log: str
    #: the adapter daemonizes into its own session; it is stopped with the debuggee
    adapter: ProcessRef | None = None
    #: the controller flags to restore once the session ends
    restore_legacy: tuple[str, ...] = ()
    restore_args: tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True)
class DaemonState:
    process: ProcessRef
    control_url: str
    log: str


@dataclasses.dataclass(frozen=True)
class LabState:
    name: str
    backend: str
    k8s_version: str
    directory: str
    kubeconfig: str
    cloud_config: str
    aws_endpoint: str
    imds_endpoint: str
    region: str
    cluster_id: str
    nodes: tuple[NodeState, ...]
    kube_endpoint: str | None = None
    #: the lab's secret: the bearer token its control planes (``/_lab/``) and, where served
    #: with auth, its API server accept; generated per lab, never logged
    token: str | None = None
    #: ``aws="real"``: the key pair (access key id, secret) the recording proxy accepts from
    #: callers (the controller, the lab's clients, ``lab.env``); generated per lab, never logged
    aws_credentials: tuple[str, str] | None = None
    vpc_id: str | None = None
    node_security_group: str | None = None
    daemon: DaemonState | None = None
    controller: ControllerState | None = None
    debug: DebugState | None = None
    #: the AWS backend (``moto`` or ``localstack``); with LocalStack, ``aws_endpoint`` is the
    #: recording proxy in front of ``aws_upstream``, and ``localstack_container`` the Docker
    #: container the lab started for it (None: one the user runs)
    aws: str = "moto"
    aws_upstream: str | None = None
    localstack_container: str | None = None
    #: kind: the controller build running in-cluster from this image (``--controller-image``)
    controller_image: str | None = None
    #: backend existing: what the lab changed in a cluster it did not create (it creates
    #: nothing there and ``lab.down`` deletes nothing there), one line each
    cluster_changes: tuple[str, ...] = ()
    version: int = FORMAT_VERSION

    def replace(self, **changes: Any) -> Self:
        return dataclasses.replace(self, **changes)

    def node(self, name: str) -> NodeState:
        for node in self.nodes:
            if node.name == name:
                return node
        known = ", ".join(n.name for n in self.nodes)
        raise LabError(f"lab {self.name!r} has no node {name!r}; its nodes are: {known}")

    def processes(self) -> list[tuple[str, ProcessRef]]:
        """Every process the lab started, labelled, in the order to stop them."""
        found: list[tuple[str, ProcessRef]] = []
        if self.debug is not None:
            found.append(("debug controller", self.debug.process))
            if self.debug.adapter is not None:
                found.append(("debug adapter", self.debug.adapter))
        if self.controller is not None:
            found.append(("controller", self.controller.process))
        if self.daemon is not None:
            found.append(("lab daemon", self.daemon.process))
        return found

    def endpoints(self) -> list[tuple[str, str]]:
        """(label, URL) of everything that listens for this lab."""
        urls = [("AWS", self.aws_endpoint), ("metadata", self.imds_endpoint)]
        if self.kube_endpoint:
            urls.append(("Kubernetes", self.kube_endpoint))
        if self.daemon is not None:
            urls.append(("lab daemon", self.daemon.control_url))
        if self.controller is not None and self.controller.health_url:
            urls.append(("controller", self.controller.health_url))
        if self.debug is not None:
            urls.append(("debugger", f"tcp://{self.debug.address}"))
        return urls

    # --- JSON --------------------------------------------------------------------------------

    def to_json(self) -> dict[str, Any]:
        return _encode(self)  # type: ignore[no-any-return]

    @classmethod
    def from_json(cls, data: Mapping[str, Any], *, source: str = "state.json") -> LabState:
        version = data.get("version")
        if version != FORMAT_VERSION:
            raise LabError(
                f"{source} has format version {version!r}, this checkout reads version "
                f"{FORMAT_VERSION}; stop that lab with the checkout that started it, or remove "
                f"{Path(source).parent} after stopping its processes by hand"
            )
        try:
            return _decode_state(data)
        except (KeyError, TypeError, ValueError) as exc:
            raise LabError(f"{source} is damaged ({exc!r}); remove it and start again") from exc


def _encode(value: Any) -> Any:
    if isinstance(value, ProcessRef):
        return value.to_json()
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _encode(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, tuple | list):
        return [_encode(v) for v in value]
    return value


def _process(data: Any) -> ProcessRef:
    ref = ProcessRef.from_json(data)
    if ref is None:
        raise ValueError(f"not a process reference: {data!r}")
    return ref


def _strs(data: Any) -> tuple[str, ...]:
    if not isinstance(data, list):
        raise TypeError(f"expected a list of strings, got {data!r}")
    return tuple(str(v) for v in data)


def _key_pair(data: Any) -> tuple[str, str] | None:
    if data is None:
        return None
    pair = _strs(data)
    if len(pair) != 2:
        raise ValueError(f"aws_credentials: expected [key id, secret], got {len(pair)} items")
    return pair[0], pair[1]


def _decode_state(data: Mapping[str, Any]) -> LabState:
    ctl, dbg, dmn = data.get("controller"), data.get("debug"), data.get("daemon")
    return LabState(
        name=str(data["name"]),
        backend=str(data["backend"]),
        k8s_version=str(data["k8s_version"]),
        directory=str(data["directory"]),
        kubeconfig=str(data["kubeconfig"]),
        cloud_config=str(data["cloud_config"]),
        aws_endpoint=str(data["aws_endpoint"]),
        imds_endpoint=str(data["imds_endpoint"]),
        region=str(data["region"]),
        cluster_id=str(data["cluster_id"]),
        nodes=tuple(NodeState(**{k: str(v) for k, v in n.items()}) for n in data["nodes"]),
        kube_endpoint=data.get("kube_endpoint"),
        token=data.get("token"),
        aws_credentials=_key_pair(data.get("aws_credentials")),
        vpc_id=data.get("vpc_id"),
        node_security_group=data.get("node_security_group"),
        aws=str(data.get("aws", "moto")),
        aws_upstream=data.get("aws_upstream"),
        localstack_container=data.get("localstack_container"),
        controller_image=data.get("controller_image"),
        cluster_changes=_strs(data.get("cluster_changes", [])),
        daemon=None
        if dmn is None
        else DaemonState(_process(dmn["process"]), str(dmn["control_url"]), str(dmn["log"])),
        controller=None
        if ctl is None
        else ControllerState(
            process=_process(ctl["process"]),
            log=str(ctl["log"]),
            flags=_strs(ctl["flags"]),
            legacy_behavior=_strs(ctl["legacy_behavior"]),
            extra_args=_strs(ctl["extra_args"]),
            health_url=ctl.get("health_url"),
            metrics_url=ctl.get("metrics_url"),
            command=_strs(ctl.get("command", [])),
            command_name=str(ctl.get("command_name", "")),
            ready_log=ctl.get("ready_log"),
            ready_url=ctl.get("ready_url"),
        ),
        debug=None
        if dbg is None
        else DebugState(
            process=_process(dbg["process"]),
            address=str(dbg["address"]),
            log_dir=str(dbg["log_dir"]),
            log=str(dbg["log"]),
            adapter=ProcessRef.from_json(dbg.get("adapter")),
            restore_legacy=_strs(dbg["restore_legacy"]),
            restore_args=_strs(dbg["restore_args"]),
        ),
        version=int(data["version"]),
    )


# --- files -----------------------------------------------------------------------------------


def lab_dir(name: str, root: Path | None = None) -> Path:
    return (root or LAB_ROOT).resolve() / name


def make_private_dir(directory: Path) -> Path:
    """Create ``directory`` (and ``.lab``) readable by the user only."""
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    for path in (directory.parent, directory):
        path.chmod(0o700)
    return directory


def write_private(path: Path, text: str) -> Path:
    """Write ``text`` atomically to ``path`` with mode 0600 (readers never see half a file)."""
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(text)
    tmp.replace(path)
    return path


def write_state(state: LabState) -> Path:
    return write_private(
        Path(state.directory) / STATE_FILE, json.dumps(state.to_json(), indent=2) + "\n"
    )


def read_lab_file(directory: Path, name: str) -> dict[str, Any] | None:
    """The JSON object in the lab directory's file ``name`` (``state.json``, ``spec.json``),
    None when there is none; :class:`LabError` saying what to do when it is damaged."""
    path = directory / name
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise LabError(f"{path} is unreadable ({exc}); remove {directory} and start again") from exc
    if not isinstance(data, dict):
        raise LabError(f"{path} is not a JSON object; remove {directory} and start again")
    return data


def read_state(directory: Path) -> LabState | None:
    """The state in ``directory``, None when there is none (a lab that is not up)."""
    data = read_lab_file(directory, STATE_FILE)
    return None if data is None else LabState.from_json(data, source=str(directory / STATE_FILE))


def load_state(name: str, root: Path | None = None) -> LabState:
    """The state of lab ``name``, or a :class:`LabError` saying how to start one."""
    directory = lab_dir(name, root)
    state = read_state(directory)
    if state is None:
        raise LabError(
            f"no lab named {name!r} is up (no {directory / STATE_FILE}); "
            f"start one with `invoke lab.up --name {name}`"
        )
    return state


def node_states(nodes: Sequence[Any]) -> tuple[NodeState, ...]:
    """NodeStates from objects with the same attribute names (``lab.compose.LabNode``)."""
    return tuple(
        NodeState(
            name=n.name,
            role=str(n.role),
            instance_id=n.instance_id,
            private_ip=n.private_ip,
            zone=n.zone,
            provider_id=n.provider_id,
        )
        for n in nodes
    )
