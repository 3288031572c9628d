"""Request handling: decode the wire request, call the store, encode the reply.

Transport-neutral: :class:`Api.handle` takes a :class:`Request` and returns a :class:`Response`
whose body is bytes, or an iterator of chunks for watch streams; ``server.py`` owns sockets,
TLS and HTTP framing. Discovery, OpenAPI and Table printing are delegated to ``discovery.py``,
``openapi.py`` and ``tables.py``; ``/_lab`` requests to the control-plane section below. Every
:class:`ApiError` becomes its ``Status`` here and nowhere else; any other exception is recorded
(tests fail on it) and answered as 500 InternalError.
"""

from __future__ import annotations

import json
import logging
import random
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from typing import Any
from urllib.parse import parse_qs, urlsplit

import yaml

from lab.kube import errors as E
from lab.kube import patch as P
from lab.kube.control import FaultRule, Faults, default_reason
from lab.kube.deletion import DeleteOptions
from lab.kube.protobuf import PROTOBUF, ProtobufError, decode_object
from lab.kube.resources import ResourceType
from lab.kube.routes import Route, parse, verb_for
from lab.kube.selectors import parse_field_selector, parse_label_selector
from lab.kube.store import Selection, Store, rt_key
from lab.kube.strategies import unknown_fields
from lab.kube.watch import CLOSED, Event, ExpiredError, Watcher, dumps, with_type

log = logging.getLogger(__name__)
JSON = "application/json"
VERSION = {
    "major": "1",
    "minor": "32",
    "gitVersion": "v1.32.0",
    "gitCommit": "70d3cc986aa8221cd1dfb1121852688902d3bf53",
    "gitTreeState": "clean",
    "buildDate": "2024-12-11T00:00:00Z",
    "goVersion": "go1.23.3",
    "compiler": "gc",
    "platform": "linux/amd64",
}
ANONYMOUS_PATHS = ("/version", "/healthz", "/livez", "/readyz")


@dataclass
class Request:
    method: str
    target: str  # path with query
    headers: dict[str, str]  # lower-case names
    body: bytes = b""
    server_address: str = "127.0.0.1"
    alive: Callable[[], bool] = field(default=lambda: True, repr=False)

    @property
    def path(self) -> str:
        return urlsplit(self.target).path

    @property
    def query(self) -> dict[str, str]:
        q = parse_qs(urlsplit(self.target).query, keep_blank_values=True)
        return {k: v[0] for k, v in q.items()}


@dataclass
class Response:
    status: int
    body: bytes = b""
    content_type: str = JSON
    headers: dict[str, str] = field(default_factory=dict)
    stream: Iterator[bytes] | None = None


def _bool(q: dict[str, str], name: str) -> bool:
    if name not in q:
        return False
    return q[name] not in ("0",) and q[name].lower() != "false"


def _json(status: int, body: Any) -> Response:
    return Response(status, dumps(body))


def _error(err: E.ApiError) -> Response:
    return Response(err.code, dumps(err.status()), headers=dict(err.headers))


def _tables() -> Any:
    try:
        from lab.kube import tables
    except ImportError:  # pragma: no cover - the module is C2's; absent only mid-development
        return None
    return tables


