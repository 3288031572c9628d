"""Kubelet stand-in, pod half: runs the pods bound to the lab's nodes, per kubelet version.

Role: for every pod on a node of the kubelet stand-in (``lab.cluster.kubelet``) whose kubelet
is alive, it writes what that release's kubelet writes (``podstatus``, through ``pods/status``):

* **start**: ``Pending``/``ContainerCreating``, then after the app's start delay an IP from the
  node's ``podCIDR`` (lowest free first; none yet: it waits) and ``Running``.
* **readiness**: no readinessProbe: ready once started; with one, probes every
  ``periodSeconds`` against the app (``podapp.AppSpec`` annotations or :meth:`set_ready`).
* **graceful termination** (``deletionTimestamp``): SIGTERM at once; the app exits after its
  shutdown time or is killed at the grace period (137). Probes go on meanwhile, except on
  1.22.0-.10, 1.23.0-.7, 1.24.0-.1 where Ready freezes (#110309). Then the IP is freed, the
  status written (a terminal phase from 1.27, #115331) and the pod deleted with grace 0.
* **kubelet-initiated failures**: :meth:`evict` and :meth:`shutdown_node` (Ready=False "node is
  shutting down", pods killed with reason ``Terminated``/``Shutdown``, the node powers off) end
  in ``Failed``; the affected releases keep ``Ready=True`` (#108594: #109414/#109718). From
  1.26 a ``DisruptionTarget`` condition comes first.
* **status reconcile**: a Ready condition someone else changed (the node lifecycle controller
  marks a silent or late node's pods not ready) is written back as the kubelet sees it, as its
  status manager's reconcile does: when the node's kubelet runs again, and whenever the
  kubelet's own node is Ready (a heartbeat that came late, a node that reported NotReady and
  recovered).

For the kube-proxy model: :meth:`pod_at` (the running pod holding an IP now: a Failed pod's
stale ``podIP`` may be a newer pod's) and :meth:`refusal` (does it accept a connection now).
:meth:`logs` returns the stand-in's log lines of a pod. A dead kubelet changes nothing: its
pods keep running and serving, their status frozen.
"""

from __future__ import annotations

import contextlib
import ipaddress
import logging
import threading
from collections.abc import Hashable
from typing import Any, Protocol

from lab.clock import LabClock
from lab.dataplane.api import NODES, PODS, Api, meta, path
from lab.dataplane.controller import Controller
from lab.dataplane.events import involved, record
from lab.dataplane.informers import Informers
from lab.dataplane.kubeproxy import PodTarget
from lab.dataplane.nodelifecycle import ready_status
from lab.dataplane.podapp import (
    AppSpec,
    NodePodIpam,
    PodRun,
    Probe,
    app_ready,
    next_due,
    probe_spec,
    readiness,
)
from lab.dataplane.podstatus import condition, node_ip, write_status
from lab.kube.objects import Obj
from lab.kubeclient import Conflict, NotFound
from lab.versions.dataplane import KubeletBehaviour

log = logging.getLogger(__name__)

#: the kubelet status manager's full sync period (syncBatch every 10 s), lab seconds
STATUS_SYNC_PERIOD = 10.0
SHUTDOWN_MESSAGE = "Pod was terminated in response to imminent node shutdown."


class KubeletHosts(Protocol):
    """The node half of the kubelet stand-in (``lab.cluster.kubelet.KubeletStandIn``)."""

    @property
    def node_names(self) -> list[str]: ...
    def is_running(self, name: str) -> bool: ...
    def add_listener(self, listener: Any) -> None: ...
    def report_not_ready(self, name: str, message: str = ...) -> None: ...
    def stop_heartbeat(self, name: str) -> None: ...


