"""Kubernetes API errors as exception classes carrying their wire ``Status``.

Every failure the simulator reports is one of these; the HTTP layer (``server.py``) serialises
them in exactly one place (:meth:`ApiError.status`). The constructors reproduce the message
formats of ``k8s.io/apimachinery/pkg/api/errors`` (``apiserver-spec.md`` §11) because clients
and humans match on them: ``services "x" not found``, ``Operation cannot be fulfilled on …``,
``Service "x" is invalid: …``. :class:`KubeControlError` is what the typed control client
(``control_client``) raises when the ``/_lab`` control plane refuses a request.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from lab.kube.resources import RESOURCES, ResourceType


@dataclass(frozen=True)
class FieldError:
    """One validation failure (``field.Error``): its type, JSON path and detail."""

    type: str  # e.g. "FieldValueInvalid"
    field: str
    message: str  # the text without the field path, e.g. 'Invalid value: 30080: provided port …'

    def render(self) -> str:
        return f"{self.field}: {self.message}" if self.field else self.message


_GO_ESCAPES = {"\a": "\\a", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t"}
_GO_ESCAPES |= {"\v": "\\v", '"': '\\"', "\\": "\\\\"}


def go_quote(text: str) -> str:
    """Go's ``strconv.Quote`` (``%q``), as field errors render a string value: quotes and
    backslashes escaped, unprintable characters as ``\\n``, ``\\x00``, ``\\u0085``..."""
    out = []
    for ch in text:
        if ch in _GO_ESCAPES:
            out.append(_GO_ESCAPES[ch])
        elif ch.isprintable():
            out.append(ch)
        elif ord(ch) < 0x80:
            out.append(f"\\x{ord(ch):02x}")
        elif ord(ch) < 0x10000:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(f"\\U{ord(ch):08x}")
    return '"' + "".join(out) + '"'


def _value(v: object) -> str:
    if isinstance(v, str):
        return go_quote(v)
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, list):
        return "[]string{" + ", ".join(_value(x) for x in v) + "}"
    return str(v)


def invalid_value(field: str, value: object, detail: str) -> FieldError:
    return FieldError("FieldValueInvalid", field, f"Invalid value: {_value(value)}: {detail}")


def required(field: str, detail: str = "") -> FieldError:
    return FieldError(
        "FieldValueRequired", field, "Required value" + (f": {detail}" if detail else "")
    )


def forbidden(field: str, detail: str) -> FieldError:
    return FieldError("FieldValueForbidden", field, f"Forbidden: {detail}")


def duplicate(field: str, value: object) -> FieldError:
    return FieldError("FieldValueDuplicate", field, f"Duplicate value: {_value(value)}")


def not_supported(field: str, value: object, allowed: list[str]) -> FieldError:
    quoted = ", ".join(f'"{a}"' for a in allowed)
    return FieldError(
        "FieldValueNotSupported",
        field,
        f"Unsupported value: {_value(value)}: supported values: {quoted}",
    )


def too_many(field: str, actual: int, limit: int) -> FieldError:
    items = "item" if limit == 1 else "items"
    return FieldError(
        "FieldValueTooMany", field, f"Too many: {actual}: must have at most {limit} {items}"
    )


def too_long(field: str, limit: int) -> FieldError:
    return FieldError("FieldValueTooLong", field, f"Too long: must have at most {limit} bytes")


class ApiError(Exception):
    """A failed request, as the ``Status`` object the API server would return."""

    def __init__(
        self,
        code: int,
        reason: str,
        message: str,
        *,
        details: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.details = details
        self.headers = headers or {}

    def status(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
        }
        if self.reason:  # metav1.Status omits an empty (Unknown) reason
            body["reason"] = self.reason
        if self.details is not None:
            body["details"] = self.details
        body["code"] = self.code
        return body


def _qualified(rt: ResourceType) -> str:
    """``services`` or ``leases.coordination.k8s.io`` (the GroupResource string)."""
    return f"{rt.plural}.{rt.group}" if rt.group else rt.plural


def _details(rt: ResourceType, name: str, *, kind: str | None = None) -> dict[str, Any]:
    d: dict[str, Any] = {"name": name}
    if rt.group:
        d["group"] = rt.group
    d["kind"] = kind if kind is not None else rt.plural
    return d


def not_found(rt: ResourceType, name: str) -> ApiError:
    return ApiError(
        404, "NotFound", f'{_qualified(rt)} "{name}" not found', details=_details(rt, name)
    )


def namespace_not_found(name: str) -> ApiError:
    return ApiError(
        404,
        "NotFound",
        f'namespaces "{name}" not found',
        details={"name": name, "kind": "namespaces"},
    )


def unknown_path() -> ApiError:
    return ApiError(404, "NotFound", "the server could not find the requested resource", details={})


def already_exists(rt: ResourceType, name: str, *, deleting: bool = False) -> ApiError:
    prefix = "object is being deleted: " if deleting else ""
    return ApiError(
        409,
        "AlreadyExists",
        f'{prefix}{_qualified(rt)} "{name}" already exists',
        details=_details(rt, name),
    )


def conflict(rt: ResourceType, name: str, why: str, *, kind: str | None = None) -> ApiError:
    subject = kind if kind is not None else _qualified(rt)
    return ApiError(
        409,
        "Conflict",
        f'Operation cannot be fulfilled on {subject} "{name}": {why}',
        details=_details(rt, name, kind=kind),
    )


MODIFIED = (
    "the object has been modified; please apply your changes to the latest version and try again"
)


def stale(rt: ResourceType, name: str) -> ApiError:
    return conflict(rt, name, MODIFIED)


def invalid(rt: ResourceType, name: str, errors: list[FieldError]) -> ApiError:
    kind = f"{rt.kind}.{rt.group}" if rt.group else rt.kind
    rendered = [e.render() for e in errors]
    text = rendered[0] if len(rendered) == 1 else "[" + ", ".join(rendered) + "]"
    details: dict[str, Any] = {"name": name}
    if rt.group:
        details["group"] = rt.group
    details["kind"] = rt.kind
    details["causes"] = [{"reason": e.type, "message": e.message, "field": e.field} for e in errors]
    return ApiError(422, "Invalid", f'{kind} "{name}" is invalid: {text}', details=details)


def invalid_options(kind: str, errors: list[FieldError]) -> ApiError:
    """422 for bad list/watch/delete options (``details.kind`` is e.g. ``ListOptions``)."""
    rendered = [e.render() for e in errors]
    text = rendered[0] if len(rendered) == 1 else "[" + ", ".join(rendered) + "]"
    return ApiError(
        422,
        "Invalid",
        f'{kind}.meta.k8s.io "" is invalid: {text}',
        details={
            "group": "meta.k8s.io",
            "kind": kind,
            "causes": [{"reason": e.type, "message": e.message, "field": e.field} for e in errors],
        },
    )


def invalid_patch(patch: str, detail: str) -> ApiError:
    """A patch whose result does not decode into the kind's struct (handlers/patch.go):
    ``errors.NewInvalid(schema.GroupKind{}, "", field.Invalid("patch", ...))``."""
    err = invalid_value("patch", patch, detail)
    return ApiError(
        422,
        "Invalid",
        f' "" is invalid: {err.render()}',
        details={"causes": [{"reason": err.type, "message": err.message, "field": err.field}]},
    )


#: rest.EnsureObjectNamespaceMatchesRequestNamespace's refusal (create, update, patch)
NAMESPACE_MISMATCH = (
    "the namespace of the provided object does not match the namespace sent on the request"
)
#: where kube-apiserver's built-in kinds are registered (runtime.NewScheme's call site)
LEGACY_SCHEME = "k8s.io/kubernetes/pkg/api/legacyscheme/scheme.go:30"


def unconvertible_kind(rt: ResourceType, kind: str) -> str:
    """The decoder's error for a body of ``rt``'s resource that names another ``kind``: a kind
    registered in the same group version decodes, then cannot convert into ``rt``'s internal
    type; any other is not registered at all."""
    if any(r.api_version == rt.api_version and r.kind == kind for r in RESOURCES):
        internal = rt.group.split(".", 1)[0] if rt.group else "core"
        return f"converting ({rt.version}.{kind}) to ({internal}.{rt.kind}): unknown conversion"
    return (
        f'no kind "{kind}" is registered for version "{rt.api_version}" in scheme "{LEGACY_SCHEME}"'
    )


def bad_request(message: str) -> ApiError:
    return ApiError(400, "BadRequest", message)


def forbidden_error(rt: ResourceType, name: str, why: str) -> ApiError:
    return ApiError(
        403,
        "Forbidden",
        f'{_qualified(rt)} "{name}" is forbidden: {why}',
        details=_details(rt, name),
    )


def method_not_allowed(verb: str, rt: ResourceType) -> ApiError:
    return ApiError(
        405,
        "MethodNotAllowed",
        f'{verb} is not supported on resources of kind "{_qualified(rt)}"',
        details={"kind": rt.plural} | ({"group": rt.group} if rt.group else {}),
    )


def expired(message: str) -> ApiError:
    return ApiError(410, "Expired", message)


def gone_continue() -> ApiError:
    return ApiError(
        410,
        "Expired",
        "The provided continue parameter is too old to display a consistent list result. You can "
        "start a new list without the continue parameter, or use the continue token in this "
        "response to retrieve the remainder of the results. Continuing with the provided token "
        "results in an inconsistent list - objects that were created, modified, or deleted "
        "between the time the first chunk was returned and now may show up in the list.",
    )


def unsupported_media_type(accepted: list[str]) -> ApiError:
    return ApiError(
        415,
        "UnsupportedMediaType",
        "the body of the request was in an unknown format - accepted media types include: "
        + ", ".join(accepted),
    )


def internal(message: str) -> ApiError:
    return ApiError(
        500,
        "InternalError",
        f"Internal error occurred: {message}",
        details={"causes": [{"message": message}]},
    )


def timeout(message: str, *, retry_after: int = 1) -> ApiError:
    return ApiError(
        504, "Timeout", f"Timeout: {message}", details={"retryAfterSeconds": retry_after}
    )


def unauthorized(message: str = "Unauthorized") -> ApiError:
    """kube-apiserver's ``apierrors.NewUnauthorized("Unauthorized")`` (the authentication
    filter's answer); ``/_lab/`` says more in ``message``."""
    return ApiError(401, "Unauthorized", message)


class KubeControlError(RuntimeError):
    """The ``/_lab`` control plane refused a request (client side): its status and message."""

    def __init__(self, message: str, *, status: int) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
