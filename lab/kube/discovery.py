"""API discovery documents for the Kubernetes API simulator.

Role: answer ``/api``, ``/api/v1``, ``/apis``, ``/apis/<group>`` and ``/apis/<group>/<version>``
the way a v1.32 kube-apiserver does (``shared/docs/apiserver-spec.md`` §1.3, §1.4):

* legacy documents (``APIVersions``, ``APIGroupList``, ``APIGroup``, ``APIResourceList``),
  which the Python ``DynamicClient`` and any client that only says ``application/json`` read;
* aggregated discovery (``apidiscovery.k8s.io/v2`` ``APIGroupDiscoveryList``) on ``/api`` and
  ``/apis`` when the ``Accept`` header asks for it. kubectl asks for it first and, when the reply's
  ``Content-Type`` carries ``g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList``, makes no
  per-group-version requests at all.

Neighbours: everything is derived from ``resources.RESOURCES`` (the single source of truth for
kinds, verbs, short names and subresources); the HTTP router calls :func:`handle_discovery` before
resource routing and writes the returned status, content type and JSON body.

Design: pure functions of (path, Accept, server address) with no state, so the router stays a
thin dispatcher and the documents can be unit-tested without a socket. Content negotiation
follows the server: the first media range in ``Accept`` that we can produce wins (``q``
parameters are honoured; kubectl never sends them).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from lab.kube.resources import SUBRESOURCE_KINDS, ResourceType, groups, in_group_version

JSON: Final = "application/json"
DISCOVERY_GROUP: Final = "apidiscovery.k8s.io"
AGGREGATED_KIND: Final = "APIGroupDiscoveryList"
# Versions of aggregated discovery we can serve, newest first.
AGGREGATED_VERSIONS: Final = ("v2", "v2beta1")

JSONDict = dict[str, Any]


@dataclass(frozen=True)
class MediaRange:
    """One element of an ``Accept`` header: ``type/subtype;k=v;...`` with its ``q`` weight."""

    mime: str
    params: tuple[tuple[str, str], ...]
    q: float

    def param(self, name: str) -> str | None:
        for key, value in self.params:
            if key == name:
                return value
        return None


def parse_accept(accept: str) -> list[MediaRange]:
    """Split an ``Accept`` header into media ranges, best first (stable for equal ``q``).

    An empty header means ``*/*``. Malformed ``q`` values count as 1, as lenient servers do.
    """
    ranges: list[MediaRange] = []
    for raw in (accept or "*/*").split(","):
        parts = [p.strip() for p in raw.split(";")]
        mime = parts[0].lower()
        if not mime:
            continue
        params: list[tuple[str, str]] = []
        q = 1.0
        for part in parts[1:]:
            key, _, value = part.partition("=")
            key = key.strip().lower()
            value = value.strip().strip('"')
            if key == "q":
                try:
                    q = float(value)
                except ValueError:
                    q = 1.0
            elif key:
                params.append((key, value))
        ranges.append(MediaRange(mime, tuple(params), q))
    # sorted() is stable, so equal weights keep the client's order.
    return sorted((r for r in ranges if r.q > 0), key=lambda r: -r.q)


def _json_like(mime: str) -> bool:
    return mime in (JSON, "application/*", "*/*")


def negotiate_aggregated(accept: str) -> str | None:
    """The aggregated-discovery version to serve for this ``Accept``, or ``None`` for legacy.

    The first range we can satisfy decides: ``application/json;g=apidiscovery.k8s.io;v=v2;
    as=APIGroupDiscoveryList`` selects aggregated v2, a plain ``application/json`` (or ``*/*``)
    selects the legacy document. Protobuf ranges are skipped: we only speak JSON.
    """
    for media in parse_accept(accept):
        if not _json_like(media.mime):
            continue  # protobuf and anything else we cannot produce
        if media.param("as") is None:
            return None  # plain JSON: the legacy document
        if (
            media.mime == JSON
            and media.param("g") == DISCOVERY_GROUP
            and media.param("as") == AGGREGATED_KIND
            and media.param("v") in AGGREGATED_VERSIONS
        ):
            return media.param("v")
        # Another "as=" (an unknown discovery version, a Table, ...): not for us, keep looking.
    return None


def aggregated_content_type(version: str) -> str:
    """The exact ``Content-Type`` client-go checks before reading an aggregated body."""
    return f"{JSON};g={DISCOVERY_GROUP};v={version};as={AGGREGATED_KIND}"


# --------------------------------------------------------------------------------------------
# Legacy documents


def _group_version_entry(group: str, version: str) -> JSONDict:
    return {"groupVersion": f"{group}/{version}", "version": version}


def api_group(group: str) -> JSONDict:
    versions = groups()[group]
    entries = [_group_version_entry(group, v) for v in versions]
    return {
        "kind": "APIGroup",
        "apiVersion": "v1",
        "name": group,
        "versions": entries,
        "preferredVersion": entries[0],
    }


def api_group_list() -> JSONDict:
    body = [api_group(g) for g in groups() if g]
    for entry in body:
        del entry["kind"], entry["apiVersion"]
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": body}


def api_versions(server_address: str) -> JSONDict:
    return {
        "kind": "APIVersions",
        "versions": list(groups().get("", [])),
        "serverAddressByClientCIDRs": [
            {"clientCIDR": "0.0.0.0/0", "serverAddress": server_address},
        ],
    }


def _legacy_resource(rt: ResourceType) -> JSONDict:
    entry: JSONDict = {
        "name": rt.plural,
        "singularName": rt.singular,
        "namespaced": rt.namespaced,
        "kind": rt.kind,
        "verbs": list(rt.verbs),
    }
    if rt.short_names:
        entry["shortNames"] = list(rt.short_names)
    if rt.categories:
        entry["categories"] = list(rt.categories)
    return entry