class KubeletPods(Controller):
    """See the module doc."""

    name = "kubelet-pods"
    workers = 4  # a kubelet runs one pod worker per pod; four threads stand in for them

    def __init__(
        self,
        api: Api,
        informers: Informers,
        clock: LabClock,
        *,
        hosts: KubeletHosts,
        behaviour: KubeletBehaviour,
        ip_policy: str = "lowest-free",
    ) -> None:
        super().__init__(clock)
        self.api = api
        self.hosts = hosts
        self.behaviour = behaviour
        self.ip_policy = ip_policy
        self.pods = informers(PODS)
        self.nodes = informers(NODES)
        self._runs: dict[tuple[str, str], PodRun] = {}
        self._by_ip: dict[str, PodRun] = {}
        self._ipam: dict[str, NodePodIpam] = {}
        self._shutting_down: set[str] = set()
        #: nodes a graceful shutdown powered off (until their kubelet runs again)
        self._powered_off: set[str] = set()
        #: pods whose status the kubelet re-checks against the API (its kubelet came back) ->
        #: the lab time it came back
        self._reconcile: dict[tuple[str, str], float] = {}
        #: lab time of each reconciling pod's last write-back (one per STATUS_SYNC_PERIOD)
        self._synced: dict[tuple[str, str], float] = {}
        self._lock = threading.RLock()
        self.pods.add_handler(self._on_pod)
        self.nodes.add_handler(self._on_node)
        hosts.add_listener(self._on_kubelet)

    # --- events ------------------------------------------------------------------------

    def _on_pod(self, event: str, pod: Obj, old: Obj | None) -> None:
        if (pod.get("spec") or {}).get("nodeName") or event == "DELETED":
            self.enqueue((meta(pod).get("namespace", ""), meta(pod).get("name", "")))

    def _on_node(self, event: str, node: Obj, old: Obj | None) -> None:
        cidr = (node.get("spec") or {}).get("podCIDR")
        if cidr and cidr != ((old or {}).get("spec") or {}).get("podCIDR"):
            self._enqueue_node(str(meta(node).get("name")))
        elif ready_status(node) == "True" and ready_status(old or {}) != "True":
            # Ready again: the status manager's next reconcile puts back what the node
            # lifecycle controller changed meanwhile
            self._enqueue_node(str(meta(node).get("name")))

    def _on_kubelet(self, node: str, running: bool) -> None:
        if running:
            with self._lock:
                self._powered_off.discard(node)
                now = self.clock.now()
                self._reconcile.update({k: now for k, r in self._runs.items() if r.node == node})
                for key in [k for k, r in self._runs.items() if r.node == node]:
                    self._synced.pop(key, None)  # back: its first reconcile writes at once
            self._enqueue_node(node)

    def _enqueue_node(self, node: str) -> None:
        for pod in self.pods.objects():
            if (pod.get("spec") or {}).get("nodeName") == node:
                self.enqueue((meta(pod).get("namespace", ""), meta(pod).get("name", "")))

    # --- the lab API -------------------------------------------------------------------

    def set_ready(self, namespace: str, name: str, ready: bool | None) -> None:
        """Make the pod's app pass (True) or fail (False) readiness from now on; None goes back
        to its annotations. Without a readinessProbe this sets the container's readiness."""
        run = self._run_of(namespace, name)
        run.override = ready
        self.enqueue(run.key)

    def evict(
        self,
        namespace: str,
        name: str,
        *,
        reason: str = "Evicted",
        message: str = "The node was low on resource: memory.",
        grace_seconds: float = 0.0,
    ) -> None:
        """A kubelet-level eviction (node pressure, admission after reboot: ``OutOfcpu``...):
        the pod is killed and ends ``Failed`` with ``reason``/``message``; its object stays."""
        run = self._run_of(namespace, name)
        with self._lock:
            if run.sigterm is None and not run.terminated:
                run.failure = (reason, message)
                self._sigterm(run, grace_seconds)
        self.enqueue(run.key)

    def shutdown_node(self, node: str, *, grace_seconds: float = 30.0) -> None:
        """Graceful node shutdown (``shutdownGracePeriod``): the kubelet reports Ready=False
        "node is shutting down", kills every pod within ``grace_seconds`` (ending them
        ``Failed``, reason per version) and the node powers off (heartbeats stop)."""
        if node not in self.hosts.node_names:
            raise KeyError(f"node {node!r} has no kubelet here; known: {self.hosts.node_names}")
        reason = self.behaviour.node_shutdown_reason
        # The pods' kills are queued (owed to the lab clock) before the node reports NotReady:
        # both happen at this lab instant, and a node-monitor pass due after it waits for both
        # (``Controller.after_earlier_work``) instead of seeing one without the other.
        with self._lock:
            self._shutting_down.add(node)
            for run in list(self._runs.values()):
                if run.node == node and run.sigterm is None and not run.terminated:
                    run.failure = (reason, SHUTDOWN_MESSAGE)
                    self._sigterm(run, grace_seconds)
                    self.enqueue(run.key)
        self.hosts.report_not_ready(node, "node is shutting down")
        self._maybe_power_off(node)

    def logs(self, namespace: str, name: str, container: str | None = None) -> list[str]:
        """The log lines the stand-in wrote for the pod (KeyError for a pod it never ran)."""
        return list(self._run_of(namespace, name).logs)

    def powered_off(self, node: str) -> bool:
        """True for a node a graceful shutdown switched off (nothing on it answers), until its
        kubelet runs again. A kubelet that only stopped heartbeating leaves the node up."""
        with self._lock:
            return node in self._powered_off

    def pod_at(self, ip: str) -> PodTarget | None:
        """The running pod holding ``ip`` now (its sandbox exists), or None."""
        with self._lock:
            run = self._by_ip.get(ip)
            if run is None:
                return None
            return PodTarget(namespace=run.key[0], name=run.key[1], ip=ip, node=run.node)

    def refusal(self, target: PodTarget, port: int) -> str | None:
        """None when the pod accepts a connection on ``port`` now, else why not."""
        with self._lock:
            run = self._runs.get((target.namespace, target.name))
        if run is None or run.ip != target.ip:
            return f"pod {target.namespace}/{target.name} is not running (connection refused)"
        return run.refusal(port)

    def _run_of(self, namespace: str, name: str) -> PodRun:
        with self._lock:
            run = self._runs.get((namespace, name))
        if run is None:
            raise KeyError(f"pod {namespace}/{name} is not running on a lab kubelet")
        return run

    # --- the sync ----------------------------------------------------------------------

    def sync(self, key: Hashable) -> None:
        assert isinstance(key, tuple)
        ns, name = str(key[0]), str(key[1])
        pod = self.pods.get(ns, name)
        with self._lock:
            run = self._runs.get((ns, name))
            if run is not None and (pod is None or meta(pod).get("uid") != run.uid):
                self._forget(run)
                run = None
        if pod is None:
            return
        node = str((pod.get("spec") or {}).get("nodeName") or "")
        if node not in self.hosts.node_names or not self.hosts.is_running(node):
            return
        if run is None:
            run = self._admit(pod, node)
        now = self.clock.now()
        if meta(pod).get("deletionTimestamp") and run.sigterm is None and not run.terminated:
            grace = meta(pod).get("deletionGracePeriodSeconds")
            with self._lock:
                self._sigterm(run, float(grace if grace is not None else 30))
        if run.terminated:
            if meta(pod).get("deletionTimestamp"):
                self._delete(pod)
            return
        if run.sigterm is not None:
            if run.exit_at is not None and now >= run.exit_at:
                self._finish(run, pod)
                if meta(pod).get("deletionTimestamp"):
                    self._delete(pod)
                return
            self._readiness(run, pod, now, terminating=True)
            self._requeue(run, now)
            return
        if run.started is None and not self._start(run, pod, now):
            return
        self._readiness(run, pod, now, terminating=False)
        self._requeue(run, now)

    def _admit(self, pod: Obj, node: str) -> PodRun:
        app, problems = AppSpec.from_pod(pod)
        for problem in problems:
            self._event(
                pod,
                node,
                "InvalidSimAnnotation",
                f"{problem}; using the default",
                field="metadata.annotations",
                type_="Warning",
            )
        run = PodRun.for_pod(pod, node, app, now=self.clock.now())
        if run.ip is not None:  # a pod this kubelet ran before it restarted: adopt it
            ipam = self._node_ipam(node)
            if ipam is not None:
                ipam.reserve(run.ip)
            self._by_ip[run.ip] = run
        elif node in self._shutting_down and not run.terminated:
            run.failure = ("NodeShutdown", "Pod was rejected as the node is shutting down.")
            run.terminated = True
            extra = {"reason": run.failure[0], "message": run.failure[1]}
            self._write(pod, phase="Failed", extra=extra)
        with self._lock:
            self._runs[run.key] = run
        return run

    def _node_ipam(self, node: str) -> NodePodIpam | None:
        node_obj = self.nodes.get("", node)
        cidr = ((node_obj or {}).get("spec") or {}).get("podCIDR")
        if not cidr:
            return None
        with self._lock:
            ipam = self._ipam.get(node)
            if ipam is None or ipam.cidr != str(ipaddress.ip_network(cidr, strict=False)):
                ipam = self._ipam[node] = NodePodIpam(cidr, policy=self.ip_policy)
            return ipam

    def _host_ip(self, node: str) -> str:
        return node_ip(self.nodes.get("", node) or {})

    def _start(self, run: PodRun, pod: Obj, now: float) -> bool:
        host_ip = self._host_ip(run.node)
        if not run.pending_written:
            run.pending_written = True
            self._write(
                pod,
                phase="Pending",
                ready=False,
                containers="waiting",
                host_ip=host_ip,
                extra={"startTime": self._stamp()},
            )
        if now < run.start_at:
            self.follow_up(run.key, run.start_at - now)
            return False
        if (pod.get("spec") or {}).get("hostNetwork"):
            ip: str | None = host_ip
        else:
            ipam = self._node_ipam(run.node)
            ip = ipam.allocate() if ipam is not None else None
        if not ip:
            # network not ready: the sandbox waits (the node's podCIDR arriving requeues the
            # pod at once; a node that never gets one keeps it waiting, as a real one does)
            self.schedule(run.key, 1.0)
            return False
        with self._lock:
            run.ip, run.started, run.started_stamp = ip, now, self._stamp()
            self._by_ip[ip] = run
        probe = probe_spec(pod)
        if probe is not None:
            run.probe = Probe(next_at=now + float(probe.get("initialDelaySeconds") or 0))
            run.ready = False
        else:
            run.ready = app_ready(run, now, terminating=False)
        names = ",".join(
            str(c.get("name")) for c in (pod.get("spec") or {}).get("containers") or []
        )
        self._log(run, f"started container(s) {names} on {run.node}, IP {ip}")
        for container in (pod.get("spec") or {}).get("containers") or []:
            cname, image = container.get("name"), container.get("image")
            for reason, message in (
                ("Pulled", f'Container image "{image}" already present on machine'),
                ("Created", f"Created container {cname}"),
                ("Started", f"Started container {cname}"),
            ):
                self._event(pod, run.node, reason, message, field=f"spec.containers{{{cname}}}")
        self._write(
            pod,
            phase="Running",
            ready=run.ready,
            containers="running",
            host_ip=host_ip,
            extra={"podIP": ip, "podIPs": [{"ip": ip}]},
        )
        return True

    # --- readiness -----------------------------------------------------------------------

    def _readiness(self, run: PodRun, pod: Obj, now: float, *, terminating: bool) -> None:
        if terminating and self.behaviour.probes_stop_on_termination:
            # #110309: the probe workers are gone; Ready keeps its last value, and no probe
            # falls due any more (a probe time left in the past requeued the pod at once, over
            # and over, until the container exited)
            run.probe = None
            return
        ready = readiness(run, probe_spec(pod), now, terminating=terminating)
        if ready != run.ready:
            run.ready = ready
            self._log(run, f"readiness {'passed' if ready else 'failed'}")
            self._write(pod, phase=None, ready=ready, containers="running")
        elif (
            run.key not in self._reconcile
            and _api_ready(pod) not in (None, run.ready)
            and self._node_ready(run.node)
        ):
            # the API says otherwise (or the informer has not caught up with our own write):
            # the status manager's next periodic reconcile looks again
            with self._lock:
                self._reconcile[run.key] = now
                self._synced[run.key] = now
            self.schedule(run.key, STATUS_SYNC_PERIOD)
        elif run.key in self._reconcile:
            # The status manager's reconcile (its syncBatch, every 10 s): the node lifecycle
            # controller marked this pod not ready (a silent kubelet, a late heartbeat), and
            # marks it again on every update while it sees the node not Ready; so at most one
            # write per period, or the two would trade writes without pause.
            if _api_ready(pod) not in (None, run.ready):
                last = self._synced.get(run.key)
                if last is not None and now - last < STATUS_SYNC_PERIOD:
                    self.schedule(run.key, STATUS_SYNC_PERIOD - (now - last))
                    return
                self._log(run, "status reconciled with the kubelet's readiness")
                self._write(pod, phase=None, ready=run.ready, containers="running")
                with self._lock:
                    self._synced[run.key] = now
            elif (
                self._node_ready(run.node)
                and now - self._reconcile[run.key] >= 2 * STATUS_SYNC_PERIOD
            ):
                with self._lock:
                    self._reconcile.pop(run.key, None)
                    self._synced.pop(run.key, None)
                return
            self.schedule(run.key, STATUS_SYNC_PERIOD)

    def _node_ready(self, node: str) -> bool:
        return ready_status(self.nodes.get("", node) or {}) == "True"

    def _requeue(self, run: PodRun, now: float) -> None:
        due = next_due(run, now)
        if due is not None:
            self.schedule(run.key, max(due - now, 0.0))

    # --- termination ---------------------------------------------------------------------

    def _sigterm(self, run: PodRun, grace: float) -> None:
        now = self.clock.now()
        run.sigterm = now
        if run.started is None:  # nothing runs yet: nothing to wait for
            run.exit_at = now
            return
        run.killed = run.app.shutdown_seconds > grace
        run.exit_at = now + min(run.app.shutdown_seconds, grace)
        self._log(run, f"SIGTERM (grace period {grace:g}s)")
        pod_now = self.pods.get(*run.key)
        for container in ((pod_now or {}).get("spec") or {}).get("containers") or []:
            self._event(
                pod_now or {},
                run.node,
                "Killing",
                f"Stopping container {container.get('name')}",
                field=f"spec.containers{{{container.get('name')}}}",
            )
        if run.failure is not None and self.behaviour.disruption_target:
            pod = self.pods.get(*run.key)
            if pod is not None:
                run.added = [
                    condition(
                        pod,
                        "DisruptionTarget",
                        True,
                        self._stamp(),
                        reason="TerminationByKubelet",
                        message=run.failure[1],
                    )
                ]
                self._write(pod, phase=None)

    def _finish(self, run: PodRun, pod: Obj) -> None:
        """Containers exited: free the IP, write the final status."""
        code = 137 if run.killed else run.app.exit_code
        with self._lock:
            run.terminated = True
            if run.ip is not None and self._by_ip.get(run.ip) is run:
                del self._by_ip[run.ip]
                if not (pod.get("spec") or {}).get("hostNetwork"):
                    ipam = self._ipam.get(run.node)
                    if ipam is not None:
                        ipam.release(run.ip)
        if run.started is not None:
            self._log(
                run,
                f"exited with code {code}"
                + (" (killed at the grace period)" if run.killed else ""),
            )
        if run.failure is not None:
            terminal, extra = "Failed", {"reason": run.failure[0], "message": run.failure[1]}
        else:
            extra = {}
            policy = (pod.get("spec") or {}).get("restartPolicy") or "Always"
            if self.behaviour.terminal_phase_on_delete or policy == "Never":
                terminal = "Succeeded" if code == 0 else "Failed"
            elif policy == "OnFailure" and code == 0:
                terminal = "Succeeded"
            else:
                terminal = "Running"
        state = "terminated" if run.started is not None else "waiting"
        keep_ready = terminal in ("Failed", "Succeeded") and self.behaviour.terminal_keeps_ready
        self._write(
            pod,
            phase=terminal,
            ready=None if keep_ready else False,
            containers=state,
            exit_code=code,
            killed=run.killed,
            extra=extra,
        )
        self._maybe_power_off(run.node)

    def _maybe_power_off(self, node: str) -> None:
        with self._lock:
            if node not in self._shutting_down:
                return
            if any(r.node == node and not r.terminated for r in self._runs.values()):
                return
            self._shutting_down.discard(node)
            self._powered_off.add(node)
        log.info("node %s: every pod terminated, powering off", node)
        self.hosts.stop_heartbeat(node)

    def _delete(self, pod: Obj) -> None:
        with contextlib.suppress(NotFound, Conflict):
            self.api.delete(
                path(PODS, meta(pod).get("namespace", ""), meta(pod).get("name", "")),
                {"gracePeriodSeconds": 0, "preconditions": {"uid": meta(pod).get("uid")}},
            )

    def _forget(self, run: PodRun) -> None:
        if run.ip is not None and self._by_ip.get(run.ip) is run:
            del self._by_ip[run.ip]
            ipam = self._ipam.get(run.node)
            if ipam is not None:
                ipam.release(run.ip)
        self._runs.pop(run.key, None)
        self._reconcile.pop(run.key, None)
        self._synced.pop(run.key, None)

    # --- writing -------------------------------------------------------------------------

    def _stamp(self) -> str:
        return self.clock.wall().strftime("%Y-%m-%dT%H:%M:%SZ")

    def _event(
        self, pod: Obj, node: str, reason: str, message: str, *, field: str, type_: str = "Normal"
    ) -> None:
        ref = {**involved(pod, kind="Pod"), "fieldPath": field}
        record(
            self.api,
            self.clock,
            ref,
            reason=reason,
            message=message,
            component="kubelet",
            type_=type_,
            host=node,
        )

    def _log(self, run: PodRun, line: str) -> None:
        run.logs.append(
            f"{self.clock.wall().isoformat(timespec='seconds')} [ccm-lab kubelet] {line}"
        )

    def _write(
        self,
        pod: Obj,
        *,
        phase: str | None,
        ready: bool | None = None,
        containers: str | None = None,
        host_ip: str | None = None,
        exit_code: int = 0,
        killed: bool = False,
        extra: dict[str, Any] | None = None,
    ) -> None:
        run = self._runs.get((meta(pod).get("namespace", ""), meta(pod).get("name", "")))
        sandbox = containers == "running" or (containers == "waiting" and bool(run and run.ip))
        write_status(
            self.api,
            self.behaviour,
            pod,
            now=self._stamp(),
            phase=phase,
            ready=ready,
            containers=containers,
            sandbox=sandbox,
            started_at=run.started_stamp if run else None,
            own_conditions=run.added if run else None,
            host_ip=host_ip,
            exit_code=exit_code,
            killed=killed,
            extra=extra,
        )


def _api_ready(pod: Obj) -> bool | None:
    """The Ready condition the API server holds for ``pod`` (None: none yet)."""
    for cond in (pod.get("status") or {}).get("conditions") or ():
        if cond.get("type") == "Ready":
            return bool(cond.get("status") == "True")
    return None
