"""Writes: create, update (PUT) and patch, with the generic metadata rules.

Over the store (``store.py``): :class:`Writer` runs every write under the store's lock and
commits through ``Store.commit``; it is given the deleter (``deletion.py``: an update that
clears the last finalizer deletes) and, from ``registry.py`` which composes them, the hook that
adds a new namespace's companions (``seed.py``), so it imports neither the registry nor
seeding. Order of processing follows the API server's create and update handlers
(``apiserver-spec.md`` §6.1, §3.2, §6.5): decode, system fields, strategy PrepareFor*,
defaulting, validation, allocation, generation, managedFields, then the write itself, skipped
when the result equals the stored object (no new resourceVersion, no event).
"""

from __future__ import annotations

import json
import random
import uuid
from collections.abc import Callable
from typing import Any

from lab.kube import exceptions as E
from lab.kube import patch as P
from lab.kube.deletion import Deleter
from lab.kube.objects import Obj, RTKey, clone, now_rfc3339, rt_key
from lab.kube.resources import ResourceType
from lab.kube.schema import (
    always_serialized,
    apply_type_error,
    drop_empty_collections,
    type_error,
)
from lab.kube.smd import Types
from lab.kube.ssa import FieldManager
from lab.kube.store import Store
from lab.kube.validation import validate_meta_update, validate_metadata

_NAME_CHARS = "bcdfghjklmnpqrstvwxz2456789"
_EMPTY: dict[tuple[str, str, str], Obj] = {}


