"""The four PATCH flavours: JSON patch, JSON merge patch, strategic merge patch and apply.

Pure functions over plain dicts (no store, no HTTP). Strategic merge needs to know, per list
field, whether it is atomic, a primitive set, or a list of maps merged by key; that is the
``LIST_STRATEGIES`` table below, taken from the ``patchStrategy``/``patchMergeKey`` markers of
``k8s.io/api`` (``apiserver-spec.md`` §6.6). Lists not in the table are atomic, as in Kubernetes.
Server-side apply merges with the apply list-map keys (ports key on ``port`` + ``protocol``);
field ownership among appliers (removal of dropped fields, conflicts, ``force``) is in
``ssa.py``.
"""

from __future__ import annotations

import json
from typing import Any

import jsonpatch

from lab.kube.exceptions import ApiError, bad_request
from lab.kube.objects import clone
from lab.kube.schema import json_kind

JSONPatch = "application/json-patch+json"
MERGE = "application/merge-patch+json"
STRATEGIC = "application/strategic-merge-patch+json"
APPLY = "application/apply-patch+yaml"
PATCH_TYPES = (JSONPatch, MERGE, STRATEGIC, APPLY)

# path (dots; "[]" marks "each element of the list") -> merge key, or "" for a primitive set
_POD_SPEC: dict[str, str] = {
    "containers": "name",
    "initContainers": "name",
    "ephemeralContainers": "name",
    "containers[].ports": "containerPort",
    "containers[].env": "name",
    "containers[].volumeMounts": "mountPath",
    "containers[].volumeDevices": "devicePath",
    "initContainers[].ports": "containerPort",
    "initContainers[].env": "name",
    "initContainers[].volumeMounts": "mountPath",
    "volumes": "name",
    "imagePullSecrets": "name",
    "hostAliases": "ip",
    "resourceClaims": "name",
}

_COMMON: dict[str, str] = {
    "metadata.finalizers": "",
    "metadata.ownerReferences": "uid",
}

LIST_STRATEGIES: dict[str, dict[str, str]] = {
    "Service": {
        "spec.ports": "port",
        "status.conditions": "type",
    },
    "Node": {
        "spec.podCIDRs": "",
        "status.conditions": "type",
        "status.addresses": "type",
        "status.images": "",  # atomic upstream; harmless as set for simulator purposes
    },
    "Pod": {
        **{f"spec.{k}": v for k, v in _POD_SPEC.items()},
        "status.conditions": "type",
        "status.podIPs": "ip",
        "status.hostIPs": "ip",
    },
    "Deployment": {
        **{f"spec.template.spec.{k}": v for k, v in _POD_SPEC.items()},
        "status.conditions": "type",
    },
    "Namespace": {"status.conditions": "type"},
    "ServiceAccount": {"secrets": "name"},
}

# server-side apply list-map keys where they differ from SMP merge keys
APPLY_KEYS: dict[str, dict[str, str]] = {
    "Service": {"spec.ports": "port,protocol"},
    "Node": {"spec.taints": "key,effect"},
}
_KEY_DEFAULTS = {"protocol": "TCP"}


def strategies_for(kind: str, *, apply: bool = False) -> dict[str, str]:
    out = {**_COMMON, **LIST_STRATEGIES.get(kind, {})}
    if apply:
        out.update(APPLY_KEYS.get(kind, {}))
    return out


#: what kube-apiserver answers for any failed operation of a JSON patch: apimachinery's
#: NewGenericServerResponse(422, ...) without the library's error text (``details`` empty)
REJECTED = "the server rejected our request due to an error in our request"


def _rejected() -> ApiError:
    return ApiError(422, "Invalid", REJECTED, details={})


