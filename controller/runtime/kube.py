"""The Kubernetes access seam and its implementation on the official client.

Controllers talk to Kubernetes only through :class:`KubeClient`: a handful of calls that say
what the controllers do (list and watch a kind, add or remove the Service finalizer, patch a
Service's load-balancer status, replace a Node, patch Node addresses, delete a Node, write
Events and Leases). :class:`ApiKube` implements it with ``kubernetes.client.ApiClient`` (auth,
TLS and kubeconfig handling stay the official client's), sending the same request shapes as
upstream: strategic-merge patches on ``services/{name}/status`` carrying metadata and status,
a PUT for Node initialisation, a strategic-merge patch on ``nodes/{name}/status`` whose
address list ends in ``{"$patch": "replace"}``. ``controller.fake.FakeKube`` implements the
same protocol in memory for unit tests.

Errors: every non-2xx answer and every transport failure becomes one of the classes below,
chosen in one table from the ``Status`` reason/code; ``kubernetes``/``urllib3`` exceptions never
leave this module.
"""

from __future__ import annotations

import json
import logging
import socket
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Literal, Protocol

log = logging.getLogger(__name__)

Obj = dict[str, Any]
Kind = Literal["services", "nodes"]

KIND_PATHS: dict[str, str] = {"services": "/api/v1/services", "nodes": "/api/v1/nodes"}


class KubeError(Exception):
    """A Kubernetes API request failed; ``code``/``reason`` come from the ``Status``."""

    code = 0
    reason = ""

    def __init__(self, message: str, *, code: int | None = None, reason: str | None = None):
        super().__init__(message)
        if code is not None:
            self.code = code
        if reason is not None:
            self.reason = reason


class NotFound(KubeError):
    code, reason = 404, "NotFound"


class AlreadyExists(KubeError):
    code, reason = 409, "AlreadyExists"


class Conflict(KubeError):
    code, reason = 409, "Conflict"


class Expired(KubeError):
    """The resourceVersion is too old (410 Gone / ``Expired``): the informer must relist."""

    code, reason = 410, "Expired"


class Unavailable(KubeError):
    """No answer: connection refused or reset, timeout, stream cut."""

    code, reason = 0, "Unavailable"


_BY_REASON: dict[str, type[KubeError]] = {
    "NotFound": NotFound,
    "AlreadyExists": AlreadyExists,
    "Conflict": Conflict,
    "Expired": Expired,
    "Gone": Expired,
}
_BY_CODE: dict[int, type[KubeError]] = {404: NotFound, 410: Expired}


def error_from_status(code: int, body: Mapping[str, Any] | str | bytes | None) -> KubeError:
    """Build the error for an HTTP status (or a watch ERROR event's ``Status`` object)."""
    status: Mapping[str, Any] = {}
    if isinstance(body, bytes | str):
        try:
            parsed = json.loads(body)
            status = parsed if isinstance(parsed, dict) else {}
        except ValueError:
            status = {"message": body.decode() if isinstance(body, bytes) else body}
    elif body is not None:
        status = body
    reason = str(status.get("reason") or "")
    code = int(status.get("code") or code)
    message = str(status.get("message") or f"HTTP {code}")
    cls = _BY_REASON.get(reason) or _BY_CODE.get(code) or KubeError
    return cls(message, code=code, reason=reason or cls.reason)


@dataclass(frozen=True)
class WatchEvent:
    type: str  # ADDED | MODIFIED | DELETED | BOOKMARK
    object: Obj


class WatchStream(Protocol):
    def __iter__(self) -> Iterator[WatchEvent]: ...

    def close(self) -> None: ...


class KubeClient(Protocol):
    """What the controllers need from Kubernetes. Objects are JSON dicts."""

    def list_objects(self, kind: Kind) -> tuple[list[Obj], str]:
        """All objects of ``kind`` (all namespaces) and the list's resourceVersion."""
        ...

    def watch_objects(self, kind: Kind, resource_version: str, timeout: float) -> WatchStream:
        """Changes after ``resource_version``; raises :class:`Expired` when it is too old."""
        ...

    def add_service_finalizer(self, namespace: str, name: str, finalizer: str) -> Obj: ...

    def remove_service_finalizer(self, namespace: str, name: str, finalizer: str) -> Obj: ...

    def patch_service_load_balancer_status(
        self, namespace: str, name: str, load_balancer: Mapping[str, Any]
    ) -> Obj: ...

    def get_node(self, name: str) -> Obj: ...

    def replace_node(self, node: Obj) -> Obj:
        """PUT with the object's resourceVersion; :class:`Conflict` when it is stale."""
        ...

    def patch_node_addresses(self, name: str, addresses: list[dict[str, str]]) -> Obj: ...

    def delete_node(self, name: str) -> None: ...

    def create_event(self, namespace: str, event: Obj) -> Obj: ...

    def patch_event(self, namespace: str, name: str, patch: Obj) -> Obj: ...

    def get_lease(self, namespace: str, name: str) -> Obj: ...

    def create_lease(self, namespace: str, lease: Obj) -> Obj: ...

    def replace_lease(self, namespace: str, name: str, lease: Obj) -> Obj: ...


