"""What runs inside a simulated pod, where its IP comes from, and the status a kubelet writes.

Role: the pieces of the kubelet stand-in (``kubelet_pods``) that are data, not control flow:

* :class:`AppSpec`, the pod's "application", read from ``sim.ccm-lab.io/*`` annotations
  (lab seconds; all optional):

  ========================================  =============================================
  ``sim.ccm-lab.io/start-seconds``          container start delay after binding (1)
  ``sim.ccm-lab.io/ready-after-seconds``    readiness passes this long after start (0)
  ``sim.ccm-lab.io/not-ready-after-seconds`` readiness fails from this long after start
  ``sim.ccm-lab.io/shutdown-seconds``       SIGTERM to exit; past the grace period the
                                            kubelet kills it with exit code 137 (0)
  ``sim.ccm-lab.io/serve-during-shutdown``  ``"true"``: keeps accepting connections until it
                                            exits; default: refuses them from SIGTERM on
  ``sim.ccm-lab.io/ready-during-shutdown``  ``"true"``: its readiness endpoint keeps passing
                                            after SIGTERM; default: fails (the #110309 app)
  ``sim.ccm-lab.io/exit-code``              exit code when it exits on its own (0)
  ``sim.ccm-lab.io/listen-ports``           comma-separated ports it accepts; default: the
                                            declared containerPorts, or any port if none
  ========================================  =============================================

  A malformed value is reported (an event naming the annotation and value) and the default
  used, so a typo never silently changes behaviour.
* :class:`NodePodIpam`, host-local IPAM on one node's ``podCIDR``: by default the **lowest
  free address first** (``.2`` upward; ``.1`` is the bridge gateway), so a freed IP is reused
  by the next pod, which is what kubernetes#109414 needs; ``policy="round-robin"`` is
  host-local's real order (continue after the last address handed out, wrap around).
* :class:`PodRun`, what the kubelet stand-in tracks per pod (start, IP, probes, SIGTERM and
  exit times), and :func:`app_ready`, what the app's readiness endpoint answers at a lab time.

The ``status`` the kubelet writes is built in ``podstatus``.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import math
import threading
from collections.abc import Mapping
from typing import Any

from lab.kube.objects import Obj

PREFIX = "sim.ccm-lab.io/"
TRUE_VALUES = ("true", "false")


@dataclasses.dataclass(frozen=True)
class AppSpec:
    start_seconds: float = 1.0
    ready_after: float = 0.0
    not_ready_after: float | None = None
    shutdown_seconds: float = 0.0
    serve_during_shutdown: bool = False
    ready_during_shutdown: bool = False
    exit_code: int = 0
    listen_ports: frozenset[int] | None = None  # None: any port

    @classmethod
    def from_pod(cls, pod: Obj) -> tuple[AppSpec, list[str]]:
        """The pod's app and the problems found in its annotations (one message each)."""
        annotations: Mapping[str, str] = (pod.get("metadata") or {}).get("annotations") or {}
        problems: list[str] = []
        values: dict[str, Any] = {}

        def seconds(name: str, field: str) -> None:
            raw = annotations.get(PREFIX + name)
            if raw is None:
                return
            try:
                value = float(raw)
                if value < 0 or not math.isfinite(value):
                    raise ValueError
                values[field] = value
            except ValueError:
                problems.append(f"{PREFIX}{name}: {raw!r} is not a number of seconds >= 0")

        def flag(name: str, field: str) -> None:
            raw = annotations.get(PREFIX + name)
            if raw is None:
                return
            if raw.lower() not in TRUE_VALUES:
                problems.append(f'{PREFIX}{name}: {raw!r} is not "true" or "false"')
                return
            values[field] = raw.lower() == "true"

        seconds("start-seconds", "start_seconds")
        seconds("ready-after-seconds", "ready_after")
        seconds("not-ready-after-seconds", "not_ready_after")
        seconds("shutdown-seconds", "shutdown_seconds")
        flag("serve-during-shutdown", "serve_during_shutdown")
        flag("ready-during-shutdown", "ready_during_shutdown")
        raw = annotations.get(PREFIX + "exit-code")
        if raw is not None:
            if raw.isdigit() and int(raw) <= 255:
                values["exit_code"] = int(raw)
            else:
                problems.append(f"{PREFIX}exit-code: {raw!r} is not an exit code 0..255")
        raw = annotations.get(PREFIX + "listen-ports")
        declared = {
            int(p["containerPort"])
            for c in (pod.get("spec") or {}).get("containers") or []
            for p in c.get("ports") or []
            if p.get("containerPort")
        }
        if raw is not None:
            try:
                ports = frozenset(int(p) for p in raw.split(",") if p.strip())
                if any(not 0 < p < 65536 for p in ports):
                    raise ValueError
                values["listen_ports"] = ports
            except ValueError:
                problems.append(f"{PREFIX}listen-ports: {raw!r} is not a list of ports 1..65535")
        if "listen_ports" not in values and declared:
            values["listen_ports"] = frozenset(declared)
        return cls(**values), problems


