"""Request handling: decode the wire request, call the store, encode the reply.

Transport-neutral: :class:`Api.handle` takes a :class:`Request` and returns a :class:`Response`
whose body is bytes, or an iterator of chunks for watch streams (``streams.py``); ``server.py``
owns sockets, TLS and HTTP framing, ``wire.py`` body decoding and query options. Discovery,
OpenAPI and Table printing are delegated to ``discovery.py``, ``openapi.py`` and ``tables.py``;
``/_lab`` requests to ``control.py``, fault rules to ``faults.py``. Every
:class:`ApiError` becomes its ``Status`` here and nowhere else; any other exception is recorded
(tests fail on it) and answered as Go's panic recovery answers (a plain-text 500).

Authentication comes first, as kube-apiserver's filter chain has it: with a lab token, a
request without valid credentials is ``401 Unauthorized`` on every path (``/version`` and the
health checks included); ``/_lab`` needs the control token (the lab's) whenever one is set.
"""

from __future__ import annotations

import json
import logging
import threading
import time
import traceback
from typing import Any

from lab.component import InternalErrors
from lab.component.bearer import bearer_ok, refusal
from lab.kube import exceptions as E
from lab.kube import health, podstreams, tables
from lab.kube import patch as P
from lab.kube import scale as S
from lab.kube.auth import ADMIN, ANONYMOUS, Attributes, Authorizer, Tokens, User
from lab.kube.binding import bind
from lab.kube.control import ControlRoutes
from lab.kube.deletion import DeleteOptions
from lab.kube.discovery import handle_discovery
from lab.kube.faults import KubeFaults, default_reason
from lab.kube.objects import rt_key
from lab.kube.openapi import handle_openapi
from lab.kube.protobuf import PROTOBUF, ProtobufError, decode_object
from lab.kube.registry import Registry
from lab.kube.resources import REVIEW_GROUPS, ResourceType
from lab.kube.review import review
from lab.kube.routes import Route, parse, verb_for
from lab.kube.schema import type_error
from lab.kube.streams import WatchStreams
from lab.kube.watch import dumps, with_type
from lab.kube.wire import (
    Request,
    Response,
    bool_param,
    check_gv,
    decode,
    decode_body,
    delete_options,
    error_response,
    field_validation,
    int64_param,
    json_response,
    list_options,
    selection,
)
from lab.kube.wire import (
    dry_run as parse_dry_run,
)
from lab.versions.release import DEFAULT_K8S_VERSION, version_info

log = logging.getLogger(__name__)
# what kube-apiserver puts before a patch body's decode error, per patch type (handlers/patch.go)
_PATCH_DECODE = {
    P.JSONPatch: "error decoding patch: ",
    P.MERGE: "error decoding patch: ",
    P.STRATEGIC: "",
    P.APPLY: "error decoding YAML: ",
}


_FIELD_MANAGER_MAX = 128
#: the body a ``serviceaccounts/<name>/token`` create decodes into
_TOKEN_REQUEST = ResourceType(
    "authentication.k8s.io", "v1", "TokenRequest", "tokenrequests", "", True
)


#: the options kind a write's query decodes into (its validation errors name it)
_WRITE_OPTIONS = {"create": "CreateOptions", "update": "UpdateOptions", "patch": "PatchOptions"}


def unprintable(text: str) -> list[tuple[str, int]]:
    """The characters Go's ``unicode.IsPrint`` refuses, each with its byte offset."""
    out, at = [], 0
    for ch in text:
        if not ch.isprintable():
            out.append((ch, at))
        at += len(ch.encode(errors="surrogatepass"))
    return out


def manager_from_user_agent(agent: str) -> str:
    """The field manager a write without ``fieldManager`` is recorded under
    (``prefixFromUserAgent`` in the apiserver's handlers): the User-Agent up to its first
    ``/``, without unprintable characters, cut at 128 characters."""
    head = agent.split("/", maxsplit=1)[0]
    return "".join(ch for ch in head if ch.isprintable())[:_FIELD_MANAGER_MAX]


