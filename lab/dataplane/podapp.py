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
* builders for the ``status`` a kubelet writes (conditions, containerStatuses), used with the
  version behaviour in ``versions``.
"""

from __future__ import annotations

import dataclasses
import hashlib
import ipaddress
import math
import threading
from collections.abc import Mapping
from typing import Any

Obj = dict[str, Any]
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


# --- status builders ------------------------------------------------------------------------


def full_image(image: str) -> str:
    """The image reference containerd reports (``nginx`` -> ``docker.io/library/nginx:latest``)."""
    name = image
    if "@" not in name and ":" not in name.rsplit("/", 1)[-1]:
        name += ":latest"
    first = name.split("/", 1)[0]
    if "/" not in name:
        name = f"docker.io/library/{name}"
    elif "." not in first and ":" not in first and first != "localhost":
        name = f"docker.io/{name}"
    return name


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def container_statuses(
    pod: Obj,
    *,
    state: str,
    ready: bool,
    started_at: str | None,
    finished_at: str | None = None,
    exit_code: int = 0,
    killed: bool = False,
) -> list[Obj]:
    """containerStatuses for every container in ``state`` waiting|running|terminated."""
    uid = str((pod.get("metadata") or {}).get("uid") or "")
    out = []
    for container in (pod.get("spec") or {}).get("containers") or []:
        name, image = str(container.get("name")), str(container.get("image") or "")
        status: Obj = {
            "name": name,
            "image": full_image(image),
            "imageID": "",
            "ready": ready and state == "running",
            "restartCount": 0,
            "started": state == "running",
            "lastState": {},
        }
        if state == "waiting":
            status["state"] = {"waiting": {"reason": "ContainerCreating"}}
        else:
            repo = full_image(image).rsplit(":", 1)[0]
            status["imageID"] = f"{repo}@sha256:{_digest(full_image(image))}"
            status["containerID"] = f"containerd://{_digest(uid + name)}"
        if state == "running":
            status["state"] = {"running": {"startedAt": started_at}}
        elif state == "terminated":
            status["state"] = {
                "terminated": {
                    "exitCode": exit_code,
                    "reason": "Error" if exit_code else "Completed",
                    "startedAt": started_at,
                    "finishedAt": finished_at,
                    "containerID": status["containerID"],
                }
            }
            if killed:
                status["state"]["terminated"]["signal"] = 9
        out.append(status)
    return out


def condition(
    pod: Obj,
    ctype: str,
    value: bool,
    now: str,
    *,
    reason: str | None = None,
    message: str | None = None,
) -> Obj:
    """A pod condition; ``lastTransitionTime`` kept from the pod when the status is unchanged."""
    status = "True" if value else "False"
    current = next(
        (c for c in (pod.get("status") or {}).get("conditions") or [] if c.get("type") == ctype),
        None,
    )
    when = now
    if (
        current is not None
        and current.get("status") == status
        and current.get("lastTransitionTime")
    ):
        when = current["lastTransitionTime"]
    out: Obj = {"type": ctype, "status": status, "lastProbeTime": None, "lastTransitionTime": when}
    if reason:
        out["reason"] = reason
    if message:
        out["message"] = message
    return out


def not_ready_message(pod: Obj) -> str:
    names = " ".join(str(c.get("name")) for c in (pod.get("spec") or {}).get("containers") or [])
    return f"containers with unready status: [{names}]"
