"""The ``/_lab/`` control plane of the metadata service (server side), JSON over HTTP.

Role: tests, e2e scenarios and ``tasks.py`` steer a running IMDS beside its data plane. Routes
(bodies and answers are JSON; refusals are ``InvalidControlRequest``, 400, naming the field):

=================================================  ============  ==========================
path                                               method        effect
=================================================  ============  ==========================
``/_lab/healthz``                                  GET           ``ok`` once serving
``/_lab/state``                                    GET           settings, tokens, injections
``/_lab/settings``                                 PATCH / PUT   change settings
``/_lab/reset``                                    POST          back to the start settings
``/_lab/source-addresses/<ip>``                    PUT / DELETE  map a caller to an instance
``/_lab/instances/<id>/{spot,events,rebalance}``   PUT / DELETE  inject / clear
=================================================  ============  ==========================

Neighbours: mounted by ``routes.ImdsApp`` (which serializes errors); the operations are
``handlers.ImdsService``'s; the typed client is ``control_client.ImdsControlClient``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from werkzeug.routing import Rule
from werkzeug.wrappers import Request

from lab.imds.exceptions import InvalidControlRequest
from lab.imds.handlers import ImdsService, Reply

PREFIX = "/_lab"

RULES = [
    Rule(f"{PREFIX}/healthz", endpoint="healthz", methods=["GET"]),
    Rule(f"{PREFIX}/state", endpoint="state", methods=["GET"]),
    Rule(f"{PREFIX}/settings", endpoint="settings", methods=["PATCH", "PUT"]),
    Rule(f"{PREFIX}/reset", endpoint="reset", methods=["POST"]),
    Rule(
        f"{PREFIX}/source-addresses/<address>",
        endpoint="source_address",
        methods=["PUT", "DELETE"],
    ),
    Rule(
        f"{PREFIX}/instances/<instance_id>/<any(spot, events, rebalance):kind>",
        endpoint="injection",
        methods=["PUT", "DELETE"],
    ),
]


class ControlRoutes:
    """The views of :data:`RULES`, bound to one service."""

    def __init__(self, service: ImdsService) -> None:
        self.service = service

    def views(self) -> dict[str, Callable[..., Reply]]:
        service = self.service
        return {
            "healthz": lambda req: Reply(200, b"ok"),
            "state": lambda req: service.state(),
            "settings": lambda req: service.update_settings(json_object(req) or {}),
            "reset": lambda req: service.reset(),
            "source_address": self._source_address,
            "injection": self._injection,
        }

    def _source_address(self, request: Request, address: str) -> Reply:
        if request.method == "DELETE":
            return self.service.map_source_address(address, None)
        body = json_object(request) or {}
        instance_id = body.get("instance_id")
        if not isinstance(instance_id, str) or not instance_id:
            raise InvalidControlRequest(f"instance_id={instance_id!r}: expected an instance id")
        return self.service.map_source_address(address, instance_id)

    def _injection(self, request: Request, instance_id: str, kind: str) -> Reply:
        body = None if request.method == "DELETE" else (json_object(request) or {})
        setter = {
            "spot": self.service.set_spot,
            "events": self.service.set_events,
            "rebalance": self.service.set_rebalance,
        }[kind]
        return setter(instance_id, body)


def json_object(request: Request) -> dict[str, Any] | None:
    """The request body as a JSON object (None when empty); anything else is a 400."""
    raw = request.get_data(as_text=True)
    if not raw.strip():
        return None
    try:
        body = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise InvalidControlRequest(f"request body is not JSON: {exc}") from None
    if not isinstance(body, dict):
        raise InvalidControlRequest(f"request body={body!r}: expected a JSON object")
    return body
