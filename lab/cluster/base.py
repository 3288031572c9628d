"""The cluster provider interface and provider selection.

A provider turns a :class:`ClusterSpec` (name, Kubernetes version, nodes with their AWS
provider IDs and addresses) into a reachable cluster, and afterwards answers ``nodes()``,
``kubeconfig()``, ``logs()`` and ``delete()``. Three implementations sit beside this module:
``sim`` (the embedded API simulator plus the kubelet stand-in), ``kind`` (real kind through its
CLI) and ``existing`` (any kubeconfig). The interface is deliberately small, in the spirit of
kind's internal ``Provider`` (docs/reference/style-anchors.md §A4), with a :class:`Capabilities`
value saying what a backend can and cannot do so tests can skip with a reason instead of
guessing. Provisioning itself is an ordered list of steps (``lab.cluster.steps``).

:func:`choose_provider` picks ``kind`` when a Docker engine answers ``docker info`` quickly and
the kind CLI is on PATH, else ``sim``, and always says why.
"""

from __future__ import annotations

import dataclasses
import enum
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, NewType, Protocol

from lab.cluster.steps import ProgressReporter
from lab.exec import CommandError, Runner, SubprocessRunner
from lab.settle import Reporter
from lab.versions.release import KubeVersion

if TYPE_CHECKING:
    from kubernetes.client import ApiClient

ProviderID = NewType("ProviderID", str)
NodeName = NewType("NodeName", str)


class Role(enum.StrEnum):
    CONTROL_PLANE = "control-plane"
    WORKER = "worker"


@dataclasses.dataclass(frozen=True)
class NodeSpec:
    """A node the lab wants.

    ``name``/``ip`` may be None where the backend assigns them: kind names nodes
    ``<cluster>-<role>[N]`` and Docker hands out the IPs (a requested ``ip`` cannot be honoured
    there; the provider reports the real addresses through its ``on_nodes`` hook), the sim
    backend fills both the same way. ``labels`` become kubelet ``--node-labels`` (kubelet only
    accepts ``kubernetes.io`` keys on its allow-list, e.g. topology and instance-type).
    """

    role: Role = Role.WORKER
    name: str | None = None
    ip: str | None = None
    provider_id: ProviderID | None = None
    labels: Mapping[str, str] = dataclasses.field(default_factory=dict, hash=False)
    #: the availability zone of the node's instance (the planner fills it; the cluster itself
    #: does not care)
    zone: str | None = None


@dataclasses.dataclass(frozen=True)
class ClusterSpec:
    name: str
    version: KubeVersion
    nodes: tuple[NodeSpec, ...]

    def __post_init__(self) -> None:
        if not self.nodes:
            raise ValueError(f"cluster {self.name!r}: nodes must not be empty")
        if not any(n.role is Role.CONTROL_PLANE for n in self.nodes):
            raise ValueError(f"cluster {self.name!r}: nodes need at least one control-plane")


@dataclasses.dataclass(frozen=True)
class NodeInfo:
    """A node as the provisioned cluster has it."""

    name: NodeName
    role: Role
    ip: str | None
    provider_id: ProviderID | None = None


@dataclasses.dataclass(frozen=True)
class Capabilities:
    """What a backend offers; tests consult these and skip with the field name as reason."""

    provisions: bool  # creates and deletes its own cluster
    real_kubelet: bool  # Node objects come from real kubelets
    real_controller_manager: bool  # a real kube-controller-manager (node lifecycle, GC) runs
    load_images: bool  # can load a locally built controller image into the nodes
    stop_node_heartbeat: bool  # can make a node NotReady on request
    #: the lab's kubelet stand-in registers the nodes: they can be re-registered with other
    #: kubelet flags, removed and made NotReady at will (``SimProvider.stand_in``)
    kubelet_stand_in: bool = False
    #: node IPs are assigned by the backend (Docker), not taken from the spec: the lab aligns
    #: its EC2 instances with ``nodes()`` after provisioning
    assigns_node_ips: bool = False
    #: the cluster's own components (kubelets, kube-proxy, node lifecycle) run on the lab clock,
    #: so a faster clock speeds them up with the ELB's health checks; where they run in real
    #: time (kind, existing) only the lab's side (health checks) follows its clock, and the
    #: catalog does not speed it up there
    lab_time: bool = False
    #: Address at which processes inside the cluster reach the host (the lab's AWS endpoint and
    #: IMDS must listen there); None when everything runs on the host.
    host_address_for_nodes: str | None = None


