"""Structured-merge-diff over the served OpenAPI schemas: typed paths, field sets, merge.

The part of ``sigs.k8s.io/structured-merge-diff`` (SMD) the field manager (``ssa.py``) stands
on, with no notion of managers: :class:`Types` (schema lookups for one version),
:func:`field_set` (SMD's ``ToFieldSet``), :func:`compare` (the paths added, changed and
removed between two objects), :func:`merge` (an applied configuration over the live object),
:func:`remove_paths` (the ``prune``) and :func:`to_fields_v1` / :func:`from_fields_v1` (the
``fieldsV1`` encoding). Split from ``ssa.py`` so the ownership rules read apart from the tree
algebra they use.

List and map semantics come from the upstream OpenAPI schema of the server's version
(``schema.definitions``): ``x-kubernetes-list-type`` atomic / set / map with
``x-kubernetes-list-map-keys``; failing that, ``x-kubernetes-patch-strategy: merge`` with a
merge key (as kube-openapi's ``schemaconv`` falls back); ``x-kubernetes-map-type: atomic``;
fields without a schema are deduced from the value (maps granular, lists atomic).

Paths are tuples of fieldsV1 keys: ``f:<name>``, ``k:<json of the key fields, sorted>``,
``v:<json value>``.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from typing import Any

from lab.kube.resources import ResourceType
from lab.kube.schema import definition_name, definitions

Path = tuple[str, ...]
PathSet = set[Path]
Schema = dict[str, Any]

_PREFIX = "#/$defs/"
# List-map key fields with a ``+default`` marker in k8s.io/api, which SMD uses for an item that
# omits the key. The shipped schemas carry no ``default``s, hence this table (the only two among
# the multi-key list maps of the served kinds).
_KEY_DEFAULTS: dict[tuple[str, str], Any] = {
    ("io.k8s.api.core.v1.ServicePort", "protocol"): "TCP",
    ("io.k8s.api.core.v1.ContainerPort", "protocol"): "TCP",
}


# ---------------------------------------------------------------------------------- types
@dataclass
class TypeNode:
    """What SMD needs to know of a schema node."""

    kind: str  # "struct", "map", "list", "scalar", "deduced"
    atomic: bool = False
    props: dict[str, Schema] = field(default_factory=dict)
    elem: Schema | None = None  # map values, list items
    list_type: str = "atomic"  # "atomic", "set", "map"
    keys: tuple[str, ...] = ()


_DEDUCED = TypeNode("deduced")
# keyed by the ids of long-lived schema dicts: the loaded definitions (kept for the process) and
# the root references below (kept here), never of a temporary dict
_cache: dict[int, dict[int, TypeNode]] = {}  # id(definitions) -> id(schema) -> node
_roots: dict[str, Schema] = {}
_cache_lock = threading.Lock()


class Types:
    """Schema lookups for one Kubernetes version."""

    def __init__(self, version: str) -> None:
        self.defs = definitions(version)
        with _cache_lock:
            self._nodes = _cache.setdefault(id(self.defs), {})

    def root(self, rt: ResourceType) -> Schema:
        name = definition_name(rt)
        with _cache_lock:
            return _roots.setdefault(name, {"$ref": _PREFIX + name})

    def node(self, schema: Schema | None) -> TypeNode:
        if schema is None:
            return _DEDUCED
        hit = self._nodes.get(id(schema))  # a dict read is atomic; filling takes the lock
        if hit is not None:
            return hit
        node = self._build(schema)
        with _cache_lock:
            self._nodes[id(schema)] = node
        return node

    def _build(self, schema: Schema) -> TypeNode:
        ext = dict(schema)
        ref = schema.get("$ref")
        target = schema
        if isinstance(ref, str) and ref.startswith(_PREFIX):
            target = self.defs.get(ref[len(_PREFIX) :], {})
            ext = {**target, **{k: v for k, v in schema.items() if k.startswith("x-")}}
        if "oneOf" in target:  # IntOrString, Quantity
            return TypeNode("scalar")
        props = target.get("properties")
        atomic_map = ext.get("x-kubernetes-map-type") == "atomic"
        if isinstance(props, dict):
            return TypeNode("struct", atomic=atomic_map, props=props)
        types = target.get("type")
        types = [types] if isinstance(types, str) else list(types or [])
        if "array" in types:
            list_type = ext.get("x-kubernetes-list-type")
            keys: tuple[str, ...] = ()
            if list_type == "map":
                keys = tuple(ext.get("x-kubernetes-list-map-keys") or ())
            elif list_type not in ("atomic", "set"):
                strategy = str(ext.get("x-kubernetes-patch-strategy") or "")
                if "merge" in strategy.split(","):
                    merge_key = ext.get("x-kubernetes-patch-merge-key")
                    list_type = "map" if merge_key else "set"
                    keys = (merge_key,) if merge_key else ()
                else:
                    list_type = "atomic"
            items = target.get("items")
            return TypeNode(
                "list",
                atomic=list_type == "atomic",
                elem=items if isinstance(items, dict) else None,
                list_type=list_type,
                keys=keys,
            )
        if "object" in types:
            extra = target.get("additionalProperties")
            if isinstance(extra, dict):
                return TypeNode("map", atomic=atomic_map, elem=extra)
            return _DEDUCED
        if types:
            return TypeNode("scalar")
        return _DEDUCED

    def child(self, node: TypeNode, name: str) -> Schema | None:
        if node.kind == "struct":
            return node.props.get(name)
        return node.elem

    def key_default(self, node: TypeNode, key: str) -> Any:
        item = self.node(node.elem)
        prop = item.props.get(key) if item.kind == "struct" else None
        if isinstance(prop, dict) and "default" in prop:
            return prop["default"]
        ref = str((node.elem or {}).get("$ref", ""))[len(_PREFIX) :]
        return _KEY_DEFAULTS.get((ref, key))


_KEY_ENCODER = json.JSONEncoder(sort_keys=True, separators=(",", ":"))


def key_json(value: Any) -> str:
    return _KEY_ENCODER.encode(value)


def _element(types: Types, node: TypeNode, item: Any) -> str:
    """The path element of a list item (``k:`` for list maps, ``v:`` for sets)."""
    if node.list_type == "map" and isinstance(item, dict):
        ident = {}
        for key in node.keys:
            value = item.get(key)
            if value is None:
                value = types.key_default(node, key)
            if value is not None:
                ident[key] = value
        return "k:" + key_json(ident)
    return "v:" + key_json(item)


def _granular(node: TypeNode, value: Any) -> bool:
    """Whether SMD descends into ``value`` (a struct or map that is not atomic)."""
    if node.kind in ("struct", "map"):
        return not node.atomic and isinstance(value, dict)
    if node.kind == "deduced":
        return isinstance(value, dict)
    return False


def _associative(node: TypeNode, value: Any) -> bool:
    return node.kind == "list" and not node.atomic and isinstance(value, list)


# ---------------------------------------------------------------------------------- sets
def field_set(types: Types, value: Any, schema: Schema | None) -> PathSet:
    """SMD ``ToFieldSet``: the leaves, list items and map entries ``value`` sets."""
    out: PathSet = set()

    def walk(val: Any, sch: Schema | None, path: Path) -> None:
        node = types.node(sch)
        if _granular(node, val):
            for key, child in val.items():
                if node.kind == "struct" and key not in node.props:
                    continue  # an unknown field has no place in the set
                sub = (*path, f"f:{key}")
                walk(child, types.child(node, key), sub)
                if child is None or child == {} or node.kind != "struct":
                    out.add(sub)
        elif _associative(node, val):
            for item in val:
                sub = (*path, _element(types, node, item))
                walk(item, node.elem, sub)
                out.add(sub)
        elif path:
            out.add(path)

    walk(value, schema, ())
    return out


@dataclass
class Comparison:
    added: PathSet = field(default_factory=set)
    modified: PathSet = field(default_factory=set)
    removed: PathSet = field(default_factory=set)

    def changed(self) -> PathSet:
        return self.added | self.modified


def compare(types: Types, old: Any, new: Any, schema: Schema | None) -> Comparison:
    """SMD ``Compare``: what ``new`` added, modified and removed relative to ``old``."""
    out = Comparison()

    def everything(val: Any, sch: Schema | None, path: Path, into: PathSet) -> None:
        into.add(path)
        node = types.node(sch)
        if _granular(node, val):
            for key, child in val.items():
                if node.kind == "struct" and key not in node.props:
                    continue
                everything(child, types.child(node, key), (*path, f"f:{key}"), into)
        elif _associative(node, val):
            for item in val:
                everything(item, node.elem, (*path, _element(types, node, item)), into)

    def walk(lhs: Any, rhs: Any, sch: Schema | None, path: Path) -> None:
        if lhs is rhs or lhs == rhs:
            return  # an equal subtree adds, modifies and removes nothing (a C-speed check)
        node = types.node(sch)
        if _granular(node, lhs) and _granular(node, rhs):
            for key in {**lhs, **rhs}:
                if node.kind == "struct" and key not in node.props:
                    continue
                sub = (*path, f"f:{key}")
                csch = types.child(node, key)
                if key not in rhs:
                    everything(lhs[key], csch, sub, out.removed)
                elif key not in lhs:
                    everything(rhs[key], csch, sub, out.added)
                else:
                    walk(lhs[key], rhs[key], csch, sub)
        elif _associative(node, lhs) and _associative(node, rhs):
            left = {_element(types, node, item): item for item in lhs}
            right = {_element(types, node, item): item for item in rhs}
            for pe, item in left.items():
                if pe not in right:
                    everything(item, node.elem, (*path, pe), out.removed)
            for pe, item in right.items():
                if pe not in left:
                    everything(item, node.elem, (*path, pe), out.added)
                else:
                    walk(left[pe], item, node.elem, (*path, pe))
        elif lhs != rhs and path:
            out.modified.add(path)

    walk(old, new, schema, ())
    return out


def merge(types: Types, live: Any, config: Any, schema: Schema | None) -> Any:
    """SMD ``Merge``: the configuration over the live object (structs and maps field by field,
    list maps and sets item by item, atomic values replaced)."""
    node = types.node(schema)
    if _granular(node, live) and _granular(node, config):
        out = dict(live)
        for key, value in config.items():
            if key in live:
                out[key] = merge(types, live[key], value, types.child(node, key))
            else:
                out[key] = value
        return out
    if _associative(node, live) and _associative(node, config):
        wanted = {_element(types, node, item): item for item in config}
        merged: list[Any] = []
        seen = set()
        for item in live:
            pe = _element(types, node, item)
            if pe in wanted:
                seen.add(pe)
                merged.append(merge(types, item, wanted[pe], node.elem))
            else:
                merged.append(item)
        merged.extend(item for pe, item in wanted.items() if pe not in seen)
        return merged
    return config


def remove_paths(types: Types, obj: Any, paths: PathSet, schema: Schema | None) -> Any:
    """``obj`` without the items ``paths`` name (a whole subtree each; SMD ``RemoveItems``)."""
    if not paths:
        return obj

    def walk(val: Any, sch: Schema | None, path: Path) -> Any:
        node = types.node(sch)
        if _granular(node, val):
            out = {}
            for key, child in val.items():
                sub = (*path, f"f:{key}")
                if sub in paths:
                    continue
                out[key] = walk(child, types.child(node, key), sub)
            return out
        if _associative(node, val):
            items = []
            for item in val:
                sub = (*path, _element(types, node, item))
                if sub not in paths:
                    items.append(walk(item, node.elem, sub))
            return items
        return val

    return walk(obj, schema, ())


def prefixes(paths: PathSet) -> PathSet:
    return {p[:i] for p in paths for i in range(1, len(p) + 1)}


# ---------------------------------------------------------------------------------- fieldsV1
def to_fields_v1(paths: PathSet) -> dict[str, Any]:
    """A path set as the ``fieldsV1`` trie (``"."`` marks a member that has children)."""
    root: dict[str, Any] = {}
    for path in paths:
        node = root
        for part in path:
            node = node.setdefault(part, {})
    members = set(paths)

    def mark(node: dict[str, Any], path: Path) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if node and path in members:
            out["."] = {}
        for key in sorted(node):
            out[key] = mark(node[key], (*path, key))
        return out

    return mark(root, ())


def from_fields_v1(doc: Any) -> PathSet:
    out: PathSet = set()

    def walk(node: dict[str, Any], prefix: Path) -> None:
        for key, value in node.items():
            if key == ".":
                out.add(prefix)
                continue
            path = (*prefix, key)
            if isinstance(value, dict) and value:
                walk(value, path)
            else:
                out.add(path)

    if isinstance(doc, dict):
        walk(doc, ())
    out.discard(())
    return out
