"""Typed Python client for the simulator's ``/_lab`` control plane.

Role: what tests, e2e scenarios and ``lab/cluster`` use to steer a running simulator beside
the Kubernetes API: reset, seed objects, fault rules (:mod:`lab.kube.faults`), closing watch
streams, compacting history, the state dump and the collected handler errors. Over HTTP, so it
works for the in-process and the child-process simulator alike; refusals come back as
:class:`~lab.kube.exceptions.KubeControlError` with the server's status and message.

Neighbours: ``control`` (the server side of every call here).
"""

from __future__ import annotations

import json
import ssl
import urllib.error
import urllib.request
from typing import Any, Unpack

from lab.component.bearer import refusal_message
from lab.kube.exceptions import KubeControlError
from lab.kube.faults import KubeFaultRule, KubeMatch


class KubeControlClient:
    """Typed client for ``/_lab``. ``base_url`` is the simulator's URL."""

    def __init__(
        self,
        base_url: str,
        *,
        token: str | None = None,
        ca_file: str | None = None,
        ca_data: str | None = None,
        timeout: float = 10.0,
    ) -> None:
        """``ca_file`` or ``ca_data`` (PEM text, as a kubeconfig's decoded
        ``certificate-authority-data``): the CA an ``https`` simulator's certificate is from."""
        self.base_url = base_url.rstrip("/")
        self._token = token
        self._timeout = timeout
        self._ctx: ssl.SSLContext | None = None
        if base_url.startswith("https"):
            self._ctx = ssl.create_default_context(cafile=ca_file, cadata=ca_data)

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
            message, text = refusal_message(exc, "message")
            raise KubeControlError(
                f"{method} {path}: {text if message is None else message}", status=exc.code
            ) from None
        return json.loads(raw) if raw else None

    def reset(self) -> None:
        """Forget every object and fault; re-seed the default namespaces and services."""
        self._call("POST", "/_lab/reset", {})

    def seed(self, objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Create objects (each with apiVersion, kind, metadata); returns the stored objects."""
        out: list[dict[str, Any]] = self._call("POST", "/_lab/seed", {"objects": objects})["items"]
        return out

    def add_fault(
        self,
        *,
        status: int = 500,
        reason: str | None = None,
        message: str | None = None,
        latency_ms: float | None = None,
        **where: Unpack[KubeMatch],
    ) -> KubeFaultRule:
        """Fail matching requests with ``status`` (after ``latency_ms``, if given).

        ``where``: ``verb``, ``resource``, ``subresource`` (``"*"`` by default), ``count``
        (None: until cleared), ``probability`` and ``seed`` (see :mod:`lab.faults`). Returns
        the rule with its id.
        """
        given = {"status": status, "reason": reason, "message": message, "latency_ms": latency_ms}
        return self._add(**given, **where)

    def add_latency(self, *, latency_ms: float, **where: Unpack[KubeMatch]) -> KubeFaultRule:
        """Delay matching requests by ``latency_ms``, then serve them; returns the rule."""
        return self._add(effect="latency", latency_ms=latency_ms, **where)

    def _add(self, **given: Any) -> KubeFaultRule:
        return self.add_rule({k: v for k, v in given.items() if v is not None})

    def add_rule(self, rule: dict[str, Any]) -> KubeFaultRule:
        """Add a rule given as its JSON (the fields of :mod:`lab.kube.faults`); returns it."""
        return KubeFaultRule.from_dict(self._call("POST", "/_lab/faults", rule))

    def faults(self) -> list[KubeFaultRule]:
        return [KubeFaultRule.from_dict(r) for r in self._call("GET", "/_lab/faults")["items"]]

    def remove_fault(self, rule_id: str) -> None:
        self._call("DELETE", f"/_lab/faults/{rule_id}")

    def clear_faults(self) -> None:
        self._call("DELETE", "/_lab/faults")

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
