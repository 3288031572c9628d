"""The wire side of a request: request/response model, body decoding, query options.

Transport-neutral helpers for ``handlers.py`` and ``streams.py``: decoding JSON, YAML and
protobuf bodies with the API server's error texts, ``fieldValidation``, ``dryRun``,
DeleteOptions (query and body merged), label/field selections and list/watch option
validation (``apiserver-spec.md`` §1.6, §1.8, §3.3, §6.3, §6.9, §8.1). Decoding refuses what
Go's decoders refuse (nesting past 10,000, YAML alias bombs) with their texts, and nesting past
the simulator's own smaller limit before any recursive Python code sees the body.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, urlsplit

import yaml

from lab.kube import exceptions as E
from lab.kube import gojson
from lab.kube.deletion import DeleteOptions
from lab.kube.objects import rt_key
from lab.kube.protobuf import PROTOBUF, ProtobufError, decode_object
from lab.kube.resources import ResourceType
from lab.kube.schema import definition_type_error, json_kind
from lab.kube.selectors import parse_field_selector, parse_label_selector
from lab.kube.store import Selection, Store
from lab.kube.strategies import unknown_fields
from lab.kube.watch import dumps
from lab.versions.release import DEFAULT_K8S_VERSION

JSON = "application/json"


@dataclass
class Request:
    method: str
    target: str  # path with query
    headers: dict[str, str]  # lower-case names
    body: bytes = b""
    server_address: str = "127.0.0.1"
    alive: Callable[[], bool] = field(default=lambda: True, repr=False)
    #: keys the JSON body repeats ("data.a"), found by :func:`decode_body`
    duplicates: list[str] = field(default_factory=list, repr=False)

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
    raw: bool = False  # written as is (no newline added: the server writes raw JSON there)


def bool_param(q: dict[str, str], name: str) -> bool:
    if name not in q:
        return False
    return q[name] not in ("0",) and q[name].lower() != "false"


def json_response(status: int, body: Any) -> Response:
    return Response(status, dumps(body))


def error_response(err: E.ApiError) -> Response:
    return Response(err.code, dumps(err.status()), headers=dict(err.headers))


def field_validation(
    q: dict[str, str], rt: ResourceType, body: dict[str, Any], duplicates: Sequence[str] = ()
) -> dict[str, str]:
    """Apply ``fieldValidation`` (Strict | Warn, the default | Ignore) to the strict decoding
    errors, repeated keys (``duplicates``, the last one kept, as Go's decoder does) and unknown
    fields: Strict rejects them, the others go on without the unknown fields (Warn with a
    ``Warning`` header)."""
    mode = q.get("fieldValidation") or "Warn"
    if mode not in ("Ignore", "Warn", "Strict"):
        raise E.bad_request(
            f'fieldValidation: Unsupported value: "{mode}": supported values: '
            '"Ignore", "Strict", "Warn"'
        )
    unknown = unknown_fields(rt, body)
    problems = [f'duplicate field "{f}"' for f in duplicates]
    problems += [f'unknown field "{f}"' for f in unknown]
    if not problems:
        return {}
    if mode == "Strict":
        raise E.bad_request(f"strict decoding error: {', '.join(problems)}")
    for path in unknown:
        holder = body.get("metadata", {}) if path.startswith("metadata.") else body
        holder.pop(path.removeprefix("metadata."), None)
    if mode == "Ignore":
        return {}
    quoted = (p.replace('"', '\\"') for p in problems)
    return {"Warning": ", ".join(f'299 - "{p}"' for p in quoted)}


def int64_param(q: dict[str, str], key: str) -> int:
    """An integer query parameter as the parameter codec converts it (``strconv.ParseInt``,
    base 10, 64 bits; empty is 0): anything else is the request's 400 with Go's error."""
    value = q.get(key, "")
    if not value:
        return 0
    digits = value[1:] if value[:1] in "+-" else value
    if not (digits.isascii() and digits.isdigit()):
        raise E.bad_request(f'strconv.ParseInt: parsing "{value}": invalid syntax')
    number = int(value)
    if not -(2**63) <= number < 2**63:
        raise E.bad_request(f'strconv.ParseInt: parsing "{value}": value out of range')
    return number


def dry_run(q: dict[str, str]) -> bool:
    if "dryRun" not in q:
        return False
    if q["dryRun"] != "All":
        raise E.invalid_options("DryRunOptions", [E.not_supported("dryRun", q["dryRun"], ["All"])])
    return True


# Go's encoding/json (and the sigs.k8s.io/json fork) refuse nesting deeper than this.
GO_MAX_DEPTH = 10000
# The simulator's own limit: Python code recurses per level (decoders, merges, copies), so a
# body nested deeper than this is refused before any of it runs. No built-in kind comes near.
SIM_MAX_DEPTH = 200
# go-yaml's guard against alias bombs ("billion laughs"): decoded nodes and alias share.
_ALIAS_RANGE_LOW, _ALIAS_RANGE_HIGH = 400_000, 4_000_000


class Undecodable(Exception):
    """A body the decoder refuses; ``str()`` is Go's error text (without any handler prefix)."""


def _nesting(text: str) -> tuple[int, str]:
    """Deepest bracket nesting of a JSON (or flow-style YAML) text, strings skipped, and the
    bracket that reached one past Go's limit ("" if none did). Called when decoding failed,
    and before parsing YAML (whose pure-Python parser is slow to fail on deep input)."""
    depth = deepest = 0
    culprit = ""
    stripped = re.sub(r'"(?:[^"\\]|\\.)*"', '""', text)
    for m in re.finditer(r"[\[\]{}]", stripped):
        c = m.group()
        if c in "[{":
            depth += 1
            if depth > deepest:
                deepest = depth
                if depth == GO_MAX_DEPTH + 1 and not culprit:
                    culprit = c
        else:
            depth -= 1
    return deepest, culprit


def _too_deep(text: str) -> Undecodable:
    deepest, culprit = _nesting(text)
    if culprit:
        return Undecodable(f"invalid character '{culprit}' exceeded max depth")
    return Undecodable(
        f"body nested {deepest} levels deep: the simulator decodes at most {SIM_MAX_DEPTH} "
        f"(kube-apiserver {GO_MAX_DEPTH})"
    )


def _depth_ok(value: Any) -> bool:
    """True when ``value`` nests at most SIM_MAX_DEPTH containers (iterative walk)."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        v, d = stack.pop()
        if isinstance(v, dict):
            items: Any = v.values()
        elif isinstance(v, list):
            items = v
        else:
            continue
        if d > SIM_MAX_DEPTH:
            return False
        stack.extend((x, d + 1) for x in items if isinstance(x, (dict, list)))
    return True


def _yaml_guard(raw: str) -> None:
    """Refuse alias bombs as go-yaml does, counting expanded nodes without expanding them."""
    node = yaml.compose(raw, Loader=yaml.SafeLoader)
    if node is None:
        return
    sizes: dict[int, int] = {}
    total = aliased = 0
    seen: set[int] = set()

    def size(n: yaml.Node) -> int:  # expanded node count, memoised per node
        key = id(n)
        if key not in sizes:
            sizes[key] = 1
            if isinstance(n, yaml.SequenceNode):
                sizes[key] += sum(size(c) for c in n.value)
            elif isinstance(n, yaml.MappingNode):
                sizes[key] += sum(size(k) + size(v) for k, v in n.value)
        return sizes[key]

    stack: list[yaml.Node] = [node]
    while stack:
        n = stack.pop()
        if id(n) in seen:  # a second visit is an alias: it expands the whole subtree again
            total += size(n)
            aliased += size(n)
            continue
        seen.add(id(n))
        total += 1
        if isinstance(n, yaml.SequenceNode):
            stack.extend(n.value)
        elif isinstance(n, yaml.MappingNode):
            for k, v in n.value:
                stack.extend((k, v))
    if total <= _ALIAS_RANGE_LOW:
        ratio = 0.99
    elif total >= _ALIAS_RANGE_HIGH:
        ratio = 0.10
    else:
        ratio = 0.99 - 0.89 * (total - _ALIAS_RANGE_LOW) / (_ALIAS_RANGE_HIGH - _ALIAS_RANGE_LOW)
    if aliased > 100 and total > 1000 and aliased / total > ratio:
        raise Undecodable("yaml: document contains excessive aliasing")


def parse(raw: bytes, *, yaml_ok: bool, duplicates: list[str] | None = None) -> Any:
    """Decode a JSON (or YAML) body; :class:`Undecodable` with Go's text when it cannot be.
    ``duplicates`` (JSON only) receives the paths of repeated keys, as the strict decoder
    names them (``data.a``, ``spec.ports[0].name``)."""
    try:
        text = raw.decode() if raw else ""
    except UnicodeDecodeError as exc:
        if yaml_ok:
            raise Undecodable(f"invalid UTF-8 in request body: {exc.reason}") from None
        # Go's decoder reads bytes: invalid UTF-8 in a string becomes U+FFFD, elsewhere it is
        # an invalid character
        error = gojson.syntax_error(raw)
        if error:
            raise Undecodable(error) from None
        text = raw.decode(errors="replace")
    try:
        if yaml_ok:
            if _nesting(text)[0] > SIM_MAX_DEPTH:  # flow style: refuse before the slow parser
                raise RecursionError
            _yaml_guard(text or "{}")
            value = yaml.safe_load(text or "{}")
        elif duplicates is None:
            value = json.loads(text or "{}", parse_constant=_no_constant)
        else:
            value = _json_noting_duplicates(text or "{}", duplicates)
    except RecursionError:
        raise _too_deep(text) from None
    except yaml.YAMLError as exc:
        raise Undecodable(gojson.yaml_error(exc)) from None
    except ValueError as exc:  # Python's wording is not Go's: say what Go's scanner says
        if yaml_ok:
            raise Undecodable(str(exc)) from None
        raise Undecodable(gojson.syntax_error(text) or "unexpected end of JSON input") from None
    if not _depth_ok(value):
        raise _too_deep(text)
    if _SURROGATE_ESCAPE.search(text):
        value = _without_lone_surrogates(value)
    return value


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")  # Go's decoder knows no NaN or Infinity


class _Repeats(dict[str, Any]):
    """A decoded JSON object that repeated some of its keys (the last value kept)."""

    repeated: list[str]


def _json_noting_duplicates(text: str, duplicates: list[str]) -> Any:
    """``json.loads``, noting each repeated key's path (in document order) in ``duplicates``."""

    found = False

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        nonlocal found
        obj = dict(items)
        if len(obj) == len(items):
            return obj
        found = True
        repeats = _Repeats(obj)
        seen: set[str] = set()
        repeats.repeated = []
        for k, _ in items:
            if k in seen:
                repeats.repeated.append(k)
            seen.add(k)
        return repeats

    value = json.loads(text, object_pairs_hook=pairs, parse_constant=_no_constant)
    if not found:
        return value
    stack: list[tuple[Any, str]] = [(value, "")]
    while stack:  # iterative: the depth check runs after this
        v, path = stack.pop()
        if isinstance(v, dict):
            if isinstance(v, _Repeats):
                duplicates.extend(f"{path}.{k}" if path else k for k in v.repeated)
            stack.extend((x, f"{path}.{k}" if path else k) for k, x in reversed(v.items()))
        elif isinstance(v, list):
            stack.extend((x, f"{path}[{i}]") for i, x in reversed(list(enumerate(v))))
    return value


# a \u escape of a UTF-16 surrogate: json.loads pairs the valid ones and keeps a lone one
_SURROGATE_ESCAPE = re.compile(r"\\[uU][dD][89a-fA-F]")
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def _without_lone_surrogates(value: Any) -> Any:
    """Go's encoding/json decodes a lone surrogate escape (``"\\ud800"``) as U+FFFD; Python
    keeps it, and it cannot be encoded back to UTF-8. Replace them as Go does."""
    if isinstance(value, str):
        return _LONE_SURROGATE.sub("\ufffd", value)
    if isinstance(value, list):
        return [_without_lone_surrogates(v) for v in value]
    if isinstance(value, dict):
        return {_without_lone_surrogates(k): _without_lone_surrogates(v) for k, v in value.items()}
    return value


def decode(
    raw: bytes,
    *,
    yaml_ok: bool,
    prefix: str = "error decoding request body: ",
    duplicates: list[str] | None = None,
) -> Any:
    try:
        return parse(raw, yaml_ok=yaml_ok, duplicates=duplicates)
    except Undecodable as exc:
        raise E.bad_request(f"{prefix}{exc}") from None


def summarize(data: bytes, limit: int = 30) -> str:
    """A body's opening as kube-apiserver quotes it in decode errors (``summarizeData``)."""
    if not data:
        return "<empty>"
    if data[:1] == b"{":
        return data[:limit].decode(errors="replace") + (" ..." if len(data) > limit else "")
    return data[:limit].hex() + (" ..." if len(data) > limit else "")


def decode_body(req: Request, rt: ResourceType, ns: str) -> dict[str, Any]:
    ctype = req.headers.get("content-type", "").split(";")[0].strip()
    if ctype in ("", JSON, "*/*", "application/yaml", "application/x-yaml", "text/yaml"):
        try:
            yaml_ok = ctype not in ("", JSON, "*/*")
            body = parse(req.body, yaml_ok=yaml_ok, duplicates=None if yaml_ok else req.duplicates)
        except Undecodable as exc:  # the apiserver fails reading apiVersion/kind first
            raise E.bad_request(
                f"the object provided is unrecognized (must be of type {rt.kind}): couldn't get "
                f"version/kind; json parse error: {exc} ({summarize(req.body)})"
            ) from None
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
    check_gv(rt, body)
    meta = body.get("metadata")
    if (
        isinstance(meta, dict)
        and rt.namespaced
        and meta.get("namespace")
        and meta["namespace"] != ns
    ):
        raise E.bad_request(
            "the namespace of the provided object does not match the namespace sent on the request"
        )
    return body


def check_gv(rt: ResourceType, body: dict[str, Any]) -> None:
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


_FIND_KIND = (
    'struct { APIVersion string "json:\\"apiVersion,omitempty\\""; '
    'Kind string "json:\\"kind,omitempty\\"" }'
)
_DELETE_OPTIONS = "io.k8s.apimachinery.pkg.apis.meta.v1.DeleteOptions"


def _delete_body(req: Request, version: str) -> dict[str, Any]:
    """A DELETE's body decoded into ``DeleteOptions`` (handlers/delete.go: any decode error is
    a 400 with the decoder's text)."""
    decoded = decode(req.body, yaml_ok=False)
    if not isinstance(decoded, dict):
        what = "array" if isinstance(decoded, list) else json_kind(decoded)
        raise E.bad_request(
            "couldn't get version/kind; json parse error: json: cannot unmarshal "
            f"{what} into Go value of type {_FIND_KIND}"
        )
    for key in ("apiVersion", "kind"):
        if key in decoded and not isinstance(decoded[key], str):
            raise E.bad_request(
                "couldn't get version/kind; json parse error: json: cannot unmarshal "
                f"{json_kind(decoded[key])} into Go struct field .{key} of type string"
            )
    av, kind = decoded.get("apiVersion") or "", decoded.get("kind") or ""
    if av and av not in _delete_options_versions():
        raise E.bad_request(
            f'no kind "{kind or "DeleteOptions"}" is registered for version "{av}" in scheme '
            '"k8s.io/apimachinery/pkg/apis/meta/internalversion/scheme/register.go"'
        )
    if kind and kind != "DeleteOptions":
        raise E.bad_request("decoded object cannot be converted to DeleteOptions")
    wrong = definition_type_error(_DELETE_OPTIONS, "DeleteOptions", decoded, version=version)
    if wrong:
        raise E.bad_request(wrong)
    return decoded


def _delete_options_versions() -> set[str]:
    """Where DeleteOptions is registered: meta.k8s.io/v1 and every served group version (for
    clients that still send a per-group DeleteOptions)."""
    from lab.kube.resources import RESOURCES

    return {"meta.k8s.io/v1"} | {rt.api_version for rt in RESOURCES}


def delete_options(
    req: Request, q: dict[str, str], dry_run: bool, *, version: str = DEFAULT_K8S_VERSION
) -> DeleteOptions:
    body: dict[str, Any] = {}
    if req.body.strip():
        # with a body, kube-apiserver reads the options from it alone (not the query)
        body = _delete_body(req, version)
        q = {}
        dry_run = False
    modes = body.get("dryRun") or ([q["dryRun"]] if "dryRun" in q else [])
    bad_modes = [m for m in modes if m != "All"]
    if bad_modes:
        raise E.invalid_options("DeleteOptions", [E.not_supported("dryRun", bad_modes[0], ["All"])])
    opts = DeleteOptions(dry_run=dry_run or bool(modes))
    if body:
        gp = body.get("gracePeriodSeconds")
        if gp is not None:
            opts.grace_period = int(gp)
    elif q.get("gracePeriodSeconds"):
        opts.grace_period = int64_param(q, "gracePeriodSeconds")
    opts.propagation = q.get("propagationPolicy") or body.get("propagationPolicy")
    od = q.get("orphanDependents", body.get("orphanDependents"))
    if od is not None:
        opts.orphan_dependents = (
            od if isinstance(od, bool) else str(od).lower() not in ("0", "false")
        )
    pre = body.get("preconditions") or {}  # a dict: the type check ran
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


def selection(
    store: Store, q: dict[str, str], rt: ResourceType, name: str | None = None
) -> Selection:
    sel = Selection()
    if q.get("labelSelector"):
        sel.labels = parse_label_selector(q["labelSelector"])
    fs = q.get("fieldSelector", "")
    fields = parse_field_selector(fs) if fs else ()
    if name is not None:
        from lab.kube.selectors import FieldRequirement

        fields = (*fields, FieldRequirement("metadata.name", "=", name))
    if fields:
        store.strategies[rt_key(rt)].check_field_selector(tuple(f.field for f in fields))
        sel.fields = fields
    return sel


def list_options(q: dict[str, str], *, watch: bool) -> None:
    errs = []
    rvm = q.get("resourceVersionMatch", "")
    if watch:
        if "sendInitialEvents" in q:
            if rvm != "NotOlderThan":
                errs.append(
                    E.forbidden(
                        "resourceVersionMatch",
                        "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan",
                    )
                )
            elif not bool_param(q, "allowWatchBookmarks"):
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
            errs.append(E.forbidden("sendInitialEvents", "sendInitialEvents is forbidden for list"))
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
