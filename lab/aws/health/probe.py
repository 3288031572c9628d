"""The prober seam of Classic ELB health checks: what one health check of one instance answers.

Role: :mod:`lab.aws.health.classic` counts health checks against a load balancer's thresholds; *how*
a single check turns out is asked of a :class:`Prober`. The lab's default,
:class:`SecurityGroupProber`, answers from state, the way the check travels on AWS:

1. the instance must be ``running`` (anything else answers nothing: the check times out);
2. the check leaves the load balancer's interfaces, so the load balancer's security groups'
   outbound rules and the instance's groups' inbound rules must allow
   ``tcp/<target port>`` from the load balancer's groups / node address
   (:class:`lab.aws.health.sgview.SecurityGroupView`); a dropped check times out;
3. then something on the instance must answer: an injected :data:`NodeAnswers` callback. The
   sim backend wires it to its kube-proxy model (which endpoint the nodePort reaches, or the
   ``healthCheckNodePort`` status); the default says a running instance answers.

``lab/aws`` knows nothing of Kubernetes: the callback is the only way cluster knowledge gets in.
For a backend with real nodes (kind), :class:`NetworkAnswers` is a callback that makes the
real TCP/SSL/HTTP/HTTPS request (the security groups are still evaluated first: no real network
enforces them there).

Neighbours: :mod:`lab.aws.health.view` (:class:`ClassicInstance`), :mod:`lab.aws.health.sgview`.
"""

from __future__ import annotations

import http.client
import logging
import re
import socket
import ssl
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Protocol

from lab.aws.health.sgview import SecurityGroupView
from lab.aws.health.view import ClassicInstance

log = logging.getLogger(__name__)

_TARGET = re.compile(r"^(?P<proto>TCP|SSL|HTTP|HTTPS):(?P<port>[0-9]{1,5})(?P<path>/.*)?\Z")


@dataclass(frozen=True)
class HealthTarget:
    """A Classic ELB health-check ``Target``: ``TCP:30080``, ``HTTP:30080/healthz``..."""

    protocol: str
    port: int
    path: str = ""

    @classmethod
    def parse(cls, text: str) -> HealthTarget:
        """Parse a target; ``ValueError`` names the value when AWS would refuse it (HTTP and
        HTTPS need a path, TCP and SSL take none, port 1-65535)."""
        match = _TARGET.match(str(text).strip())
        if match is None:
            raise ValueError(
                f"HealthCheck.Target={text!r}: expected TCP:PORT, SSL:PORT, HTTP:PORT/PATH or "
                "HTTPS:PORT/PATH"
            )
        proto, port, path = match["proto"], int(match["port"]), match["path"] or ""
        if not 1 <= port <= 65535:
            raise ValueError(f"HealthCheck.Target={text!r}: port must be 1-65535")
        if proto in ("HTTP", "HTTPS") and not path:
            raise ValueError(f"HealthCheck.Target={text!r}: {proto} needs a path (e.g. /healthz)")
        if proto in ("TCP", "SSL") and path:
            raise ValueError(f"HealthCheck.Target={text!r}: {proto} takes no path")
        return cls(proto, port, path)

    def __str__(self) -> str:
        return f"{self.protocol}:{self.port}{self.path}"


@dataclass(frozen=True)
class ProbeTarget:
    """One health check as the load balancer sends it."""

    load_balancer: str
    target: HealthTarget
    timeout: float
    """Seconds the load balancer waits for an answer (HealthCheck.Timeout)."""
    source_groups: tuple[str, ...] = ()
    """The load balancer's security groups: health checks leave from its interfaces."""
    source_ip: str | None = None
    """A modelled address of a load-balancer node (in its first subnet), for CIDR rules."""


@dataclass(frozen=True)
class ProbeResult:
    """How one health check turned out: passed or not, and what happened."""

    ok: bool
    reason: str
    timed_out: bool = False
    """No answer within Timeout (dropped by a security group, instance not running...)."""


class Prober(Protocol):
    """Runs one health check of ``instance``."""

    def probe(self, instance: ClassicInstance, target: ProbeTarget) -> ProbeResult: ...


NodeAnswers = Callable[[ClassicInstance, ProbeTarget], ProbeResult]
"""What answers on the instance once a health check got through (the sim's kube-proxy model)."""


