"""URL grammar: turn a request path and method into a resource route and a Kubernetes verb.

``{prefix}[/namespaces/{ns}]/{resource}[/{name}[/{subresource}]]`` with ``{prefix}`` =
``/api/v1`` or ``/apis/{group}/{version}`` (``apiserver-spec.md`` §1.1). Discovery, OpenAPI,
``/version``, health and the ``/_lab`` control plane are recognised by ``handlers.py`` before
this module is asked. Resource types come from the table in ``resources.py``.
"""

from __future__ import annotations

from dataclasses import dataclass

from lab.kube import exceptions as E
from lab.kube.resources import RESOURCES, ResourceType

_BY_GV: dict[tuple[str, str], dict[str, ResourceType]] = {}
for _rt in RESOURCES:
    _BY_GV.setdefault((_rt.group, _rt.version), {})[_rt.plural] = _rt

SUBRESOURCE_VERBS = {
    "status": ("get", "patch", "update"),
    "finalize": ("update",),
    "binding": ("create",),
    "scale": ("get", "patch", "update"),
    "token": ("create",),
    "log": ("get",),
    "exec": ("create", "get"),
    "attach": ("create", "get"),
    "portforward": ("create", "get"),
}


@dataclass(frozen=True)
class Route:
    rt: ResourceType
    namespace: str | None  # None: cluster-scoped kind, or all namespaces
    name: str | None
    subresource: str


def parse(path: str) -> Route | None:
    """A resource route, or None when ``path`` is not under a resource prefix."""
    parts = [p for p in path.split("/") if p]
    if len(parts) >= 2 and parts[0] == "api":
        gv = ("", parts[1])
        rest = parts[2:]
    elif len(parts) >= 3 and parts[0] == "apis":
        gv = (parts[1], parts[2])
        rest = parts[3:]
    else:
        return None
    table = _BY_GV.get(gv)
    if table is None or not rest:
        return None
    namespace: str | None = None
    if (
        rest[0] == "namespaces"
        and len(rest) >= 3
        and rest[2] in table
        and table[rest[2]].namespaced
    ):
        namespace = rest[1]
        rest = rest[2:]
    rt = table.get(rest[0])
    if rt is None or len(rest) > 3:
        raise E.unknown_path()
    if namespace is not None and not rt.namespaced:
        raise E.unknown_path()
    name = rest[1] if len(rest) >= 2 else None
    sub = rest[2] if len(rest) == 3 else ""
    if sub and sub not in rt.subresources:
        raise E.unknown_path()
    return Route(rt, namespace, name, sub)


def verb_for(method: str, route: Route, *, watch: bool) -> str:
    if route.name is None:
        verbs = {
            "GET": "watch" if watch else "list",
            "POST": "create",
            "DELETE": "deletecollection",
        }
    else:
        verbs = {
            "GET": "watch" if watch else "get",
            "PUT": "update",
            "PATCH": "patch",
            "DELETE": "delete",
        }
        if route.subresource:
            verbs["POST"] = "create"  # e.g. pods/binding
    verb = verbs.get(method)
    if verb is None:
        raise E.ApiError(
            405,
            "MethodNotAllowed",
            "the server does not allow this method on the requested resource",
            details={},
        )
    allowed = SUBRESOURCE_VERBS.get(route.subresource, ()) if route.subresource else route.rt.verbs
    if verb not in allowed and not (verb == "watch" and route.name and "watch" in route.rt.verbs):
        raise E.method_not_allowed(verb, route.rt)
    return verb
