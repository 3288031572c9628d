"""Generic ObjectMeta validation shared by every kind (``apiserver-spec.md`` §6.2, §8.1).

Returns lists of :class:`FieldError`; the store turns them into one 422 ``Invalid`` Status.
Kind-specific validation lives in the strategies (``strategies.py``, ``services.py``).
"""

from __future__ import annotations

import re
from typing import Any

from lab.kube.exceptions import FieldError, forbidden, invalid_value, required, too_long
from lab.kube.selectors import key_problem, value_problem

DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?\Z")
DNS1035_LABEL = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?\Z")
DNS1123_SUBDOMAIN = re.compile(
    r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\Z"
)

LABEL_MSG = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and "
    "must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex "
    "used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
)
DNS1035_MSG = (
    "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an "
    "alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or "
    "'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')"
)
SUBDOMAIN_MSG = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or "
    "'.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used "
    "for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
)


def name_problems(name: str, rule: str) -> list[str]:
    """Problems with ``name`` under ``rule`` ("label", "dns1035", "subdomain" or
    "path-segment", apimachinery's ``IsValidPathSegmentName`` for RBAC and APIService names)."""
    out: list[str] = []
    if rule == "path-segment":
        if name in (".", ".."):
            out.append(f"may not be '{name}'")
        out.extend(f"may not contain '{c}'" for c in ("/", "%") if c in name)
    elif rule == "subdomain":
        if len(name) > 253:
            out.append("must be no more than 253 characters")
        if not DNS1123_SUBDOMAIN.match(name):
            out.append(SUBDOMAIN_MSG)
    else:
        if len(name) > 63:
            out.append("must be no more than 63 characters")
        pattern, msg = (
            (DNS1035_LABEL, DNS1035_MSG) if rule == "dns1035" else (DNS1123_LABEL, LABEL_MSG)
        )
        if not pattern.match(name):
            out.append(msg)
    return out


_PORT_NAME_CHARSET = re.compile(r"^[-a-z0-9]+\Z")
_PORT_NAME_LETTER = re.compile(r"[a-z]")


def port_name_problems(port: str) -> list[str]:
    """apimachinery's ``IsValidPortName``: an IANA_SVC_NAME (RFC 6335), the rule a named
    ``targetPort`` and a container port's name follow."""
    out: list[str] = []
    if len(port) > 15:
        out.append("must be no more than 15 characters")
    if not _PORT_NAME_CHARSET.match(port):
        out.append("must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)")
    if not _PORT_NAME_LETTER.search(port):
        out.append("must contain at least one letter (a-z)")
    if "--" in port:
        out.append("must not contain consecutive hyphens")
    if port[:1] == "-" or port[-1:] == "-":
        out.append("must not begin or end with a hyphen")
    return out


def validate_metadata(
    meta: dict[str, Any], *, name_rule: str, namespaced: bool
) -> list[FieldError]:
    errs: list[FieldError] = []
    name = meta.get("name") or ""
    if not name:
        errs.append(required("metadata.name", "name or generateName is required"))
    else:
        for p in name_problems(name, name_rule):
            errs.append(invalid_value("metadata.name", name, p))
    if namespaced and not meta.get("namespace"):
        errs.append(required("metadata.namespace"))
    errs.extend(validate_labels(meta.get("labels"), "metadata.labels"))
    errs.extend(_annotation_errors(meta.get("annotations") or {}))
    errs.extend(_finalizer_errors(meta.get("finalizers") or []))
    errs.extend(_owner_reference_errors(meta.get("ownerReferences") or []))
    return errs


def _annotation_errors(annotations: Any) -> list[FieldError]:
    """A map of qualified keys, 256 KiB at most in all."""
    if not isinstance(annotations, dict):
        return [invalid_value("metadata.annotations", str(annotations), "must be a map")]
    errs: list[FieldError] = []
    total = 0
    for k, v in annotations.items():
        problem = key_problem(k)
        if problem:
            errs.append(invalid_value("metadata.annotations", k, problem))
        total += len(k) + len(str(v))
    if total > 256 * 1024:
        errs.append(too_long("metadata.annotations", 256 * 1024))
    return errs


def _finalizer_errors(finalizers: Any) -> list[FieldError]:
    """Qualified names, and not both orphan and foregroundDeletion."""
    errs: list[FieldError] = []
    for i, f in enumerate(finalizers):
        if not isinstance(f, str) or key_problem(f):
            errs.append(
                invalid_value(
                    f"metadata.finalizers[{i}]",
                    f,
                    "name is neither a standard finalizer name nor is it fully qualified",
                )
            )
    if "orphan" in finalizers and "foregroundDeletion" in finalizers:
        errs.append(
            invalid_value(
                "metadata.finalizers",
                finalizers,
                "finalizer orphan and foregroundDeletion cannot be both set",
            )
        )
    return errs


def _owner_reference_errors(refs: Any) -> list[FieldError]:
    """Every reference complete, at most one of them the controller."""
    errs: list[FieldError] = []
    controllers = 0
    for i, ref in enumerate(refs):
        for f in ("apiVersion", "kind", "name", "uid"):
            if not ref.get(f):
                errs.append(
                    invalid_value(
                        f"metadata.ownerReferences[{i}].{f}", "", f"{f} must not be empty"
                    )
                )
        if ref.get("controller"):
            controllers += 1
    if controllers > 1:
        errs.append(
            invalid_value(
                "metadata.ownerReferences", "", "Only one reference can have Controller set to true"
            )
        )
    return errs


def validate_labels(labels: Any, field: str) -> list[FieldError]:
    errs: list[FieldError] = []
    if labels is None:
        return errs
    if not isinstance(labels, dict):
        return [invalid_value(field, str(labels), "must be a map of strings")]
    for k, v in labels.items():
        problem = key_problem(k)
        if problem:
            errs.append(invalid_value(field, k, problem))
        if not isinstance(v, str):
            errs.append(invalid_value(f"{field}", str(v), "must be a string"))
            continue
        problem = value_problem(v)
        if problem:
            errs.append(invalid_value(field, v, problem))
    return errs


def validate_meta_update(new: dict[str, Any], old: dict[str, Any]) -> list[FieldError]:
    """Rules of ``ValidateObjectMetaUpdate`` the simulator enforces."""
    errs: list[FieldError] = []
    nm, om = new.get("metadata", {}), old.get("metadata", {})
    if nm.get("uid") != om.get("uid"):
        errs.append(invalid_value("metadata.uid", nm.get("uid") or "", "field is immutable"))
    old_fin = set(om.get("finalizers") or [])
    added = [f for f in nm.get("finalizers") or [] if f not in old_fin]
    if om.get("deletionTimestamp") and added:
        quoted = ", ".join(f'"{f}"' for f in added)
        errs.append(
            forbidden(
                "metadata.finalizers",
                "no new finalizers can be added if the object is being deleted, found new "
                f"finalizers []string{{{quoted}}}",
            )
        )
    return errs