def running_answers(instance: ClassicInstance, target: ProbeTarget) -> ProbeResult:
    """The default node: a running instance answers every check (no cluster model attached)."""
    if instance.state == "running":
        return ProbeResult(True, f"{target.target} answered (instance running; no node model)")
    return ProbeResult(False, f"instance is {instance.state}: no answer", timed_out=True)


AddressOf = Callable[[ClassicInstance, ProbeTarget], tuple[str, int]]
"""Where a real health check connects for an instance (a kind node container's address...)."""


def private_address(instance: ClassicInstance, target: ProbeTarget) -> tuple[str, int]:
    """The instance's private address and the target port, as on AWS."""
    return instance.private_ip, target.target.port


class NetworkAnswers:
    """A :data:`NodeAnswers` that really connects (for a backend with real nodes, e.g. kind).

    ``TCP``: a connection is accepted; ``SSL``: a TLS handshake completes; ``HTTP``/``HTTPS``:
    ``GET <path>`` answers 200 (any other status fails, as on a Classic ELB). Backend
    certificates are not verified, as the load balancer does not verify them. ``timeout`` is in
    **real** seconds; the endpoint asks its prober under its request lock, so wrap it in
    :class:`BackgroundAnswers` (as a composed lab on kind does) rather than plug it in bare.
    ``address_of`` maps an instance to where its node listens (default: its private address and
    the target port).
    """

    def __init__(self, address_of: AddressOf = private_address, *, timeout: float = 2.0) -> None:
        if not timeout > 0:
            raise ValueError(f"timeout must be > 0 seconds, got {timeout!r}")
        self.address_of = address_of
        self.timeout = timeout

    def __call__(self, instance: ClassicInstance, target: ProbeTarget) -> ProbeResult:
        host, port = self.address_of(instance, target)
        check = target.target
        where = f"{check} at {host}:{port}"
        try:
            if check.protocol in ("HTTP", "HTTPS"):
                return self._http(host, port, check, where)
            with socket.create_connection((host, port), timeout=self.timeout) as sock:
                if check.protocol == "SSL":
                    with _unverified().wrap_socket(sock, server_hostname=host):
                        pass
            return ProbeResult(True, f"{where}: connected")
        except ConnectionRefusedError:
            return ProbeResult(False, f"{where}: connection refused")
        except TimeoutError:
            return ProbeResult(False, f"{where}: no answer in {self.timeout:g}s", timed_out=True)
        except (OSError, http.client.HTTPException) as exc:
            return ProbeResult(False, f"{where}: {type(exc).__name__}: {exc}")

    def _http(self, host: str, port: int, check: HealthTarget, where: str) -> ProbeResult:
        conn: http.client.HTTPConnection
        if check.protocol == "HTTPS":
            conn = http.client.HTTPSConnection(
                host, port, timeout=self.timeout, context=_unverified()
            )
        else:
            conn = http.client.HTTPConnection(host, port, timeout=self.timeout)
        try:
            conn.request("GET", check.path, headers={"User-Agent": "ELB-HealthChecker/1.0"})
            status = conn.getresponse().status
        finally:
            conn.close()
        return ProbeResult(status == 200, f"{where}: HTTP {status}")