class Writer:
    """The store's create/update/patch path."""

    def __init__(self, store: Store, deleter: Deleter) -> None:
        self.store = store
        self.deleter = deleter
        #: told the name of every namespace created, after its commit (``Registry`` adds the
        #: ServiceAccount and ConfigMap kube-controller-manager would)
        self.on_namespace_created: Callable[[str], None] | None = None

    # ------------------------------------------------------------------ create
    def create(
        self,
        rt: ResourceType,
        ns: str,
        body: Obj,
        *,
        dry_run: bool = False,
        manager: str = "",
    ) -> Obj:
        with self.store.lock:
            return self._create_locked(rt, ns, body, dry_run=dry_run, manager=manager)

    def _create_locked(
        self,
        rt: ResourceType,
        ns: str,
        body: Obj,
        *,
        dry_run: bool,
        manager: str,
        managed: list[dict[str, Any]] | None = None,
    ) -> Obj:
        """``managed``: the managedFields an apply computed; otherwise the create is an Update
        operation of ``manager`` over an empty object."""
        k = rt_key(rt)
        strategy = self.store.strategies[k]
        obj = self._new_object(rt, ns, body)
        meta = obj["metadata"]
        strategy.prepare_for_create(obj)
        strategy.default(obj, None)
        if managed is None:
            # the field manager sees the decoded, defaulted object before allocation
            managed = self._field_manager(rt).update(
                self._empty(rt),
                self._view(rt, obj),
                manager=manager or "unknown",
                subresource="",
                incoming=meta.get("managedFields"),
                previous=None,
            )
        errs = validate_metadata(meta, name_rule=strategy.name_rule, namespaced=rt.namespaced)
        errs += strategy.validate(obj, None)
        if errs:
            raise E.invalid(rt, meta.get("name") or meta.get("generateName", ""), errs)
        existing = self.store._t.objects[k].get((meta.get("namespace", ""), meta["name"]))
        if existing is not None:
            raise E.already_exists(
                rt, meta["name"], deleting=bool(existing.obj["metadata"].get("deletionTimestamp"))
            )
        strategy.allocate(obj, None, dry_run=dry_run)
        if strategy.generation_managed:
            meta["generation"] = 1
        _set_managed(meta, managed)
        obj = _ordered(obj)
        always_serialized(rt, obj, version=self.store.k8s_version)
        if dry_run:
            return obj
        stored = self.store.commit(rt, "ADDED", obj, None)
        if k == ("", "namespaces") and self.on_namespace_created is not None:
            self.on_namespace_created(meta["name"])
        return stored

    def _new_object(self, rt: ResourceType, ns: str, body: Obj) -> Obj:
        """The body as a new object: decoded, its namespace checked, the system fields a
        client may not set dropped, a uid, a creation time and (``generateName``) a name."""
        obj = clone(body)
        obj.pop("kind", None)
        obj.pop("apiVersion", None)
        drop_empty_collections(rt, obj, version=self.store.k8s_version)
        meta = obj.get("metadata")
        if not isinstance(meta, dict):
            meta = obj["metadata"] = {}
        if rt.namespaced:
            meta["namespace"] = ns
            self._check_namespace(ns)
        else:
            meta.pop("namespace", None)
        for f in (
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "resourceVersion",
            "generation",
            "selfLink",
        ):
            meta.pop(f, None)
        meta["uid"] = str(uuid.uuid4())
        meta["creationTimestamp"] = now_rfc3339()
        if not meta.get("name") and bool(meta.get("generateName")):
            meta["name"] = self._generate_name(rt_key(rt), ns, meta["generateName"])
        return obj

    def _generate_name(self, k: RTKey, ns: str, prefix: str) -> str:
        base = prefix[:58]
        for _ in range(8):
            name = base + "".join(random.choice(_NAME_CHARS) for _ in range(5))
            if (ns, name) not in self.store._t.objects[k]:
                return name
        rt = self.store.by_key[k]
        raise E.ApiError(
            409,
            "AlreadyExists",
            f'{rt.plural} "{base}" already exists, the server '
            "was not able to generate a unique name for the object",
            details={"name": base, "kind": rt.plural},
        )

    def _check_namespace(self, ns: str) -> None:
        entry = self.store._t.objects[("", "namespaces")].get(("", ns))
        if entry is None:
            raise E.namespace_not_found(ns)
        if entry.obj["metadata"].get("deletionTimestamp"):
            raise E.ApiError(
                403,
                "Forbidden",
                f"unable to create new content in namespace {ns} because it is being terminated",
                details={
                    "name": ns,
                    "kind": "namespaces",
                    "causes": [
                        {
                            "reason": "NamespaceTerminating",
                            "message": f"namespace {ns} is being terminated",
                            "field": "metadata.namespace",
                        }
                    ],
                },
            )

    def _field_manager(self, rt: ResourceType) -> FieldManager:
        return FieldManager(Types(self.store.k8s_version), rt, "status" in rt.subresources)

    def _view(self, rt: ResourceType, obj: Obj) -> Obj:
        """The object as the field manager compares it: what Go would serialize (the struct
        values are added in place, as the commit adds them anyway)."""
        always_serialized(rt, obj, version=self.store.k8s_version)
        return obj

    def _empty(self, rt: ResourceType) -> Obj:
        """A new, empty object of the kind (``scope.Creater.New``): its struct values only.
        Shared and never modified (the field manager only reads it)."""
        key = (rt.group, rt.plural, self.store.k8s_version)
        empty = _EMPTY.get(key)
        if empty is None:
            empty = {"metadata": {}}
            always_serialized(rt, empty, version=self.store.k8s_version)
            _EMPTY[key] = empty
        return empty

    # ------------------------------------------------------------------ update / patch
    def update(
        self,
        rt: ResourceType,
        ns: str,
        name: str,
        body: Obj,
        *,
        subresource: str = "",
        dry_run: bool = False,
        manager: str = "",
    ) -> tuple[Obj, bool]:
        with self.store.lock:
            strategy = self.store.strategies[rt_key(rt)]
            entry = self.store.find(rt, ns, name)
            new = clone(body)
            new.pop("kind", None)
            new.pop("apiVersion", None)
            meta = new.setdefault("metadata", {})
            if entry is None:
                if strategy.create_on_update and not subresource:
                    return self._create_locked(rt, ns, new, dry_run=dry_run, manager=manager), True
                raise E.not_found(rt, name)
            old = entry.obj
            rv = meta.get("resourceVersion")
            if rv:
                if rv != old["metadata"]["resourceVersion"]:
                    raise E.stale(rt, name)
            elif not strategy.unconditional_update:
                raise E.invalid(
                    rt,
                    name,
                    [
                        E.invalid_value(
                            "metadata.resourceVersion", 0, "must be specified for an update"
                        )
                    ],
                )
            uid = meta.get("uid")
            if uid and uid != old["metadata"]["uid"]:
                raise E.conflict(
                    rt,
                    name,
                    f"Precondition failed: UID in precondition: {uid}, "
                    f"UID in object meta: {old['metadata']['uid']}",
                )
            return self._finish_update(
                rt,
                old,
                new,
                subresource=subresource,
                dry_run=dry_run,
                manager=manager,
                operation="Update",
            ), False

    def patch(
        self,
        rt: ResourceType,
        ns: str,
        name: str,
        patch_type: str,
        body: Any,
        *,
        subresource: str = "",
        dry_run: bool = False,
        manager: str = "",
        force: bool = False,
    ) -> tuple[Obj, bool]:
        with self.store.lock:
            entry = self.store.find(rt, ns, name)
            if patch_type == P.APPLY:
                self._check_apply_body(rt, body)
                if entry is None:
                    if subresource:
                        raise E.not_found(rt, name)
                    obj = self._apply_create(
                        rt, ns, name, body, dry_run=dry_run, manager=manager, force=force
                    )
                    return obj, True
            if entry is None:
                raise E.not_found(rt, name)
            old = entry.obj
            new, managed = self._patched(
                rt, old, patch_type, body, subresource=subresource, manager=manager, force=force
            )
            self._check_patched(rt, name, old, new, body)
            op = "Apply" if patch_type == P.APPLY else "Update"
            return self._finish_update(
                rt,
                old,
                new,
                subresource=subresource,
                dry_run=dry_run,
                manager=manager,
                operation=op,
                managed=managed,
            ), False

    def _check_apply_body(self, rt: ResourceType, body: Any) -> None:
        if not isinstance(body, dict):
            raise E.bad_request("error decoding YAML: apply patch must be an object")
        typed = apply_type_error(rt, body, version=self.store.k8s_version)
        if typed:
            # the field manager's plain error: kube-apiserver answers 500 without reason
            raise E.ApiError(500, "", typed)

    def _apply_create(
        self,
        rt: ResourceType,
        ns: str,
        name: str,
        body: Obj,
        *,
        dry_run: bool,
        manager: str,
        force: bool,
    ) -> Obj:
        """An apply to an object that does not exist creates it from the configuration."""
        cfg, created_managed, _ = self._field_manager(rt).apply(
            clone(self._empty(rt)),  # merged into the new object
            body,
            manager=manager,
            subresource="",
            force=force,
        )
        cfg.setdefault("metadata", {})["name"] = name
        return self._create_locked(
            rt, ns, cfg, dry_run=dry_run, manager=manager, managed=created_managed
        )

    def _patched(
        self,
        rt: ResourceType,
        old: Obj,
        patch_type: str,
        body: Any,
        *,
        subresource: str,
        manager: str,
        force: bool,
    ) -> tuple[Any, list[dict[str, Any]] | None]:
        """The stored object with the patch applied (with kind and apiVersion, as the patch
        saw it), and the managedFields when it was an apply."""
        base = {"kind": rt.kind, "apiVersion": rt.api_version, **clone(old)}
        if patch_type == P.JSONPatch:
            return P.apply_json_patch(base, body), None
        if patch_type in (P.MERGE, P.STRATEGIC) and not isinstance(body, dict):
            raise E.bad_request(
                "json: cannot unmarshal array into Go value of type map[string]interface {}"
            )
        if patch_type == P.MERGE:
            return P.merge_patch(base, body), None
        if patch_type == P.STRATEGIC:
            try:
                return P.strategic_merge(base, body, P.strategies_for(rt.kind)), None
            except P.SmpError as exc:
                # a plain Go error in kube-apiserver: answered 500 without a reason
                raise E.ApiError(500, "", str(exc)) from None
        new, managed, _ = self._field_manager(rt).apply(
            clone(old),
            body,
            manager=manager,
            subresource=subresource,
            force=force,
        )
        return {"kind": rt.kind, "apiVersion": rt.api_version, **new}, managed

    def _check_patched(self, rt: ResourceType, name: str, old: Obj, new: Any, body: Any) -> None:
        """The patched object must still decode, be the same object at the same revision;
        kind and apiVersion go, the stored managedFields stay unless the patch set them."""
        if not isinstance(new, dict):
            raise E.bad_request("patched object is not a JSON object")
        kind = new.get("kind")
        if isinstance(kind, str) and kind and kind != rt.kind:
            # the patched JSON decodes as another kind, which cannot convert into this one
            shown = json.dumps(body, separators=(",", ":"))
            raise E.invalid_patch(shown, E.unconvertible_kind(rt, kind))
        wrong = type_error(rt, new, version=self.store.k8s_version, stored=old)
        if wrong:
            # the patched JSON no longer decodes into the Go struct: 422 on field "patch"
            shown = json.dumps(body, separators=(",", ":"))
            raise E.invalid_patch(shown, wrong)
        new.pop("kind", None)
        new.pop("apiVersion", None)
        meta = new.get("metadata")
        if not isinstance(meta, dict):
            meta = new["metadata"] = {}
        rv = meta.get("resourceVersion")
        if rv and rv != old["metadata"]["resourceVersion"]:
            raise E.stale(rt, name)
        if not meta.get("managedFields") and old["metadata"].get("managedFields"):
            meta["managedFields"] = old["metadata"]["managedFields"]
        request_ns = old["metadata"].get("namespace", "")
        if rt.namespaced and meta.get("namespace") and meta["namespace"] != request_ns:
            # rest.EnsureObjectNamespaceMatchesRequestNamespace, before the name check
            raise E.bad_request(E.NAMESPACE_MISMATCH)
        if meta.get("name") != name:
            raise E.bad_request(
                f"the name of the object ({meta.get('name') or ''}) does not match the "
                f"name on the URL ({name})"
            )

    def _finish_update(
        self,
        rt: ResourceType,
        old: Obj,
        new: Obj,
        *,
        subresource: str,
        dry_run: bool,
        manager: str,
        operation: str,
        managed: list[dict[str, Any]] | None = None,
    ) -> Obj:
        k = rt_key(rt)
        strategy = self.store.strategies[k]
        drop_empty_collections(rt, new, version=self.store.k8s_version)
        ometa = old["metadata"]
        _keep_system_fields(new["metadata"], ometa)
        if subresource == "finalize":
            new = _finalize_view(old, new)
        else:
            strategy.prepare_for_update(new, old, subresource)
        meta = new["metadata"]
        strategy.default(new, old)
        if operation != "Apply":
            managed = self._field_manager(rt).update(
                old,
                self._view(rt, new),
                manager=manager or "unknown",
                subresource=subresource,
                incoming=meta.get("managedFields"),
                previous=ometa.get("managedFields"),
            )
        _set_managed(meta, managed or [])
        errs = validate_metadata(meta, name_rule=strategy.name_rule, namespaced=rt.namespaced)
        errs += validate_meta_update(new, old)
        errs += strategy.validate(new, old)
        if errs:
            raise E.invalid(rt, ometa["name"], errs)
        strategy.allocate(new, old, dry_run=dry_run)
        if strategy.generation_managed and new.get("spec") != old.get("spec"):
            meta["generation"] = int(ometa.get("generation", 0)) + 1
        new = _ordered(new)
        # Go decodes into structs: the struct-valued fields exist before the no-op comparison
        always_serialized(rt, new, version=self.store.k8s_version)
        # a write that only changes who owns what is still a write
        if _same(new, old, managed_fields=True):
            return old
        if dry_run:
            return new
        return self._store_update(rt, new, old)

    def _store_update(self, rt: ResourceType, new: Obj, old: Obj) -> Obj:
        """Commit an update; one that leaves a deleted object nothing to wait for deletes it,
        and a Terminating namespace may finish."""
        k, meta = rt_key(rt), new["metadata"]
        if (
            meta.get("deletionTimestamp")
            and not meta.get("finalizers")
            and not meta.get("deletionGracePeriodSeconds")
            and not self._blocked_namespace(k, new)
        ):
            return self.deleter.final_delete(rt, new, old)
        stored = self.store.commit(rt, "MODIFIED", new, old)
        if k == ("", "namespaces") and meta.get("deletionTimestamp"):
            self.deleter.maybe_finish_namespace(old["metadata"]["name"])
        return stored

    @staticmethod
    def _blocked_namespace(k: RTKey, obj: Obj) -> bool:
        return k == ("", "namespaces") and bool((obj.get("spec") or {}).get("finalizers"))