class Api:
    """The simulated API server's request dispatcher."""

    def __init__(self, store: Store, *, token: str | None = None) -> None:
        self.store = store
        self.token = token
        self.faults = Faults()
        self.errors: list[str] = []
        self._errors_lock = threading.Lock()
        self.stopping = threading.Event()
        self.min_request_timeout = 1800

    # ------------------------------------------------------------------ entry point
    def handle(self, req: Request) -> Response:
        try:
            return self._dispatch(req)
        except E.ApiError as err:
            return _error(err)
        except Exception as exc:  # a simulator bug: record it so the test that caused it fails
            self.record_error(req, exc)
            return _error(E.internal(f"{type(exc).__name__}: {exc}"))

    def record_error(self, req: Request, exc: BaseException) -> None:
        text = f"{req.method} {req.target}\n" + "".join(traceback.format_exception(exc))
        log.error("handler exception: %s", text)
        with self._errors_lock:
            self.errors.append(text)

    def _dispatch(self, req: Request) -> Response:
        path = req.path
        if path in ANONYMOUS_PATHS:
            if path == "/version":
                return _json(200, VERSION)
            return Response(200, b"ok", content_type="text/plain; charset=utf-8")
        if self.token is not None and req.headers.get("authorization") != f"Bearer {self.token}":
            raise E.unauthorized()
        if path.startswith("/_lab/"):
            return self._control(req)
        accept = req.headers.get("accept", "")
        if path.startswith("/openapi"):
            try:
                from lab.kube.openapi import handle_openapi
            except ImportError:
                raise E.unknown_path() from None
            out = handle_openapi(req.target, accept)
            if out is not None:
                status, ctype, body = out
                return Response(
                    status, body if isinstance(body, bytes) else dumps(body), content_type=ctype
                )
        route = parse(path)
        if route is None:
            try:
                from lab.kube.discovery import handle_discovery
            except ImportError:
                raise E.unknown_path() from None
            d = handle_discovery(path, accept, req.server_address)
            if d is None:
                raise E.unknown_path()
            status, ctype, body = d
            return Response(status, dumps(body), content_type=ctype)
        return self._resource(req, route)

    # ------------------------------------------------------------------ resources
    def _resource(self, req: Request, route: Route) -> Response:
        q = req.query
        verb = verb_for(req.method, route, watch=_bool(q, "watch"))
        latency, rule = self.faults.take(verb, route.rt.plural, route.subresource)
        if latency:
            time.sleep(latency)
        if rule is not None:
            reason = rule.reason or default_reason(rule.status)
            message = rule.message or f"injected fault: {verb} {route.rt.plural}"
            raise E.ApiError(rule.status, reason, message, details={})
        rt = route.rt
        ns = route.namespace or ""
        if rt.namespaced and route.name is not None and route.namespace is None:
            raise E.unknown_path()
        dry_run = self._dry_run(q)
        manager = q.get("fieldManager") or req.headers.get("user-agent", "").split("/")[0]
        if len(manager) > 128:
            raise E.invalid_options("CreateOptions", [E.too_long("fieldManager", 128)])
        if verb == "get":
            return self._get(req, route)
        if verb == "list":
            return self._list(req, route)
        if verb == "watch":
            return self._watch(req, route)
        if verb == "create":
            if rt.namespaced and route.namespace is None:
                raise E.unknown_path()
            body = self._body(req, rt, ns)
            warnings = self._field_validation(q, rt, body)
            obj = self.store.create(rt, ns, body, dry_run=dry_run, manager=manager)
            return self._object(rt, obj, 201, warnings)
        assert route.name is not None or verb == "deletecollection"
        name = route.name or ""
        if verb == "update":
            body = self._body(req, rt, ns)
            meta = body.setdefault("metadata", {})
            if not meta.get("name"):
                meta["name"] = name
            if meta["name"] != name:
                raise E.bad_request(
                    f"the name of the object ({meta['name']}) does not match the name on the URL "
                    f"({name})"
                )
            warnings = self._field_validation(q, rt, body)
            obj, created = self.store.update(
                rt, ns, name, body, subresource=route.subresource, dry_run=dry_run, manager=manager
            )
            return self._object(rt, obj, 201 if created else 200, warnings)
        if verb == "patch":
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
            body = self._decode(req.body, yaml_ok=ptype == P.APPLY)
            if ptype == P.APPLY and isinstance(body, dict):
                self._check_gv(rt, body)
            warnings = self._field_validation(q, rt, body) if isinstance(body, dict) else {}
            obj, created = self.store.patch(
                rt,
                ns,
                name,
                ptype,
                body,
                subresource=route.subresource,
                dry_run=dry_run,
                manager=manager,
            )
            return self._object(rt, obj, 201 if created else 200, warnings)
        opts = self._delete_options(req, q, dry_run)
        if verb == "delete":
            obj, removed = self.store.delete(rt, ns, name, opts)
            if removed and not self.store.strategies[rt_key(rt)].return_deleted_object:
                return _json(
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
        # deletecollection
        items = self.store.delete_collection(rt, route.namespace, self._selection(q, rt), opts)
        body = {
            "kind": rt.list_kind,
            "apiVersion": rt.api_version,
            "metadata": {"resourceVersion": str(self.store.rv)},
            "items": items,
        }
        return _json(200, body)

    def _object(
        self,
        rt: ResourceType,
        obj: dict[str, Any],
        code: int,
        headers: dict[str, str] | None = None,
    ) -> Response:
        return Response(code, with_type(rt.kind, rt.api_version, dumps(obj)), headers=headers or {})

    @staticmethod
    def _field_validation(
        q: dict[str, str], rt: ResourceType, body: dict[str, Any]
    ) -> dict[str, str]:
        """Apply ``fieldValidation`` (Strict | Warn, the default | Ignore) to unknown fields:
        Strict rejects them, the others drop them (Warn with a ``Warning`` header)."""
        mode = q.get("fieldValidation") or "Warn"
        if mode not in ("Ignore", "Warn", "Strict"):
            raise E.bad_request(
                f'fieldValidation: Unsupported value: "{mode}": supported values: '
                '"Ignore", "Strict", "Warn"'
            )
        unknown = unknown_fields(rt, body)
        if not unknown:
            return {}
        if mode == "Strict":
            listed = ", ".join(f'unknown field "{f}"' for f in unknown)
            raise E.bad_request(f"strict decoding error: {listed}")
        for path in unknown:
            holder = body.get("metadata", {}) if path.startswith("metadata.") else body
            holder.pop(path.removeprefix("metadata."), None)
        if mode == "Ignore":
            return {}
        return {"Warning": ", ".join(f'299 - "unknown field \\"{f}\\""' for f in unknown)}

    @staticmethod
    def _dry_run(q: dict[str, str]) -> bool:
        if "dryRun" not in q:
            return False
        if q["dryRun"] != "All":
            raise E.invalid_options(
                "DryRunOptions", [E.not_supported("dryRun", q["dryRun"], ["All"])]
            )
        return True

    def _decode(self, raw: bytes, *, yaml_ok: bool) -> Any:
        try:
            if yaml_ok:
                return yaml.safe_load(raw.decode() or "{}")
            return json.loads(raw or b"{}")
        except (ValueError, yaml.YAMLError) as exc:
            raise E.bad_request(f"error decoding request body: {exc}") from None

    def _body(self, req: Request, rt: ResourceType, ns: str) -> dict[str, Any]:
        ctype = req.headers.get("content-type", "").split(";")[0].strip()
        if ctype in ("", JSON, "*/*"):
            body = self._decode(req.body, yaml_ok=False)
        elif ctype in ("application/yaml", "application/x-yaml", "text/yaml"):
            body = self._decode(req.body, yaml_ok=True)
        elif ctype == PROTOBUF:
            try:
                body = decode_object(req.body)
            except ProtobufError as exc:
                if "not supported" in str(exc):
                    raise E.unsupported_media_type([JSON, "application/yaml"]) from None
                raise E.bad_request(f"error decoding protobuf request body: {exc}") from None
        else:
            raise E.unsupported_media_type([JSON, "application/yaml", PROTOBUF])
        if not isinstance(body, dict):
            raise E.bad_request(
                f"Object 'Kind' is missing in '{req.body[:200].decode(errors='replace')}'"
            )
        self._check_gv(rt, body)
        meta = body.get("metadata")
        if (
            isinstance(meta, dict)
            and rt.namespaced
            and meta.get("namespace")
            and meta["namespace"] != ns
        ):
            raise E.bad_request(
                "the namespace of the provided object does not match the namespace sent on "
                "the request"
            )
        return body

    @staticmethod
    def _check_gv(rt: ResourceType, body: dict[str, Any]) -> None:
        av = body.get("apiVersion")
        if av and av != rt.api_version:
            raise E.bad_request(
                f"the API version in the data ({av}) does not match the expected API version "
                f"({rt.api_version})"
            )
        kind = body.get("kind")
        if kind and kind != rt.kind:
            raise E.bad_request(
                f"the kind in the data ({kind}) does not match the expected kind ({rt.kind})"
            )

    def _delete_options(self, req: Request, q: dict[str, str], dry_run: bool) -> DeleteOptions:
        body: dict[str, Any] = {}
        if req.body.strip():
            decoded = self._decode(req.body, yaml_ok=False)
            if isinstance(decoded, dict):
                body = decoded
        opts = DeleteOptions(dry_run=dry_run or body.get("dryRun") == ["All"])
        gp = q.get("gracePeriodSeconds", body.get("gracePeriodSeconds"))
        if gp not in (None, ""):
            try:
                opts.grace_period = int(gp)
            except (TypeError, ValueError):
                raise E.bad_request(f"invalid gracePeriodSeconds: {gp!r}") from None
        opts.propagation = q.get("propagationPolicy") or body.get("propagationPolicy")
        od = q.get("orphanDependents", body.get("orphanDependents"))
        if od is not None:
            opts.orphan_dependents = (
                od if isinstance(od, bool) else str(od).lower() not in ("0", "false")
            )
        pre = body.get("preconditions") or {}
        opts.precondition_uid = pre.get("uid")
        opts.precondition_rv = pre.get("resourceVersion")
        errs = []
        if opts.propagation and opts.orphan_dependents is not None:
            errs.append(
                E.invalid_value(
                    "propagationPolicy",
                    opts.propagation,
                    "orphanDependents and deletionPropagation cannot be both set",
                )
            )
        if opts.propagation not in (None, "Orphan", "Background", "Foreground"):
            errs.append(
                E.not_supported(
                    "propagationPolicy",
                    opts.propagation,
                    ["Foreground", "Background", "Orphan", "nil"],
                )
            )
        if errs:
            raise E.invalid_options("DeleteOptions", errs)
        return opts

    def _selection(self, q: dict[str, str], rt: ResourceType, name: str | None = None) -> Selection:
        sel = Selection()
        if q.get("labelSelector"):
            sel.labels = parse_label_selector(q["labelSelector"])
        fs = q.get("fieldSelector", "")
        fields = parse_field_selector(fs) if fs else ()
        if name is not None:
            from lab.kube.selectors import FieldRequirement

            fields = (*fields, FieldRequirement("metadata.name", "=", name))
        if fields:
            self.store.strategies[rt_key(rt)].check_field_selector(tuple(f.field for f in fields))
            sel.fields = fields
        return sel

    # ------------------------------------------------------------------ reads
    def _get(self, req: Request, route: Route) -> Response:
        rt, q = route.rt, req.query
        rv = q.get("resourceVersion", "")
        if rv and rv != "0":
            try:
                want = int(rv)
            except ValueError:
                raise E.bad_request(f"invalid resource version: {rv}") from None
            if want > self.store.rv:
                raise E.timeout(f"Too large resource version: {want}, current: {self.store.rv}")
        entry = self.store.get(rt, route.namespace or "", route.name or "")
        tables = _tables()
        if tables is not None and tables.wants_table(req.headers.get("accept", "")):
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
        tables = _tables()
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
        return _json(200, table)

    def _list_options(self, q: dict[str, str], *, watch: bool) -> None:
        errs = []
        rvm = q.get("resourceVersionMatch", "")
        if watch:
            if "sendInitialEvents" in q:
                if rvm != "NotOlderThan":
                    errs.append(
                        E.forbidden(
                            "resourceVersionMatch",
                            "sendInitialEvents requires setting "
                            "resourceVersionMatch to NotOlderThan",
                        )
                    )
                elif not _bool(q, "allowWatchBookmarks"):
                    errs.append(
                        E.forbidden(
                            "allowWatchBookmarks",
                            "sendInitialEvents requires setting allowWatchBookmarks to true",
                        )
                    )
            elif rvm:
                errs.append(
                    E.forbidden(
                        "resourceVersionMatch",
                        "resourceVersionMatch is forbidden "
                        "for watch unless sendInitialEvents is provided",
                    )
                )
        else:
            if "sendInitialEvents" in q:
                errs.append(
                    E.forbidden("sendInitialEvents", "sendInitialEvents is forbidden for list")
                )
            if rvm:
                if not q.get("resourceVersion"):
                    errs.append(
                        E.forbidden(
                            "resourceVersionMatch",
                            "resourceVersionMatch is forbidden unless resourceVersion is provided",
                        )
                    )
                if q.get("continue"):
                    errs.append(
                        E.forbidden(
                            "resourceVersionMatch",
                            "resourceVersionMatch is forbidden when continue is provided",
                        )
                    )
                if rvm == "Exact" and q.get("resourceVersion") == "0":
                    errs.append(
                        E.forbidden(
                            "resourceVersionMatch",
                            'resourceVersionMatch "exact" is forbidden for resourceVersion "0"',
                        )
                    )
                if rvm not in ("Exact", "NotOlderThan"):
                    errs.append(
                        E.not_supported("resourceVersionMatch", rvm, ["Exact", "NotOlderThan", ""])
                    )
        if errs:
            raise E.invalid_options("ListOptions", errs)

    def _list(self, req: Request, route: Route) -> Response:
        rt, q = route.rt, req.query
        self._list_options(q, watch=False)
        rv = q.get("resourceVersion", "")
        if q.get("continue") and rv not in ("",):
            raise E.bad_request("specifying resource version is not allowed when using continue")
        if rv and rv != "0":
            try:
                want = int(rv)
            except ValueError:
                raise E.bad_request(f"invalid resource version: {rv}") from None
            if want > self.store.rv:
                raise E.timeout(f"Too large resource version: {want}, current: {self.store.rv}")
            if q.get("limit") and want < self.store.compacted:
                raise E.expired(f"too old resource version: {want} ({self.store.compacted})")
        try:
            limit = int(q.get("limit") or 0)
        except ValueError:
            raise E.bad_request(f"invalid limit: {q.get('limit')}") from None
        result = self.store.list_objects(
            rt,
            route.namespace,
            self._selection(q, rt),
            limit=max(limit, 0),
            continue_token=q.get("continue", ""),
        )
        meta: dict[str, Any] = {"resourceVersion": str(result.resource_version)}
        if result.continue_token:
            meta["continue"] = result.continue_token
        if result.remaining is not None:
            meta["remainingItemCount"] = result.remaining
        tables = _tables()
        if tables is not None and tables.wants_table(req.headers.get("accept", "")):
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

    # ------------------------------------------------------------------ watch
    def _watch(self, req: Request, route: Route) -> Response:
        rt, q = route.rt, req.query
        self._list_options(q, watch=True)
        selection = self._selection(q, rt, route.name)
        rv = q.get("resourceVersion", "")
        if rv not in ("", "0"):
            try:
                int(rv)
            except ValueError:
                raise E.bad_request(f"invalid resource version: {rv}") from None
        try:
            timeout = float(q["timeoutSeconds"]) if q.get("timeoutSeconds") else None
        except ValueError:
            raise E.bad_request(f"invalid timeoutSeconds: {q['timeoutSeconds']}") from None
        if timeout is None:
            timeout = random.uniform(self.min_request_timeout, 2 * self.min_request_timeout)
        initial = _bool(q, "sendInitialEvents") if "sendInitialEvents" in q else None
        bookmarks = _bool(q, "allowWatchBookmarks")
        tables = _tables()
        table = tables is not None and tables.wants_table(req.headers.get("accept", ""))
        try:
            watcher, _ = self.store.watch(
                rt, route.namespace, selection, resource_version=rv, initial_events=initial
            )
        except ExpiredError as exc:
            status = E.expired(exc.message).status()
            line = dumps({"type": "ERROR", "object": status}) + b"\n"
            return Response(200, stream=iter([line]))
        return Response(
            200,
            stream=self._stream(
                req,
                rt,
                watcher,
                timeout=timeout,
                bookmarks=bookmarks,
                initial_end=bool(initial),
                table=table,
            ),
        )

    def _bookmark(
        self, rt: ResourceType, watcher: Watcher, *, initial_end: bool = False
    ) -> bytes | None:
        with self.store.lock:
            if not watcher.empty():
                return None
            rv = self.store.rv
        meta: dict[str, Any] = {"resourceVersion": str(rv)}
        if initial_end:
            meta["annotations"] = {"k8s.io/initial-events-end": "true"}
        return (
            dumps(
                {
                    "type": "BOOKMARK",
                    "object": {"kind": rt.kind, "apiVersion": rt.api_version, "metadata": meta},
                }
            )
            + b"\n"
        )

    def _stream(
        self,
        req: Request,
        rt: ResourceType,
        watcher: Watcher,
        *,
        timeout: float,
        bookmarks: bool,
        initial_end: bool,
        table: bool,
    ) -> Iterator[bytes]:
        deadline = time.monotonic() + timeout
        next_bookmark = min(time.monotonic() + 60.0, deadline - 2.0) if bookmarks else None
        first_table = True
        try:
            if initial_end:
                # the initial ADDED events are already queued; the marker follows them
                while True:
                    item = watcher.next(0)
                    if item is None:
                        break
                    if item is CLOSED:
                        return
                    assert isinstance(item, Event)
                    out = self._encode(req, rt, watcher, item, table, first=first_table)
                    if out is not None:
                        first_table = False
                        yield out
                mark = self._bookmark(rt, watcher, initial_end=True)
                while mark is None:
                    item = watcher.next(0)
                    if isinstance(item, Event):
                        out = self._encode(req, rt, watcher, item, table, first=first_table)
                        if out is not None:
                            first_table = False
                            yield out
                    mark = self._bookmark(rt, watcher, initial_end=True)
                yield mark
            while not self.stopping.is_set():
                now = time.monotonic()
                if now >= deadline:
                    return
                wake = deadline if next_bookmark is None else min(deadline, next_bookmark)
                item = watcher.next(min(wake - now, 1.0))
                if item is CLOSED:
                    return
                if item is None:
                    if not req.alive():
                        return
                    if next_bookmark is not None and time.monotonic() >= next_bookmark:
                        mark = self._bookmark(rt, watcher)
                        if mark is not None:
                            yield mark
                            next_bookmark = (
                                deadline + 1.0
                                if next_bookmark >= deadline - 2.0
                                else min(time.monotonic() + 60.0, deadline - 2.0)
                            )
                    continue
                assert isinstance(item, Event)
                out = self._encode(req, rt, watcher, item, table, first=first_table)
                if out is not None:
                    first_table = False
                    yield out
        finally:
            watcher.close()

    def _encode(
        self,
        req: Request,
        rt: ResourceType,
        watcher: Watcher,
        ev: Event,
        table: bool,
        *,
        first: bool,
    ) -> bytes | None:
        if not table:
            return watcher.translate(ev)
        got = watcher.translate_object(ev)
        if got is None:
            return None
        etype, obj = got
        tables = _tables()
        full = ev.full_object(obj)
        version = tables.table_version(req.headers.get("accept", "")) or "v1"
        t = tables.to_table(
            rt,
            [full],
            list_meta=None,
            include_object=req.query.get("includeObject", ""),
            version=version,
            column_definitions=first,
        )
        return dumps({"type": etype, "object": t}) + b"\n"

    # ------------------------------------------------------------------ /_lab control plane
    def _control(self, req: Request) -> Response:
        path, method = req.path, req.method
        body: dict[str, Any] = {}
        if req.body.strip():
            decoded = json.loads(req.body)
            body = decoded if isinstance(decoded, dict) else {}
        if path == "/_lab/reset" and method == "POST":
            self.faults.clear()
            self.store.reset()
            return _json(200, {"resourceVersion": str(self.store.rv)})
        if path == "/_lab/seed" and method == "POST":
            return _json(200, {"items": self.seed(body.get("objects") or [])})
        if path == "/_lab/faults":
            if method == "POST":
                self.faults.add(FaultRule(**body))
                return _json(200, {})
            if method == "DELETE":
                self.faults.clear()
                return _json(200, {})
            return _json(200, {"items": [asdict(r) for r in self.faults.rules()]})
        if path == "/_lab/watches/close" and method == "POST":
            key = (body.get("group", ""), body["resource"]) if body.get("resource") else None
            return _json(200, {"closed": self.store.close_watches(key)})
        if path == "/_lab/compact" and method == "POST":
            return _json(200, {"resourceVersion": str(self.store.compact())})
        if path == "/_lab/state" and method == "GET":
            return _json(200, self.store.dump())
        if path == "/_lab/errors":
            if method == "DELETE":
                with self._errors_lock:
                    self.errors.clear()
                return _json(200, {})
            with self._errors_lock:
                return _json(200, {"items": list(self.errors)})
        raise E.unknown_path()

    def seed(self, objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
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
                raise E.bad_request(f"seed: no resource for apiVersion={av!r} kind={kind!r}")
            ns = (obj.get("metadata") or {}).get("namespace", "default") if rt.namespaced else ""
            stored = self.store.create(rt, ns, obj, manager="ccm-lab-seed")
            out.append({"kind": rt.kind, "apiVersion": rt.api_version, **stored})
        return out
