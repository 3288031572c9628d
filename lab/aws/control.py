"""The ``/_lab/`` control plane of the AWS endpoint and the recording proxy, JSON over HTTP.

Role: tests, ``invoke`` tasks and other processes steer the endpoint beside the AWS data plane:
reset, seed, fidelity switches, fault rules, trail queries, health. Routes (all JSON unless
noted; errors are ``{"error": "..."}`` with 400/404/405):

====================  ==========  =====================================================
path                  method      effect
====================  ==========  =====================================================
``/_lab/health``      GET         ``{"status": "ok", region, account, seed, ...}``
``/_lab/reset``       POST        wipe AWS state (process-wide), trail, faults
``/_lab/seed``        POST        ``{"seed": N}``: deterministic resource ids from now on
``/_lab/checkpoint``  POST        remember the AWS state as it is (process-wide, with the ids)
``/_lab/restore``     POST        back to the checkpoint; trail, faults, fidelity state reset
``/_lab/fidelity``    GET / POST  read / change switches (``{"elb_sg_order": "reversed"}``)
``/_lab/faults``      GET / POST  list / add a rule (see :mod:`lab.aws.faults`)
``/_lab/faults``      DELETE      remove every rule
``/_lab/faults/<id>`` DELETE      remove one rule
``/_lab/trail``       GET         events; filters ``action service error_code injected ok
                                  since_seq param.<Name>``; ``{"events": [...], "last_seq": N}``
``/_lab/trail``       DELETE      forget every event
``/_lab/trail.jsonl`` GET         every event as JSON lines (``application/x-ndjson``)
====================  ==========  =====================================================

Design: :class:`CallControlRoutes` serves what every AWS-facing server of the lab has (health,
reset, faults, trail) over a :class:`Controlled` target, so the moto endpoint
(:class:`LabControlRoutes`, which adds seed and fidelity) and the recording proxy
(:mod:`lab.aws.proxy`) share one implementation and one client.

Neighbours: mounted by :class:`lab.aws.app.AwsApp` and :class:`lab.aws.proxy.app.ProxyApp`; the
typed client is :class:`lab.aws.control_client.AwsControlClient`.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Iterable
from typing import Any, Protocol

from werkzeug.exceptions import HTTPException
from werkzeug.wrappers import Request, Response

from lab.aws.calls import CallRecorder
from lab.aws.exceptions import AwsControlError
from lab.aws.faults import AwsFaultRule
from lab.aws.fidelity import FidelityLayer
from lab.component.bearer import CHALLENGE
from lab.faults import InvalidFaultRule

log = logging.getLogger(__name__)

_BOOL = {"true": True, "1": True, "false": False, "0": False}


def _json(data: Any, status: int = 200) -> Response:
    return Response(json.dumps(data), status=status, mimetype="application/json")


def _body(request: Request) -> dict[str, Any]:
    """The JSON object the request carries, whatever its ``Content-Type`` says (``curl -d``
    sends ``application/x-www-form-urlencoded``, which ``request.data`` would leave empty)."""
    raw = request.get_data(cache=True, parse_form_data=False)
    if not raw.strip():
        return {}
    try:
        data = json.loads(raw)
    except ValueError as exc:
        raise AwsControlError(f"request body is not JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise AwsControlError(f"request body must be a JSON object, got {type(data).__name__}")
    return data


def _flag(request: Request, name: str) -> bool | None:
    raw = request.args.get(name)
    if raw is None:
        return None
    if raw.lower() not in _BOOL:
        raise AwsControlError(f"query parameter {name!r} must be true or false, got {raw!r}")
    return _BOOL[raw.lower()]


class Controlled(Protocol):
    """What the shared control routes steer: a server's fault rules, trail and health."""

    @property
    def calls(self) -> CallRecorder: ...

    def health(self) -> dict[str, Any]:
        """The ``/_lab/health`` answer."""
        ...

    def reset(self) -> None:
        """What ``POST /_lab/reset`` does."""
        ...


