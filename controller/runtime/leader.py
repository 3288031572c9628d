"""Leader election on a ``coordination.k8s.io/v1`` Lease, as client-go's ``leaderelection``.

Several controller-manager instances share one Lease (default ``kube-system/cloud-controller-
manager``). :meth:`LeaderElector.run`:

1. tries to acquire every ``retry_period``: create the Lease, or take it over when its holder
   has not renewed for ``lease_duration`` *as observed by this instance's clock* (the
   holder's own ``renewTime`` is never compared with our clock, so clock skew does not
   matter), bumping ``leaseTransitions``;
2. calls ``on_started_leading`` and renews every ``retry_period``; if no renewal succeeds for
   ``renew_deadline`` it stops leading (``on_stopped_leading``) — the manager then exits, as
   upstream, so a partitioned leader never acts next to a new one;
3. on ``stop`` (SIGTERM), releases the Lease (empty holder, 1 s duration) so a standby takes
   over at once instead of after ``lease_duration`` (``release_on_cancel``, on by default;
   off, a stopped leader looks like a crashed one).

Writes are optimistic (PUT with the resourceVersion); a ``Conflict`` means another instance
won the race. Time comes from an injectable clock.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from controller.runtime.clock import Clock, RealClock
from controller.runtime.kube import AlreadyExists, Conflict, KubeClient, KubeError, NotFound, Obj

log = logging.getLogger(__name__)


def micro_time(t: datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclass(frozen=True)
class LeaderElectionConfig:
    namespace: str = "kube-system"
    name: str = "cloud-controller-manager"
    identity: str = ""
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0
    release_on_cancel: bool = True  # client-go's ReleaseOnCancel

    def validate(self) -> None:
        if not self.identity:
            raise ValueError("leader election: identity must not be empty")
        if not self.lease_duration > self.renew_deadline:
            raise ValueError(
                f"leader election: lease duration ({self.lease_duration}s) must be greater "
                f"than the renew deadline ({self.renew_deadline}s)"
            )
        if not self.renew_deadline > self.retry_period * 1.2:
            raise ValueError(
                f"leader election: renew deadline ({self.renew_deadline}s) must be greater "
                f"than 1.2 x the retry period ({self.retry_period}s)"
            )


class LeaderElector:
    def __init__(
        self,
        kube: KubeClient,
        config: LeaderElectionConfig,
        *,
        on_started_leading: Callable[[], None],
        on_stopped_leading: Callable[[], None],
        on_new_leader: Callable[[str], None] | None = None,
        clock: Clock | None = None,
    ) -> None:
        config.validate()
        self.kube = kube
        self.config = config
        self.clock: Clock = clock or RealClock()
        self._on_started = on_started_leading
        self._on_stopped = on_stopped_leading
        self._on_new_leader = on_new_leader
        self._observed: Obj | None = None
        self._observed_spec: tuple[object, ...] | None = None
        self._observed_at = 0.0
        self._last_renew = 0.0
        self._leading = False
        self.leader = ""
        self._stop = threading.Event()

    @property
    def is_leader(self) -> bool:
        return self._leading

    def seconds_since_renew(self) -> float:
        return self.clock.monotonic() - self._last_renew

    def stop(self) -> None:
        self._stop.set()

    def run(self) -> None:
        """Block: acquire, lead, renew; return after ``stop()`` or when leadership is lost."""
        c = self.config
        log.info(
            "leader election: %s trying to acquire lease %s/%s", c.identity, c.namespace, c.name
        )
        while not self._stop.is_set():
            if self.try_acquire_or_renew():
                break
            self.clock.wait(self._stop, c.retry_period)
        if self._stop.is_set():
            return
        self._leading = True
        log.info("leader election: %s became leader", c.identity)
        self._on_started()
        try:
            while not self._stop.is_set():
                self.clock.wait(self._stop, c.retry_period)
                if self._stop.is_set():
                    break
                if self.try_acquire_or_renew():
                    continue
                if self.seconds_since_renew() >= c.renew_deadline:
                    log.error(
                        "leader election: failed to renew lease %s/%s within %.0fs; "
                        "leadership lost",
                        c.namespace,
                        c.name,
                        c.renew_deadline,
                    )
                    break
        finally:
            self._leading = False
            if self._stop.is_set() and self.config.release_on_cancel:
                self.release()
            self._on_stopped()

    def _lease_spec(self, acquire: datetime, renew: datetime, transitions: int) -> Obj:
        return {
            "holderIdentity": self.config.identity,
            "leaseDurationSeconds": int(self.config.lease_duration),
            "acquireTime": micro_time(acquire),
            "renewTime": micro_time(renew),
            "leaseTransitions": transitions,
        }

    def try_acquire_or_renew(self) -> bool:
        c = self.config
        now = self.clock.now()
        mono = self.clock.monotonic()
        try:
            lease = self.kube.get_lease(c.namespace, c.name)
        except NotFound:
            body = {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {"name": c.name, "namespace": c.namespace},
                "spec": self._lease_spec(now, now, 0),
            }
            try:
                self._observe(self.kube.create_lease(c.namespace, body), mono)
            except (AlreadyExists, KubeError) as exc:
                log.info("leader election: could not create lease: %s", exc)
                return False
            self._last_renew = mono
            return True
        except KubeError as exc:
            log.warning(
                "leader election: error retrieving lease %s/%s: %s", c.namespace, c.name, exc
            )
            return False

        spec = lease.get("spec") or {}
        self._observe(lease, mono)
        holder = spec.get("holderIdentity") or ""
        duration = float(spec.get("leaseDurationSeconds") or c.lease_duration)
        if holder and holder != c.identity and mono < self._observed_at + duration:
            return False  # someone else holds a lease that has not expired in our eyes
        transitions = int(spec.get("leaseTransitions") or 0)
        acquire_time = spec.get("acquireTime")
        if holder != c.identity:
            transitions += 1
            acquire_time = None
        new = dict(lease)
        new["spec"] = self._lease_spec(now, now, transitions)
        if acquire_time:
            new["spec"]["acquireTime"] = acquire_time
        try:
            updated = self.kube.replace_lease(c.namespace, c.name, new)
        except Conflict:
            return False
        except KubeError as exc:
            log.warning("leader election: error updating lease: %s", exc)
            return False
        self._observe(updated, mono)
        self._last_renew = mono
        return True

    def _observe(self, lease: Obj, mono: float) -> None:
        spec = lease.get("spec") or {}
        key = (spec.get("holderIdentity"), spec.get("renewTime"), spec.get("leaseTransitions"))
        if key != self._observed_spec:
            self._observed_spec = key
            self._observed_at = mono
            holder = str(spec.get("holderIdentity") or "")
            if holder != self.leader:
                self.leader = holder
                log.info("leader election: current leader is %r", holder)
                if self._on_new_leader is not None:
                    self._on_new_leader(holder)
        self._observed = lease

    def release(self) -> None:
        """Give the lease up if we hold it (holder cleared, 1 s duration)."""
        c = self.config
        try:
            lease = self.kube.get_lease(c.namespace, c.name)
            spec = lease.get("spec") or {}
            if spec.get("holderIdentity") != c.identity:
                return
            now = micro_time(self.clock.now())
            new = dict(lease)
            new["spec"] = {
                **spec,
                "holderIdentity": "",
                "leaseDurationSeconds": 1,
                "renewTime": now,
                "acquireTime": now,
            }
            self.kube.replace_lease(c.namespace, c.name, new)
            log.info("leader election: released lease %s/%s", c.namespace, c.name)
        except KubeError as exc:
            log.warning("leader election: could not release the lease: %s", exc)
