"""Server-side apply field sets: what each applier owns, and removal of what it dropped.

A pragmatic subset of ``structured-merge-diff``: the set of fields an applied configuration
sets is computed with the apply list semantics of ``patch.py`` (list-map keys such as Service
ports on ``port`` + ``protocol``, primitive sets, atomic lists) and stored as a real
``fieldsV1`` document in that manager's ``Apply`` entry of ``managedFields``. On the next apply
by the same manager, fields it set before but left out now are removed from the live object
unless another *applier* still owns them, and changing a value another applier owns is a 409
``FieldManagerConflict`` unless ``force=true`` (which takes the field over). Not modelled:
ownership by ``Update`` managers (their entries keep a placeholder ``fieldsV1``, so an apply
never conflicts with, and may remove a field last written by, kubectl edit or a controller).
"""

from __future__ import annotations

import json
from typing import Any

from lab.kube import exceptions as E
from lab.kube.patch import strategies_for
from lab.kube.resources import ResourceType

Path = tuple[str, ...]  # fieldsV1 keys from the root, e.g. ("f:spec", "f:ports", 'k:{...}')
_KEY_DEFAULTS = {"protocol": "TCP"}
_METADATA_FIELDS = ("labels", "annotations", "finalizers", "ownerReferences")


def _compact(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def field_set(config: dict[str, Any], kind: str) -> set[Path]:
    """The fields ``config`` sets, as fieldsV1 paths."""
    strat = strategies_for(kind, apply=True)
    out: set[Path] = set()

    def walk(node: dict[str, Any], prefix: Path, spath: str) -> None:
        for key, value in node.items():
            if not prefix and key in ("apiVersion", "kind", "status"):
                continue
            if prefix == ("f:metadata",) and key not in _METADATA_FIELDS:
                continue
            path = (*prefix, f"f:{key}")
            sub = f"{spath}.{key}" if spath else key
            if isinstance(value, dict) and value:
                walk(value, path, sub)
            elif isinstance(value, list) and sub in strat:
                merge_key = strat[sub]
                for item in value:
                    if merge_key == "" or not isinstance(item, dict):
                        out.add((*path, f"v:{_compact(item)}"))
                        continue
                    ident = {f: item.get(f, _KEY_DEFAULTS.get(f)) for f in merge_key.split(",")}
                    element = (*path, f"k:{_compact(ident)}")
                    out.add(element)
                    walk(item, element, f"{sub}[]")
            elif value is not None:
                out.add(path)

    walk(config, (), "")
    return out


def to_fields_v1(paths: set[Path]) -> dict[str, Any]:
    root: dict[str, Any] = {}
    for path in sorted(paths):
        node = root
        for part in path:
            node = node.setdefault(part, {})
        if path and path[-1].startswith("k:"):
            node["."] = {}
    return root


def from_fields_v1(doc: Any) -> set[Path]:
    out: set[Path] = set()

    def walk(node: dict[str, Any], prefix: Path) -> None:
        for key, value in node.items():
            if key == ".":
                continue
            path = (*prefix, key)
            if isinstance(value, dict) and any(k != "." for k in value):
                if key.startswith("k:"):
                    out.add(path)
                walk(value, path)
            else:
                out.add(path)

    if isinstance(doc, dict):
        walk(doc, ())
    return out


def _find(items: list[Any], ident: dict[str, Any]) -> int | None:
    for idx, item in enumerate(items):
        if isinstance(item, dict) and all(
            item.get(f, _KEY_DEFAULTS.get(f)) == v for f, v in ident.items()
        ):
            return idx
    return None


def remove_dropped(live: dict[str, Any], dropped: set[Path], still_owned: set[Path]) -> None:
    """Delete from ``live`` (in place) the fields in ``dropped``. A list-map element goes as a
    whole when nobody still owns anything inside it; otherwise only its dropped non-key fields
    go (the key fields are the element's identity)."""
    gone: list[Path] = []
    for path in sorted(dropped, key=len):
        if any(path[: len(g)] == g for g in gone):
            continue
        parent: Any = live
        for part in path[:-1]:
            parent = _step(parent, part)
            if parent is None:
                break
        if parent is None:
            continue
        last = path[-1]
        if last.startswith("k:") and isinstance(parent, list):
            if any(p[: len(path)] == path for p in still_owned):
                continue
            idx = _find(parent, json.loads(last[2:]))
            if idx is not None:
                parent.pop(idx)
            gone.append(path)
        elif last.startswith("f:") and isinstance(parent, dict):
            owner = path[-2] if len(path) > 1 else ""
            if owner.startswith("k:") and last[2:] in json.loads(owner[2:]):
                continue
            parent.pop(last[2:], None)
        elif last.startswith("v:") and isinstance(parent, list):
            value = json.loads(last[2:])
            parent[:] = [v for v in parent if v != value]


def _step(node: Any, part: str) -> Any:
    if part.startswith("f:") and isinstance(node, dict):
        return node.get(part[2:])
    if part.startswith("k:") and isinstance(node, list):
        idx = _find(node, json.loads(part[2:]))
        return None if idx is None else node[idx]
    return None


def value_at(obj: Any, path: Path) -> tuple[bool, Any]:
    """(present, value) of the field ``path`` names in ``obj``."""
    node = obj
    for part in path[:-1]:
        node = _step(node, part)
        if node is None:
            return False, None
    last = path[-1]
    if last.startswith("f:") and isinstance(node, dict):
        return (last[2:] in node), node.get(last[2:])
    if last.startswith("v:") and isinstance(node, list):
        value = json.loads(last[2:])
        return (value in node), value
    if last.startswith("k:") and isinstance(node, list):
        idx = _find(node, json.loads(last[2:]))
        return idx is not None, None
    return False, None


def render(path: Path) -> str:
    """A field path as the API server prints it in conflicts (``.spec.ports[port=80,...]``)."""
    out = ""
    for part in path:
        kind, text = part[:2], part[2:]
        if kind == "f:":
            out += f".{text}"
        elif kind == "k:":
            ident = json.loads(text)
            out += "[" + ",".join(f"{k}={json.dumps(v)}" for k, v in ident.items()) + "]"
        else:
            out += f"[={text}]"
    return out


def conflicts(
    live: dict[str, Any], config: dict[str, Any], applied: set[Path], owners: dict[str, set[Path]]
) -> list[tuple[str, Path]]:
    """(manager, field) pairs where ``config`` would change a value another applier owns."""
    out: list[tuple[str, Path]] = []
    for path in sorted(applied):
        if path[-1].startswith("k:"):
            continue
        for manager, owned in sorted(owners.items()):
            if path not in owned:
                continue
            present, current = value_at(live, path)
            _, wanted = value_at(config, path)
            if present and current != wanted:
                out.append((manager, path))
    return out


def meta_of(obj: dict[str, Any]) -> dict[str, Any]:
    meta: dict[str, Any] = obj.setdefault("metadata", {})
    return meta


def apply_ownership(obj: dict[str, Any], manager: str) -> tuple[set[Path], dict[str, set[Path]]]:
    """Fields ``manager`` owns by apply, and the fields each other applier owns."""
    mine: set[Path] = set()
    others: dict[str, set[Path]] = {}
    for entry in obj["metadata"].get("managedFields") or []:
        if entry.get("operation") != "Apply" or entry.get("subresource"):
            continue
        owned = from_fields_v1(entry.get("fieldsV1"))
        if entry.get("manager") == manager:
            mine |= owned
        else:
            others.setdefault(str(entry.get("manager")), set()).update(owned)
    return mine, others


def release(meta: dict[str, Any], managers: set[str], paths: set[Path]) -> None:
    """Take ``paths`` away from the Apply entries of ``managers`` (a forced apply)."""
    entries = []
    for entry in meta.get("managedFields") or []:
        if entry.get("operation") == "Apply" and entry.get("manager") in managers:
            kept = from_fields_v1(entry.get("fieldsV1")) - paths
            entries.append({**entry, "fieldsV1": to_fields_v1(kept)})
        else:
            entries.append(entry)
    meta["managedFields"] = entries


def conflict_error(rt: ResourceType, name: str, clashes: list[tuple[str, Path]]) -> E.ApiError:
    by_manager: dict[str, list[str]] = {}
    for manager, path in clashes:
        by_manager.setdefault(manager, []).append(render(path))
    n = len(clashes)
    parts = []
    for manager, fields in by_manager.items():
        if len(fields) == 1:
            parts.append(f'conflict with "{manager}" using {rt.api_version}: {fields[0]}')
        else:
            listed = "\n".join(f"- {f}" for f in fields)
            parts.append(f'conflicts with "{manager}" using {rt.api_version}:\n{listed}')
    message = f"Apply failed with {n} conflict{'s' if n > 1 else ''}: " + "\n".join(parts)
    details: dict[str, Any] = {"name": name}
    if rt.group:
        details["group"] = rt.group
    details["kind"] = rt.plural
    details["causes"] = [
        {
            "type": "FieldManagerConflict",
            "message": f'conflict with "{manager}" using {rt.api_version}',
            "field": render(path),
        }
        for manager, path in clashes
    ]
    return E.ApiError(409, "Conflict", message, details=details)