SMP = "application/strategic-merge-patch+json"
JSON = "application/json"


class ApiKube:
    """:class:`KubeClient` over ``kubernetes.client.ApiClient`` (raw JSON, no models)."""

    def __init__(self, api_client: Any, *, request_timeout: float = 30.0) -> None:
        self._api = api_client
        self._timeout = request_timeout

    @classmethod
    def from_kubeconfig(cls, path: str | None, *, context: str | None = None) -> ApiKube:
        """From a kubeconfig file, or in-cluster config when ``path`` is ``None``."""
        from kubernetes import client
        from kubernetes import config as kube_config

        config: Any = kube_config  # untyped module
        if path:
            cfg = client.Configuration()
            config.load_kube_config(config_file=path, context=context, client_configuration=cfg)
        else:
            config.load_incluster_config()
            cfg = client.Configuration.get_default_copy()
        return cls(client.ApiClient(cfg))

    def close(self) -> None:
        self._api.close()

    # -- transport ------------------------------------------------------------------------
    def _send(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, str] | None = None,
        body: Any = None,
        content_type: str = JSON,
        timeout: float | tuple[float, float] | None = None,
    ) -> Any:
        from kubernetes.client.exceptions import OpenApiException

        try:
            req = self._api.param_serialize(
                method=method,
                resource_path=path,
                query_params=list((query or {}).items()),
                header_params={"Accept": JSON, "Content-Type": content_type},
                body=body,
                auth_settings=["BearerToken"],
            )
            resp = self._api.call_api(*req, _request_timeout=timeout or self._timeout)
        except OpenApiException as exc:
            raise KubeError(f"{method} {path}: {exc}") from None
        except Exception as exc:  # urllib3/socket errors: no answer at all
            raise Unavailable(f"{method} {path}: {type(exc).__name__}: {exc}") from None
        return resp

    def _request(self, method: str, path: str, **kwargs: Any) -> Obj:
        resp = self._send(method, path, **kwargs)
        try:
            data = resp.read()
        except Exception as exc:
            raise Unavailable(f"{method} {path}: reading the answer: {exc}") from None
        if not 200 <= resp.status <= 299:
            raise error_from_status(resp.status, data)
        parsed = json.loads(data) if data else {}
        return parsed if isinstance(parsed, dict) else {"items": parsed}

    # -- list / watch ---------------------------------------------------------------------
    def list_objects(self, kind: Kind) -> tuple[list[Obj], str]:
        items: list[Obj] = []
        cont = ""
        while True:
            query = {"limit": "500"}
            if cont:
                query["continue"] = cont
            page = self._request("GET", KIND_PATHS[kind], query=query)
            items.extend(page.get("items") or [])
            meta = page.get("metadata") or {}
            cont = meta.get("continue") or ""
            if not cont:
                return items, str(meta.get("resourceVersion") or "")

    def watch_objects(self, kind: Kind, resource_version: str, timeout: float) -> WatchStream:
        query = {
            "watch": "true",
            "resourceVersion": resource_version,
            "allowWatchBookmarks": "true",
            "timeoutSeconds": str(max(1, int(timeout))),
        }
        # Read timeout a little beyond the server's own, so a silent dead stream ends too.
        resp = self._send(
            "GET", KIND_PATHS[kind], query=query, timeout=(10.0, float(timeout) + 15.0)
        )
        if not 200 <= resp.status <= 299:
            raise error_from_status(resp.status, resp.read())
        return _HttpWatch(resp.response, f"watch {kind}")

    # -- services -------------------------------------------------------------------------
    def _service_status(self, namespace: str, name: str, patch: Obj) -> Obj:
        path = f"/api/v1/namespaces/{namespace}/services/{name}/status"
        return self._request("PATCH", path, body=patch, content_type=SMP)

    def add_service_finalizer(self, namespace: str, name: str, finalizer: str) -> Obj:
        return self._service_status(namespace, name, {"metadata": {"finalizers": [finalizer]}})

    def remove_service_finalizer(self, namespace: str, name: str, finalizer: str) -> Obj:
        patch = {"metadata": {"$deleteFromPrimitiveList/finalizers": [finalizer]}}
        return self._service_status(namespace, name, patch)

    def patch_service_load_balancer_status(
        self, namespace: str, name: str, load_balancer: Mapping[str, Any]
    ) -> Obj:
        # ingress is atomic under SMP; an empty status must clear it explicitly.
        body = dict(load_balancer) if load_balancer else {"ingress": None}
        return self._service_status(namespace, name, {"status": {"loadBalancer": body}})

    # -- nodes ----------------------------------------------------------------------------
    def get_node(self, name: str) -> Obj:
        return self._request("GET", f"/api/v1/nodes/{name}")

    def replace_node(self, node: Obj) -> Obj:
        name = node["metadata"]["name"]
        return self._request("PUT", f"/api/v1/nodes/{name}", body=node)

    def patch_node_addresses(self, name: str, addresses: list[dict[str, str]]) -> Obj:
        patch = {"status": {"addresses": [*addresses, {"$patch": "replace"}]}}
        return self._request("PATCH", f"/api/v1/nodes/{name}/status", body=patch, content_type=SMP)

    def delete_node(self, name: str) -> None:
        self._request("DELETE", f"/api/v1/nodes/{name}")

    # -- events and leases ----------------------------------------------------------------
    def create_event(self, namespace: str, event: Obj) -> Obj:
        return self._request("POST", f"/api/v1/namespaces/{namespace}/events", body=event)

    def patch_event(self, namespace: str, name: str, patch: Obj) -> Obj:
        path = f"/api/v1/namespaces/{namespace}/events/{name}"
        return self._request("PATCH", path, body=patch, content_type=SMP)

    def _lease_path(self, namespace: str, name: str = "") -> str:
        base = f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases"
        return f"{base}/{name}" if name else base

    def get_lease(self, namespace: str, name: str) -> Obj:
        return self._request("GET", self._lease_path(namespace, name))

    def create_lease(self, namespace: str, lease: Obj) -> Obj:
        return self._request("POST", self._lease_path(namespace), body=lease)

    def replace_lease(self, namespace: str, name: str, lease: Obj) -> Obj:
        return self._request("PUT", self._lease_path(namespace, name), body=lease)


