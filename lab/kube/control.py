"""The ``/_lab`` control plane of the API simulator (server side), JSON over HTTP.

Role: beside the Kubernetes API, tests and ``lab/cluster`` steer the simulator: wipe it, seed
objects, inject faults, cut watch streams, compact history, read the state and the handler
errors the simulator caught. Refusals are Kubernetes ``Status`` errors (400 naming the field
and value, 404 for an unknown route or rule, 405 for a wrong method), like every other answer
of this server.

=============================  =====================  ============================================
path                           method                 effect
=============================  =====================  ============================================
``/_lab/reset``                POST                   forget every object and fault; re-seed
                                                      (409 while a lab's stand-ins are attached)
``/_lab/seed``                 POST                   ``{"objects": [...]}``: create them
``/_lab/faults``               GET / POST / DELETE    list / add a rule (:mod:`lab.kube.faults`)
                                                      / remove every rule
``/_lab/faults/<id>``          DELETE                 remove one rule
``/_lab/watches/close``        POST                   end watch streams (``{"resource", "group"}``)
``/_lab/compact``              POST                   drop watch history (next old watch: 410)
``/_lab/state``                GET                    the store's state dump
``/_lab/errors``               GET / DELETE           handler exceptions caught / forget them
=============================  =====================  ============================================

A simulator serving a running lab (its kubelet stand-in and data plane attached: see
:meth:`ControlRoutes.attach`) refuses ``/_lab/reset`` with 409 ``Conflict`` and changes
nothing: the wipe would take the Nodes and Leases from under the stand-ins, which would then
re-create and lose their Leases in a loop, with no Node left. The lab's own reset
(``Lab.reset``, the pytest plugin's per-test reset) stops them, resets, and registers the
nodes again.

Neighbours: ``handlers.Api`` routes ``/_lab/`` here (after the bearer-token check); the typed
client is ``control_client.KubeControlClient``.
"""

from __future__ import annotations

import json
from typing import Any

from lab.component import InternalErrors
from lab.faults import InvalidFaultRule
from lab.kube import exceptions as E
from lab.kube.faults import KubeFaultRule, KubeFaults
from lab.kube.registry import Registry
from lab.kube.wire import Request, Response, json_response

_ROUTES = {
    "/_lab/reset": ("POST",),
    "/_lab/seed": ("POST",),
    "/_lab/faults": ("GET", "POST", "DELETE"),
    "/_lab/watches/close": ("POST",),
    "/_lab/compact": ("POST",),
    "/_lab/state": ("GET",),
    "/_lab/errors": ("GET", "DELETE"),
}


class ControlRoutes:
    """The ``/_lab`` routes, bound to one simulator's store, faults and error log."""

    def __init__(self, store: Registry, faults: KubeFaults, errors: InternalErrors) -> None:
        self.store = store
        self.faults = faults
        self.errors = errors
        #: who runs stand-ins against this simulator (None: nobody; a reset is safe)
        self.attached: str | None = None

    def attach(self, holder: str | None) -> None:
        """``holder`` (e.g. ``sim cluster 'ccm-lab'``) runs its kubelet stand-in and data plane
        against this simulator from now on (None: no longer); while attached, a reset is
        refused."""
        self.attached = holder

    def handle(self, req: Request) -> Response:
        path, method = req.path.rstrip("/"), req.method
        if path.startswith("/_lab/faults/") and method == "DELETE":
            rule_id = path.rsplit("/", 1)[1]
            if not self.faults.remove(rule_id):
                raise E.ApiError(404, "NotFound", f"fault: no rule with id {json.dumps(rule_id)}")
            return json_response(200, {})
        allowed = _ROUTES.get(path)
        if allowed is None:
            raise E.unknown_path()
        if method not in allowed:
            raise E.ApiError(405, "MethodNotAllowed", f"{method} is not allowed on {path}")
        body = _body(req)
        if path == "/_lab/reset":
            if self.attached is not None:
                raise E.ApiError(
                    409,
                    "Conflict",
                    f"/_lab/reset refused: {self.attached} runs its kubelet stand-in and data "
                    "plane against this simulator, and a reset would leave it without Nodes; "
                    "reset the lab instead (Lab.reset(), the pytest plugin's lab fixture) or "
                    "stop it first. Nothing was changed.",
                )
            self.faults.clear()
            self.store.reset()
            return json_response(200, {"resourceVersion": str(self.store.rv)})
        if path == "/_lab/seed":
            return json_response(200, {"items": self.seed(body.get("objects") or [])})
        if path == "/_lab/faults":
            return self._faults(method, body)
        if path == "/_lab/watches/close":
            key = (body.get("group", ""), body["resource"]) if body.get("resource") else None
            return json_response(200, {"closed": self.store.close_watches(key)})
        if path == "/_lab/compact":
            return json_response(200, {"resourceVersion": str(self.store.compact())})
        if path == "/_lab/state":
            return json_response(200, self.store.dump())
        if method == "DELETE":  # /_lab/errors
            self.errors.clear()
            return json_response(200, {})
        return json_response(200, {"items": self.errors.peek()})

    def _faults(self, method: str, body: dict[str, Any]) -> Response:
        if method == "POST":
            try:
                rule = self.faults.add(KubeFaultRule.parse(body))
            except InvalidFaultRule as exc:
                raise E.bad_request(exc.message) from None
            return json_response(201, rule.to_dict())
        if method == "DELETE":
            self.faults.clear()
            return json_response(200, {})
        return json_response(200, {"items": [r.to_dict() for r in self.faults.rules()]})

    def seed(self, objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Create ``objects`` (each with apiVersion, kind, metadata); returns them as stored."""
        out = []
        for obj in objects:
            av, kind = obj.get("apiVersion", "v1"), obj.get("kind", "")
            group, _, version = av.rpartition("/")
            rt = next(
                (
                    r
                    for r in self.store.resources
                    if r.group == group and r.version == version and r.kind == kind
                ),
                None,
            )
            if rt is None:
                raise E.bad_request(
                    f"seed: no resource for apiVersion={json.dumps(av)} kind={json.dumps(kind)}"
                )
            ns = (obj.get("metadata") or {}).get("namespace", "default") if rt.namespaced else ""
            stored = self.store.writer.create(rt, ns, obj, manager="ccm-lab-seed")
            out.append({"kind": rt.kind, "apiVersion": rt.api_version, **stored})
        return out


def _body(req: Request) -> dict[str, Any]:
    if not req.body.strip():
        return {}
    try:
        decoded = json.loads(req.body)
    except ValueError as exc:
        raise E.bad_request(f"request body is not JSON: {exc}") from None
    if not isinstance(decoded, dict):
        raise E.bad_request(f"request body={decoded!r:.80}: expected a JSON object")
    return decoded