def _keep_system_fields(meta: dict[str, Any], ometa: dict[str, Any]) -> None:
    """The fields an update may not set come from the stored object (a different uid is left
    for ``validate_meta_update`` to report); resourceVersion too, once it was checked."""
    for f in (
        "name",
        "namespace",
        "uid",
        "creationTimestamp",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "generation",
    ):
        if f in ometa:
            if f == "uid" and meta.get("uid") and meta["uid"] != ometa["uid"]:
                continue  # reported by validate_meta_update
            meta[f] = ometa[f]
        else:
            meta.pop(f, None)
    meta["resourceVersion"] = ometa["resourceVersion"]


def _finalize_view(old: Obj, new: Obj) -> Obj:
    """A ``/finalize`` write: the stored object with only ``spec.finalizers`` taken."""
    return {
        **clone(old),
        "spec": {
            **(old.get("spec") or {}),
            "finalizers": (new.get("spec") or {}).get("finalizers") or [],
        },
    }


def _set_managed(meta: dict[str, Any], managed: list[dict[str, Any]]) -> None:
    if managed:
        meta["managedFields"] = managed
    else:
        meta.pop("managedFields", None)


def _ordered(obj: Obj) -> Obj:
    """metadata, spec, then the rest, status last (the order real servers emit)."""
    out: Obj = {"metadata": obj["metadata"]}
    if "spec" in obj:
        out["spec"] = obj["spec"]
    for k, v in obj.items():
        if k not in ("metadata", "spec", "status"):
            out[k] = v
    if "status" in obj:
        out["status"] = obj["status"]
    return out


def _same(a: Obj, b: Obj, *, managed_fields: bool = False) -> bool:
    """Equal ignoring managedFields, or only their timestamps (a no-op write is not stored)."""

    def meta(obj: Obj) -> dict[str, Any]:
        out = {k: v for k, v in obj["metadata"].items() if k != "managedFields"}
        if managed_fields:
            out["managedFields"] = [
                {k: v for k, v in m.items() if k != "time"}
                for m in obj["metadata"].get("managedFields") or []
            ]
        return out

    if meta(a) != meta(b):
        return False
    return {k: v for k, v in a.items() if k != "metadata"} == {
        k: v for k, v in b.items() if k != "metadata"
    }
