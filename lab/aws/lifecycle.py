"""Instance state transitions that take time, and terminated instances that disappear.

Role: moto moves an instance to ``running``, ``stopped`` or ``terminated`` the moment the call
returns, and keeps terminated instances forever. Real EC2 passes through ``pending``,
``stopping`` and ``shutting-down`` for a while and hides terminated instances after about an
hour. The node-lifecycle scenarios (shutdown taint, deletion of nodes whose instance is gone)
depend on those in-between states and on "gone"; kubernetes#81636 depends on EC2's eventual
consistency (a just-launched instance missing from ``DescribeInstances``, :meth:`hide_new`).
After moto answered a ``Run/Start/Stop/TerminateInstances`` call,
:meth:`InstanceLifecycle.observe` puts each affected instance back into the in-between state
with a due time; :meth:`InstanceLifecycle.tick` (run
before every AWS call) completes due transitions and removes terminated instances whose
visibility has expired from moto's reservations. A later call on the same instance replaces its
pending transition, as on EC2.

Design: lazy advancement on each request keeps the endpoint free of timer threads; the clock is
injected so tests can use fake time. The moto model is changed in place (``instance._state``),
so every reader — filters such as ``instance-state-name``, ``DescribeInstanceStatus``, ELB
instance health — sees one consistent state.

Neighbours: owned by :class:`lab.aws.fidelity.FidelityLayer`, which configures the delays.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from lab.aws.protocol import AwsRequest, WireResponse, indexed

STATE_CODES = {
    "pending": 0,
    "running": 16,
    "shutting-down": 32,
    "terminated": 48,
    "stopping": 64,
    "stopped": 80,
}
_INSTANCE_ID = re.compile(rb"<instanceId>(i-[0-9a-f]+)</instanceId>")


@dataclass(frozen=True)
class _Transition:
    due: float
    final: str


def _set_state(instance: Any, name: str) -> None:
    instance._state.name = name
    instance._state.code = STATE_CODES[name]


class InstanceLifecycle:
    """Pending transitions and terminated-instance expiry (see module docstring)."""

    def __init__(self, *, clock: Callable[[], float]) -> None:
        self.clock = clock
        self._lock = threading.Lock()
        self._transitions: dict[tuple[str, str], _Transition] = {}
        self._terminated: dict[tuple[str, str], float] = {}
        self.pending_s = 0.0
        self.stopping_s = 0.0
        self.shutting_down_s = 0.0
        self.terminated_visible_s: float | None = None
        self.describe_lag_s = 0.0
        self._created: dict[tuple[str, str], float] = {}

    def configure(
        self,
        *,
        pending_s: float,
        stopping_s: float,
        shutting_down_s: float,
        terminated_visible_s: float | None,
        describe_lag_s: float = 0.0,
    ) -> None:
        with self._lock:
            self.describe_lag_s = describe_lag_s
            self.pending_s = pending_s
            self.stopping_s = stopping_s
            self.shutting_down_s = shutting_down_s
            self.terminated_visible_s = terminated_visible_s

    def clear(self) -> None:
        with self._lock:
            self._transitions.clear()
            self._terminated.clear()
            self._created.clear()

    def observe(self, view: Any, request: AwsRequest, response: WireResponse) -> None:
        """Record the transitions a successful instance call started."""
        if request.action == "RunInstances":
            ids = [m.decode() for m in _INSTANCE_ID.findall(response.body)]
        else:
            ids = indexed(request.params, "InstanceId")
        plan = {
            "RunInstances": ("pending", "running", self.pending_s),
            "StartInstances": ("pending", "running", self.pending_s),
            "StopInstances": ("stopping", "stopped", self.stopping_s),
            "TerminateInstances": ("shutting-down", "terminated", self.shutting_down_s),
        }[request.action]
        between, final, delay = plan
        now = self.clock()
        with self._lock:
            if request.action == "RunInstances" and self.describe_lag_s > 0:
                for instance_id in ids:
                    self._created[(request.region, instance_id)] = now
            for instance_id in ids:
                key = (request.region, instance_id)
                self._transitions.pop(key, None)
                if final != "terminated":
                    self._terminated.pop(key, None)
                try:
                    instance = view.ec2.get_instance(instance_id)
                except Exception:
                    continue
                if instance.state != final:
                    continue  # moto refused the transition (e.g. start of a terminated one)
                if delay > 0:
                    _set_state(instance, between)
                    self._transitions[key] = _Transition(due=now + delay, final=final)
                elif final == "terminated":
                    self._terminated.setdefault(key, now)

    def tick(self, views: Callable[[str], Any]) -> None:
        """Complete due transitions; drop terminated instances past their visibility."""
        now = self.clock()
        with self._lock:
            if not self._transitions and not self._terminated:
                return
            for key, transition in list(self._transitions.items()):
                if transition.due > now:
                    continue
                del self._transitions[key]
                instance = _find(views(key[0]), key[1])
                if instance is None:
                    continue
                _set_state(instance, transition.final)
                if transition.final == "terminated":
                    self._terminated[key] = transition.due
            visible = self.terminated_visible_s
            if visible is None:
                return
            for key, since in list(self._terminated.items()):
                if now - since >= visible:
                    del self._terminated[key]
                    _remove(views(key[0]), key[1])

    def hide_new(self, view: Any, region: str) -> _Hidden | None:
        """Take instances younger than ``describe_lag_s`` out of moto until :meth:`_Hidden.restore`.

        EC2 is eventually consistent: right after ``RunInstances`` a ``DescribeInstances`` by id
        can answer ``InvalidInstanceID.NotFound`` and a listing can miss the instance
        (kubernetes#81636). Called under the endpoint's request lock, around one moto call.
        """
        with self._lock:
            if self.describe_lag_s <= 0 or not self._created:
                return None
            now = self.clock()
            for key, created in list(self._created.items()):
                if now - created >= self.describe_lag_s:
                    del self._created[key]
            young = {iid for (r, iid) in self._created if r == region}
        if not young:
            return None
        order = list(view.ec2.reservations.items())
        lists: list[tuple[Any, list[Any]]] = []
        for reservation_id, reservation in order:
            kept = [i for i in reservation.instances if i.id not in young]
            if len(kept) != len(reservation.instances):
                lists.append((reservation, reservation.instances))
                reservation.instances = kept
                if not kept:
                    del view.ec2.reservations[reservation_id]
        return _Hidden(view.ec2.reservations, order, lists)

    def pending(self) -> dict[str, str]:
        """Instance id → state it is heading to (for the control plane)."""
        with self._lock:
            return {key[1]: t.final for key, t in self._transitions.items()}


@dataclass(frozen=True)
class _Hidden:
    """Instances taken out of moto for one call, and how to put them back exactly."""

    reservations: Any
    order: list[tuple[str, Any]]
    lists: list[tuple[Any, list[Any]]]

    def restore(self) -> None:
        for reservation, instances in self.lists:
            reservation.instances = instances
        self.reservations.clear()
        self.reservations.update(self.order)


def _find(view: Any, instance_id: str) -> Any:
    for reservation in list(view.ec2.reservations.values()):
        for instance in reservation.instances:
            if instance.id == instance_id:
                return instance
    return None


def _remove(view: Any, instance_id: str) -> None:
    for reservation_id, reservation in list(view.ec2.reservations.items()):
        kept = [i for i in reservation.instances if i.id != instance_id]
        if len(kept) != len(reservation.instances):
            reservation.instances = kept
            if not kept:
                del view.ec2.reservations[reservation_id]