def apply_json_patch(obj: dict[str, Any], body: Any) -> dict[str, Any]:
    if not isinstance(body, list):
        what = json_kind(body)
        raise bad_request(f"json: cannot unmarshal {what} into Go value of type jsonpatch.Patch")
    for op in body:  # DecodePatch: each operation is a JSON object (or null)
        if op is not None and not isinstance(op, dict):
            what = json_kind(op)
            raise bad_request(
                f"json: cannot unmarshal {what} into Go value of type jsonpatch.Operation"
            )
    if len(body) > 10000:
        raise ApiError(
            413,
            "RequestEntityTooLarge",
            "The request is too large: the allowed number of operations in a json patch is "
            f"10000, but found {len(body)}",
        )
    try:
        result = jsonpatch.apply_patch(obj, [op or {} for op in body], in_place=False)
    except (jsonpatch.JsonPatchException, jsonpatch.JsonPointerException, TypeError):
        # the library's text (Python reprs) stays here, as evanphx/json-patch's stays in Go
        raise _rejected() from None
    if not isinstance(result, dict):
        raise _rejected()
    return result


def merge_patch(original: Any, patch: Any) -> Any:
    """RFC 7386."""
    if not isinstance(patch, dict):
        return clone(patch)
    result = dict(original) if isinstance(original, dict) else {}
    for k, v in patch.items():
        if v is None:
            result.pop(k, None)
        else:
            result[k] = merge_patch(result.get(k), v)
    return result


class _Delete:
    pass


_DELETE = _Delete()


def strategic_merge(original: Any, patch: Any, strategies: dict[str, str]) -> Any:
    """Apply a strategic merge patch; the result shares no mutable state with the patch."""
    out = _smp_map(original, patch, strategies, "")
    return {} if isinstance(out, _Delete) else out


def _clean(value: Any) -> Any:
    """A patch fragment with directives and nulls removed (for newly added content)."""
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items() if not k.startswith("$") and v is not None}
    if isinstance(value, list):
        return [_clean(v) for v in value if not (isinstance(v, dict) and "$patch" in v)]
    return value


def _smp_map(original: Any, patch: Any, strat: dict[str, str], path: str) -> Any:
    if not isinstance(patch, dict):
        return clone(patch)
    directive = patch.get("$patch")
    if directive == "replace":
        return _clean(patch)
    if directive == "delete":
        return _DELETE
    if "$patch" in patch:
        # handleDirectiveInMergeMap: mergepatch.ErrBadPatchType, a plain error (500)
        raise SmpError(f"unknown patch type: {go_s(directive)} in map: {go_sprint(patch)}")
    _check_directive_formats(patch)
    result: dict[str, Any] = dict(original) if isinstance(original, dict) else {}
    retain = patch.get("$retainKeys")
    if isinstance(retain, list):
        result = {k: v for k, v in result.items() if k in retain}
    for k, v in patch.items():
        if k.startswith("$deleteFromPrimitiveList/"):
            field = k.split("/", 1)[1]
            current = result.get(field)
            if isinstance(current, list) and isinstance(v, list):
                result[field] = [x for x in current if x not in v]
    for k, v in patch.items():
        if k.startswith("$"):
            continue
        sub = f"{path}.{k}" if path else k
        if v is None:
            result.pop(k, None)
        elif isinstance(v, dict):
            merged = _smp_map(result.get(k), v, strat, sub)
            if isinstance(merged, _Delete):
                result.pop(k, None)
            else:
                result[k] = merged
        elif isinstance(v, list):
            if k not in result:  # not in the original: the patch's value, directives removed
                cleaned = _clean(v)
                if cleaned:
                    result[k] = cleaned
                continue  # an empty list decodes to Go's nil slice, which is omitted
            result[k] = _smp_list(result.get(k), v, strat, sub)
        else:
            result[k] = v
    for k, v in patch.items():
        if k.startswith("$setElementOrder/") and isinstance(v, list):
            field = k.split("/", 1)[1]
            current = result.get(field)
            if isinstance(current, list):
                key = strat.get(f"{path}.{field}" if path else field, "")
                result[field] = _reorder(current, v, key)
    return result


def _key_of(elem: Any, key: str) -> Any:
    if not isinstance(elem, dict):
        return elem
    if "," in key:
        return tuple(elem.get(f, _KEY_DEFAULTS.get(f)) for f in key.split(","))
    return elem.get(key)


