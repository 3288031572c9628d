"""Typed Python client for the endpoint's ``/_lab/`` control plane.

Role: the one way code outside the endpoint's process (and inside it, for symmetry) steers the
lab: ``AwsControlClient(url, token=lab_token).reset()``, ``.set_fidelity(elb_sg_order="reversed")``,
``.add_fault(action="DeleteSecurityGroup", code="Throttling", count=2)``, ``.add_latency(...)``,
``.trail(action="DeleteSecurityGroup")``. It speaks plain JSON over HTTP with ``urllib`` (no
extra dependency) and turns refusals into :class:`lab.aws.exceptions.AwsControlError` carrying the
server's message; transport errors surface as :class:`AwsControlUnavailable`.

Neighbours: the server side is :mod:`lab.aws.control`; values are :class:`FidelityConfig`,
:class:`AwsFaultRule` and :class:`TrailEvent` from their modules.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any, Unpack
from urllib.parse import urlencode

from lab.aws.exceptions import AwsControlError, AwsControlUnavailable
from lab.aws.faults import AwsFaultRule, AwsMatch
from lab.aws.fidelity_config import FidelityConfig
from lab.aws.trail import TrailEvent, load_jsonl
from lab.component.bearer import auth_headers, refusal_message


@dataclass(frozen=True)
class Health:
    status: str
    region: str
    account: str
    seed: int | None
    uptime_s: float
    trail_events: int
    faults: int
    internal_errors: list[str]
    upstream: str | None = None
    """The recording proxy's upstream URL (None: the lab's moto endpoint)."""
    resigning: bool | None = None
    """Whether the recording proxy signs forwarded calls with its own credentials."""
    caller_auth: bool | None = None
    """Whether the recording proxy accepts only calls signed with its caller key pair."""


class AwsControlClient:
    """Client for ``<url>/_lab/`` (see :mod:`lab.aws.control` for the routes)."""

    def __init__(self, url: str, *, token: str | None = None, timeout: float = 10.0) -> None:
        self.url = url.rstrip("/")
        self.timeout = timeout
        self._token = token

    def __repr__(self) -> str:
        return f"AwsControlClient({self.url!r})"

    def _call(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(
            f"{self.url}/_lab/{path}",
            data=data,
            method=method,
            headers={
                **({"Content-Type": "application/json"} if data is not None else {}),
                **auth_headers(self._token),
            },
        )
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                raw = response.read()
                if response.headers.get_content_type() == "application/json":
                    return json.loads(raw)
                return raw.decode("utf-8")
        except urllib.error.HTTPError as exc:
            message, text = refusal_message(exc, "error")
            raise AwsControlError(
                (text or exc.reason) if message is None else message, status=exc.code
            ) from None
        except (urllib.error.URLError, OSError) as exc:
            raise AwsControlUnavailable(f"{method} {self.url}/_lab/{path}: {exc}") from exc

    # --- lifecycle ----------------------------------------------------------------------------

    def health(self) -> Health:
        return Health(**self._call("GET", "health"))

    def reset(self) -> None:
        """Clear all AWS state (process-wide in moto), the trail, faults and fidelity state."""
        self._call("POST", "reset")

    def seed(self, seed: int) -> None:
        """Make resource ids deterministic from now on (and after every reset)."""
        self._call("POST", "seed", {"seed": seed})

    def checkpoint(self) -> None:
        """Remember the AWS state as it is now (moto's, process-wide, and its id generator)."""
        self._call("POST", "checkpoint")

    def restore(self) -> None:
        """Back to the last checkpoint; the trail, faults and fidelity state reset as with
        :meth:`reset` (``AwsControlError`` with status 409 when there is none)."""
        self._call("POST", "restore")

    # --- fidelity -----------------------------------------------------------------------------

    def fidelity(self) -> FidelityConfig:
        return FidelityConfig(**self._call("GET", "fidelity"))

    def set_fidelity(self, **changes: Any) -> FidelityConfig:
        """Change switches, e.g. ``set_fidelity(elb_sg_order="shuffle", elb_sg_order_seed=3)``.

        ``set_fidelity(enabled=False)`` gives stock moto behaviour. Returns the new switches.
        """
        return FidelityConfig(**self._call("POST", "fidelity", changes))

    # --- faults -------------------------------------------------------------------------------

    def add_fault(
        self,
        *,
        action: str,
        code: str,
        status: int | None = None,
        message: str | None = None,
        latency_ms: float | None = None,
        **where: Unpack[AwsMatch],
    ) -> AwsFaultRule:
        """Answer matching calls with AWS error ``code`` (after ``latency_ms``, if given).

        ``where``: ``service``, ``match``, ``caller``, ``count`` (None: until cleared),
        ``probability`` and ``seed`` (see :mod:`lab.faults`). Returns the rule with its id.
        """
        given = {"code": code, "status": status, "message": message, "latency_ms": latency_ms}
        return self._add(action=action, **given, **where)

    def add_latency(
        self, *, action: str, latency_ms: float, **where: Unpack[AwsMatch]
    ) -> AwsFaultRule:
        """Delay matching calls by ``latency_ms``, then let them proceed; returns the rule."""
        return self._add(effect="latency", action=action, latency_ms=latency_ms, **where)

    def _add(self, **given: Any) -> AwsFaultRule:
        return self.add_rule({k: v for k, v in given.items() if v is not None})

    def add_rule(self, rule: dict[str, Any]) -> AwsFaultRule:
        """Add a rule given as its JSON (the fields of :mod:`lab.aws.faults`); returns it."""
        return AwsFaultRule.from_dict(self._call("POST", "faults", rule))

    def faults(self) -> list[AwsFaultRule]:
        return [AwsFaultRule.from_dict(r) for r in self._call("GET", "faults")["faults"]]

    def remove_fault(self, rule_id: str) -> None:
        self._call("DELETE", f"faults/{rule_id}")

    def clear_faults(self) -> None:
        self._call("DELETE", "faults")

    # --- trail --------------------------------------------------------------------------------

    def trail(
        self,
        action: str | None = None,
        *,
        service: str | None = None,
        error_code: str | None = None,
        injected: bool | None = None,
        ok: bool | None = None,
        since_seq: int | None = None,
        params: dict[str, str] | None = None,
    ) -> list[TrailEvent]:
        """Trail events matching every given filter, oldest first.

        ``params`` matches readable parameters like :meth:`lab.aws.trail.Trail.calls`.
        """
        query: dict[str, str] = {}
        for key, value in (
            ("action", action),
            ("service", service),
            ("error_code", error_code),
            ("since_seq", since_seq),
        ):
            if value is not None:
                query[key] = str(value)
        for key, flag in (("injected", injected), ("ok", ok)):
            if flag is not None:
                query[key] = "true" if flag else "false"
        for key, value in (params or {}).items():
            query[f"param.{key}"] = value
        suffix = f"?{urlencode(query)}" if query else ""
        data = self._call("GET", f"trail{suffix}")
        return [TrailEvent.from_dict(e) for e in data["events"]]

    def trail_jsonl(self) -> str:
        return str(self._call("GET", "trail.jsonl"))

    def trail_events(self) -> list[TrailEvent]:
        """Every event, via the JSON-lines export."""
        return load_jsonl(self.trail_jsonl().splitlines())

    def clear_trail(self) -> None:
        self._call("DELETE", "trail")
