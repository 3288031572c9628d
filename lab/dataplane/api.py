"""Wire-JSON calls to the Kubernetes API for the data-plane stand-ins.

Role: every stand-in in ``lab.dataplane`` reads and writes through this one thin layer over the
official client's ``ApiClient`` (its configuration: host, TLS, bearer token), sending and
receiving the JSON the server speaks (camelCase, RFC 3339) instead of the client's models. The
models would cost a conversion per object, and the stand-ins handle thousands of pods.
Failures raise the lab's typed errors (``lab.kubeclient.NotFound``, ``Conflict``, ...: the
stand-ins write ``except NotFound:``), carrying the server's ``Status`` body. Neighbours:
``informers`` (list+watch over :meth:`Api.stream`) and the controllers, which build paths with
:func:`path`.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator, Sequence
from typing import Any, NamedTuple

import urllib3
from kubernetes import client

from lab.kube.objects import Obj
from lab.kubeclient import error_from

JSON = "application/json"
MERGE_PATCH = "application/merge-patch+json"
SMP = "application/strategic-merge-patch+json"


class Resource(NamedTuple):
    """A resource type's coordinates in the API."""

    group: str
    version: str
    plural: str
    namespaced: bool
    kind: str

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version


PODS = Resource("", "v1", "pods", True, "Pod")
NODES = Resource("", "v1", "nodes", False, "Node")
SERVICES = Resource("", "v1", "services", True, "Service")
ENDPOINTS = Resource("", "v1", "endpoints", True, "Endpoints")
EVENTS = Resource("", "v1", "events", True, "Event")
LEASES = Resource("coordination.k8s.io", "v1", "leases", True, "Lease")
ENDPOINT_SLICES = Resource("discovery.k8s.io", "v1", "endpointslices", True, "EndpointSlice")
DEPLOYMENTS = Resource("apps", "v1", "deployments", True, "Deployment")
REPLICA_SETS = Resource("apps", "v1", "replicasets", True, "ReplicaSet")


def path(rt: Resource, namespace: str | None = None, name: str | None = None, sub: str = "") -> str:
    """``/api/v1/namespaces/ns/pods/name/status`` and the like (all namespaces: no ns)."""
    base = f"/apis/{rt.group}/{rt.version}" if rt.group else f"/api/{rt.version}"
    if rt.namespaced and namespace:
        base += f"/namespaces/{namespace}"
    base += f"/{rt.plural}"
    if name:
        base += f"/{name}"
        if sub:
            base += f"/{sub}"
    return base


def new_api_client(base: Any, *, pool_size: int = 48) -> Any:
    """A new ``ApiClient`` with ``base``'s configuration and a pool large enough for one
    long-lived watch per informer plus the controllers' writes (the caller closes it)."""
    config = copy.copy(base.configuration)
    config.connection_pool_maxsize = pool_size
    return client.ApiClient(configuration=config)


class Api:
    """Raw JSON requests through an ``ApiClient`` (thread-safe, as urllib3's pool is)."""

    def __init__(self, api_client: Any, *, user_agent: str = "ccm-lab-dataplane") -> None:
        self.client = api_client
        self.user_agent = user_agent
        #: where ``lab.dataplane.events.record`` queues events (None: written inline)
        self.event_sink: object | None = None

    def _send(
        self,
        method: str,
        url_path: str,
        *,
        query: Sequence[tuple[str, str]] = (),
        body: object = None,
        content_type: str | None = None,
        timeout: float | tuple[float, float] = 30.0,
    ) -> urllib3.BaseHTTPResponse:
        headers = {"Accept": JSON, "User-Agent": self.user_agent}
        if content_type:
            headers["Content-Type"] = content_type
        # URL and auth headers from the client's configuration; the body is encoded here and
        # sent through the client's own pool: the client's sanitize-then-dumps walk of a
        # 1,000-address Endpoints object costs more than the request itself
        m, url, hdrs, _, _ = self.client.param_serialize(
            method=method,
            resource_path=url_path,
            query_params=list(query) or None,
            header_params=headers,
            body=None,
            auth_settings=["BearerToken"],
        )
        payload = json.dumps(body, separators=(",", ":")).encode() if body is not None else None
        if isinstance(timeout, tuple):
            limit = urllib3.Timeout(connect=timeout[0], read=timeout[1])
        else:
            limit = urllib3.Timeout(total=timeout)
        raw: urllib3.BaseHTTPResponse = self.client.rest_client.pool_manager.request(
            m, url, body=payload, headers=hdrs, timeout=limit, preload_content=False
        )
        return raw

    def request(
        self,
        method: str,
        url_path: str,
        *,
        query: Sequence[tuple[str, str]] = (),
        body: object = None,
        content_type: str | None = None,
        timeout: float = 30.0,
    ) -> Obj:
        """One request; the JSON object answered, or the typed error for a non-2xx status."""
        raw = self._send(
            method, url_path, query=query, body=body, content_type=content_type, timeout=timeout
        )
        data = raw.data
        if not 200 <= raw.status < 300:
            raise error_from(raw.status, raw.reason, data)
        parsed = json.loads(data) if data else {}
        if not isinstance(parsed, dict):
            raise TypeError(f"{method} {url_path}: expected a JSON object")
        return parsed

    def get(self, url_path: str, *, query: Sequence[tuple[str, str]] = ()) -> Obj:
        return self.request("GET", url_path, query=query)

    def create(self, url_path: str, body: Obj) -> Obj:
        return self.request("POST", url_path, body=body, content_type=JSON)

    def replace(self, url_path: str, body: Obj) -> Obj:
        return self.request("PUT", url_path, body=body, content_type=JSON)

    def patch(self, url_path: str, body: Obj, *, content_type: str = MERGE_PATCH) -> Obj:
        return self.request("PATCH", url_path, body=body, content_type=content_type)

    def delete(self, url_path: str, options: Obj | None = None) -> Obj:
        body = {"kind": "DeleteOptions", "apiVersion": "v1", **(options or {})}
        return self.request("DELETE", url_path, body=body, content_type=JSON)

    def stream(
        self, url_path: str, *, query: Sequence[tuple[str, str]] = (), read_timeout: float = 300.0
    ) -> urllib3.BaseHTTPResponse:
        """Open a long-lived GET (a watch); the caller reads it with :func:`json_lines` and
        closes it (``shutdown()`` from another thread ends a blocked read)."""
        raw = self._send("GET", url_path, query=query, timeout=(10.0, read_timeout))
        if not 200 <= raw.status < 300:
            data = raw.read()
            raw.release_conn()
            raise error_from(raw.status, raw.reason, data)
        return raw


def json_lines(raw: urllib3.BaseHTTPResponse) -> Iterator[Obj]:
    """The JSON objects of a newline-delimited stream, as they arrive."""
    buffer = b""
    for chunk in raw.stream(65536, decode_content=True):
        buffer += chunk
        while b"\n" in buffer:
            line, buffer = buffer.split(b"\n", 1)
            if line.strip():
                yield json.loads(line)
    if buffer.strip():
        yield json.loads(buffer)


def meta(obj: Obj) -> Obj:
    m: Obj = obj.get("metadata") or {}
    return m


def key_of(obj: Obj) -> tuple[str, str]:
    """(namespace, name) of an object ("" namespace for cluster-scoped kinds)."""
    m = meta(obj)
    return (str(m.get("namespace") or ""), str(m.get("name") or ""))
