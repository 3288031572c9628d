"""The parameters of the OpenAPI documents' operations, as kube-apiserver documents them.

Role: ``openapi.py`` builds the paths; this module says which parameters each operation takes,
read off upstream's published documents (``api/openapi-spec/v3/*.json``, written by
kube-openapi from the request scopes): the path parameters (``namespace``, ``name``: ``in:
path``, ``required``), ``pretty`` on every path, the list options on a list (``watch``,
``labelSelector``, ``limit``, ...), ``dryRun`` / ``fieldManager`` / ``fieldValidation`` on
writes (and ``force`` on a patch), the delete options on a delete and the connect options of
``log``, ``exec``, ``attach`` and ``portforward``. Every parameter's schema carries
``uniqueItems: true``, as upstream's (a kube-openapi artefact). As kube-openapi does,
parameters every operation of a path shares are written once on the path item, sorted by
name; the rest stay on their operation, in upstream's order. No ``components.parameters``:
upstream's v3 documents write every parameter inline. Descriptions are shortened.
"""

from __future__ import annotations

from typing import Any

JSONDict = dict[str, Any]
#: (name, schema type, description) of a query parameter
Query = tuple[str, str, str]

PRETTY: Query = ("pretty", "string", "If 'true', then the output is pretty printed.")
LIST: tuple[Query, ...] = (
    ("labelSelector", "string", "A selector to restrict the list by labels."),
    ("fieldSelector", "string", "A selector to restrict the list by fields."),
    ("watch", "boolean", "Watch for changes to the described resources."),
    ("allowWatchBookmarks", "boolean", "Ask for watch events of type BOOKMARK."),
    ("resourceVersion", "string", "Which resource versions the request may be served from."),
    ("resourceVersionMatch", "string", "How resourceVersion applies to a list."),
    ("sendInitialEvents", "boolean", "Start a watch with the current state as events."),
    ("timeoutSeconds", "integer", "Timeout for the list/watch call."),
    ("limit", "integer", "The maximum number of items to return."),
    ("continue", "string", "The continue token of a previous, limited list."),
)
DRY_RUN: Query = ("dryRun", "string", "When present, do not persist the change (All).")
FIELD_MANAGER: Query = ("fieldManager", "string", "Name of the actor making the change.")
FIELD_VALIDATION: Query = (
    "fieldValidation",
    "string",
    "How to treat unknown or duplicate fields: Ignore, Warn or Strict.",
)
WRITE: tuple[Query, ...] = (DRY_RUN, FIELD_MANAGER, FIELD_VALIDATION)
PATCH: tuple[Query, ...] = (
    DRY_RUN,
    ("force", "boolean", "Force a server-side apply over conflicts."),
    FIELD_MANAGER,
    FIELD_VALIDATION,
)
DELETE: tuple[Query, ...] = (
    ("gracePeriodSeconds", "integer", "Seconds before the object is deleted."),
    ("orphanDependents", "boolean", "Deprecated: use propagationPolicy."),
    ("propagationPolicy", "string", "Orphan, Background or Foreground."),
    DRY_RUN,
)
_STREAMS: tuple[Query, ...] = (
    ("container", "string", "The container to attach to."),
    ("stderr", "boolean", "Redirect the standard error stream."),
    ("stdin", "boolean", "Redirect the standard input stream."),
    ("stdout", "boolean", "Redirect the standard output stream."),
    ("tty", "boolean", "Allocate a terminal."),
)
CONNECT: dict[str, tuple[Query, ...]] = {
    "log": (
        ("container", "string", "The container whose log to read."),
        ("follow", "boolean", "Follow the log stream."),
        ("insecureSkipTLSVerifyBackend", "boolean", "Skip verifying the kubelet's certificate."),
        ("limitBytes", "integer", "Bytes to read from the server before stopping."),
        ("previous", "boolean", "The log of the previous, terminated container."),
        ("sinceSeconds", "integer", "Only lines newer than this many seconds."),
        ("tailLines", "integer", "Lines from the end of the log to show."),
        ("timestamps", "boolean", "Prefix every line with an RFC 3339 timestamp."),
    ),
    "exec": (("command", "string", "The command to run."), *_STREAMS),
    "attach": _STREAMS,
    "portforward": (("ports", "integer", "Pod ports to forward."),),
}


def parameter(
    name: str, where: str, kind: str, description: str, *, v2: bool, required: bool = False
) -> JSONDict:
    """One parameter in the document's shape (v2: type on the parameter; v3: a schema)."""
    param: JSONDict = {"description": description, "in": where, "name": name}
    if required:
        param["required"] = True
    if v2:
        param.update(type=kind, uniqueItems=True)
    else:
        param["schema"] = {"type": kind, "uniqueItems": True}
    return param


def _queries(queries: tuple[Query, ...], *, v2: bool) -> list[JSONDict]:
    return [parameter(n, "query", k, d, v2=v2) for n, k, d in queries]


def path_parameters(*, namespaced: bool, item_kind: str | None, v2: bool) -> list[JSONDict]:
    """``name`` (on an item's path), ``namespace`` (namespaced kinds) and ``pretty``."""
    params = []
    if item_kind is not None:
        params.append(
            parameter("name", "path", "string", f"name of the {item_kind}", v2=v2, required=True)
        )
    if namespaced:
        scope = "object name and auth scope, such as for teams and projects"
        params.append(parameter("namespace", "path", "string", scope, v2=v2, required=True))
    return [*params, *_queries((PRETTY,), v2=v2)]


def operation_parameters(action: str, subresource: str = "", *, v2: bool) -> list[JSONDict]:
    """The query parameters of one operation (``x-kubernetes-action``)."""
    if subresource in CONNECT:
        return _queries(CONNECT[subresource], v2=v2)
    table: dict[str, tuple[Query, ...]] = {
        "list": LIST,
        "post": WRITE,
        "put": WRITE,
        "patch": PATCH,
        "delete": DELETE,
    }
    return _queries(table.get(action, ()), v2=v2)


def hoist(path_item: JSONDict, shared: list[JSONDict]) -> JSONDict:
    """Give each operation ``shared`` plus its own parameters, then write the ones every
    operation has once on the path item (sorted by name) and leave the rest on their
    operation, as kube-openapi does."""
    operations = {verb: op for verb, op in path_item.items() if verb != "parameters"}
    full = {verb: [*shared, *op.get("parameters", [])] for verb, op in operations.items()}
    keys = [{(p["name"], p["in"]) for p in params} for params in full.values()]
    common = set.intersection(*keys) if keys else set()
    out: JSONDict = {}
    for verb, op in operations.items():
        own = [p for p in full[verb] if (p["name"], p["in"]) not in common]
        rest = {k: v for k, v in op.items() if k != "parameters"}
        out[verb] = {**rest, "parameters": own} if own else rest
    hoisted = {(p["name"], p["in"]): p for params in full.values() for p in params}
    out["parameters"] = [hoisted[key] for key in sorted(common)]
    return out
