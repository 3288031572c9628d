"""The ``sim`` cluster provider: the embedded API simulator, the kubelet stand-in, a data plane.

The default backend where Docker is absent. Provisioning steps (undone in reverse on failure
unless ``retain``):

1. ``start-apiserver``: a ``lab.kube.server.KubeServer`` on 127.0.0.1, port 0.
2. ``write-kubeconfig``: its kubeconfig copied to ``<state_dir>/kubeconfig``.
3. ``start-kubelets``: the :class:`~lab.cluster.kubelet.KubeletStandIn` heartbeat loop.
4. ``register-nodes``: one registration per :class:`NodeSpec`, shaped for the spec's version.
5. ``start-dataplane``: ``lab.dataplane.plane.SimDataPlane`` for the spec's version: scheduler,
   the controllers of kube-controller-manager that move pods and endpoints (workloads, node
   IPAM, node lifecycle and taint eviction, GC, Endpoints/EndpointSlices), the kubelet's pod
   half and the kube-proxy model, all through the API and on the lab clock (``clock``).

A one-node cluster gets what kind does to it after kubeadm: no control-plane taint and, from
kind v0.22.0, no exclusion label (``versions.kind_single_node_keeps_exclusion_label``). Nodes
without a name get kind's names (``<cluster>-control-plane``, ``<cluster>-worker2`` …) so
scenarios read the same on both backends; nodes without an IP get consecutive addresses from
``node_subnet`` (``.2`` upward, as Docker hands them out on kind's network). The lab aligns the
fake EC2 instances with the result of :meth:`SimProvider.nodes`.

Where a real kubelet or kube-controller-manager is missing, the stand-ins' documented effects
apply: Lease renewal and condition heartbeats (``lab.cluster.kubelet``); Unknown/unreachable
after the node-monitor grace period on ``stop_heartbeat``, taints, pod eviction and the rest
(``lab.dataplane``). ``dataplane=False`` leaves the data plane out (nodes then only heartbeat).

The simulator's store tells :attr:`SimProvider.heads` (``lab.settle.ApiHeads``) of every commit,
so the data plane's informers owe the lab clock what they have not delivered yet and the settle
barrier knows the API's newest revision per type; :meth:`SimProvider.reporters` lists every
stand-in for it.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path
from typing import Any

from lab.clock import LabClock, ScaledClock
from lab.cluster.base import Capabilities, ClusterSpec, NodeInfo, NodeSpec
from lab.cluster.kubeapi import list_node_infos, raw
from lab.cluster.kubelet import KubeletStandIn, NodeRegistration
from lab.cluster.planner import plan_nodes
from lab.cluster.steps import ProgressReporter, Step, StepRun
from lab.dataplane.plane import SimDataPlane
from lab.kube.server import KubeServer
from lab.settle import ApiHeads, Reporter
from lab.versions.provisioning import kind_single_node_keeps_exclusion_label


@dataclasses.dataclass
class SimContext:
    spec: ClusterSpec
    provider: SimProvider
    registered: list[str] = dataclasses.field(default_factory=list)


class StartApiServer:
    name = "start-apiserver"

    def execute(self, ctx: SimContext) -> None:
        p = ctx.provider
        p.simulator = KubeServer(
            version=str(ctx.spec.version),
            workdir=p.state_dir / "apiserver",
            **p.simulator_options,
        )
        p.simulator.store.on_publish = p.heads.published
        p.simulator.start()

    def undo(self, ctx: SimContext) -> None:
        p = ctx.provider
        if p.simulator is not None:
            p.simulator.stop()
            p.simulator = None


class WriteKubeconfig:
    name = "write-kubeconfig"

    def execute(self, ctx: SimContext) -> None:
        p = ctx.provider
        shutil.copyfile(p.require_simulator().kubeconfig_path, p.kubeconfig())
        p.kubeconfig().chmod(0o600)

    def undo(self, ctx: SimContext) -> None:
        ctx.provider.kubeconfig().unlink(missing_ok=True)


class StartKubelets:
    name = "start-kubelets"

    def execute(self, ctx: SimContext) -> None:
        p = ctx.provider
        p.kubelet = p.new_kubelet()
        p.kubelet.start()
        p.require_simulator().attach_lab(f"sim cluster {p.name!r}")

    def undo(self, ctx: SimContext) -> None:
        p = ctx.provider
        if p.simulator is not None:
            p.simulator.attach_lab(None)
        if p.kubelet is not None:
            p.kubelet.stop()
            p.kubelet = None


class RegisterNodes:
    name = "register-nodes"

    def execute(self, ctx: SimContext) -> None:
        p = ctx.provider
        kubelet = p.require_kubelet()
        for node in p.planned:
            kubelet.register(p.registration(str(node.name)))
            ctx.registered.append(str(node.name))

    def undo(self, ctx: SimContext) -> None:
        kubelet = ctx.provider.kubelet
        if kubelet is None:
            return
        for name in reversed(ctx.registered):
            kubelet.unregister(name)
        ctx.registered.clear()


class StartDataPlane:
    name = "start-dataplane"

    def execute(self, ctx: SimContext) -> None:
        p = ctx.provider
        if p.with_dataplane:
            p.dataplane = p.new_dataplane().start()

    def undo(self, ctx: SimContext) -> None:
        p = ctx.provider
        if p.dataplane is not None:
            p.dataplane.stop()
            p.dataplane = None


class SimProvider:
    """A simulated cluster whose state lives under ``state_dir``."""

    kind = "sim"

    def __init__(
        self,
        name: str,
        *,
        state_dir: Path,
        node_subnet: str = "172.18.0.0/16",
        simulator_options: dict[str, Any] | None = None,
        kubelet_options: dict[str, Any] | None = None,
        dataplane: bool = True,
        dataplane_options: dict[str, Any] | None = None,
        clock: LabClock | None = None,
    ) -> None:
        self.name = name
        self.state_dir = state_dir
        self.node_subnet = node_subnet
        self.simulator_options = dict(simulator_options or {})
        self.kubelet_options = dict(kubelet_options or {})
        self.with_dataplane = dataplane
        self.dataplane_options = dict(dataplane_options or {})
        #: the lab clock every timed stand-in runs on (lab seconds; ``lab.clock``)
        self.clock: LabClock = clock or ScaledClock()
        #: the API's newest revision per type, fed by the simulator's store (``lab.settle``)
        self.heads = ApiHeads(self.clock)
        self.simulator: KubeServer | None = None
        self.kubelet: KubeletStandIn | None = None
        self.dataplane: SimDataPlane | None = None
        self.spec: ClusterSpec | None = None
        #: the spec's nodes with names and IPs filled in (``lab.cluster.planner``)
        self.planned: list[NodeSpec] = []
        self._run: StepRun[SimContext] | None = None
        self._ctx: SimContext | None = None
        self._api_client: Any = None

    def capabilities(self) -> Capabilities:
        return Capabilities(
            provisions=True,
            real_kubelet=False,
            real_controller_manager=False,
            load_images=False,
            stop_node_heartbeat=True,
            kubelet_stand_in=True,
            assigns_node_ips=False,
            lab_time=True,
        )

    def steps(self) -> list[Step[SimContext]]:
        return [
            StartApiServer(),
            WriteKubeconfig(),
            StartKubelets(),
            RegisterNodes(),
            StartDataPlane(),
        ]

    def prepare(self, spec: ClusterSpec) -> None:
        """Nothing has to exist before the lab's endpoints start."""

    def provision(
        self, spec: ClusterSpec, *, retain: bool = False, progress: ProgressReporter | None = None
    ) -> None:
        if spec.name != self.name:
            raise ValueError(f"spec.name {spec.name!r} differs from provider name {self.name!r}")
        # validate (and fill in) before starting anything
        self.planned = plan_nodes(spec, subnets=[(None, self.node_subnet)], first_host=2)
        self.spec = spec
        self.state_dir.mkdir(parents=True, exist_ok=True)
        self._ctx = SimContext(spec=spec, provider=self)
        self._run = StepRun(self.steps(), progress=progress)
        self._run.run(self._ctx, retain=retain)  # on failure delete() undoes what was retained

    # --- the kubelets and the data plane -------------------------------------------------

    def new_kubelet(self) -> KubeletStandIn:
        return KubeletStandIn(self.api_client(), clock=self.clock, **self.kubelet_options)

    def new_dataplane(self) -> SimDataPlane:
        if self.spec is None:
            raise RuntimeError(f"sim cluster {self.name!r} is not provisioned")
        return SimDataPlane(
            self.api_client(),
            version=self.spec.version,
            hosts=self.require_kubelet(),
            clock=self.clock,
            heads=self.heads,
            **self.dataplane_options,
        )

    def require_dataplane(self) -> SimDataPlane:
        if self.dataplane is None:
            raise RuntimeError(f"sim cluster {self.name!r} runs no data plane")
        return self.dataplane

    def registration(self, name: str, /, **changes: Any) -> NodeRegistration:
        """How the stand-in registers the planned node ``name`` (tweak with ``changes``).

        A one-node cluster gets what kind does to it after kubeadm: no control-plane taint
        and, from kind v0.22.0, no exclusion label, so scenarios see the same node on both
        backends.
        """
        if self.spec is None:
            raise RuntimeError(f"sim cluster {self.name!r} is not provisioned")
        node = next((n for n in self.planned if n.name == name), None)
        if node is None or node.ip is None:
            known = ", ".join(str(n.name) for n in self.planned)
            raise KeyError(f"sim cluster {self.name!r} has no node {name!r}; it has: {known}")
        single = len(self.planned) == 1
        reg = NodeRegistration(
            name=name,
            ip=node.ip,
            version=self.spec.version,
            role=node.role,
            provider_id=node.provider_id,
            labels=dict(node.labels),
            control_plane_taints=not single,
            exclusion_label=not single or kind_single_node_keeps_exclusion_label(self.spec.version),
        )
        return dataclasses.replace(reg, **changes) if changes else reg

    def reregister(self, name: str, /, **changes: Any) -> dict[str, Any]:
        """Register node ``name`` again as a kubelet started with other flags would: the Node
        (and its Lease) is deleted and created anew from :meth:`registration` with
        ``changes``. Returns the new Node as the server has it."""
        kubelet = self.require_kubelet()
        reg = self.registration(name, **changes)
        kubelet.unregister(name, delete=True)
        return dict(kubelet.register(reg))

    def remove_node(self, name: str) -> None:
        """Delete node ``name`` and stop its kubelet."""
        self.require_kubelet().unregister(name, delete=True)

    # --- what only the simulator has (``lab.compose.Lab.sim`` hands these out) ------------

    @property
    def kube(self) -> KubeServer:
        """The embedded API simulator (its ``control`` plane, ``store``, ``workdir``)."""
        return self.require_simulator()

    @property
    def stand_in(self) -> KubeletStandIn:
        """The kubelet stand-in: heartbeats, Leases, NotReady at will."""
        return self.require_kubelet()

    @property
    def plane(self) -> SimDataPlane:
        """The data plane: scheduler, controllers, kubelet pods, kube-proxy model."""
        return self.require_dataplane()

    # --- the ClusterProvider interface -----------------------------------------------------

    def require_simulator(self) -> KubeServer:
        if self.simulator is None:
            raise RuntimeError(f"sim cluster {self.name!r} is not provisioned")
        return self.simulator

    def require_kubelet(self) -> KubeletStandIn:
        if self.kubelet is None:
            raise RuntimeError(f"sim cluster {self.name!r} has no running kubelet stand-in")
        return self.kubelet

    def api_client(self) -> Any:
        if self._api_client is None:
            self._api_client = self.require_simulator().api_client()
        return self._api_client

    def api_url(self) -> str | None:
        return self.simulator.url if self.simulator is not None else None

    def host_address(self) -> str:
        return "127.0.0.1"

    def nodes(self) -> list[NodeInfo]:
        return list_node_infos(self.api_client())

    def kubeconfig(self) -> Path:
        return self.state_dir / "kubeconfig"

    def baseline(self) -> None:
        """Nothing to remember: the baseline is the planned registrations."""

    def reset_objects(self) -> None:
        """Wipe the simulator (back to its seeded namespaces) and register every node anew."""
        sim = self.require_simulator()
        kubelet = self.require_kubelet()
        if self.dataplane is not None:
            self.dataplane.stop()
            self.dataplane = None
        kubelet.stop()
        sim.attach_lab(None)  # the stand-ins are stopped: the wipe is safe now
        try:
            sim.control.reset()
        finally:
            sim.attach_lab(f"sim cluster {self.name!r}")
        self.kubelet = self.new_kubelet()
        for node in self.planned:
            self.kubelet.register(self.registration(str(node.name)))
        self.kubelet.start()
        if self.with_dataplane:
            self.dataplane = self.new_dataplane().start()

    def reporters(self) -> list[Reporter]:
        """The kubelet stand-in and every data-plane component (``lab.settle``)."""
        out: list[Reporter] = []
        if self.kubelet is not None:
            out.append(self.kubelet)
        if self.dataplane is not None:
            out += self.dataplane.reporters()
        return out

    def take_internal_errors(self) -> list[str]:
        errors = self.simulator.take_internal_errors() if self.simulator is not None else []
        if self.kubelet is not None:
            errors += [f"kubelet stand-in: {e}" for e in self.kubelet.errors]
            self.kubelet.errors.clear()
        if self.dataplane is not None:
            errors += [f"data plane: {e}" for e in self.dataplane.take_errors()]
        return errors

    def stop_heartbeat(self, node: str) -> None:
        self.require_kubelet().stop_heartbeat(node)

    def resume_heartbeat(self, node: str) -> None:
        self.require_kubelet().resume_heartbeat(node)

    def report_not_ready(self, node: str, message: str | None = None) -> None:
        """The node's kubelet keeps heartbeating but reports Ready=False."""
        kubelet = self.require_kubelet()
        if message is None:
            kubelet.report_not_ready(node)
        else:
            kubelet.report_not_ready(node, message)

    def report_ready(self, node: str) -> None:
        self.require_kubelet().report_ready(node)

    def logs(self, dest: Path) -> Path:
        """Node, Lease and Pod objects as JSON, plus simulator handler and stand-in errors."""
        from kubernetes import client

        dest.mkdir(parents=True, exist_ok=True)
        api_client = self.api_client()
        nodes = raw(client.CoreV1Api(api_client).list_node(_preload_content=False))
        leases = raw(
            client.CoordinationV1Api(api_client).list_namespaced_lease(
                "kube-node-lease", _preload_content=False
            )
        )
        pods = raw(client.CoreV1Api(api_client).list_pod_for_all_namespaces(_preload_content=False))
        (dest / "nodes.json").write_text(json.dumps(nodes, indent=2))
        (dest / "leases.json").write_text(json.dumps(leases, indent=2))
        (dest / "pods.json").write_text(json.dumps(pods, indent=2))
        errors = self.require_simulator().internal_errors()
        (dest / "apiserver-handler-errors.txt").write_text("\n".join(errors))
        kubelet_errors = self.kubelet.errors if self.kubelet else []
        (dest / "kubelet-stand-in-errors.txt").write_text("\n".join(kubelet_errors))
        return dest

    def delete(self) -> None:
        """Stop the stand-in and the simulator (in reverse of provisioning). Idempotent."""
        if self._api_client is not None:
            self._api_client.close()
            self._api_client = None
        if self._run is not None and self._ctx is not None:
            errors = self._run.undo_all(self._ctx)
            self._run = None
            if errors:
                name, err = errors[0]
                raise RuntimeError(f"sim cluster {self.name!r}: undo of {name} failed: {err}")
