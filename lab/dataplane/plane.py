"""The sim backend's data plane as one object: every stand-in, started and stopped together.

Role: the sim cluster provider (``lab.cluster.sim``) builds a :class:`SimDataPlane` next to the
kubelet stand-in, for the cluster's Kubernetes version and the lab clock. It owns one API
client (a pool sized for the watches), the shared informers, and the stand-ins: kube-scheduler
(``scheduler``), the ReplicaSet, Deployment, node IPAM, node lifecycle, taint-eviction,
garbage-collector, Endpoints and EndpointSlice controllers, the kubelet's pod half
(``kubelet_pods``, driven by the node half it is given) and the kube-proxy model
(``kubeproxy``). :meth:`SimDataPlane.start` waits for the informers to sync before any
controller acts; :meth:`SimDataPlane.stop` is idempotent and leaves no thread behind.
Errors the stand-ins could not recover from are handed out by :meth:`take_errors` (the sim
provider reports them as internal errors, which fail the test that caused them).

Progress: every informer, controller and the event writer report where they are
(:meth:`SimDataPlane.reporters`, for ``lab.settle``); given the API's heads
(``lab.settle.ApiHeads``, which the sim provider wires to its simulator) the informers know
what "caught up" means and owe the lab clock what they have not delivered yet.

The public surface the traffic probe and the sim prober use: ``kube_proxy`` (route,
health_check_node_port, healthz), ``kubelet`` (set_ready, evict, shutdown_node, logs, pod_at).
"""

from __future__ import annotations

import logging
import random
from collections.abc import Mapping
from typing import Any

from lab.clock import LabClock, ScaledClock
from lab.dataplane.api import Api, new_api_client
from lab.dataplane.controller import Controller
from lab.dataplane.deployments import DeploymentController
from lab.dataplane.endpoints import EndpointsController
from lab.dataplane.endpointslices import EndpointSliceController
from lab.dataplane.events import EventSink
from lab.dataplane.gc import GarbageCollector
from lab.dataplane.informers import Informers
from lab.dataplane.ipam import DEFAULT_CLUSTER_CIDR, NodeIpamController
from lab.dataplane.kubelet_pods import KubeletHosts, KubeletPods
from lab.dataplane.kubeproxy import KubeProxyModel
from lab.dataplane.nodelifecycle import NodeLifecycleController, TaintEvictionController
from lab.dataplane.replicasets import ReplicaSetController
from lab.dataplane.scheduler import Scheduler
from lab.settle import ApiHeads, Reporter
from lab.versions.dataplane import (
    deployment_behaviour,
    endpoints_behaviour,
    kube_proxy_behaviour,
    kubelet_behaviour,
    node_lifecycle_behaviour,
)
from lab.versions.release import KubeVersion

log = logging.getLogger(__name__)


class SimDataPlane:
    """Every data-plane stand-in of one sim cluster (see the module doc)."""

    def __init__(
        self,
        api_client: Any,
        *,
        version: KubeVersion | str,
        hosts: KubeletHosts,
        clock: LabClock | None = None,
        seed: int = 0,
        node_monitor_grace_period: float | None = None,
        node_monitor_period: float = 5.0,
        cluster_cidr: str = DEFAULT_CLUSTER_CIDR,
        ip_policy: str = "lowest-free",
        feature_gates: Mapping[str, bool] | None = None,
        heads: ApiHeads | None = None,
    ) -> None:
        self.version = KubeVersion.parse(version)
        self.feature_gates = dict(feature_gates or {})
        self.clock: LabClock = clock or ScaledClock()
        self._client = new_api_client(api_client)
        self.api = Api(self._client)
        self.events: EventSink | None = None
        self.informers = Informers(self.api, heads=heads)
        self.scheduler = Scheduler(self.api, self.informers, self.clock, rng=random.Random(seed))
        self._controller_manager(
            cluster_cidr=cluster_cidr,
            grace=node_monitor_grace_period,
            monitor_period=node_monitor_period,
        )
        self._node_components(hosts, ip_policy=ip_policy)
        self._started = False

    def _controller_manager(
        self, *, cluster_cidr: str, grace: float | None, monitor_period: float
    ) -> None:
        """kube-controller-manager's stand-ins, each with its release's behaviour."""
        lifecycle = node_lifecycle_behaviour(self.version)
        endpoints = endpoints_behaviour(self.version)
        self.replica_sets = ReplicaSetController(self.api, self.informers, self.clock)
        self.deployments = DeploymentController(
            self.api, self.informers, self.clock, behaviour=deployment_behaviour(self.version)
        )
        self.node_ipam = NodeIpamController(
            self.api, self.informers, self.clock, cluster_cidr=cluster_cidr
        )
        self.node_lifecycle = NodeLifecycleController(
            self.api,
            self.informers,
            self.clock,
            behaviour=lifecycle,
            grace=grace,
            monitor_period=monitor_period,
        )
        self.taint_eviction = TaintEvictionController(
            self.api, self.informers, self.clock, behaviour=lifecycle
        )
        self.garbage_collector = GarbageCollector(self.api, self.informers, self.clock)
        self.endpoints = EndpointsController(
            self.api, self.informers, self.clock, behaviour=endpoints
        )
        self.endpoint_slices = EndpointSliceController(
            self.api, self.informers, self.clock, behaviour=endpoints
        )

    def _node_components(self, hosts: KubeletHosts, *, ip_policy: str) -> None:
        """The kubelets' pod half and the kube-proxy model over it."""
        self.kubelet = KubeletPods(
            self.api,
            self.informers,
            self.clock,
            hosts=hosts,
            behaviour=kubelet_behaviour(self.version),
            ip_policy=ip_policy,
        )
        self.kube_proxy = KubeProxyModel(
            self.informers,
            self.clock,
            behaviour=kube_proxy_behaviour(self.version, self.feature_gates),
            network=self.kubelet,
        )

    @property
    def controllers(self) -> list[Controller]:
        return [
            self.node_ipam,
            self.node_lifecycle,
            self.taint_eviction,
            self.scheduler,
            self.replica_sets,
            self.deployments,
            self.garbage_collector,
            self.endpoints,
            self.endpoint_slices,
            self.kubelet,
        ]

    def start(self, *, timeout: float = 20.0) -> SimDataPlane:
        if self._started:
            return self
        self.events = EventSink(self.api, clock=self.clock)
        self.api.event_sink = self.events
        self.informers.start()
        try:
            self.informers.wait_synced(timeout)
        except TimeoutError:
            self.informers.stop()
            self.events.stop()
            raise
        for controller in self.controllers:
            controller.start()
        self._started = True
        log.info("data plane started (kubernetes %s, clock %r)", self.version, self.clock)
        return self

    def stop(self) -> None:
        """Stop every controller and informer (idempotent)."""
        for controller in self.controllers:
            controller.stop()
        self.informers.stop()
        if self.events is not None:
            self.events.stop()
            self.api.event_sink = self.events = None
        if self._started:
            self._client.close()
        self._started = False

    def __enter__(self) -> SimDataPlane:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def take_errors(self) -> list[str]:
        """Failures no retry fixed, since the last call, as ``component: what``."""
        errors = self.informers.take_errors()
        for controller in self.controllers:
            errors += controller.errors
            controller.errors.clear()
        return errors

    def reporters(self) -> list[Reporter]:
        """Every informer, controller and the event writer (``lab.settle``)."""
        out: list[Reporter] = [*self.informers.all(), *self.controllers, self.kube_proxy]
        if self.events is not None:
            out.append(self.events)
        return out
