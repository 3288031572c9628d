"""A schema-driven fuzz of the simulator through the OpenAPI documents it serves (schemathesis).

The documents of core/v1, apps/v1, discovery.k8s.io/v1 and coordination.k8s.io/v1 are read
from the running simulator, so what an OpenAPI tool (a client generator, schemathesis) sees is
what is fuzzed: every operation, with its path parameters (``{namespace}``, ``{name}``) and
query parameters generated from the documented schemas, plus a request body generated from the
kind's schema for writes (the served documents carry no ``requestBody``, on purpose: see
``lab/kube/openapi.py``). Bounded: a few examples per operation, loopback only. Every answer
must be below 500 (the simulator's documented 5xx answers are to malformed framing and to
invalid strategic-merge directives, which this generator does not send), the server must have
raised nothing, and ``/readyz`` must still answer.

``watch`` is removed from every generated query: a watch streams until its timeout, which is
not a fuzz's business (the watch paths have their own tests).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from schemathesis.core import NOT_SET

from lab.kube.server import KubeServer

GROUP_VERSIONS = (
    "api/v1",
    "apis/apps/v1",
    "apis/discovery.k8s.io/v1",
    "apis/coordination.k8s.io/v1",
)
WRITES = ("post", "put", "patch")
#: examples per operation: 145 operations, so about 550 requests in all
EXAMPLES = 3


@pytest.fixture(scope="module")
def fuzzed() -> Iterator[KubeServer]:
    with KubeServer() as sim:
        yield sim
        assert sim.take_internal_errors() == []


def _served(sim: KubeServer) -> dict[str, Any]:
    """The four documents as the simulator serves them, merged into one."""
    doc: dict[str, Any] = {"paths": {}, "components": {"schemas": {}}}
    with httpx.Client(base_url=sim.url) as http:
        index = http.get("/openapi/v3").json()["paths"]
        for key in GROUP_VERSIONS:
            part = http.get(index[key]["serverRelativeURL"]).json()
            doc["openapi"], doc["info"] = part["openapi"], part["info"]
            doc["paths"].update(part["paths"])
            doc["components"]["schemas"].update(part["components"]["schemas"])
    return doc


def _with_bodies(doc: dict[str, Any]) -> dict[str, Any]:
    """A request body for each write, from the kind its operation names (test side only)."""
    out = copy.deepcopy(doc)
    schemas = out["components"]["schemas"]
    by_gvk = {
        (g["group"], g["version"], g["kind"]): name
        for name, schema in schemas.items()
        for g in schema.get("x-kubernetes-group-version-kind", [])
    }
    for path, path_item in out["paths"].items():
        if path.rsplit("/", 1)[-1] in ("exec", "attach", "portforward"):
            continue  # connect operations take options, not a body
        for verb in WRITES:
            op = path_item.get(verb)
            if op is None:
                continue
            gvk = op["x-kubernetes-group-version-kind"]
            name = by_gvk.get((gvk["group"], gvk["version"], gvk["kind"]))
            if name is not None:
                ref = {"$ref": f"#/components/schemas/{name}"}
                op["requestBody"] = {"content": {"application/json": {"schema": ref}}}
    return out


def test_every_operation_has_its_path_parameters(fuzzed: KubeServer) -> None:
    """What OpenAPI tools refused before: a ``{namespace}``/``{name}`` path whose operations
    declare no such parameter (``Path parameters 'namespace', 'name' are not defined``)."""
    doc = _served(fuzzed)
    for path, path_item in doc["paths"].items():
        shared = path_item.get("parameters", [])
        for verb, op in path_item.items():
            if verb == "parameters":
                continue
            declared = {
                p["name"] for p in [*shared, *op.get("parameters", [])] if p["in"] == "path"
            }
            wanted = {seg[1:-1] for seg in path.split("/") if seg.startswith("{")}
            assert declared == wanted, (path, verb, declared)
            for p in [*shared, *op.get("parameters", [])]:
                assert p["schema"]["uniqueItems"] is True
                assert p.get("required") is (True if p["in"] == "path" else None)


def test_no_server_error_for_any_generated_request(fuzzed: KubeServer) -> None:
    """Each operation's own hypothesis run (schemathesis strategies, a few examples each)."""
    schema = schemathesis.openapi.from_dict(_with_bodies(_served(fuzzed)))
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) > 80
    with httpx.Client(base_url=fuzzed.url, timeout=30) as http:
        for operation in operations:
            _fuzz(operation, fuzzed, http)


def _fuzz(operation: Any, sim: KubeServer, http: httpx.Client) -> None:
    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=list(HealthCheck),
        phases=[Phase.explicit, Phase.generate],
    )
    @given(case=operation.as_strategy())
    def run(case: Any) -> None:
        query = {k: v for k, v in (case.query or {}).items() if k != "watch"}
        body = None if case.body is NOT_SET else case.body
        kind = "application/merge-patch+json" if case.method == "PATCH" else "application/json"
        response = http.request(
            case.method,
            case.formatted_path,
            params=query,
            content=None if body is None else json.dumps(body),
            headers={} if body is None else {"content-type": kind},
        )
        where = f"{case.method} {case.formatted_path} {query}"
        assert response.status_code < 500, (
            f"{where} -> {response.status_code} {response.text[:300]}"
        )
        assert sim.take_internal_errors() == [], where

    run()
    assert http.get("/readyz").status_code == 200, operation.label
