"""Protocol details a client can see: ``/version/``, trailing newlines, health check listings,
and error texts free of Python internals (a bounded sweep of wrong-typed fields per kind).

Sources: ``k8s.io/apiserver`` ``responsewriters.WriteRawJSON`` (``/version``: indented, no
newline), the JSON serializer (``json.Encoder``: every document ends with a newline) and
``server/healthz`` (``[+]<check> ok`` ... ``<name> check passed``).
"""

from __future__ import annotations

import http.client
import json
from typing import Any

import pytest

from lab.kube.resources import RESOURCES
from lab.kube.schema import definition_name, definitions
from lab.kube.server import KubeServer
from lab.versions.release import DEFAULT_K8S_VERSION


def get(sim: KubeServer, path: str, **headers: str) -> tuple[int, dict[str, str], bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", sim.port, timeout=10)
    try:
        conn.request("GET", path, headers=headers)
        resp = conn.getresponse()
        return resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read()
    finally:
        conn.close()


def test_version_with_trailing_slash_answers_like_version(sim: KubeServer) -> None:
    plain = get(sim, "/version")
    slashed = get(sim, "/version/")
    assert plain[0] == slashed[0] == 200
    assert plain[2] == slashed[2]
    assert plain[2].startswith(b'{\n  "major": "1",')  # MarshalIndent, as WriteRawJSON writes
    assert not plain[2].endswith(b"\n")
    assert json.loads(plain[2])["gitVersion"].startswith("v1.")


@pytest.mark.parametrize(
    "path",
    [
        "/api/v1/namespaces/default",
        "/api/v1/namespaces",
        "/api/v1/namespaces/default/configmaps/missing",
        "/api",
        "/apis",
        "/api/v1",
    ],
)
def test_json_bodies_end_with_a_newline(sim: KubeServer, path: str) -> None:
    status, headers, body = get(sim, path, Accept="application/json")
    assert headers["content-type"].startswith("application/json")
    assert body.endswith(b"}\n"), (status, body[-40:])
    assert body.count(b"\n") == 1


def test_table_responses_end_with_a_newline(sim: KubeServer) -> None:
    _, _, body = get(
        sim, "/api/v1/namespaces", Accept="application/json;as=Table;v=v1;g=meta.k8s.io"
    )
    assert json.loads(body)["kind"] == "Table"
    assert body.endswith(b"}\n")


def test_readyz_verbose_lists_checks(sim: KubeServer) -> None:
    status, headers, body = get(sim, "/readyz?verbose")
    text = body.decode()
    assert status == 200
    assert headers["content-type"] == "text/plain; charset=utf-8"
    lines = text.splitlines()
    assert lines[0] == "[+]ping ok"
    assert "[+]etcd ok" in lines
    assert "[+]shutdown ok" in lines
    assert all(line.startswith("[+]") and line.endswith(" ok") for line in lines[:-1])
    assert lines[-1] == "readyz check passed"
    assert text.endswith("\n")


def test_livez_verbose_has_no_readiness_only_checks(sim: KubeServer) -> None:
    status, _, body = get(sim, "/livez?verbose")
    lines = body.decode().splitlines()
    assert status == 200
    assert lines[-1] == "livez check passed"
    assert "[+]ping ok" in lines
    assert "[+]shutdown ok" not in lines


def test_health_without_verbose_is_plain_ok_and_checks_are_addressable(sim: KubeServer) -> None:
    assert get(sim, "/readyz")[2] == b"ok"
    assert get(sim, "/healthz")[2] == b"ok"
    assert get(sim, "/readyz/ping")[2] == b"ok"
    assert get(sim, "/livez/etcd")[2] == b"ok"
    assert get(sim, "/readyz/no-such-check")[0] == 404


def test_exclude_marks_checks_and_warns_about_unknown_names(sim: KubeServer) -> None:
    _, _, body = get(sim, "/readyz?verbose&exclude=etcd&exclude=nope")
    text = body.decode()
    assert "[+]etcd excluded: ok\n" in text
    assert 'warn: some health checks cannot be excluded: no matches for "nope"\n' in text


def test_readyz_fails_once_the_server_is_stopping() -> None:
    with KubeServer() as kube:
        kube.api.stopping.set()
        try:
            status, _, body = get(kube, "/readyz")
        finally:
            kube.api.stopping.clear()
        assert status == 500
        assert body.decode().endswith("[-]shutdown failed: reason withheld\nreadyz check failed\n")
        assert get(kube, "/livez")[0] == 200


WRONG: tuple[Any, ...] = (5, "x", [1], {"a": 1}, True)
LEAKS = ("<class", "Traceback", "object has no attribute", "NoneType", "'dict'", "'list'")


def _probe_fields(rt_name: str) -> list[tuple[str, ...]]:
    defs = definitions(DEFAULT_K8S_VERSION)
    rt = next(r for r in RESOURCES if f"{r.group}/{r.plural}" == rt_name)
    top = defs[definition_name(rt)]["properties"]
    paths: list[tuple[str, ...]] = []
    for name, schema in top.items():
        if name in ("apiVersion", "kind"):
            continue
        paths.append((name,))
        ref = schema.get("$ref", "").rsplit("/", 1)[-1]
        for sub in defs.get(ref, {}).get("properties") or {}:
            if (name, sub) != ("metadata", "name"):
                paths.append((name, sub))
    return paths


@pytest.mark.parametrize("rt_name", sorted({f"{r.group}/{r.plural}" for r in RESOURCES}))
def test_wrong_types_never_crash_or_leak_python_internals(sim: KubeServer, rt_name: str) -> None:
    rt = next(r for r in RESOURCES if f"{r.group}/{r.plural}" == rt_name)
    if "create" not in rt.verbs:
        pytest.skip(f"{rt.plural} cannot be created")
    base = rt.path_prefix() + ("/namespaces/default/" if rt.namespaced else "/") + rt.plural
    conn = http.client.HTTPConnection("127.0.0.1", sim.port, timeout=10)
    seen = 0
    try:
        for i, path in enumerate(_probe_fields(rt_name)):
            for value in WRONG:
                body: dict[str, Any] = {"metadata": {"name": f"probe-{i}"}}
                holder = body
                for part in path[:-1]:
                    holder = holder.setdefault(part, {})
                holder[path[-1]] = value
                conn.request(
                    "POST",
                    base,
                    body=json.dumps(body),
                    headers={"Content-Type": "application/json"},
                )
                resp = conn.getresponse()
                payload = resp.read()
                seen += 1
                assert resp.status < 500, (path, value, payload[:300])
                if resp.status >= 400:
                    message = json.loads(payload)["message"]
                    assert not any(leak in message for leak in LEAKS), (path, value, message)
                else:
                    conn.request("DELETE", f"{base}/probe-{i}")
                    conn.getresponse().read()
    finally:
        conn.close()
    assert seen > 0


@pytest.mark.parametrize(
    ("rt_name", "path"),
    [
        ("/services", "/api/v1/namespaces/default/services/kubernetes"),
        ("/namespaces", "/api/v1/namespaces/default"),
    ],
)
@pytest.mark.parametrize(
    "ctype", ["application/merge-patch+json", "application/strategic-merge-patch+json"]
)
def test_wrong_typed_patches_never_crash_or_change_anything(
    sim: KubeServer, rt_name: str, path: str, ctype: str
) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", sim.port, timeout=10)
    try:
        conn.request("GET", path)
        before = json.loads(conn.getresponse().read())
        for fields in _probe_fields(rt_name):
            if fields[0] == "metadata":
                continue  # name/namespace/resourceVersion changes are their own errors
            for value in WRONG:
                body: dict[str, Any] = {}
                holder = body
                for part in fields[:-1]:
                    holder = holder.setdefault(part, {})
                holder[fields[-1]] = value
                conn.request("PATCH", path, body=json.dumps(body), headers={"Content-Type": ctype})
                resp = conn.getresponse()
                payload = resp.read()
                # strategic merge's mixed-element-type error is upstream's own 500
                upstream_500 = b"list element types are not identical" in payload
                assert resp.status < 500 or upstream_500, (fields, value, payload[:300])
                if resp.status >= 400:
                    message = json.loads(payload)["message"]
                    assert not any(leak in message for leak in LEAKS), (fields, value, message)
                    continue
                conn.request("GET", path)  # accepted (a valid type): put the object back
                now = json.loads(conn.getresponse().read())
                before["metadata"]["resourceVersion"] = now["metadata"]["resourceVersion"]
                conn.request(
                    "PUT",
                    path,
                    body=json.dumps(before),
                    headers={"Content-Type": "application/json"},
                )
                conn.getresponse().read()
    finally:
        conn.close()
