"""Field ownership (``metadata.managedFields``) and server-side apply, schema-driven.

The behaviour follows ``sigs.k8s.io/structured-merge-diff`` (SMD) as kube-apiserver's field
manager (``k8s.io/apiserver/pkg/endpoints/handlers/fieldmanager``) drives it:

* every write records its manager's field set; a manager is identified by name, operation
  (``Update`` or ``Apply``), subresource and, for ``Update`` only, the apiVersion (SMD's
  ``BuildManagerIdentifier``), one ``managedFields`` entry each;
* an ``Update`` (create, update, any non-apply patch) owns the fields it added or changed
  (SMD ``Updater.Update``: the old object compared with the new one); those fields, and the
  ones it removed, leave every other manager's set; its entry's ``time`` moves only when it
  took a field; a manager whose set becomes empty loses its entry;
* an ``Apply`` owns exactly the fields of its configuration (SMD ``ToFieldSet``); the merged
  object is compared with the live one and a field another manager owns that would be added or
  changed is a conflict (409) unless ``force`` (then ownership moves); a field the applier
  owned before and now leaves out is removed from the object unless some manager (the
  applier's new set included) still owns it (SMD ``prune``);
* the fields the field manager never tracks are stripped (``stripMeta``: ``apiVersion``,
  ``kind``, ``metadata`` name/namespace/uid/... ) and the fields a strategy resets are ignored
  (``status`` through the main resource of a kind with a status subresource; everything but
  ``status`` through ``/status``);
* entries are written in the order ``sortEncodedManagedFields`` sorts them (Apply first, then
  by time in seconds, manager, apiVersion, subresource).

Neighbours: the writer (``writes.py``) runs a :class:`FieldManager` on every create, update and
patch; the structured-merge-diff operations it stands on (typed paths, field sets, compare,
merge, prune, the fieldsV1 encoding) are in ``smd.py``, which knows nothing of managers.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from lab.kube import exceptions as E
from lab.kube.objects import now_rfc3339
from lab.kube.resources import ResourceType
from lab.kube.smd import (
    Path,
    PathSet,
    Types,
    compare,
    field_set,
    from_fields_v1,
    key_json,
    merge,
    prefixes,
    remove_paths,
    to_fields_v1,
)

_STRIPPED: frozenset[Path] = frozenset(
    {
        ("f:apiVersion",),
        ("f:kind",),
        ("f:metadata",),
        *(
            ("f:metadata", f"f:{name}")
            for name in (
                "name",
                "namespace",
                "creationTimestamp",
                "selfLink",
                "uid",
                "clusterName",
                "generation",
                "managedFields",
                "resourceVersion",
            )
        ),
    }
)


# ---------------------------------------------------------------------------------- managers
@dataclass
class Manager:
    name: str
    operation: str
    subresource: str
    api_version: str
    fields: PathSet
    time: str | None

    def ident(self) -> tuple[str, str, str, str]:
        version = "" if self.operation == "Apply" else self.api_version
        return (self.name, self.operation, self.subresource, version)

    def entry(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "manager": self.name,
            "operation": self.operation,
            "apiVersion": self.api_version,
        }
        if self.time:
            out["time"] = self.time
        out["fieldsType"] = "FieldsV1"
        out["fieldsV1"] = to_fields_v1(self.fields)
        if self.subresource:
            out["subresource"] = self.subresource
        return out

    def printed(self) -> str:
        """As ``printManager`` names it in a conflict."""
        out = json.dumps(self.name)
        if self.subresource:
            out += f" with subresource {json.dumps(self.subresource)}"
        if self.operation == "Update":
            out += f" using {self.api_version}"
        return out


def decode(entries: Any) -> list[Manager] | None:
    """The managers of a ``managedFields`` list; None when it is not a valid one."""
    if not isinstance(entries, list):
        return None
    out = []
    for e in entries:
        if not isinstance(e, dict) or e.get("operation") not in ("Apply", "Update"):
            return None
        if e.get("fieldsType", "FieldsV1") != "FieldsV1":
            return None
        out.append(
            Manager(
                name=str(e.get("manager") or ""),
                operation=str(e["operation"]),
                subresource=str(e.get("subresource") or ""),
                api_version=str(e.get("apiVersion") or ""),
                fields=from_fields_v1(e.get("fieldsV1")),
                time=e.get("time") if isinstance(e.get("time"), str) else None,
            )
        )
    return out


def _seconds(stamp: str | None) -> str:
    return stamp or ""


def encode(managers: list[Manager]) -> list[dict[str, Any]]:
    kept = [m for m in managers if m.fields]
    kept.sort(
        key=lambda m: (
            m.operation,
            _seconds(m.time),
            m.name,
            m.api_version,
            m.subresource,
        )
    )
    return [m.entry() for m in kept]


def _ignored(rt: ResourceType, subresource: str, has_status: bool) -> Any:
    """A predicate: paths the strategy resets for this write (the field manager's
    ``IgnoredFields`` from ``ResetFieldsStrategy``)."""
    if subresource == "status":
        return lambda p: bool(p) and p[0] not in ("f:status", "f:metadata")
    if has_status:
        return lambda p: bool(p) and p[0] == "f:status"
    return lambda p: False


def _clean(paths: PathSet, ignored: Any) -> PathSet:
    return {p for p in paths if p not in _STRIPPED and not ignored(p)}


@dataclass
class FieldManager:
    """Field ownership for one resource type."""

    types: Types
    rt: ResourceType
    has_status: bool

    def _base(self, new_meta: dict[str, Any], old_meta: dict[str, Any] | None) -> list[Manager]:
        mine = decode(new_meta.get("managedFields"))
        if mine:
            return mine
        if old_meta is not None:
            return decode(old_meta.get("managedFields")) or []
        return []

    def update(
        self,
        old: dict[str, Any],
        new: dict[str, Any],
        *,
        manager: str,
        subresource: str,
        incoming: Any,
        previous: Any,
    ) -> list[dict[str, Any]]:
        """The managedFields after an Update-operation write from ``old`` to ``new``.
        ``incoming`` is the managedFields the request carried, ``previous`` the stored ones."""
        managers = self._base({"managedFields": incoming}, {"managedFields": previous})
        ignored = _ignored(self.rt, subresource, self.has_status)
        cmp = compare(self.types, old, new, self.types.root(self.rt))
        changed = _clean(cmp.changed(), ignored)
        removed = _clean(cmp.removed, ignored)
        me = Manager(manager, "Update", subresource, self.rt.api_version, set(), None)
        mine: Manager | None = None
        for m in managers:
            if m.ident() == me.ident():
                mine = m
            m.fields -= changed
            m.fields -= removed
        if changed:
            if mine is None:
                mine = me
                managers.append(me)
            mine.fields |= changed
            mine.time = now_rfc3339()
        return encode(managers)

    def apply(
        self,
        live: dict[str, Any],
        config: dict[str, Any],
        *,
        manager: str,
        subresource: str,
        force: bool,
    ) -> tuple[dict[str, Any], list[dict[str, Any]], bool]:
        """(new object, its managedFields, whether the object changed) for an apply of
        ``config`` over ``live``; raises the 409 conflict."""
        root = self.types.root(self.rt)
        managers = decode(live.get("metadata", {}).get("managedFields")) or []
        ignored = _ignored(self.rt, subresource, self.has_status)
        applied = _clean(field_set(self.types, config, root), ignored)
        me = Manager(manager, "Apply", subresource, self.rt.api_version, set(), None)
        mine = next((m for m in managers if m.ident() == me.ident()), None)
        last = set(mine.fields) if mine else set()
        others = [m for m in managers if m is not mine]
        owned = set(applied).union(*(m.fields for m in others))
        merged = merge(self.types, live, _applicable(config, ignored), root)
        dropped = last - owned
        # a struct or map left empty by the removal goes too, unless something in it is owned
        # SMD makes the struct fields above a dropped field members of the last set too: one
        # left with nothing anybody owns goes with it (``EnsureNamedFieldsAreMembers``)
        gone = dropped | {
            p
            for p in prefixes(dropped) - prefixes(owned)
            if p[-1].startswith("f:") and p != ("f:metadata",)
        }
        merged = remove_paths(self.types, merged, gone, root)
        cmp = compare(self.types, live, merged, root)
        changed = _clean(cmp.changed(), ignored)
        removed = _clean(cmp.removed, ignored)
        clashes = [(m, p) for m in others for p in sorted(m.fields & changed)]
        if clashes and not force:
            raise conflict_error(clashes)
        for m in others:
            m.fields -= changed
            m.fields -= removed
        if mine is None:
            mine = me
            managers.append(me)
        mine.fields = applied
        mine.api_version = self.rt.api_version
        object_changed = merged != live
        if object_changed or mine.time is None:
            mine.time = now_rfc3339()
        return merged, encode(managers), object_changed


def _applicable(config: dict[str, Any], ignored: Any) -> dict[str, Any]:
    """The configuration without the top-level fields the strategy resets anyway, and without
    the type fields (the live object carries neither)."""
    return {
        k: v
        for k, v in config.items()
        if k not in ("apiVersion", "kind") and not ignored((f"f:{k}",))
    }


def conflict_error(clashes: list[tuple[Manager, Path]]) -> E.ApiError:
    """The 409 ``NewApplyConflict`` builds: details carry only the causes."""
    causes = [
        {
            "reason": "FieldManagerConflict",
            "message": f"conflict with {m.printed()}",
            "field": render(p),
        }
        for m, p in clashes
    ]
    if len(clashes) == 1:
        m, p = clashes[0]
        message = f"Apply failed with 1 conflict: conflict with {m.printed()}: {render(p)}"
    else:
        by_manager: dict[str, list[str]] = {}
        order: dict[str, str] = {}
        for m, p in clashes:
            key = key_json(m.ident())
            order[key] = m.printed()
            by_manager.setdefault(key, []).append(render(p))
        lines = []
        for key in sorted(by_manager, key=lambda k: _sort_ident(json.loads(k))):
            lines.append(f"conflicts with {order[key]}:")
            lines.extend(f"- {p}" for p in by_manager[key])
        message = f"Apply failed with {len(clashes)} conflicts: " + "\n".join(lines)
    return E.ApiError(409, "Conflict", message, details={"causes": causes})


def _sort_ident(ident: list[str]) -> str:
    """Managers sort by their identifier string: the JSON of the ManagedFieldsEntry with
    manager, operation, apiVersion (Update) and subresource, in Go's field order."""
    name, operation, subresource, version = ident
    entry: dict[str, str] = {"manager": name, "operation": operation}
    if version:
        entry["apiVersion"] = version
    if subresource:
        entry["subresource"] = subresource
    return json.dumps(entry, separators=(",", ":"))


def render(path: Path) -> str:
    """A path as fieldpath.Path prints it: ``.spec.ports[port=80,protocol="TCP"]``."""
    out = ""
    for part in path:
        kind, text = part[:2], part[2:]
        if kind == "f:":
            out += f".{text}"
        elif kind == "k:":
            ident = json.loads(text)
            out += "[" + ",".join(f"{k}={key_json(v)}" for k, v in ident.items()) + "]"
        elif kind == "i:":
            out += f"[{text}]"
        else:
            out += f"[={text}]"
    return out