def _smp_list(original: Any, patch: list[Any], strat: dict[str, str], path: str) -> list[Any]:
    if any(isinstance(e, dict) and e.get("$patch") == "replace" for e in patch):
        return [_clean(e) for e in patch if not (isinstance(e, dict) and "$patch" in e)]
    if path not in strat:
        return [_clean(e) for e in patch]  # atomic
    key = strat[path]
    current: list[Any] = list(original) if isinstance(original, list) else []
    _same_element_types(current, patch)
    if key == "":
        for item in patch:
            if item not in current:
                current.append(clone(item))
        return current
    for elem in patch:
        if not isinstance(elem, dict):
            continue
        k = _key_of(elem, key)
        if elem.get("$patch") == "delete":
            current = [c for c in current if _key_of(c, key) != k]
            continue
        for idx, c in enumerate(current):
            if _key_of(c, key) == k:
                merged = _smp_map(c, elem, strat, path + "[]")
                if isinstance(merged, _Delete):
                    current.pop(idx)
                else:
                    current[idx] = merged
                break
        else:
            current.append(_smp_map({}, elem, strat, path + "[]"))
    return current


# mergepatch's format errors, which kube-apiserver answers 400 (interpretStrategicMergePatchError)
_FORMAT_ERRORS = (
    ("$retainKeys", "invalid patch format of retainKeys"),
    ("$setElementOrder/", "invalid patch format of setElementOrder list"),
    ("$deleteFromPrimitiveList/", "invalid patch format of primitive list"),
)


def _check_directive_formats(patch: dict[str, Any]) -> None:
    """A ``$retainKeys``, ``$setElementOrder/...`` or ``$deleteFromPrimitiveList/...`` whose
    value is not a list: mergepatch's ``ErrBadPatchFormatFor...``, a 400."""
    for key, value in patch.items():
        if not key.startswith("$") or isinstance(value, list):
            continue
        for prefix, message in _FORMAT_ERRORS:
            if key == prefix or (prefix.endswith("/") and key.startswith(prefix)):
                raise ApiError(400, "BadRequest", message)


def go_s(value: Any) -> str:
    """``fmt.Sprintf("%s", v)`` of a decoded JSON value (``%!s(float64=5)`` for non-strings)."""
    if isinstance(value, str):
        return value
    if value is None:
        return "%!s(<nil>)"
    if isinstance(value, bool):
        return f"%!s(bool={'true' if value else 'false'})"
    if isinstance(value, (int, float)):
        return f"%!s(float64={go_sprint(value)})"
    return go_sprint(value)


class SmpError(Exception):
    """An error strategicpatch returns as a plain Go error (kube-apiserver: 500, no reason)."""


def go_sprint(value: Any) -> str:
    """``fmt.Sprint`` of decoded JSON (maps with sorted keys, as Go prints them)."""
    if isinstance(value, dict):
        return "map[" + " ".join(f"{k}:{go_sprint(value[k])}" for k in sorted(value)) + "]"
    if isinstance(value, list):
        return "[" + " ".join(go_sprint(v) for v in value) + "]"
    if value is None:
        return "<nil>"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _same_element_types(original: list[Any], patch: list[Any]) -> None:
    """strategicpatch's sliceElementType: every element of both lists of one JSON type."""
    kinds = {
        type(v) if not isinstance(v, (int, float)) or isinstance(v, bool) else float
        for v in (*original, *patch)
    }
    if len(kinds) > 1:
        raise SmpError(f"list element types are not identical: {go_sprint([original, patch])}")
    if kinds == {list}:
        raise ApiError(422, "", "lists of lists are not supported")


def _reorder(items: list[Any], order: list[Any], key: str) -> list[Any]:
    wanted = [_key_of(o, key) if key else o for o in order]
    rank = {json.dumps(w, sort_keys=True): i for i, w in enumerate(wanted)}

    def pos(pair: tuple[int, Any]) -> tuple[int, int]:
        idx, item = pair
        k = json.dumps(_key_of(item, key) if key else item, sort_keys=True)
        return (rank.get(k, len(rank)), idx)

    return [item for _, item in sorted(enumerate(items), key=pos)]


def apply_patch(
    original: dict[str, Any] | None, config: dict[str, Any], kind: str
) -> dict[str, Any]:
    """Server-side apply, simplified: merge the applied configuration into the live object."""
    strat = strategies_for(kind, apply=True)
    base: dict[str, Any] = original if original is not None else {}
    out = _smp_map(base, config, strat, "")
    return {} if isinstance(out, _Delete) else out
