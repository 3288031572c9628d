"""The one way the lab makes a Kubernetes client, and the typed errors its clients raise.

Role: everything in the lab that talks to a cluster (the simulator's own ready-made client, the
cluster providers, the kubelet stand-in, ``invoke lab.*``) gets its ``ApiClient`` here, so TLS,
tokens and contexts are read the same way everywhere. Its failures are typed: a refused call
raises a :class:`KubeError` subclass (:class:`NotFound`, :class:`Conflict`,
:class:`AlreadyExists`, :class:`Invalid`, ...), so callers write ``except Conflict:`` instead of
testing status codes. :data:`ERRORS` is the one table from a ``Status`` code and reason to a
class; :func:`error_from` is the one translation point from what the server answered, used by
:func:`translate` (the official client's ``ApiException``), :func:`typed_api` (a generated API
object whose calls raise typed errors) and ``lab.dataplane.api`` (which speaks HTTP itself).

Design: the class follows the HTTP status (``except Conflict`` means "the server answered 409",
as ``status == 409`` did before), and the ``Status`` reason only picks a subclass of that
code's class: :class:`AlreadyExists` is a :class:`Conflict`, :class:`Expired` a :class:`Gone`.
The errors do not derive from the client's ``ApiException`` (kopf's ``clients/errors.py`` keeps
its transport's exceptions inside the client layer the same way); the original is chained as
``__cause__``. A bottom-layer module: it imports nothing of the lab.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar, cast

import yaml

if TYPE_CHECKING:
    from kubernetes.client.exceptions import ApiException

T = TypeVar("T")


def new_api_client(kubeconfig: Path | str, *, context: str | None = None) -> Any:
    """A new ``kubernetes.client.ApiClient`` for ``kubeconfig``; the caller closes it."""
    from kubernetes import config

    return config.new_client_from_config(  # type: ignore[no-untyped-call]
        config_file=str(kubeconfig), context=context
    )


def kubeconfig_server(kubeconfig: Path | str, *, context: str | None = None) -> str | None:
    """The API server URL ``kubeconfig`` points at (its current or the given context)."""
    try:
        doc: Any = yaml.safe_load(Path(kubeconfig).read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError):
        return None
    if not isinstance(doc, dict):
        return None
    wanted = context or doc.get("current-context")
    ctx = next((c for c in doc.get("contexts") or [] if c.get("name") == wanted), None)
    cluster_name = (ctx or {}).get("context", {}).get("cluster")
    for cluster in doc.get("clusters") or []:
        if cluster.get("name") == cluster_name:
            server = (cluster.get("cluster") or {}).get("server")
            return str(server) if server else None
    return None


# --- typed errors ----------------------------------------------------------------------------


class KubeError(Exception):
    """The API server refused a call: its HTTP ``status``, ``Status`` ``reason`` and message."""

    #: The HTTP status this class stands for (0: any, for the base class).
    code: ClassVar[int] = 0
    #: The ``Status`` reason this class stands for ("": any reason of its code).
    status_reason: ClassVar[str] = ""

    def __init__(self, status: int, reason: str, message: str, body: Mapping[str, Any]) -> None:
        super().__init__(f"{status} {reason}: {message}" if message else f"{status} {reason}")
        self.status = status
        self.reason = reason
        self.message = message
        #: The ``Status`` object the server sent ({} when the body was not one).
        self.body = body


class BadRequest(KubeError):
    code, status_reason = 400, "BadRequest"


class Unauthorized(KubeError):
    code, status_reason = 401, "Unauthorized"


class Forbidden(KubeError):
    code, status_reason = 403, "Forbidden"


class NotFound(KubeError):
    code, status_reason = 404, "NotFound"


class MethodNotAllowed(KubeError):
    code, status_reason = 405, "MethodNotAllowed"


class NotAcceptable(KubeError):
    code, status_reason = 406, "NotAcceptable"


class Conflict(KubeError):
    """409: a write lost to another (``Conflict``), or a create found the name taken."""

    code, status_reason = 409, "Conflict"


class AlreadyExists(Conflict):
    status_reason = "AlreadyExists"


class Gone(KubeError):
    """410: a watch or list from a resourceVersion the server no longer has."""

    code, status_reason = 410, "Gone"


class Expired(Gone):
    status_reason = "Expired"


class RequestEntityTooLarge(KubeError):
    code, status_reason = 413, "RequestEntityTooLarge"


class UnsupportedMediaType(KubeError):
    code, status_reason = 415, "UnsupportedMediaType"


class Invalid(KubeError):
    code, status_reason = 422, "Invalid"


class TooManyRequests(KubeError):
    code, status_reason = 429, "TooManyRequests"


class InternalError(KubeError):
    code, status_reason = 500, "InternalError"


class ServerTimeout(InternalError):
    status_reason = "ServerTimeout"


class ServiceUnavailable(KubeError):
    code, status_reason = 503, "ServiceUnavailable"


class Timeout(KubeError):
    """504: the server gave up waiting (also a watch from a resourceVersion it has not seen)."""

    code, status_reason = 504, "Timeout"


#: The one table: every typed error, keyed by its ``code`` and ``status_reason``.
ERRORS: tuple[type[KubeError], ...] = (
    BadRequest,
    Unauthorized,
    Forbidden,
    NotFound,
    MethodNotAllowed,
    NotAcceptable,
    Conflict,
    AlreadyExists,
    Gone,
    Expired,
    RequestEntityTooLarge,
    UnsupportedMediaType,
    Invalid,
    TooManyRequests,
    InternalError,
    ServerTimeout,
    ServiceUnavailable,
    Timeout,
)
_BY_CODE = {e.code: e for e in ERRORS if e.__base__ is KubeError}
_BY_REASON = {e.status_reason: e for e in ERRORS}


def error_from(status: int, reason: str | None, body: bytes | str | None) -> KubeError:
    """The typed error for an answer of ``status`` (``reason``: the HTTP reason phrase) whose
    body is ``body``: the class of the code, narrowed by the ``Status`` reason when that names
    a subclass of it; :class:`KubeError` itself for a code the table does not know."""
    text = body.decode(errors="replace") if isinstance(body, bytes) else body or ""
    try:
        parsed: Any = json.loads(text) if text else {}
    except ValueError:
        parsed = {}
    document: Mapping[str, Any] = parsed if isinstance(parsed, dict) else {}
    status_reason = str(document.get("reason") or "")
    cls = _BY_CODE.get(status, KubeError)
    narrower = _BY_REASON.get(status_reason)
    if narrower is not None and issubclass(narrower, cls):
        cls = narrower
    message = str(document.get("message") or text.strip())
    return cls(status, status_reason or str(reason or ""), message, document)


def translate(error: ApiException) -> KubeError:
    """The typed error for the official client's ``ApiException``."""
    return error_from(int(error.status or 0), error.reason, error.body)