class NodePodIpam:
    """Pod IPs from one node's ``podCIDR`` (see the module doc for the two policies)."""

    def __init__(self, cidr: str, *, policy: str = "lowest-free") -> None:
        if policy not in ("lowest-free", "round-robin"):
            raise ValueError(f"pod IP policy must be lowest-free or round-robin, got {policy!r}")
        network = ipaddress.ip_network(cidr, strict=False)
        self.cidr = str(network)
        self.policy = policy
        self._first = int(network.network_address) + 2
        self._last = int(network.broadcast_address) - 1
        self._used: set[int] = set()
        self._after = self._first - 1
        self._lock = threading.Lock()

    def allocate(self) -> str | None:
        with self._lock:
            size = self._last - self._first + 1
            start = self._first if self.policy == "lowest-free" else self._after + 1
            for offset in range(size):
                value = self._first + (start - self._first + offset) % size
                if value not in self._used:
                    self._used.add(value)
                    self._after = value
                    return str(ipaddress.ip_address(value))
            return None

    def reserve(self, ip: str) -> bool:
        value = int(ipaddress.ip_address(ip))
        with self._lock:
            if not self._first <= value <= self._last or value in self._used:
                return False
            self._used.add(value)
            return True

    def release(self, ip: str) -> None:
        with self._lock:
            self._used.discard(int(ipaddress.ip_address(ip)))


# --- what the kubelet tracks per pod --------------------------------------------------------


@dataclasses.dataclass
class Probe:
    next_at: float
    successes: int = 0
    failures: int = 0


@dataclasses.dataclass
class PodRun:
    key: tuple[str, str]
    uid: str
    node: str
    app: AppSpec
    start_at: float
    started: float | None = None
    started_stamp: str | None = None
    ip: str | None = None
    pending_written: bool = False
    ready: bool = False
    probe: Probe | None = None
    override: bool | None = None
    sigterm: float | None = None
    exit_at: float | None = None
    killed: bool = False
    failure: tuple[str, str] | None = None  # (reason, message) of a kubelet-initiated kill
    #: conditions this kubelet added that it does not own (DisruptionTarget): kept in every
    #: later write even when the cached pod does not show them yet
    added: list[Obj] = dataclasses.field(default_factory=list)
    terminated: bool = False
    logs: list[str] = dataclasses.field(default_factory=list)

    def refusal(self, port: int) -> str | None:
        """None when the app accepts a connection on ``port`` now, else why not."""
        who = f"pod {self.key[0]}/{self.key[1]}"
        if self.started is None or self.terminated:
            return f"{who} is not running (connection refused)"
        if self.sigterm is not None and not self.app.serve_during_shutdown:
            return f"{who} not listening (connection refused)"
        if self.app.listen_ports is not None and port not in self.app.listen_ports:
            return f"{who} not listening on port {port} (connection refused)"
        return None

    @classmethod
    def for_pod(cls, pod: Obj, node: str, app: AppSpec, *, now: float) -> PodRun:
        """A run for a pod seen the first time; a Running pod with an IP (the stand-in
        restarted under it) is adopted as started, a terminal one as over."""
        meta, status = pod.get("metadata") or {}, pod.get("status") or {}
        run = cls(
            (meta.get("namespace", ""), meta.get("name", "")),
            str(meta.get("uid")),
            node,
            app,
            start_at=now + app.start_seconds,
        )
        if status.get("phase") in ("Succeeded", "Failed"):
            run.terminated = True
        elif status.get("phase") == "Running" and status.get("podIP"):
            run.started, run.ip, run.started_stamp = now, status["podIP"], status.get("startTime")
            run.pending_written = True
            run.ready = any(
                c.get("type") == "Ready" and c.get("status") == "True"
                for c in status.get("conditions") or []
            )
        return run


def probe_spec(pod: Obj) -> Obj | None:
    for container in (pod.get("spec") or {}).get("containers") or []:
        if container.get("readinessProbe"):
            probe: Obj = container["readinessProbe"]
            return probe
    return None


def app_ready(run: PodRun, t: float, *, terminating: bool) -> bool:
    """What the pod's readiness endpoint answers at lab time ``t``."""
    if run.override is not None:
        return run.override
    if terminating:
        return run.app.ready_during_shutdown
    started = run.started if run.started is not None else t
    if t < started + run.app.ready_after:
        return False
    return run.app.not_ready_after is None or t < started + run.app.not_ready_after


def readiness(run: PodRun, spec: Obj | None, now: float, *, terminating: bool) -> bool:
    """The Ready value after every probe due by ``now`` (each answered by :func:`app_ready`
    at its own time; thresholds counted); without a readinessProbe, ready while running."""
    if spec is None or run.probe is None:
        return run.ready if terminating else app_ready(run, now, terminating=False)
    ready = run.ready
    period = float(spec.get("periodSeconds") or 10)
    sigterm = run.sigterm if run.sigterm is not None else float("inf")
    while run.probe.next_at <= now:
        if app_ready(run, run.probe.next_at, terminating=run.probe.next_at >= sigterm):
            run.probe.successes, run.probe.failures = run.probe.successes + 1, 0
            if run.probe.successes >= int(spec.get("successThreshold") or 1):
                ready = True
        else:
            run.probe.failures, run.probe.successes = run.probe.failures + 1, 0
            if run.probe.failures >= int(spec.get("failureThreshold") or 3):
                ready = False
        run.probe.next_at += period
    return ready


def next_due(run: PodRun, now: float) -> float | None:
    """The next lab time something changes for ``run`` (exit, probe, readiness boundary)."""
    due = [run.exit_at] if run.exit_at is not None else []
    if run.probe is not None:
        due.append(run.probe.next_at)
    elif run.started is not None and run.override is None and run.sigterm is None:
        for offset in (run.app.ready_after, run.app.not_ready_after):
            if offset is not None and run.started + offset > now:
                due.append(run.started + offset)
    return min(due) if due else None
