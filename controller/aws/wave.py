"""Reads shared by one sync wave: AWS answers the controller would otherwise ask for again.

Neighbours: :class:`controller.aws.context.AWSContext` carries one :class:`WaveCache`;
:mod:`controller.aws.loadbalancer`, :mod:`controller.aws.nlb`, :mod:`controller.aws.subnets`
and :mod:`controller.aws.securitygroups` read through it; the service controller opens and
closes waves through :meth:`controller.aws.AWSCloud` (``begin_wave`` / ``end_wave``).

Design. A *wave* is one burst of syncs: a node sync updating every Service, or the service
queue from the moment a worker takes a key until the queue is empty and no worker is busy
(a restart re-ensuring every Service is one wave). Outside a wave nothing is cached and
every read goes to AWS, exactly as before. Inside one:

* reads every Service makes identically (the VPC's subnets and route tables, every security
  group) are asked once and reused;
* a load balancer's description is kept per name until a call changes that load balancer;
* in a *batched* wave (two or more syncs known to be coming) one listing serves many: one
  ``DescribeLoadBalancers`` without names for every Classic ELB (or ELBv2 load balancer and
  target group), and the security-group questions (by id, by name, by referencing group) are
  answered from the one unfiltered ``DescribeSecurityGroups``. A name missing from a listing
  is always asked for directly: a listing only ever answers "exists, like this".

Correctness against real AWS: every mutating call made through the controller's clients
invalidates what it can change (botocore events, before the call and again after it, error
or not): an EC2 mutation drops every EC2 answer, a Classic ELB mutation the named load
balancers (all of them when the call names none), an ELBv2 mutation every ELBv2 answer except
for target (de)registration and tags, which no cached description shows. A read that was in
flight while a mutation ran is used once but not kept. The wave's end drops everything, and
no answer is served older than ``max_age`` seconds even inside a long wave.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Hashable, Iterable, Mapping
from typing import Any, Final, TypeVar

_T = TypeVar("_T")

#: ELBv2 mutations that change nothing a cached description shows (targets, tags)
_ELBV2_KEEPS: Final = frozenset({"RegisterTargets", "DeregisterTargets", "AddTags", "RemoveTags"})
_READ_PREFIXES: Final = ("Describe", "Get", "List")
_CONTEXT_KEY: Final = "ccm_wave_invalidates"


class _Miss:
    pass


MISS: Final = _Miss()


class WaveCache:
    """Per-wave memo of AWS reads, keyed by domain (``ec2``, ``elb``, ``elbv2``) and key."""

    def __init__(self, *, max_age: float = 60.0, clock: Callable[[], float] = time.monotonic):
        self.max_age = max_age
        self._clock = clock
        self._lock = threading.Lock()
        self._depth = 0
        self._batched = 0
        self._entries: dict[tuple[str, Hashable], tuple[float, Any]] = {}
        self._tick = 0
        self._domain_tick: dict[str, int] = {}
        self._key_tick: dict[tuple[str, Hashable], int] = {}
        self._listed: dict[Hashable, float] = {}

    # -- waves ------------------------------------------------------------------------------
    def begin(self, size: int) -> None:
        """Open a wave of ``size`` syncs known so far (nested waves share the memo)."""
        with self._lock:
            self._depth += 1
            self._batched += 1 if size >= 2 else 0

    def grow(self, was: int, now: int) -> None:
        """A wave opened with ``was`` syncs now knows of ``now``."""
        if was < 2 <= now:
            with self._lock:
                self._batched += 1

    def end(self, size: int) -> None:
        """Close a wave opened (or grown) to ``size``; the last one out drops everything."""
        with self._lock:
            self._depth = max(0, self._depth - 1)
            self._batched = max(0, self._batched - (1 if size >= 2 else 0))
            if self._depth == 0:
                self._drop_all()

    @property
    def active(self) -> bool:
        return self._depth > 0

    @property
    def batched(self) -> bool:
        return self._depth > 0 and self._batched > 0

    # -- reading ----------------------------------------------------------------------------
    def mark(self) -> int:
        """The invalidation counter now: pass it to :meth:`put` for an answer asked after."""
        with self._lock:
            return self._tick

    def get(self, domain: str, key: Hashable) -> Any:
        """The kept answer, or :data:`MISS`."""
        with self._lock:
            if self._depth == 0:
                return MISS
            found = self._entries.get((domain, key))
            if found is None:
                return MISS
            at, value = found
            if self._clock() - at > self.max_age:
                del self._entries[(domain, key)]
                return MISS
            return value

    def put(self, domain: str, key: Hashable, value: Any, *, since: int) -> None:
        """Keep ``value`` (asked when the counter was ``since``) unless a mutation of its
        domain or key ran since then, or no wave is open."""
        self.put_many(domain, {key: value}, since=since)

    def put_many(self, domain: str, values: Mapping[Hashable, Any], *, since: int) -> None:
        with self._lock:
            if self._depth == 0 or self._domain_tick.get(domain, -1) > since:
                return
            now = self._clock()
            for key, value in values.items():
                if self._key_tick.get((domain, key), -1) <= since:
                    self._entries[(domain, key)] = (now, value)

    def read(self, domain: str, key: Hashable, fetch: Callable[[], _T]) -> _T:
        """The kept answer, or ``fetch()`` kept for the rest of the wave."""
        found = self.get(domain, key)
        if found is not MISS:
            return found  # type: ignore[no-any-return]
        since = self.mark()
        value = fetch()
        self.put(domain, key, value, since=since)
        return value

    def first_listing(self, listing: Hashable) -> bool:
        """True once per batched wave for each ``listing`` (e.g. every Classic ELB), and again
        once the last one is ``max_age`` old (what it answered has expired): the caller
        fetches it then; otherwise a name the listing lacks is asked for directly."""
        with self._lock:
            if self._depth == 0 or self._batched == 0:
                return False
            now = self._clock()
            at = self._listed.get(listing)
            if at is not None and now - at <= self.max_age:
                return False
            self._listed[listing] = now
            return True

    # -- invalidation -----------------------------------------------------------------------
    def invalidate(self, domain: str, keys: Iterable[Hashable] | None = None) -> None:
        """Forget ``keys`` of ``domain``, or the whole domain."""
        with self._lock:
            self._tick += 1
            if keys is None:
                self._domain_tick[domain] = self._tick
                for entry in [e for e in self._entries if e[0] == domain]:
                    del self._entries[entry]
                return
            for key in keys:
                self._key_tick[(domain, key)] = self._tick
                self._entries.pop((domain, key), None)

    def _drop_all(self) -> None:
        self._tick += 1
        self._entries.clear()
        self._key_tick.clear()
        self._listed.clear()
        self._domain_tick = dict.fromkeys(("ec2", "elb", "elbv2"), self._tick)

    def watch(self, domain: str, client: Any) -> None:
        """Invalidate on every mutating call ``client`` makes (before it is sent, and again
        once it answered or failed)."""
        events = client.meta.events

        def before(
            params: Mapping[str, Any], model: Any, context: dict[str, Any], **_: Any
        ) -> None:
            target = invalidation(domain, model.name, params)
            if target is not None:
                context[_CONTEXT_KEY] = target
                self.invalidate(domain, target or None)

        def after(context: Mapping[str, Any] | None = None, **_: Any) -> None:
            target = (context or {}).get(_CONTEXT_KEY)
            if target is not None:
                self.invalidate(domain, target or None)

        events.register("before-parameter-build.*.*", before, unique_id=f"ccm-wave-b-{domain}")
        events.register("after-call.*.*", after, unique_id=f"ccm-wave-a-{domain}")
        events.register("after-call-error.*.*", after, unique_id=f"ccm-wave-e-{domain}")


def invalidation(domain: str, action: str, params: Mapping[str, Any]) -> tuple[str, ...] | None:
    """What a call invalidates: ``None`` nothing (a read), ``()`` the whole domain, else the
    Classic ELB names it changes."""
    if action.startswith(_READ_PREFIXES):
        return None
    if domain == "elbv2" and action in _ELBV2_KEEPS:
        return None
    if domain == "elb":
        names = params.get("LoadBalancerNames") or (
            [params["LoadBalancerName"]] if params.get("LoadBalancerName") else []
        )
        return tuple(str(n) for n in names)
    return ()