def typed_api(api: T) -> T:
    """``api`` (a generated ``kubernetes.client`` API object such as ``CoreV1Api(...)``) with
    every method call raising the typed error instead of ``ApiException``."""
    return cast(T, _TypedApi(api))


class _TypedApi:
    def __init__(self, api: object) -> None:
        self._api = api

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._api, name)
        if not callable(attr):
            return attr
        return _translating(attr)


def _translating(call: Callable[..., Any]) -> Callable[..., Any]:
    # imported here: the front door reads errors without paying for the client's imports
    from kubernetes.client.exceptions import ApiException

    @functools.wraps(call)
    def translated(*args: Any, **kwargs: Any) -> Any:
        try:
            return call(*args, **kwargs)
        except ApiException as err:
            raise translate(err) from err

    return translated


# --- wire calls ------------------------------------------------------------------------------

#: the ``Accept`` list every generated ``kubernetes.client`` call offers the server
GENERATED_ACCEPT = (
    "application/json",
    "application/yaml",
    "application/vnd.kubernetes.protobuf",
    "application/cbor",
)


class WireApi:
    """The requests a generated API method (``CoreV1Api.create_node``, ...) with
    ``_preload_content=False`` sends, built by the same ``ApiClient`` (``param_serialize``: the
    same headers, token, TLS and path quoting; a client model body serialized the same way),
    without importing the generated API classes: their pydantic-checked signatures cost about
    0.7 s of CPU to import (``CoreV1Api`` and ``CoordinationV1Api``). Answers are the wire JSON
    object ({} for an empty body); a refused call raises the typed error (:func:`translate`)."""

    def __init__(self, api_client: Any) -> None:
        self.api_client = api_client

    def call(
        self,
        method: str,
        path: str,
        body: object = None,
        *,
        content_type: str | None = None,
        **path_params: str,
    ) -> dict[str, Any]:
        """``method`` on ``path`` (``{name}`` placeholders filled from ``path_params``)."""
        from kubernetes.client.exceptions import ApiException

        client = self.api_client
        headers = {"Accept": client.select_header_accept(list(GENERATED_ACCEPT))}
        if content_type is not None:
            headers["Content-Type"] = content_type
        request = client.param_serialize(
            method=method,
            resource_path=path,
            path_params=path_params,
            query_params=[],
            header_params=headers,
            body=body,
            post_params=[],
            files={},
            auth_settings=["BearerToken"],
            collection_formats={},
        )
        try:
            response = client._call_with_legacy_options(request, {}, None, False, None, True)
        except ApiException as err:
            raise translate(err) from err
        data = response.data
        parsed = json.loads(data) if data else {}
        if not isinstance(parsed, dict):
            raise TypeError(f"expected a JSON object from the API server, got {type(parsed)}")
        return parsed