class ClusterProvider(Protocol):
    """A provisioned-or-attachable cluster. One instance per lab cluster.

    The lab (``lab.compose.Lab``) drives every backend through this interface only: it asks
    ``capabilities()`` what the backend can do instead of asking which backend it is.
    """

    @property
    def kind(self) -> str: ...  # "sim" | "kind" | "existing"

    def capabilities(self) -> Capabilities: ...

    def prepare(self, spec: ClusterSpec) -> None:
        """Create what must exist before the lab's endpoints start (kind: the Docker network
        whose gateway they may listen on; nothing elsewhere). Idempotent; ``delete()`` undoes
        it."""
        ...

    def provision(
        self, spec: ClusterSpec, *, retain: bool = False, progress: ProgressReporter | None = None
    ) -> None:
        """Bring the cluster up. On failure everything done so far is undone unless
        ``retain``; raises ``lab.cluster.steps.ProvisionError``."""
        ...

    def nodes(self) -> Sequence[NodeInfo]: ...

    def kubeconfig(self) -> Path: ...

    def api_client(self) -> ApiClient:
        """The official client's ``ApiClient`` for this cluster (one, shared, closed by
        ``delete()``)."""
        ...

    def api_url(self) -> str | None:
        """The API server's URL as the kubeconfig names it, None before provisioning."""
        ...

    def host_address(self) -> str:
        """Where processes inside the cluster reach the host (``127.0.0.1`` when the cluster
        runs on the host itself)."""
        ...

    def baseline(self) -> None:
        """Remember the cluster's objects as they are now: ``reset_objects()`` returns there."""
        ...

    def reset_objects(self) -> None:
        """Back to the baseline: what tests created is removed, the nodes are as registered."""
        ...

    def take_internal_errors(self) -> list[str]:
        """Errors the backend's own stand-ins hit while serving (and forget them)."""
        ...

    def reporters(self) -> list[Reporter]:
        """The backend's in-lab components, for the settle barrier (``lab.settle``): the
        sim's stand-ins; none where real components run."""
        ...

    def logs(self, dest: Path) -> Path:
        """Collect logs under ``dest``; returns the directory written."""
        ...

    def delete(self) -> None:
        """Tear down what ``provision`` made. Idempotent."""
        ...


# --- selection --------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class ProviderChoice:
    name: str  # "kind" | "sim" | "existing"
    reason: str


def choose_provider(
    requested: str | None = None,
    *,
    runner: Runner | None = None,
    docker_timeout: float = 5.0,
    kind_binary: str = "kind",
) -> ProviderChoice:
    """Pick the backend: honour ``requested``; else ``kind`` when a Docker engine answers
    ``docker info`` within ``docker_timeout`` seconds and ``kind`` is on PATH; else ``sim``."""
    if requested is not None:
        if requested not in ("sim", "kind", "existing"):
            raise ValueError(f"backend {requested!r} is not one of sim, kind, existing")
        return ProviderChoice(requested, f"{requested} was requested explicitly")
    runner = runner or SubprocessRunner()
    started = time.monotonic()
    try:
        result = runner.run(
            ["docker", "info", "--format", "{{.ServerVersion}}"], timeout=docker_timeout
        )
    except CommandError as err:
        return ProviderChoice("sim", f"no Docker engine answered `docker info`: {err.reason}")
    elapsed = time.monotonic() - started
    version = result.stdout.strip() or "unknown version"
    kind_probe = _probe_kind(runner, kind_binary)
    if kind_probe is not None:
        return ProviderChoice(
            "sim", f"Docker engine {version} answered but the kind CLI is unusable: {kind_probe}"
        )
    return ProviderChoice(
        "kind",
        f"Docker engine {version} answered `docker info` in {elapsed:.1f}s and kind is on PATH",
    )


def _probe_kind(runner: Runner, kind_binary: str) -> str | None:
    try:
        runner.run([kind_binary, "version"], timeout=10)
    except CommandError as err:
        return err.reason
    return None
