"""The ``/_lab`` control plane: fault rules on the server side, a typed client on the other.

Beside the Kubernetes API the simulator serves ``/_lab/*`` (reset, seed, faults, closing watch
streams, compacting history, state dump, collected handler errors). :class:`Faults` is the
server-side rule table the HTTP layer consults before every API request; :class:`ControlClient`
is what tests and ``lab/cluster`` use, over HTTP so it works for the in-process and the
subprocess simulator alike.
"""

from __future__ import annotations

import json
import ssl
import threading
import urllib.request
from dataclasses import asdict, dataclass
from typing import Any


@dataclass
class FaultRule:
    """Fail (``status`` > 0) and/or delay (``latency_ms``) requests matching verb and resource.

    ``verb``/``resource`` are Kubernetes verbs (get, list, watch, create, update, patch, delete,
    deletecollection) and plural resource names; ``"*"`` matches any. ``count`` is how many
    matching requests the rule affects (-1: until cleared).
    """

    verb: str = "*"
    resource: str = "*"
    status: int = 0
    count: int = 1
    message: str = ""
    reason: str = ""
    latency_ms: int = 0
    subresource: str = "*"


_REASONS = {
    400: "BadRequest",
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    409: "Conflict",
    410: "Expired",
    422: "Invalid",
    429: "TooManyRequests",
    500: "InternalError",
    503: "ServiceUnavailable",
    504: "Timeout",
}


def default_reason(status: int) -> str:
    return _REASONS.get(status, "InternalError" if status >= 500 else "BadRequest")


class Faults:
    def __init__(self) -> None:
        self._rules: list[FaultRule] = []
        self._lock = threading.Lock()

    def add(self, rule: FaultRule) -> None:
        with self._lock:
            self._rules.append(rule)

    def clear(self) -> None:
        with self._lock:
            self._rules.clear()

    def rules(self) -> list[FaultRule]:
        with self._lock:
            return list(self._rules)

    def take(self, verb: str, resource: str, subresource: str) -> tuple[float, FaultRule | None]:
        """Consume matching rules: (total latency seconds, the first failing rule or None)."""
        latency = 0.0
        failing: FaultRule | None = None
        with self._lock:
            for rule in list(self._rules):
                if rule.verb not in ("*", verb) or rule.resource not in ("*", resource):
                    continue
                if rule.subresource not in ("*", subresource):
                    continue
                if rule.status and failing is not None:
                    continue
                latency += rule.latency_ms / 1000.0
                if rule.status:
                    failing = rule
                if rule.count > 0:
                    rule.count -= 1
                    if rule.count == 0:
                        self._rules.remove(rule)
        return latency, failing


class ControlError(RuntimeError):
    pass


class ControlClient:
    """Typed client for ``/_lab``. ``base_url`` is the simulator's URL."""

    def __init__(
        self,
        base_url: str,
        *,
        token: str | None = None,
        ca_file: str | None = None,
        timeout: float = 10.0,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self._token = token
        self._timeout = timeout
        self._ctx: ssl.SSLContext | None = None
        if base_url.startswith("https"):
            self._ctx = ssl.create_default_context(cafile=ca_file)

    def _call(self, method: str, path: str, body: Any = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.base_url + path, data=data, method=method)
        req.add_header("Content-Type", "application/json")
        if self._token:
            req.add_header("Authorization", f"Bearer {self._token}")
        try:
            with urllib.request.urlopen(req, timeout=self._timeout, context=self._ctx) as resp:
                raw = resp.read()
        except urllib.error.HTTPError as exc:
            raise ControlError(f"{method} {path}: HTTP {exc.code}: {exc.read().decode()}") from None
        return json.loads(raw) if raw else None

    def reset(self) -> None:
        """Forget every object and fault; re-seed the default namespaces and services."""
        self._call("POST", "/_lab/reset", {})

    def seed(self, objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Create objects (each with apiVersion, kind, metadata); returns the stored objects."""
        out: list[dict[str, Any]] = self._call("POST", "/_lab/seed", {"objects": objects})["items"]
        return out

    def fail(
        self,
        *,
        verb: str = "*",
        resource: str = "*",
        status: int = 500,
        count: int = 1,
        message: str = "",
        reason: str = "",
        subresource: str = "*",
    ) -> None:
        """Fail the next ``count`` requests matching verb/resource with ``status``."""
        self.add_fault(
            FaultRule(
                verb=verb,
                resource=resource,
                status=status,
                count=count,
                message=message,
                reason=reason,
                subresource=subresource,
            )
        )

    def delay(
        self, *, verb: str = "*", resource: str = "*", latency_ms: int, count: int = -1
    ) -> None:
        self.add_fault(FaultRule(verb=verb, resource=resource, latency_ms=latency_ms, count=count))

    def add_fault(self, rule: FaultRule) -> None:
        self._call("POST", "/_lab/faults", asdict(rule))

    def clear_faults(self) -> None:
        self._call("DELETE", "/_lab/faults")

    def faults(self) -> list[FaultRule]:
        return [FaultRule(**r) for r in self._call("GET", "/_lab/faults")["items"]]

    def close_watches(self, resource: str | None = None, group: str = "") -> int:
        """End open watch streams (of one resource, or all); returns how many were closed."""
        body = {"resource": resource, "group": group} if resource else {}
        return int(self._call("POST", "/_lab/watches/close", body)["closed"])

    def compact(self) -> str:
        """Drop watch history: the next watch from an older resourceVersion gets 410 Expired."""
        return str(self._call("POST", "/_lab/compact", {})["resourceVersion"])

    def state(self) -> dict[str, Any]:
        out: dict[str, Any] = self._call("GET", "/_lab/state")
        return out

    def errors(self) -> list[str]:
        """Tracebacks of exceptions raised inside request handlers since the last clear."""
        return [str(e) for e in self._call("GET", "/_lab/errors")["items"]]

    def clear_errors(self) -> None:
        self._call("DELETE", "/_lab/errors")