#: non-resource paths kube-apiserver serves through a go-restful WebService with a GET route
#: only (``/version``, the legacy ``/api`` root and ``/api/v1``'s resource list): another
#: method is go-restful's 405 (``RouterJSR311.detectRoute``), plain text with ``Allow: GET``
GO_RESTFUL_GET_ONLY = frozenset({"/version", "/api", "/api/v1"})


def _method_not_allowed() -> Response:
    return Response(
        405,
        b"405: Method Not Allowed",
        content_type="text/plain; charset=utf-8",
        headers={"Allow": "GET"},
        raw=True,
    )


def _panic() -> Response:  # WithPanicRecovery's answer; details: log, take_internal_errors
    return Response(
        500,
        b"This request caused apiserver to panic. Look in the logs for details.\n",
        content_type="text/plain; charset=utf-8",
        headers={"X-Content-Type-Options": "nosniff"},
        raw=True,
    )


class Api:
    """The simulated API server's request dispatcher."""

    def __init__(
        self,
        store: Registry,
        *,
        token: str | None = None,
        control_token: str | None = None,
        version: str = DEFAULT_K8S_VERSION,
        authorization: str = "allow",
    ) -> None:
        self.store = store
        self.tokens = Tokens(store, lab_token=token)
        self.authorizer = Authorizer(store, authorization)
        store.k8s_version = version
        #: the API's admin token: with one, a request without credentials is refused as
        #: kube-apiserver refuses it with --anonymous-auth=false (401 everywhere)
        self.token = token
        #: what ``/_lab/`` requires (the API token unless told otherwise; None: open)
        self.control_token = control_token if control_token is not None else token
        self.version = version_info(version)
        self.faults = KubeFaults()
        self.errors = InternalErrors()
        self.stopping = threading.Event()
        self.streams = WatchStreams(store, self.stopping)
        self.control = ControlRoutes(store, self.faults, self.errors)

    # ------------------------------------------------------------------ entry point
    def handle(self, req: Request) -> Response:
        try:
            resp = self._dispatch(req)
        except E.ApiError as err:
            resp = error_response(err)
        except Exception as exc:  # a simulator bug: record it so the test that caused it fails
            self.record_error(req, exc)
            resp = _panic()
        if (
            resp.stream is None
            and not resp.raw
            and resp.body[-1:] not in (b"", b"\n")
            and "json" in resp.content_type
        ):
            resp.body += b"\n"  # Go's json.Encoder ends every document with a newline
        return resp

    def record_error(self, req: Request, exc: BaseException) -> None:
        text = f"{req.method} {req.target}\n" + "".join(traceback.format_exception(exc))
        log.error("handler exception: %s", text)
        self.errors.record(text)

    def _dispatch(self, req: Request) -> Response:
        path = req.path
        authorization = req.headers.get("authorization", "")
        if path.startswith("/_lab/") or path == "/_lab":
            if not bearer_ok(authorization, self.control_token):
                raise E.unauthorized(refusal("the API simulator's /_lab/", authorization))
            return self.control.handle(req)
        user = self.tokens.user_for(authorization)
        if self.token is not None and (user is None or user is ANONYMOUS):
            # kube-apiserver's authentication filter runs before every handler, /version and
            # the health checks included; without anonymous auth (what the AlwaysAllow
            # authorizer forces) a request without credentials is 401
            raise E.unauthorized()
        if user is None:
            # without a lab token the simulator serves anyone: an unknown bearer token is
            # anonymous here (kube-apiserver answers 401)
            user = ANONYMOUS
        if req.method != "GET" and path.rstrip("/") in GO_RESTFUL_GET_ONLY:
            return _method_not_allowed()
        if path in ("/version", "/version/"):
            # responsewriters.WriteRawJSON: indented, no trailing newline
            return Response(200, json.dumps(self.version, indent=2).encode(), raw=True)
        if health.is_health_path(path):
            answered = health.answer(req.target, self.stopping)
            if answered is None:
                raise E.unknown_path()
            status, text = answered
            return Response(
                status,
                text.encode(),
                content_type=health.TEXT,
                headers={"X-Content-Type-Options": "nosniff"},
            )
        accept = req.headers.get("accept", "")
        if path.startswith("/openapi"):
            out = handle_openapi(req.target, accept, version=self.version["gitVersion"])
            if out is not None:
                status, ctype, body = out
                # kube-openapi writes the marshalled document as is (no trailing newline)
                data = body if isinstance(body, bytes) else dumps(body)
                return Response(status, data, content_type=ctype, raw=True)
        route = parse(path)
        if route is None:
            d = handle_discovery(path, accept, req.server_address)
            if d is None:
                raise E.unknown_path()
            status, ctype, body = d
            return Response(status, dumps(body), content_type=ctype)
        return self._resource(req, route, user)

    # ------------------------------------------------------------------ resources
    def _authorize(self, user: User, verb: str, route: Route) -> None:
        rt = route.rt
        attrs = Attributes(
            user,
            verb,
            namespace=route.namespace or "",
            group=rt.group,
            resource=rt.plural,
            subresource=route.subresource,
            name=route.name or "",
        )
        allowed, _ = self.authorizer.authorize(attrs)
        if allowed:
            return
        resource = f"{rt.plural}/{route.subresource}" if route.subresource else rt.plural
        qualified = f"{rt.plural}.{rt.group}" if rt.group else rt.plural
        subject = f'{qualified} "{route.name}"' if route.name else qualified
        scope = (
            f'in the namespace "{route.namespace}"' if route.namespace else "at the cluster scope"
        )
        details: dict[str, Any] = {"name": route.name} if route.name else {}
        if rt.group:
            details["group"] = rt.group
        details["kind"] = rt.plural
        raise E.ApiError(
            403,
            "Forbidden",
            f'{subject} is forbidden: User "{user.name}" cannot {verb} resource "{resource}" '
            f'in API group "{rt.group}" {scope}',
            details=details,
        )

    def _resource(self, req: Request, route: Route, user: User = ADMIN) -> Response:
        """A resource request: authorize, inject faults, then the verb's (or subresource's)
        answer."""
        q = req.query
        verb = verb_for(req.method, route, watch=bool_param(q, "watch"))
        if self.authorizer.mode != "allow":
            self._authorize(user, verb, route)
        self._inject_faults(verb, route)
        if route.rt.namespaced and route.name is not None and route.namespace is None:
            raise E.unknown_path()
        dry_run = parse_dry_run(q)
        manager = self._manager(req, verb)
        special = self._subresource(req, route, verb, user, dry_run=dry_run, manager=manager)
        if special is not None:
            return special
        if verb == "get":
            return self._get(req, route)
        if verb == "list":
            return self._list(req, route)
        if verb == "watch":
            return self.streams.respond(req, route)
        if verb == "create":
            return self._create(req, route, dry_run=dry_run, manager=manager)
        assert route.name is not None or verb == "deletecollection"
        if verb == "update":
            return self._update(req, route, dry_run=dry_run, manager=manager)
        if verb == "patch":
            return self._patch(req, route, dry_run=dry_run, manager=manager)
        opts = delete_options(req, q, dry_run, version=self.store.k8s_version)
        if verb == "delete":
            return self._delete(route, opts)
        return self._delete_collection(route, q, opts)

    def _inject_faults(self, verb: str, route: Route) -> None:
        """The ``/_lab`` fault rules: delay, then answer with an injected error if one fires."""
        firing = self.faults.decide(verb, route.rt.plural, route.subresource)
        if firing.latency_ms:
            time.sleep(firing.latency_ms / 1000.0)
        rule = firing.error
        if rule is not None:
            status = rule.status or 500
            reason = rule.reason or default_reason(status)
            message = rule.message or f"injected fault: {verb} {route.rt.plural}"
            raise E.ApiError(status, reason, message, details={})

    @staticmethod
    def _manager(req: Request, verb: str) -> str:
        """``?fieldManager=``, else taken from the User-Agent. A write's options are validated
        as ``ValidateFieldManager`` does (at most 128 characters, all printable): 422 naming
        the verb's options kind."""
        manager = req.query.get("fieldManager") or ""
        options = _WRITE_OPTIONS.get(verb)
        if options and manager:
            errs = []
            if len(manager) > _FIELD_MANAGER_MAX:
                errs.append(E.too_long("fieldManager", _FIELD_MANAGER_MAX))
            for ch, at in unprintable(manager):
                detail = f"invalid character U+{ord(ch):04X} (at position {at})"
                errs.append(E.invalid_value("fieldManager", manager, detail))
            if errs:
                raise E.invalid_options(options, errs)
        return manager or manager_from_user_agent(req.headers.get("user-agent", ""))

    def _subresource(
        self, req: Request, route: Route, verb: str, user: User, *, dry_run: bool, manager: str
    ) -> Response | None:
        """The answers that are not stored objects (pod logs and streams, scale, tokens,
        reviews, binding); None for the plain verbs."""
        q, rt, ns = req.query, route.rt, route.namespace or ""
        if route.subresource == "log":
            status, text = podstreams.log(self.store, ns, route.name or "", dict(q))
            return Response(status, text, content_type="text/plain", raw=True)
        if route.subresource in ("exec", "attach", "portforward"):
            podstreams.connect(self.store, ns, route.name or "", route.subresource, dict(q))
        if route.subresource == "scale":
            return self._scale(req, route, verb, dry_run=dry_run, manager=manager)
        if verb != "create":
            return None
        if route.subresource == "token":
            body = self._plain_body(req)
            if isinstance(body, dict):
                self._check_types(_TOKEN_REQUEST, body)
                field_validation(q, _TOKEN_REQUEST, body)
            issued = self.tokens.token_request(rt, ns, route.name or "", body)
            return json_response(201, issued)
        if rt.group in REVIEW_GROUPS:
            body = self._plain_body(req)
            if isinstance(body, dict):
                self._check_types(rt, body)
                field_validation(q, rt, body)
            answered = review(rt, ns, body, user, self.tokens, self.authorizer)
            return json_response(201, answered)
        if route.subresource == "binding":
            body = decode(req.body, yaml_ok=False)
            bound = bind(self.store, rt, ns, route.name or "", body, dry_run=dry_run)
            return json_response(201, bound)
        return None

    def _create(self, req: Request, route: Route, *, dry_run: bool, manager: str) -> Response:
        rt, ns = route.rt, route.namespace or ""
        if rt.namespaced and route.namespace is None:
            raise E.unknown_path()
        body = decode_body(req, rt, ns)
        self._check_types(rt, body)
        warnings = field_validation(req.query, rt, body, req.duplicates)
        obj = self.store.writer.create(rt, ns, body, dry_run=dry_run, manager=manager)
        return self._object(rt, obj, 201, warnings)

    def _update(self, req: Request, route: Route, *, dry_run: bool, manager: str) -> Response:
        rt, ns, name = route.rt, route.namespace or "", route.name or ""
        body = decode_body(req, rt, ns)
        # decoding into the Go struct comes first: a non-object metadata is a 400 here
        self._check_types(rt, body)
        meta = body.setdefault("metadata", {})
        if not meta.get("name"):
            meta["name"] = name
        if meta["name"] != name:
            raise E.bad_request(
                f"the name of the object ({meta['name']}) does not match the name on the URL "
                f"({name})"
            )
        self._check_types(rt, body)
        warnings = field_validation(req.query, rt, body, req.duplicates)
        obj, created = self.store.writer.update(
            rt, ns, name, body, subresource=route.subresource, dry_run=dry_run, manager=manager
        )
        return self._object(rt, obj, 201 if created else 200, warnings)

    def _patch(self, req: Request, route: Route, *, dry_run: bool, manager: str) -> Response:
        q, rt = req.query, route.rt
        ptype = req.headers.get("content-type", "").split(";")[0].strip()
        if ptype not in P.PATCH_TYPES:
            raise E.unsupported_media_type(list(P.PATCH_TYPES))
        if ptype == P.APPLY and not q.get("fieldManager"):
            raise E.invalid_options(
                "PatchOptions", [E.required("fieldManager", "is required for apply patch")]
            )
        if "force" in q and ptype != P.APPLY:
            raise E.invalid_options(
                "PatchOptions",
                [E.forbidden("force", "may not be specified for non-apply patch")],
            )
        # a merge or strategic patch is decoded strictly too (repeated keys noted)
        repeated: list[str] | None = [] if ptype in (P.MERGE, P.STRATEGIC) else None
        body = decode(
            req.body,
            yaml_ok=ptype == P.APPLY,
            prefix=_PATCH_DECODE[ptype],
            duplicates=repeated,
        )
        if ptype == P.APPLY and isinstance(body, dict):
            check_gv(rt, body)
        warnings = field_validation(q, rt, body, repeated or ()) if isinstance(body, dict) else {}
        obj, created = self.store.writer.patch(
            rt,
            route.namespace or "",
            route.name or "",
            ptype,
            body,
            subresource=route.subresource,
            dry_run=dry_run,
            manager=manager,
            force=bool_param(q, "force"),
        )
        return self._object(rt, obj, 201 if created else 200, warnings)

    def _delete(self, route: Route, opts: DeleteOptions) -> Response:
        rt, name = route.rt, route.name or ""
        obj, removed = self.store.deleter.delete(rt, route.namespace or "", name, opts)
        if removed and not self.store.strategies[rt_key(rt)].return_deleted_object:
            return json_response(
                200,
                {
                    "kind": "Status",
                    "apiVersion": "v1",
                    "metadata": {},
                    "status": "Success",
                    "details": {
                        "name": name,
                        **({"group": rt.group} if rt.group else {}),
                        "kind": rt.plural,
                        "uid": obj["metadata"]["uid"],
                    },
                },
            )
        code = 202 if (not removed and opts.orphan_dependents is False) else 200
        return self._object(rt, obj, code)

    def _delete_collection(self, route: Route, q: dict[str, str], opts: DeleteOptions) -> Response:
        rt = route.rt
        items = self.store.deleter.delete_collection(
            rt, route.namespace, selection(self.store, q, rt), opts
        )
        body = {
            "kind": rt.list_kind,
            "apiVersion": rt.api_version,
            "metadata": {"resourceVersion": str(self.store.rv)},
            "items": items,
        }
        return json_response(200, body)

    @staticmethod
    def _plain_body(req: Request) -> Any:
        """A JSON or YAML body, or the protobuf one kubectl's typed clients send."""
        if req.headers.get("content-type", "").split(";")[0].strip() == PROTOBUF:
            try:
                return decode_object(req.body)
            except ProtobufError as exc:
                raise E.bad_request(f"error decoding protobuf request body: {exc}") from None
        return decode(req.body, yaml_ok=True)

    def _scale(
        self, req: Request, route: Route, verb: str, *, dry_run: bool, manager: str
    ) -> Response:
        rt, ns, name = route.rt, route.namespace or "", route.name or ""
        if verb == "get":
            return json_response(200, S.get_scale(self.store, rt, ns, name))
        if verb == "update":
            body = decode(req.body, yaml_ok=True)
            scaled = S.update_scale(
                self.store, rt, ns, name, body, dry_run=dry_run, manager=manager
            )
            return json_response(200, scaled)
        ptype = req.headers.get("content-type", "").split(";")[0].strip()
        if ptype not in P.PATCH_TYPES:
            raise E.unsupported_media_type(list(P.PATCH_TYPES))
        body = decode(req.body, yaml_ok=ptype == P.APPLY, prefix=_PATCH_DECODE[ptype])
        scaled = S.patch_scale(
            self.store, rt, ns, name, ptype, body, dry_run=dry_run, manager=manager
        )
        return json_response(200, scaled)

    def _check_types(self, rt: ResourceType, body: dict[str, Any]) -> None:
        """A field of the wrong JSON type: 400, as kube-apiserver's transformDecodeError."""
        err = type_error(rt, body, version=self.store.k8s_version)
        if err:
            raise E.bad_request(
                f'{rt.kind} in version "{rt.version}" cannot be handled as a {rt.kind}: {err}'
            )

    def _object(
        self,
        rt: ResourceType,
        obj: dict[str, Any],
        code: int,
        headers: dict[str, str] | None = None,
    ) -> Response:
        body = with_type(rt.kind, rt.api_version, self.store.encoded(obj))
        return Response(code, body, headers=headers or {})

    # ------------------------------------------------------------------ reads
    def _wanted_rv(self, rv: str) -> int | None:
        """A read's ``resourceVersion`` (None: any, "" or "0"); newer than the store's: 504."""
        if not rv or rv == "0":
            return None
        # strconv.ParseUint: ASCII digits only (no sign, no blanks), at most 2^64-1
        if not (rv.isascii() and rv.isdigit()) or int(rv) >= 2**64:
            raise E.bad_request(f"invalid resource version: {rv}")
        want = int(rv)
        if want > self.store.rv:
            raise E.timeout(f"Too large resource version: {want}, current: {self.store.rv}")
        return want

    def _get(self, req: Request, route: Route) -> Response:
        rt = route.rt
        self._wanted_rv(req.query.get("resourceVersion", ""))
        entry = self.store.get(rt, route.namespace or "", route.name or "")
        if tables.wants_table(req.headers.get("accept", "")):
            full = {"kind": rt.kind, "apiVersion": rt.api_version, **entry.obj}
            return self._table(req, rt, [full], None)
        return Response(200, self.store.encode_full(rt, entry))

    def _table(
        self,
        req: Request,
        rt: ResourceType,
        objs: list[dict[str, Any]],
        list_meta: dict[str, Any] | None,
    ) -> Response:
        accept = req.headers.get("accept", "")
        version = tables.table_version(accept) or "v1"
        try:
            table = tables.to_table(
                rt,
                objs,
                list_meta=list_meta,
                include_object=req.query.get("includeObject", ""),
                version=version,
            )
        except tables.TableRequestError as exc:
            raise E.bad_request(str(exc)) from None
        return json_response(200, table)

    def _list(self, req: Request, route: Route) -> Response:
        rt, q = route.rt, req.query
        list_options(q, watch=False)
        int64_param(q, "timeoutSeconds")
        rv = q.get("resourceVersion", "")
        if q.get("continue") and rv not in ("",):
            raise E.bad_request("specifying resource version is not allowed when using continue")
        want = self._wanted_rv(rv)
        match = q.get("resourceVersionMatch", "")
        if want is not None and (match == "Exact" or (q.get("limit") and not match)):
            # read from etcd at that revision (the legacy exact case: a limit without a match)
            self.store.check_list_revision(want)
        limit = int64_param(q, "limit")
        result = self.store.list_objects(
            rt,
            route.namespace,
            selection(self.store, q, rt),
            limit=max(limit, 0),
            continue_token=q.get("continue", ""),
        )
        meta: dict[str, Any] = {"resourceVersion": str(result.resource_version)}
        if result.continue_token:
            meta["continue"] = result.continue_token
        if result.remaining is not None:
            meta["remainingItemCount"] = result.remaining
        if tables.wants_table(req.headers.get("accept", "")):
            objs = [
                {"kind": rt.kind, "apiVersion": rt.api_version, **e.obj} for e in result.entries
            ]
            return self._table(req, rt, objs, meta)
        head = (
            b'{"kind":'
            + dumps(rt.list_kind)
            + b',"apiVersion":'
            + dumps(rt.api_version)
            + b',"metadata":'
            + dumps(meta)
            + b',"items":['
        )
        body = head + b",".join(e.item_json() for e in result.entries) + b"]}"
        return Response(200, body)