class CallControlRoutes:
    """WSGI handler for the ``/_lab/*`` routes every AWS-facing server has (see the module doc).

    A subclass adds its own routes in :meth:`more` and names them in :attr:`extra_routes`.
    """

    common_routes = (
        "/_lab/health",
        "/_lab/reset",
        "/_lab/faults",
        "/_lab/trail",
        "/_lab/trail.jsonl",
    )
    extra_routes: tuple[str, ...] = ()
    #: the services a fault rule may name (None: any, as for the proxy, which forwards any)
    fault_services: frozenset[str] | None = None

    def __init__(self, target: Controlled) -> None:
        self.target = target

    def __call__(
        self, environ: dict[str, Any], start_response: Callable[..., Any]
    ) -> Iterable[bytes]:
        request = Request(environ)
        try:
            response = self.dispatch(request)
        except AwsControlError as exc:
            response = _json({"error": exc.message}, exc.status)
        except InvalidFaultRule as exc:
            response = _json({"error": exc.message}, 400)
        except HTTPException as exc:
            response = _json({"error": exc.description or exc.name}, exc.code or 400)
        return response(environ, start_response)

    def dispatch(self, request: Request) -> Response:
        path = request.path.rstrip("/")
        method = request.method
        target = self.target
        calls = target.calls
        if path == "/_lab/health" and method == "GET":
            return _json(target.health())
        if path == "/_lab/reset" and method == "POST":
            target.reset()
            return _json({"status": "ok"})
        if path == "/_lab/faults":
            if method == "GET":
                return _json({"faults": [r.to_dict() for r in calls.faults.rules()]})
            if method == "POST":
                rule = calls.faults.add(self._fault_rule(_body(request)))
                log.info("fault added %s", rule)
                return _json(rule.to_dict(), 201)
            if method == "DELETE":
                calls.faults.clear()
                return _json({"status": "ok"})
        if path.startswith("/_lab/faults/") and method == "DELETE":
            rule_id = path.rsplit("/", 1)[1]
            if not calls.faults.remove(rule_id):
                raise AwsControlError(f"fault: no rule with id {rule_id!r}", status=404)
            return _json({"status": "ok"})
        if path == "/_lab/trail":
            if method == "GET":
                return self._trail(request)
            if method == "DELETE":
                calls.trail.clear()
                return _json({"status": "ok"})
        if path == "/_lab/trail.jsonl" and method == "GET":
            return Response(calls.trail.to_jsonl(), mimetype="application/x-ndjson")
        answer = self.more(request, path, method)
        if answer is not None:
            return answer
        known = self.common_routes[:2] + self.extra_routes + self.common_routes[2:]
        if path in known or path.startswith("/_lab/faults/"):
            raise AwsControlError(f"method {method} not allowed on {path}", status=405)
        raise AwsControlError(f"no control route {path!r}; known: {list(known)}", status=404)

    def _fault_rule(self, data: dict[str, Any]) -> AwsFaultRule:
        """A fault rule from its JSON, checked (a service this server does not answer too)."""
        rule = AwsFaultRule.parse(data)
        services = self.fault_services
        if rule.service is not None and services is not None and rule.service not in services:
            raise InvalidFaultRule("service", rule.service, f"expected one of {sorted(services)}")
        return rule

    def more(self, request: Request, path: str, method: str) -> Response | None:
        """A subclass's own routes (None: not one of them)."""
        return None

    def _trail(self, request: Request) -> Response:
        since_raw = request.args.get("since_seq")
        since: int | None = None
        if since_raw is not None:
            if not since_raw.lstrip("-").isdigit():
                raise AwsControlError(
                    f"query parameter 'since_seq' must be an integer, got {since_raw!r}"
                )
            since = int(since_raw)
        trail = self.target.calls.trail
        events = trail.calls(
            request.args.get("action"),
            service=request.args.get("service"),
            error_code=request.args.get("error_code"),
            injected=_flag(request, "injected"),
            ok=_flag(request, "ok"),
            since_seq=since,
            params={
                k[len("param.") :]: v for k, v in request.args.items() if k.startswith("param.")
            },
        )
        return _json({"events": [e.to_dict() for e in events], "last_seq": trail.last_seq})


class SteeredLab(Controlled, Protocol):
    """What the moto endpoint's routes steer beyond :class:`Controlled` (its
    :class:`lab.aws.app.AwsLab`, which this module does not import: the app mounts these
    routes)."""

    @property
    def lock(self) -> threading.RLock: ...

    @property
    def fidelity(self) -> FidelityLayer: ...

    def apply_seed(self, seed: int) -> None: ...

    def checkpoint(self) -> None: ...

    def restore(self) -> None: ...


class LabControlRoutes(CallControlRoutes):
    """The moto endpoint's ``/_lab/``: the shared routes plus seed and fidelity switches."""

    extra_routes = ("/_lab/seed", "/_lab/fidelity", "/_lab/checkpoint", "/_lab/restore")
    fault_services = frozenset({"ec2", "elb", "elbv2", "sts"})

    def __init__(self, lab: SteeredLab) -> None:
        super().__init__(lab)
        self.lab = lab

    def more(self, request: Request, path: str, method: str) -> Response | None:
        lab = self.lab
        if path == "/_lab/seed" and method == "POST":
            seed = _body(request).get("seed")
            if not isinstance(seed, int) or isinstance(seed, bool):
                raise AwsControlError(f"seed: 'seed' must be an integer, got {seed!r}")
            lab.apply_seed(seed)
            return _json({"seed": seed})
        if path == "/_lab/checkpoint" and method == "POST":
            lab.checkpoint()
            return _json({"status": "ok"})
        if path == "/_lab/restore" and method == "POST":
            lab.restore()
            return _json({"status": "ok"})
        if path == "/_lab/fidelity":
            if method == "GET":
                return _json(lab.fidelity.config.to_dict())
            if method in ("POST", "PUT", "PATCH"):
                with lab.lock:
                    lab.fidelity.config = lab.fidelity.config.updated(_body(request))
                    log.info("fidelity switches now %s", lab.fidelity.config)
                    return _json(lab.fidelity.config.to_dict())
        return None


def unauthorized(
    message: str, environ: dict[str, Any], start_response: Callable[..., Any]
) -> Iterable[bytes]:
    """401 for a control request without the lab's token, in the control plane's JSON shape."""
    method, path = environ.get("REQUEST_METHOD"), environ.get("PATH_INFO")
    log.warning("refused %s %s: %s", method, path, message.split(":", 1)[0])
    body = json.dumps({"error": message}).encode()
    start_response(
        "401 UNAUTHORIZED",
        [
            ("Content-Type", "application/json"),
            ("Content-Length", str(len(body))),
            ("WWW-Authenticate", CHALLENGE),
        ],
    )
    return [body]
