"""The composed lab: AWS endpoint, EC2 topology, metadata, cluster, controller.

One :class:`Lab` object owns every part of one lab and brings them up as ordered start steps
(``lab.compose.steps``, kind's ``create/actions`` pattern), undone in reverse when one fails, so
a failed start leaves nothing behind. Its parts, grouped by what they belong to:

* the cluster provider (``lab.cluster``: sim, kind, existing), chosen by ``config.backend``;
  the lab never asks which backend it runs on, it asks the provider's ``capabilities()``, and
  what only the simulator has (its API server, the kubelet stand-in, the data plane) is the
  sim provider's, reached through :attr:`Lab.sim`;
* the AWS side (``lab.compose.aws_side``: the lab's moto, a LocalStack, a real account), chosen
  by ``config.aws``, which the lab asks instead of branching on the kind;
* the metadata service and the EC2 world, with both in :class:`~lab.compose.parts.LabParts`;
* the controller (``lab.compose.controller``), started on demand with the flags a test or task
  wants.

It serves pytest (``lab.pytest_plugin``: one lab per session or xdist worker, ``reset()``
between tests, restoring the freshly seeded world without restarting servers) and
``invoke lab.up`` (``lab.daemon`` hosts it). Neighbours: ``lab.compose.factory`` (which parts
a config gets), ``lab.spec``, ``lab.settle`` (the barrier), ``lab.traffic``.
"""

from __future__ import annotations

import logging
import secrets
import tempfile
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, Self

from lab.aws.topology import Topology
from lab.clock import LabClock, ScaledClock
from lab.cluster.base import Capabilities, ClusterProvider
from lab.cluster.sim import SimProvider
from lab.cluster.steps import ProgressReporter, StepRun
from lab.component.heap import collector_paused, thaw
from lab.compose.aws_side import Endpoint
from lab.compose.base import LabNotReady
from lab.compose.controller import ControllerPart, ControllerSite
from lab.compose.factory import make_parts, with_free_vpc
from lab.compose.node import LabNode
from lab.compose.parts import LabParts
from lab.compose.probe import traffic_probe
from lab.compose.steps import start_steps
from lab.compose.world import World
from lab.controllerproc import ControllerCommand, ControllerProcess, ControllerSpec
from lab.imds import ImdsServer
from lab.settle import Reporter, settle
from lab.spec import LabSpec
from lab.state import LabState
from lab.traffic.clusters import NodeAddress, instance_address
from lab.traffic.probe import TrafficProbe
from lab.versions.release import KubeVersion

log = logging.getLogger(__name__)