class BackgroundAnswers:
    """A :data:`NodeAnswers` that never blocks the endpoint: real checks run on its own threads.

    :class:`lab.aws.health.classic.ElbHealth` asks its prober while the endpoint holds its request
    lock, so a blocking callback (:class:`NetworkAnswers`: up to its timeout per check) would
    stall every AWS call behind it. This wrapper answers at once with the latest result of
    ``answers`` for that instance's address and target and keeps that result fresh: each
    (instance, target) asked about is checked again by a worker every ``period`` real seconds
    while someone keeps asking (forgotten after ``forget_after`` seconds without a question).
    Until the first real answer arrives, a check is a timeout ("no answer yet"), as a check
    still in flight would be; so a real answer counts from the next check on, which on AWS's
    default 30 s interval is a delay of one check. :meth:`close` stops the workers.
    """

    def __init__(
        self,
        answers: NodeAnswers,
        *,
        period: float = 1.0,
        workers: int = 4,
        forget_after: float = 120.0,
    ) -> None:
        if not period > 0:
            raise ValueError(f"period must be > 0 seconds, got {period!r}")
        if not 1 <= workers <= 64:
            raise ValueError(f"workers must be 1-64, got {workers!r}")
        self.answers = answers
        self.period = period
        self.forget_after = forget_after
        self._lock = threading.Lock()
        self._wanted: dict[tuple[str, str, str], tuple[ClassicInstance, ProbeTarget, float]] = {}
        self._results: dict[tuple[str, str, str], ProbeResult] = {}
        self._stop = threading.Event()
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="elb-probe")
        self._thread = threading.Thread(target=self._run, name="elb-probe-loop", daemon=True)
        self._thread.start()

    @staticmethod
    def _key(instance: ClassicInstance, target: ProbeTarget) -> tuple[str, str, str]:
        return (instance.instance_id, instance.private_ip, str(target.target))

    def __call__(self, instance: ClassicInstance, target: ProbeTarget) -> ProbeResult:
        key = self._key(instance, target)
        with self._lock:
            first = key not in self._wanted
            self._wanted[key] = (instance, target, time.monotonic())
            found = self._results.get(key)
        if first and not self._stop.is_set():
            self._submit(key, instance, target)
        if found is None:
            return ProbeResult(False, f"{target.target}: no answer yet", timed_out=True)
        return found

    def _check(self, key: tuple[str, str, str], inst: ClassicInstance, tgt: ProbeTarget) -> None:
        try:
            result = self.answers(inst, tgt)
        except Exception as exc:  # a broken callback fails the check, as the prober does
            log.exception("background health check failed")
            result = ProbeResult(False, f"prober error: {type(exc).__name__}: {exc}")
        with self._lock:
            if key in self._wanted:
                self._results[key] = result

    def _run(self) -> None:
        while not self._stop.wait(self.period):
            now = time.monotonic()
            with self._lock:
                for key in [k for k, v in self._wanted.items() if now - v[2] > self.forget_after]:
                    del self._wanted[key]
                    self._results.pop(key, None)
                due = list(self._wanted.items())
            for key, (inst, tgt, _asked) in due:
                if self._stop.is_set():
                    return
                self._submit(key, inst, tgt)

    def _submit(self, key: tuple[str, str, str], inst: ClassicInstance, tgt: ProbeTarget) -> None:
        try:
            self._pool.submit(self._check, key, inst, tgt)
        except RuntimeError:  # closed meanwhile (close() raced a question): nothing to refresh
            log.debug("background health checks closed; %s not checked", key)

    def close(self) -> None:
        """Stop checking (idempotent); later questions answer from what is known."""
        self._stop.set()
        self._thread.join(timeout=5)
        self._pool.shutdown(wait=False, cancel_futures=True)


def _unverified() -> ssl.SSLContext:
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    return context


class SecurityGroupProber:
    """The default prober: instance state, security groups, then :data:`NodeAnswers`."""

    def __init__(self, groups: SecurityGroupView, node_answers: NodeAnswers = running_answers):
        self.groups = groups
        self.node_answers = node_answers

    def probe(self, instance: ClassicInstance, target: ProbeTarget) -> ProbeResult:
        if instance.state != "running":
            return ProbeResult(
                False,
                f"{target.target} timed out after {target.timeout:g}s: instance is "
                f"{instance.state}",
                timed_out=True,
            )
        verdict = self.groups.connect(
            dest_groups=instance.groups,
            protocol="tcp",
            port=target.target.port,
            source_groups=target.source_groups,
            source_ip=target.source_ip,
            dest_ip=instance.private_ip or None,
        )
        if not verdict.allowed:
            return ProbeResult(
                False,
                f"{target.target} timed out after {target.timeout:g}s: the security groups drop "
                f"the health check from load balancer {target.load_balancer}: {verdict.reason}",
                timed_out=True,
            )
        return self.node_answers(instance, target)


__all__ = [
    "AddressOf",
    "BackgroundAnswers",
    "HealthTarget",
    "NetworkAnswers",
    "NodeAnswers",
    "ProbeResult",
    "ProbeTarget",
    "Prober",
    "SecurityGroupProber",
    "private_address",
    "running_answers",
]
