"""The pod half of a rehearsal node's kubelet: pods as real processes in the node's namespace.

One :class:`NodePods` per node, in the rehearsal cluster's process. It reads the pods bound to
its node every ``period`` seconds and, as a current kubelet does:

* gives a new pod the next free address of the node's ``spec.podCIDR`` (written by the control
  plane's node IPAM), on the node namespace's loopback, and starts its container: a container
  running agnhost ``netexec`` is a ``tests.rehearsal.netexec`` process bound to that address
  (``ip netns exec``); any other image runs nothing that answers (the rehearsal cannot run it);
* reports it Running with its IPs, Ready at once without a readiness probe, or as its HTTP
  readiness probe answers (every ``periodSeconds``, a real request to the pod from the node's
  namespace, where pod IPs are routed); an exec probe cannot run here and never passes;
* on deletion (a ``deletionTimestamp``): SIGTERM (netexec ends at once), the container
  terminated in the status, then the final delete with grace period 0, as the kubelet does;
* keeps routes to the other nodes' pod CIDRs (via their node IPs) in its namespace, so a node's
  kube-proxy reaches every pod.

Not modelled: restarts, init containers, volumes, resource accounting, probes other than HTTP
GET readiness.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import ipaddress
import logging
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from lab.dataplane.api import SMP, Api
from lab.kubeclient import Conflict, NotFound

log = logging.getLogger(__name__)

AGNHOST = "registry.k8s.io/e2e-test-images/agnhost:"
#: an HTTP GET probe: exit 0 on a 2xx or 3xx answer within the timeout (the kubelet's rule)
_PROBE = (
    "import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=float(sys.argv[2]))"
)


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _internal_ip(node: dict[str, Any]) -> str | None:
    return next(
        (
            a["address"]
            for a in (node.get("status") or {}).get("addresses") or []
            if a.get("type") == "InternalIP"
        ),
        None,
    )


def netexec_args(container: dict[str, Any]) -> list[str] | None:
    """The netexec flags of a container that runs agnhost netexec, else None."""
    image = str(container.get("image") or "")
    args = [str(a) for a in (container.get("command") or [])[1:] + (container.get("args") or [])]
    if not image.startswith(AGNHOST) or not args or args[0] != "netexec":
        return None
    return args[1:]


@dataclasses.dataclass
class Run:
    uid: str
    ip: str
    process: subprocess.Popen[bytes] | None
    started: str
    ready: bool
    next_probe: float = 0.0
    ending: bool = False


class NodePods:
    def __init__(
        self,
        api: Api,
        node: str,
        namespace: str,
        *,
        run_in_node: Callable[[list[str]], list[str]],
        log_dir: Path,
        period: float = 0.2,
    ) -> None:
        self.api, self.node, self.namespace = api, node, namespace
        self.log_dir = log_dir
        self.run_in_node = run_in_node
        self.period = period
        self.runs: dict[tuple[str, str], Run] = {}
        self.used: set[str] = set()
        self.routes: dict[str, str] = {}
        self.node_ip = ""  # the node's InternalIP, read with the nodes on every pass
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name=f"pods-{node}", daemon=True)
        self.errors: list[str] = []

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)
        for run in self.runs.values():
            self._kill(run)

    # --- the loop --------------------------------------------------------------------------

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                self._sync()
            except Exception as exc:  # recorded; the next pass tries again
                self.errors.append(f"{self.node}: {type(exc).__name__}: {exc}")
                log.exception("pods of %s", self.node)
            self._stop.wait(self.period)

    def _sync(self) -> None:
        nodes = self.api.get("/api/v1/nodes").get("items") or []
        me = next((n for n in nodes if n["metadata"]["name"] == self.node), None)
        if me is None:
            return
        self._route(nodes)
        self.node_ip = _internal_ip(me) or ""
        cidr = (me.get("spec") or {}).get("podCIDR")
        pods = (
            self.api.get(
                "/api/v1/pods", query=[("fieldSelector", f"spec.nodeName={self.node}")]
            ).get("items")
            or []
        )
        seen = set()
        for pod in pods:
            key = (pod["metadata"]["namespace"], pod["metadata"]["name"])
            seen.add(key)
            run = self.runs.get(key)
            if run is not None and run.uid != pod["metadata"]["uid"]:
                self._forget(key)
                run = None
            phase = (pod.get("status") or {}).get("phase")
            if pod["metadata"].get("deletionTimestamp"):
                self._end(key, pod, run)
            elif run is None and phase not in ("Succeeded", "Failed") and cidr:
                self._start(key, pod, cidr)
            elif run is not None:
                self._probe(key, pod, run)
        for key in set(self.runs) - seen:  # deleted at once (grace 0, or by us)
            self._forget(key)

    # --- pods ------------------------------------------------------------------------------

    def _start(self, key: tuple[str, str], pod: dict[str, Any], cidr: str) -> None:
        net = ipaddress.ip_network(cidr)
        ip = next(str(a) for a in list(net.hosts())[1:] if str(a) not in self.used)
        self.used.add(ip)
        subprocess.run(
            ["ip", "-n", self.namespace, "addr", "add", f"{ip}/32", "dev", "lo"],
            check=True,
            capture_output=True,
        )
        containers = (pod.get("spec") or {}).get("containers") or []
        process = None
        flags = netexec_args(containers[0]) if containers else None
        if flags is not None:
            argv = [sys.executable, "-m", "tests.rehearsal.netexec", "--bind", ip,
                    "--hostname", key[1], *flags]  # fmt: skip
            with (self.log_dir / f"pod-{key[0]}-{key[1]}.log").open("ab") as out:
                process = subprocess.Popen(
                    self.run_in_node(argv), stdout=out, stderr=subprocess.STDOUT
                )
        probe = (containers[0].get("readinessProbe") if containers else None) or None
        run = Run(pod["metadata"]["uid"], ip, process, _now(), ready=probe is None)
        self.runs[key] = run
        self._status(key, pod, run)

    def _probe(self, key: tuple[str, str], pod: dict[str, Any], run: Run) -> None:
        containers = (pod.get("spec") or {}).get("containers") or []
        probe = (containers[0].get("readinessProbe") if containers else None) or None
        if probe is None or run.ending or time.monotonic() < run.next_probe:
            return
        run.next_probe = time.monotonic() + float(probe.get("periodSeconds") or 10)
        ready = False
        http = probe.get("httpGet")
        if http is not None:
            # from the node's namespace, as the kubelet probes: pod IPs are routed only there
            url = f"http://{run.ip}:{http.get('port')}{http.get('path') or '/'}"
            timeout = float(probe.get("timeoutSeconds") or 1)
            answered = subprocess.run(
                self.run_in_node([sys.executable, "-c", _PROBE, url, str(timeout)]),
                capture_output=True,
                timeout=timeout + 30,
                check=False,
            )
            ready = answered.returncode == 0
        if ready != run.ready:
            run.ready = ready
            self._status(key, pod, run)

    def _end(self, key: tuple[str, str], pod: dict[str, Any], run: Run | None) -> None:
        if run is not None and not run.ending:
            run.ending = True
            self._kill(run)
            run.ready = False
            self._status(key, pod, run, terminated=True)
        with contextlib.suppress(NotFound, Conflict):
            self.api.delete(
                f"/api/v1/namespaces/{key[0]}/pods/{key[1]}",
                {"gracePeriodSeconds": 0, "preconditions": {"uid": pod["metadata"]["uid"]}},
            )
        self._forget(key)

    def _forget(self, key: tuple[str, str]) -> None:
        run = self.runs.pop(key, None)
        if run is None:
            return
        self._kill(run)
        subprocess.run(
            ["ip", "-n", self.namespace, "addr", "del", f"{run.ip}/32", "dev", "lo"],
            check=False,
            capture_output=True,
        )
        self.used.discard(run.ip)

    @staticmethod
    def _kill(run: Run) -> None:
        if run.process is not None and run.process.poll() is None:
            run.process.terminate()
            try:
                run.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                run.process.kill()
                run.process.wait(timeout=10)

    def _status(
        self, key: tuple[str, str], pod: dict[str, Any], run: Run, *, terminated: bool = False
    ) -> None:
        containers = (pod.get("spec") or {}).get("containers") or []
        ready = "True" if run.ready and not terminated else "False"
        now = _now()
        state: dict[str, Any] = (
            {"terminated": {"exitCode": 0, "reason": "Completed", "startedAt": run.started,
                            "finishedAt": now}}
            if terminated else {"running": {"startedAt": run.started}}
        )  # fmt: skip
        node_ip = self.node_ip
        status = {
            "phase": "Running",
            "hostIP": node_ip,
            "hostIPs": [{"ip": node_ip}] if node_ip else [],
            "podIP": run.ip,
            "podIPs": [{"ip": run.ip}],
            "startTime": run.started,
            "conditions": [
                {"type": t, "status": s, "lastTransitionTime": now}
                for t, s in (
                    ("Initialized", "True"),
                    ("Ready", ready),
                    ("ContainersReady", ready),
                    ("PodScheduled", "True"),
                )
            ],
            "containerStatuses": [
                {
                    "name": c.get("name"),
                    "image": c.get("image"),
                    "imageID": "",
                    "containerID": f"containerd://{run.uid.replace('-', '')}{i}",
                    "ready": ready == "True",
                    "started": not terminated,
                    "restartCount": 0,
                    "state": state,
                }
                for i, c in enumerate(containers)
            ],
        }
        with contextlib.suppress(NotFound, Conflict):
            self.api.patch(
                f"/api/v1/namespaces/{key[0]}/pods/{key[1]}/status",
                {"metadata": {"uid": run.uid}, "status": status},
                content_type=SMP,
            )

    # --- routes ----------------------------------------------------------------------------

    def _route(self, nodes: list[dict[str, Any]]) -> None:
        for node in nodes:
            name = node["metadata"]["name"]
            cidr = (node.get("spec") or {}).get("podCIDR")
            ip = _internal_ip(node)
            if name == self.node or not cidr or not ip or self.routes.get(cidr) == ip:
                continue
            subprocess.run(
                ["ip", "-n", self.namespace, "route", "replace", cidr, "via", ip],
                check=True,
                capture_output=True,
            )
            self.routes[cidr] = ip