class Lab:
    """A whole lab in this process (servers in threads, the controller as a child process)."""

    def __init__(self, config: LabSpec | None = None) -> None:
        self._config = config or LabSpec()
        self.version: KubeVersion = KubeVersion.parse(self._config.k8s_version)
        #: the lab clock (``lab.clock``) every timed part of this lab runs on
        self.clock: LabClock = ScaledClock(self._config.clock_speed)
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        self.state_dir = self._config.state_dir or Path()
        #: the lab's secret (see ``LabState.token``): its control planes' bearer token
        self.token = secrets.token_urlsafe(24)
        #: the parts of the last start (kept after ``stop()``: the cluster says what it was)
        self._parts: LabParts | None = None
        self._run: StepRun[LabParts] | None = None
        self.controllers = ControllerPart()
        #: True right after start() or reset(): nothing has touched the world yet.
        self.fresh = False

    @property
    def config(self) -> LabSpec:
        """The config; a start may fill in what it chose (the VPC block)."""
        return self._parts.config if self._parts is not None else self._config

    @config.setter
    def config(self, config: LabSpec) -> None:
        self._config = config
        if self._parts is not None:
            self._parts.config = config

    # --- lifecycle ------------------------------------------------------------------------

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(
        self, *, progress: ProgressReporter | None = None, warm_controller: bool = True
    ) -> Self:
        """Bring every part up in order (the collector paused: ``lab.component.heap``); on
        failure undo what was done and raise ``ProvisionError`` naming the step.
        ``warm_controller``: our controller's fork server starts (imports) meanwhile."""
        with collector_paused(keep=True):  # thawed by stop()
            if warm_controller:
                self.controllers.warm(self.config.controller_command, self.config.controller_launch)
            if self.config.state_dir is None:
                self._tmp = tempfile.TemporaryDirectory(prefix=f"ccm-lab-{self.config.name}-")
                self.state_dir = Path(self._tmp.name)
            self.state_dir.mkdir(parents=True, exist_ok=True)
            self.config = with_free_vpc(self.config)
            self._parts = make_parts(
                self.config, version=self.version, state_dir=self.state_dir, clock=self.clock,
                token=self.token, node_address=self.node_address,
            )  # fmt: skip
            self._run = StepRun(start_steps(), progress=progress)
            try:
                self._run.run(self._parts)
            except BaseException:
                self._run = None
                self._cleanup_tmp()
                raise
        self.fresh = True
        return self

    def stop(self) -> None:
        """Stop everything this lab started. Idempotent; leaves no process or port behind."""
        self.stop_controller()
        if self._run is not None and self._parts is not None:
            errors = self._run.undo_all(self._parts)
            self._run = None
            for name, err in errors:
                log.warning("stopping the lab: %s failed: %s", name, err)
        self._cleanup_tmp()
        thaw()

    def _cleanup_tmp(self) -> None:
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None

    def _started(self) -> LabParts:
        if self._parts is None:
            raise LabNotReady("the lab is not started (call start() first)")
        return self._parts

    #: where a real request or health check for an instance's port connects (kind: the node
    #: container's IP, the instance's private address); tests with fake node containers point
    #: it at loopback
    node_address: NodeAddress = staticmethod(instance_address)

    def reset(self) -> None:
        """Back to the freshly seeded world; the controller is killed, not asked to stop:
        everything it could clean up on the way out is wiped anyway."""
        parts = self._started()
        parts.aws.check_reset()
        self.stop_controller(kill=True)
        parts.reset()
        self.fresh = True

    # --- controller -----------------------------------------------------------------------

    def _site(self, imds: bool, cloud_config: Path | None) -> Callable[[], ControllerSite]:
        return lambda: self._started().controller_site(imds=imds, cloud_config=cloud_config)

    def controller_spec(
        self,
        *,
        legacy: Iterable[str] = (),
        args: Sequence[str] = (),
        imds: bool = True,
        cloud_config: Path | None = None,
        command: ControllerCommand | None = None,
    ) -> ControllerSpec:
        """``command``: another controller build (``--controller-cmd``) instead of ours; then
        ``legacy`` and ``args`` (our controller's flags) must be empty."""
        site = self._site(imds, cloud_config)
        return self.controllers.spec(site, legacy=legacy, args=args, command=command)

    def stop_controller(self, *, kill: bool = False) -> None:
        """Stop the controller if one runs (``kill``: without letting it clean up)."""
        self.controllers.stop(kill=kill)

    def start_controller(
        self,
        *,
        legacy: Iterable[str] = (),
        args: Sequence[str] = (),
        imds: bool = True,
        cloud_config: Path | None = None,
        wait_ready: bool = True,
        command: ControllerCommand | None = None,
    ) -> ControllerProcess:
        """(Re)start the controller with these flags; waits until it is ready unless told not
        (ours: ``/readyz``; ``command``: its own readiness signal).

        With the spec's ``controller_command`` (pytest ``--controller-cmd``), that build runs
        instead of ours; a call asking for our controller's flags (``legacy``, ``args``) is
        handed to :attr:`needs_our_controller` (``ControllerPart.build_under_test``)."""
        return self.controllers.start(
            self._site(imds, cloud_config),
            legacy=legacy,
            args=args,
            command=command,
            under_test=self.config.controller_command,
            fork_ours=self.config.controller_launch == "fork",
            trail_seq=lambda: self.aws.trail.last_seq,
            wait_ready=wait_ready,
        )

    @property
    def controller(self) -> ControllerProcess | None:
        """The controller process running now (``stop_controller``/``reset`` stop it)."""
        return self.controllers.process

    @controller.setter
    def controller(self, process: ControllerProcess | None) -> None:
        self.controllers.process = process

    @property
    def controller_since_seq(self) -> int:
        return self.controllers.since_seq

    @property
    def needs_our_controller(self) -> Callable[[str], bool] | None:
        return self.controllers.needs_ours

    @needs_our_controller.setter
    def needs_our_controller(self, decide: Callable[[str], bool] | None) -> None:
        self.controllers.needs_ours = decide

    # --- settling and time ------------------------------------------------------------------

    def settle(self, timeout: float = 30.0) -> int:
        """Wait until every in-lab component has caught up with the API and has nothing left
        to do now (``lab.settle``): the sim's stand-ins and data plane (the provider's
        ``reporters()``), the ELB and NLB health models, and the metadata service (which
        forgets its instance cache). On kind the cluster's components are real and not
        covered: wait for their evidence; nor is the controller under test. Returns the
        rounds it took; ``lab.settle.SettleTimeout`` names who did not settle."""
        parts = self._parts
        if parts is not None and parts.imds is not None:
            parts.imds.forget_cache()
        return settle(self._reporters, clock=self.clock, timeout=timeout, heads=self._heads)

    def _reporters(self) -> list[Reporter]:
        return [*self.cluster.reporters(), *self._started().aws.reporters()]

    def _heads(self) -> dict[tuple[str, str], int]:
        cluster = self._parts.cluster if self._parts is not None else None
        return cluster.heads.snapshot() if isinstance(cluster, SimProvider) else {}

    def set_clock_speed(self, speed: float) -> float:
        """Run the lab clock at ``speed`` lab seconds per real second from now on (every timed
        stand-in and the ELB's health checks follow); returns the speed it had. Lab time stays
        continuous and timestamps already written keep their lab age (``lab.clock``)."""
        clock = self.clock
        if not isinstance(clock, ScaledClock):
            raise TypeError(f"the lab clock {clock!r} has no speed to set")
        before = clock.speed
        clock.speed = speed
        return before

    @property
    def settles_cluster(self) -> bool:
        """True where :meth:`settle` covers the cluster's own components (sim: once it returns,
        kube-proxy's and the controllers' informers have seen every change, so one look is the
        answer); on kind their absence of reaction can only be observed over a window."""
        return bool(self.cluster.reporters())

    def write_cloud_config(self, *, extra_global: Sequence[tuple[str, str]] = ()) -> Path:
        """Rewrite the cloud config (e.g. ``ElbSecurityGroup``); restart the controller after."""
        return self._started().write_cloud_config(extra_global)

    # --- the parts ------------------------------------------------------------------------

    @property
    def cluster(self) -> ClusterProvider:
        return self._started().cluster

    @property
    def capabilities(self) -> Capabilities:
        return self.cluster.capabilities()

    @property
    def sim(self) -> SimProvider:
        """The sim provider and what only it has: the API simulator (``kube``), the kubelet
        stand-in (``stand_in``, node re-registration), the data plane (``plane``)."""
        cluster = self.cluster
        if not isinstance(cluster, SimProvider):
            raise LabNotReady(
                f"the {self.config.backend} backend has real kubelets and no API simulator; "
                "this needs the sim backend (its kubelet stand-in and data plane)"
            )
        return cluster

    def _aws_parts(self) -> LabParts:
        if self._parts is None:
            raise LabNotReady("the lab's AWS endpoint is not running (start the lab first)")
        return self._parts

    @property
    def aws(self) -> Endpoint:
        """The lab's AWS endpoint: its moto (``AwsServer``), or the recording proxy in front
        of another (``ProxiedAws``); both hand out clients, ``control`` and ``trail``."""
        return self._aws_parts().endpoint()

    def aws_lacks(self, *features: str) -> dict[str, str]:
        """Which of the lab's AWS ``features`` (``lab.aws.proxied.FEATURES``) this lab's
        endpoint does not have, each with the reason (empty on the lab's moto)."""
        return self._aws_parts().aws.lacks(features)

    def describe_aws(self) -> str:
        """The AWS endpoint in words (messages, skip reasons)."""
        return self._parts.aws.describe() if self._parts is not None else "no AWS endpoint"

    @property
    def aws_caller_credentials(self) -> tuple[str, str] | None:
        """``aws="real"``: the key pair the recording proxy accepts from callers (the
        controller, the lab's clients), fresh per lab (see ``LabState.aws_credentials``)."""
        return self._parts.aws.caller_credentials if self._parts is not None else None

    @property
    def imds(self) -> ImdsServer:
        if self._parts is None:
            raise LabNotReady("the lab's metadata service is not running (start the lab first)")
        return self._parts.running_imds()

    @property
    def traffic(self) -> TrafficProbe:
        """Where requests to a LoadBalancer Service go, hop by hop: modelled through the sim's
        data plane, or (real kubelets: kind) really sent to the nodes (``lab.traffic``). Each
        call settles the lab first (:meth:`settle`)."""
        return self.traffic_probe(settle=True)

    def traffic_probe(self, *, settle: bool) -> TrafficProbe:
        """:attr:`traffic`; without ``settle`` the probe models the lab as it is (the lab
        daemon settles first itself, and answers anyway if the lab does not settle)."""
        if self._parts is None:
            raise LabNotReady("the lab's AWS endpoint is not running (start the lab first)")
        before = self.settle if settle else None
        return traffic_probe(self._parts, node_address=self.node_address, settle=before)

    # --- what the parts say -------------------------------------------------------------

    @property
    def world(self) -> World:
        """The EC2 world and the nodes in it (empty before ``seed-aws``)."""
        return self._parts.world if self._parts is not None else World()

    @property
    def topology(self) -> Topology | None:
        return self.world.topology

    @property
    def nodes(self) -> list[LabNode]:
        return self.world.nodes

    @property
    def control_plane(self) -> LabNode:
        return self.world.control_plane

    @property
    def workers(self) -> list[LabNode]:
        return self.world.workers

    def node(self, name: str) -> LabNode:
        return self.world.node(name)

    @property
    def cluster_changes(self) -> list[str]:
        """What the lab changed in a cluster it did not create (backend existing), one line
        each: it creates nothing there, and ``stop()`` deletes nothing there."""
        return self._parts.cluster_changes if self._parts is not None else []

    @property
    def kubeconfig_path(self) -> Path:
        return self.cluster.kubeconfig()

    @property
    def cloud_config_path(self) -> Path:
        return self.state_dir / "cloud.conf"

    def api_client(self) -> Any:
        """A ``kubernetes.client.ApiClient`` for the lab's cluster (one, shared)."""
        return self.cluster.api_client()

    def take_internal_errors(self) -> dict[str, list[str]]:
        """Exceptions any component caught while serving since the last call, by component
        (empty lists left out). A test fixture fails the test that caused them."""
        found = {
            "AWS endpoint": self.aws.take_internal_errors(),
            "metadata service": self.imds.take_internal_errors(),
            "cluster": self.cluster.take_internal_errors(),
        }
        return {k: v for k, v in found.items() if v}

    def state(self, directory: Path) -> LabState:
        """The ``state.json`` document for this lab (no daemon or controller yet)."""
        return self._started().state(directory)
