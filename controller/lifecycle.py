"""The cloud node lifecycle controller: delete Nodes whose instances are gone, taint stopped ones.

Follows upstream ``controllers/nodelifecycle`` (upstream-ccm.md §5.3). Every
``monitor_period`` (``--node-monitor-period``, 5 s) :meth:`LifecycleController.monitor_nodes`
looks at each Node:

* Ready: remove the shutdown taint ``node.cloudprovider.kubernetes.io/shutdown`` if present;
* NotReady/Unknown: ``instance_exists``; an error (a failed or ambiguous lookup) is logged
  and the Node is left alone (cloud-provider-aws#1471). ``False`` deletes the Node (Normal
  event ``DeletingNode``; Warning ``DeletingNodeFailed`` when the delete fails); ``True`` asks
  ``instance_shutdown`` and a stopped instance gets the shutdown taint (``NoSchedule``).

Legacy ``k8s-81636`` (kubernetes#81636, #58334, #63226): EC2 lookups are eventually
consistent, so right after launch an instance can be reported absent. Fixed (default): a
Node younger than ``deletion_grace_period`` is never deleted for a miss. Legacy: it is.

The monitor is a loop on an injectable clock; tests call ``monitor_nodes`` directly.
"""

from __future__ import annotations

import logging
import threading
from datetime import datetime

from controller.cloud import TAINT_SHUTDOWN, Cloud, InstancesV2, Node
from controller.legacy import LegacyFlags
from controller.nodeutil import add_taint, node_ref, remove_taint, update_node
from controller.runtime.clock import Clock, RealClock
from controller.runtime.events import NORMAL, WARNING, EventRecorder
from controller.runtime.informer import Store
from controller.runtime.kube import KubeClient, KubeError, NotFound

log = logging.getLogger(__name__)

COMPONENT = "cloud-node-lifecycle-controller"
DEFAULT_MONITOR_PERIOD = 5.0
DEFAULT_DELETION_GRACE = 120.0


def _parse_time(value: str) -> datetime | None:
    if not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


class LifecycleController:
    def __init__(
        self,
        kube: KubeClient,
        cloud: Cloud,
        *,
        nodes: Store,
        legacy: LegacyFlags | None = None,
        recorder: EventRecorder | None = None,
        clock: Clock | None = None,
        monitor_period: float = DEFAULT_MONITOR_PERIOD,
        deletion_grace_period: float = DEFAULT_DELETION_GRACE,
    ) -> None:
        instances = cloud.instances_v2()
        if instances is None:
            raise ValueError(f"cloud {cloud.provider_name!r} does not support InstancesV2")
        if monitor_period <= 0:
            raise ValueError(f"node monitor period must be positive, got {monitor_period}")
        self.kube = kube
        self.instances: InstancesV2 = instances
        self.nodes = nodes
        self.legacy = legacy or LegacyFlags()
        self.clock: Clock = clock or RealClock()
        self.recorder = recorder or EventRecorder(kube, COMPONENT, clock=self.clock)
        self.monitor_period = monitor_period
        self.deletion_grace_period = deletion_grace_period

    def run(self, stop: threading.Event) -> list[threading.Thread]:
        t = threading.Thread(target=self._loop, args=(stop,), name="node-lifecycle", daemon=True)
        t.start()
        return [t]

    def _loop(self, stop: threading.Event) -> None:
        while not self.clock.wait(stop, self.monitor_period):
            try:
                self.monitor_nodes()
            except Exception:
                log.exception("node lifecycle pass failed")

    def monitor_nodes(self) -> None:
        for obj in self.nodes.list():
            node = Node.from_api(obj)
            try:
                self._check(node)
            except KubeError as exc:
                log.warning("node lifecycle: updating node %s failed: %s", node.name, exc)

    def _check(self, node: Node) -> None:
        if node.ready is True:
            if node.has_taint(TAINT_SHUTDOWN):
                log.info("node %s is Ready again; removing the shutdown taint", node.name)
                update_node(self.kube, node.name, lambda o: remove_taint(o, TAINT_SHUTDOWN))
            return
        try:
            exists = self.instances.instance_exists(node)
        except Exception as exc:
            log.error("error checking if node %s exists: %s", node.name, exc)
            return
        if not exists:
            self._gone(node)
            return
        try:
            shutdown = self.instances.instance_shutdown(node)
        except Exception as exc:
            log.error("error checking if node %s is shutdown: %s", node.name, exc)
            return
        if shutdown and not node.has_taint(TAINT_SHUTDOWN):
            log.info("instance of node %s is stopped; adding the shutdown taint", node.name)
            update_node(self.kube, node.name, lambda o: add_taint(o, TAINT_SHUTDOWN, "NoSchedule"))

    def _gone(self, node: Node) -> None:
        if not self.legacy.enabled("k8s-81636"):
            created = _parse_time(node.creation_timestamp)
            age = (self.clock.now() - created).total_seconds() if created else None
            if age is not None and age < self.deletion_grace_period:
                # Fixed: a miss right after registration is eventual consistency, not absence.
                log.info(
                    "node %s not found in the cloud %.0fs after creation; within the %.0fs "
                    "grace period, not deleting",
                    node.name,
                    age,
                    self.deletion_grace_period,
                )
                return
        # Legacy k8s-81636 (kubernetes#81636): any miss deletes, even seconds after launch.
        ref = node_ref(node)
        self.recorder.event(
            ref,
            NORMAL,
            "DeletingNode",
            f"Deleting node {node.name} because it does not exist in the cloud provider",
        )
        try:
            self.kube.delete_node(node.name)
        except NotFound:
            return
        except KubeError as exc:
            self.recorder.event(ref, WARNING, "DeletingNodeFailed", f"Error deleting node: {exc}")
            log.error("deleting node %s failed: %s", node.name, exc)