# Verbs of the subresources a v1.32 server has for the kinds we serve; status-like by default.
SUBRESOURCE_VERBS: Final[dict[str, tuple[str, ...]]] = {
    "status": ("get", "patch", "update"),
    "scale": ("get", "patch", "update"),
    "finalize": ("update",),
    "binding": ("create",),
    "token": ("create",),
    "log": ("get",),
    "exec": ("create", "get"),
    "attach": ("create", "get"),
    "portforward": ("create", "get"),
}


def _subresource_verbs(subresource: str) -> list[str]:
    return list(SUBRESOURCE_VERBS.get(subresource, ("get", "patch", "update")))


def _legacy_sub_gv(subresource: str) -> JSONDict:
    """``group``/``version`` of a subresource whose kind lives elsewhere (``scale``: autoscaling
    v1 Scale), as ``APIResource`` carries them; omitted when they are the parent's."""
    other = SUBRESOURCE_KINDS.get(subresource)
    if other is None or not other[0]:
        return {}
    group, version, _ = other
    return {"group": group, "version": version}


def _sub_kind(rt: ResourceType, subresource: str) -> JSONDict:
    group, version, kind = SUBRESOURCE_KINDS.get(subresource, (rt.group, rt.version, rt.kind))
    return {"group": group, "version": version, "kind": kind}


def api_resource_list(group: str, version: str) -> JSONDict:
    resources: list[JSONDict] = []
    for rt in in_group_version(group, version):
        resources.append(_legacy_resource(rt))
        for sub in rt.subresources:
            resources.append(
                {
                    "name": f"{rt.plural}/{sub}",
                    "singularName": "",
                    "namespaced": rt.namespaced,
                    "kind": SUBRESOURCE_KINDS.get(sub, ("", "", rt.kind))[2],
                    "verbs": _subresource_verbs(sub),
                    **_legacy_sub_gv(sub),
                }
            )
    gv = f"{group}/{version}" if group else version
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": gv,
        "resources": resources,
    }


# --------------------------------------------------------------------------------------------
# Aggregated documents (apidiscovery.k8s.io/v2)


def _aggregated_resource(rt: ResourceType) -> JSONDict:
    kind = {"group": rt.group, "version": rt.version, "kind": rt.kind}
    entry: JSONDict = {
        "resource": rt.plural,
        "responseKind": kind,
        "scope": "Namespaced" if rt.namespaced else "Cluster",
        "singularResource": rt.singular,
        "verbs": list(rt.verbs),
    }
    if rt.short_names:
        entry["shortNames"] = list(rt.short_names)
    if rt.categories:
        entry["categories"] = list(rt.categories)
    if rt.subresources:
        entry["subresources"] = [
            {
                "subresource": sub,
                "responseKind": _sub_kind(rt, sub),
                "verbs": _subresource_verbs(sub),
            }
            for sub in rt.subresources
        ]
    return entry


def _aggregated_group(group: str) -> JSONDict:
    return {
        "metadata": {"name": group, "creationTimestamp": None},
        "versions": [
            {
                "version": version,
                "resources": [_aggregated_resource(rt) for rt in in_group_version(group, version)],
                "freshness": "Current",
            }
            for version in groups()[group]
        ],
    }


def aggregated_list(*, legacy: bool, version: str = "v2") -> JSONDict:
    """``/api`` (``legacy=True``: the core group only) or ``/apis`` (every named group)."""
    names = [""] if legacy else [g for g in groups() if g]
    return {
        "kind": AGGREGATED_KIND,
        "apiVersion": f"{DISCOVERY_GROUP}/{version}",
        "metadata": {},
        "items": [_aggregated_group(g) for g in names if g in groups()],
    }


# --------------------------------------------------------------------------------------------
# Entry point for the router


def _not_found() -> JSONDict:
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": "the server could not find the requested resource",
        "reason": "NotFound",
        "details": {},
        "code": 404,
    }


def handle_discovery(path: str, accept: str, server_address: str) -> tuple[int, str, object] | None:
    """Serve a discovery path; ``None`` when ``path`` is not one (resource paths, /version, ...).

    ``server_address`` is ``host:port`` as clients reach this server; it goes into
    ``/api``'s ``serverAddressByClientCIDRs``. Unknown groups and versions under the discovery
    grammar get a ``404 NotFound`` Status, as on a real server.
    """
    path = path.split("?", 1)[0]
    if len(path) > 1:
        path = path.rstrip("/")
    parts = path.split("/")[1:]  # "/apis/g/v" -> ["apis", "g", "v"]
    if not parts or parts[0] not in ("api", "apis"):
        return None
    served = groups()
    if parts[0] == "api":
        if len(parts) == 1:
            agg = negotiate_aggregated(accept)
            if agg is not None:
                return 200, aggregated_content_type(agg), aggregated_list(legacy=True, version=agg)
            return 200, JSON, api_versions(server_address)
        if len(parts) == 2:
            if parts[1] in served.get("", []):
                return 200, JSON, api_resource_list("", parts[1])
            return 404, JSON, _not_found()
        return None
    # /apis...
    if len(parts) == 1:
        agg = negotiate_aggregated(accept)
        if agg is not None:
            return 200, aggregated_content_type(agg), aggregated_list(legacy=False, version=agg)
        return 200, JSON, api_group_list()
    group = parts[1]
    if len(parts) == 2:
        if group and group in served:
            return 200, JSON, api_group(group)
        return 404, JSON, _not_found()
    if len(parts) == 3:
        if group and parts[2] in served.get(group, []):
            return 200, JSON, api_resource_list(group, parts[2])
        return 404, JSON, _not_found()
    return None