class _HttpWatch:
    """Newline-delimited JSON watch events from a streaming urllib3 response.

    ``close`` may come from another thread while the reader blocks in ``recv``: it shuts the
    socket down (which wakes the reader at once) instead of closing the response under the
    reader's feet; the reader releases the response itself when it ends.
    """

    def __init__(self, resp: Any, what: str) -> None:
        self._resp = resp
        self._what = what
        self._closed = False
        self._reading = False

    def close(self) -> None:
        self._closed = True
        if not self._reading:
            self._release()
            return
        sock = getattr(getattr(self._resp, "connection", None), "sock", None)
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                log.debug("shutting down %s", self._what, exc_info=True)

    def _release(self) -> None:
        try:
            self._resp.close()
            self._resp.release_conn()
        except Exception:  # closing a dead socket may fail in many ways; none matter
            log.debug("closing %s", self._what, exc_info=True)

    def __iter__(self) -> Iterator[WatchEvent]:
        buffer = b""
        self._reading = True
        try:
            if self._closed:
                return
            for chunk in self._resp.stream(amt=None, decode_content=False):
                buffer += chunk
                while b"\n" in buffer:
                    line, buffer = buffer.split(b"\n", 1)
                    if line.strip():
                        yield self._event(line)
            if buffer.strip():
                yield self._event(buffer)
        except KubeError:
            raise
        except Exception as exc:
            if self._closed:
                return
            raise Unavailable(f"{self._what}: stream broke: {type(exc).__name__}: {exc}") from None
        finally:
            self._reading = False
            self._release()

    def _event(self, line: bytes) -> WatchEvent:
        try:
            raw = json.loads(line)
        except ValueError:
            raise Unavailable(f"{self._what}: undecodable event {line[:200]!r}") from None
        etype = str(raw.get("type") or "")
        obj = raw.get("object") or {}
        if etype == "ERROR":
            raise error_from_status(int(obj.get("code") or 500), obj)
        return WatchEvent(etype, obj)
