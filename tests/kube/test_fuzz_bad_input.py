"""Bounded fuzzing of every served kind with malformed input, over HTTP on 127.0.0.1.

The kinds come from the simulator's own resource table (``lab.kube.resources.RESOURCES``, the
table discovery is built from; ``test_fuzzed_kinds_are_the_discovered_ones`` checks the two
agree), so a new kind is fuzzed without touching this file. For every request the fuzzer makes:

* the answer is a 4xx with a ``Status`` body naming the failure; the only 5xx allowed are the
  plain Go errors kube-apiserver itself passes through as 500 without a reason (strategic
  merge's element-type and bad-``$patch`` errors, the field manager's typed-patch error; see
  ``lab/kube/README.md``), never the simulator's ``InternalError``;
* nothing is stored: the store's revision is unchanged, so no object was written;
* the simulator is still healthy: ``/readyz`` answers 200 and no handler raised
  (``take_internal_errors``).

HTTP framing is a few fixed cases at the end (what Go's net/http answers, and closes).
"""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lab.kube.discovery import handle_discovery
from lab.kube.resources import RESOURCES, ResourceType
from lab.kube.schema import definition_name, definitions
from lab.kube.server import KubeServer

FUZZ = settings(
    max_examples=3,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
STORED = [rt for rt in RESOURCES if "get" in rt.verbs]
PATCH_TYPES = (
    "application/json-patch+json",
    "application/merge-patch+json",
    "application/strategic-merge-patch+json",
    "application/apply-patch+yaml",
)
# the plain Go errors kube-apiserver answers as 500 without a reason (README, "Bad input")
UPSTREAM_PLAIN_500 = (
    "list element types are not identical",
    "failed to create typed patch object",
    "unknown patch type",
)


def ids(rt: ResourceType) -> str:
    return f"{rt.plural}.{rt.group}" if rt.group else rt.plural


# ---------------------------------------------------------------- HTTP


def exchange(sim: KubeServer, data: bytes) -> tuple[int, dict[str, str], bytes]:
    """Raw bytes in, (status, headers, body) out; the connection is closed by us."""
    with socket.create_connection(("127.0.0.1", sim.port), timeout=30) as s:
        s.sendall(data)
        buf = b""
        while b"\r\n\r\n" not in buf:
            chunk = s.recv(65536)
            assert chunk, f"connection dropped without an answer: {data[:200]!r}"
            buf += chunk
        head, _, body = buf.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        headers = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        if "content-length" not in headers:  # net/http's plain refusals: read to the close
            while chunk := s.recv(65536):
                body += chunk
            return int(lines[0].split(" ", 2)[1]), headers, body
        length = int(headers["content-length"])
        while len(body) < length:
            chunk = s.recv(65536)
            assert chunk, "connection dropped inside the answer"
            body += chunk
        return int(lines[0].split(" ", 2)[1]), headers, body


def call(
    sim: KubeServer,
    method: str,
    path: str,
    body: bytes | str = b"",
    ctype: str = "application/json",
) -> tuple[int, dict[str, Any]]:
    data = body.encode() if isinstance(body, str) else body
    head = (
        f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: {ctype}\r\n"
        f"Connection: close\r\nContent-Length: {len(data)}\r\n\r\n"
    ).encode()
    status, _, payload = exchange(sim, head + data)
    return status, json.loads(payload)


def collection(rt: ResourceType) -> str:
    ns = "/namespaces/default" if rt.namespaced else ""
    return f"{rt.path_prefix()}{ns}/{rt.plural}"


def refused(sim: KubeServer, status: int, st_: dict[str, Any], what: str) -> None:
    """The answer is a refusal in a Status, the store is untouched, the server healthy."""
    assert st_.get("kind") == "Status", (what, status, st_)
    assert st_.get("status") == "Failure", (what, st_)
    assert st_.get("code") == status, (what, st_)
    assert st_.get("message"), (what, st_)
    if status >= 500:
        assert status == 500, (what, st_)
        assert "reason" not in st_, (what, st_)
        assert st_["message"].startswith(UPSTREAM_PLAIN_500), (what, st_)
    else:
        assert 400 <= status < 500, (what, status, st_)
    assert sim.take_internal_errors() == [], what


_TARGETS: dict[str, str] = {}


@pytest.fixture
def fuzz_sim(sim: KubeServer) -> Iterator[KubeServer]:
    _TARGETS.clear()  # the simulator was reset
    yield sim
    status, _, body = exchange(sim, b"GET /readyz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    assert (status, body) == (200, b"ok")


# ---------------------------------------------------------------- generators

JSON_SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.text(max_size=20)
)
NOT_AN_OBJECT = st.one_of(JSON_SCALARS, st.lists(JSON_SCALARS, max_size=3))
BROKEN_TEXT = st.sampled_from(
    ['{"metadata":', "{", "[", '{"a":1,}', "{'a': 1}", "\x00", "nul", '{"a":1}}', "\ufeff{"]
).flatmap(lambda base: st.text(max_size=8).map(lambda tail: base + tail.replace("}", "")))


def _wrong(kind: str) -> st.SearchStrategy[Any]:
    """A JSON value that is not of the schema type ``kind``."""
    choices: dict[str, st.SearchStrategy[Any]] = {
        # (not []: strategic merge drops an empty list the object lacks, see README)
        "string": st.one_of(
            st.integers(), st.booleans(), st.lists(st.integers(), min_size=1, max_size=2)
        ),
        "integer": st.one_of(st.text(max_size=5), st.booleans(), st.just({"a": 1})),
        "number": st.one_of(st.text(max_size=5), st.booleans(), st.just([1])),
        "boolean": st.one_of(st.text(max_size=5), st.integers(), st.just({})),
        "array": st.one_of(st.text(max_size=5), st.integers(), st.just({"a": "b"})),
        "object": st.one_of(st.text(max_size=5), st.integers(), st.just([1, 2])),
    }
    return choices[kind]


def typed_fields(rt: ResourceType, depth: int = 3) -> list[tuple[tuple[str, ...], str]]:
    """(path, JSON type) of the kind's typed fields, from the version's OpenAPI schemas."""
    defs = definitions("1.33")
    out: list[tuple[tuple[str, ...], str]] = []

    def walk(schema: dict[str, Any], path: tuple[str, ...], left: int) -> None:
        ref = schema.get("$ref") or (schema.get("allOf") or [{}])[0].get("$ref")
        if isinstance(ref, str):
            schema = defs.get(ref.rsplit("/", 1)[-1], {})
        t = schema.get("type")
        if isinstance(t, list):
            t = next((x for x in t if x != "null"), None)
        if (
            path
            and t in ("string", "integer", "number", "boolean", "array", "object")
            and schema.get("format") not in ("int-or-string", "quantity")
        ):
            out.append((path, t))
        if left and isinstance(schema.get("properties"), dict):
            for name, sub in schema["properties"].items():
                if name not in ("apiVersion", "kind"):
                    walk(sub, (*path, name), left - 1)

    walk(defs[definition_name(rt)], (), depth)
    return out


def nest(path: tuple[str, ...], value: Any) -> dict[str, Any]:
    out: Any = value
    for key in reversed(path):
        out = {key: out}
    assert isinstance(out, dict)
    return out


def wrong_typed(rt: ResourceType) -> st.SearchStrategy[dict[str, Any]]:
    fields = typed_fields(rt)
    return st.sampled_from(fields).flatmap(lambda f: _wrong(f[1]).map(lambda v: nest(f[0], v)))


def merged(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merged(out[key], value)
        else:
            out[key] = value
    return out


def deep(depth: int) -> str:
    return '{"a":' * depth + "1" + "}" * depth


def bad_object(rt: ResourceType) -> st.SearchStrategy[tuple[str, bytes, str]]:
    """(what, body, content type) of an object body no server accepts for ``rt``."""
    base = {"apiVersion": rt.api_version, "kind": rt.kind, "metadata": {"name": "fuzzed"}}
    typed = wrong_typed(rt).map(
        lambda w: ("wrong type", json.dumps(merged(base, w)).encode(), "application/json")
    )
    gvk = (
        st.tuples(st.sampled_from(["apiVersion", "kind"]), st.text(max_size=12))
        .filter(lambda p: p[1] != base[p[0]] and p[1] != "")
        .map(
            lambda p: (
                "wrong " + p[0],
                json.dumps({**base, p[0]: p[1]}).encode(),
                "application/json",
            )
        )
    )
    scalars = NOT_AN_OBJECT.map(
        lambda v: ("not an object", json.dumps(v).encode(), "application/json")
    )
    broken = BROKEN_TEXT.map(lambda t: ("broken JSON", t.encode(), "application/json"))
    yaml = st.sampled_from(["a: [", "metadata: {name: x", "- a\nb: c", "a: *nope", "\t- x"]).map(
        lambda t: ("broken YAML", t.encode(), "application/yaml")
    )
    deep_ = st.sampled_from([3000, 10001]).map(
        lambda d: (
            "deep",
            ('{"metadata":{"name":"fuzzed","labels":' + deep(d) + "}}").encode(),
            "application/json",
        )
    )
    huge = st.sampled_from(["name", "label", "annotation"]).map(
        lambda where: ("huge string", json.dumps(_huge(base, where)).encode(), "application/json")
    )
    if rt.verbs == ("create",):
        # reviews are not stored and upstream validates no metadata of the self reviews:
        # a huge name is answered 201 there too
        return st.one_of(typed, gvk, scalars, broken, yaml, deep_)
    return st.one_of(typed, gvk, scalars, broken, yaml, deep_, huge)


def _huge(base: dict[str, Any], where: str) -> dict[str, Any]:
    big = "a" * (1024 * 1024)  # under the 3 MiB body limit, over every field's limit
    meta: dict[str, Any] = dict(base["metadata"])
    if where == "name":
        meta["name"] = big
    elif where == "label":
        meta["labels"] = {"k": big}
    else:
        meta["annotations"] = {"k": big}
    return {**base, "metadata": meta}


# ---------------------------------------------------------------- kinds and targets


def test_fuzzed_kinds_are_the_discovered_ones(sim: KubeServer) -> None:
    """The table the fuzzer walks is what discovery serves (so no kind escapes it)."""
    served: set[tuple[str, str]] = set()
    groups = [("", "v1")] + [(rt.group, rt.version) for rt in RESOURCES if rt.group]
    for group, version in set(groups):
        path = f"/apis/{group}/{version}" if group else f"/api/{version}"
        answered = handle_discovery(path, "application/json", "127.0.0.1:0")
        assert answered is not None, path
        for res in answered[2]["resources"]:
            if "/" not in res["name"]:
                served.add((group, res["name"]))
    assert served == {(rt.group, rt.plural) for rt in RESOURCES}


# Objects of the kinds a fresh simulator has none of in ``default`` (or cluster-wide), to
# patch and update. A new kind without a seeded object fails ``target`` until it has one here.
MINIMAL: dict[str, dict[str, Any]] = {
    "Node": {},
    "Pod": {"spec": {"containers": [{"name": "c", "image": "i"}]}},
    "Event": {"involvedObject": {"kind": "Pod", "name": "p", "namespace": "default"}},
    "Secret": {},
    "Lease": {},
    "ReplicationController": {
        "spec": {
            "template": {
                "metadata": {"labels": {"a": "b"}},
                "spec": {"containers": [{"name": "c", "image": "i"}]},
            }
        }
    },
    "Role": {},
    "RoleBinding": {
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "r"}
    },
    "CronJob": {
        "spec": {
            "schedule": "* * * * *",
            "jobTemplate": {
                "spec": {
                    "template": {
                        "spec": {
                            "restartPolicy": "Never",
                            "containers": [{"name": "c", "image": "i"}],
                        }
                    }
                }
            },
        }
    },
    "Job": {
        "spec": {
            "template": {
                "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "i"}]}
            }
        }
    },
}
_POD_TEMPLATE = {
    "metadata": {"labels": {"a": "b"}},
    "spec": {"containers": [{"name": "c", "image": "i"}]},
}
for _kind in ("Deployment", "ReplicaSet", "DaemonSet", "StatefulSet"):
    MINIMAL[_kind] = {"spec": {"selector": {"matchLabels": {"a": "b"}}, "template": _POD_TEMPLATE}}


def target(sim: KubeServer, rt: ResourceType) -> str:
    """The name of an existing object of ``rt`` (seeded, or made from ``MINIMAL``)."""
    if ids(rt) in _TARGETS:
        return _TARGETS[ids(rt)]
    _TARGETS[ids(rt)] = name = _target(sim, rt)
    return name


def _target(sim: KubeServer, rt: ResourceType) -> str:
    status, listed = call(sim, "GET", collection(rt))
    assert status == 200, listed
    if listed["items"]:
        return str(listed["items"][0]["metadata"]["name"])
    assert rt.kind in MINIMAL, f"add a minimal {rt.kind} to MINIMAL to fuzz its writes"
    if rt.kind == "Event" and rt.group:
        body: dict[str, Any] = {
            "eventTime": "2026-01-01T00:00:00.000000Z",
            "reportingController": "x/y",
            "reportingInstance": "i",
            "action": "A",
            "reason": "R",
            "type": "Normal",
        }
    else:
        body = MINIMAL[rt.kind]
    status, made = call(
        sim, "POST", collection(rt), json.dumps({"metadata": {"name": "fuzz-target"}, **body})
    )
    assert status == 201, made
    return "fuzz-target"


# ---------------------------------------------------------------- bodies


@pytest.mark.parametrize("rt", [rt for rt in RESOURCES if "create" in rt.verbs], ids=ids)
@FUZZ
@given(data=st.data())
def test_malformed_create_bodies_are_refused(
    fuzz_sim: KubeServer, rt: ResourceType, data: st.DataObject
) -> None:
    what, body, ctype = data.draw(bad_object(rt))
    before = fuzz_sim.store.rv
    status, st_ = call(fuzz_sim, "POST", collection(rt), body, ctype)
    refused(fuzz_sim, status, st_, f"POST {rt.plural} {what}: {body[:120]!r}")
    assert fuzz_sim.store.rv == before


@pytest.mark.parametrize("rt", [rt for rt in STORED if "update" in rt.verbs], ids=ids)
@FUZZ
@given(data=st.data())
def test_malformed_update_bodies_are_refused(
    fuzz_sim: KubeServer, rt: ResourceType, data: st.DataObject
) -> None:
    name = target(fuzz_sim, rt)
    what, body, ctype = data.draw(bad_object(rt))
    if what != "huge string":  # the object's own name, or the URL/body name mismatch is all
        body = body.replace(b'"name": "fuzzed"', json.dumps({"name": name})[1:-1].encode())
    before = fuzz_sim.store.rv
    status, st_ = call(fuzz_sim, "PUT", f"{collection(rt)}/{name}", body, ctype)
    refused(fuzz_sim, status, st_, f"PUT {rt.plural}/{name} {what}: {body[:120]!r}")
    assert fuzz_sim.store.rv == before


# ---------------------------------------------------------------- patches


def bad_patch(rt: ResourceType, ptype: str) -> st.SearchStrategy[Any]:
    """A patch of ``ptype`` whose result no server stores."""
    typed = wrong_typed(rt)
    if ptype == "application/json-patch+json":
        ops = st.one_of(
            typed.map(_as_json_patch),
            st.just([{"op": "bogus", "path": "/metadata/labels"}]),
            st.just([{"op": "add", "path": "metadata", "value": 1}]),
            st.just([{"op": "remove", "path": "/metadata/nope/deeper"}]),
            st.just([{"op": "test", "path": "/metadata/name", "value": "not-it"}]),
            st.just([{"op": "move", "from": "/nope", "path": "/metadata/labels"}]),
            st.just([{"op": "add", "path": "/metadata/finalizers/7", "value": "a/b"}]),
            st.just([{"path": "/metadata/labels"}]),
            st.just([{"op": "replace", "path": "/metadata/name", "value": ["x"]}]),
        )
        return st.one_of(
            ops, st.dictionaries(st.text(max_size=3), JSON_SCALARS, max_size=2), JSON_SCALARS
        )
    directives = st.sampled_from(
        [
            {"$patch": "bogus"},
            {"metadata": {"$patch": "nonsense"}},
            {"metadata": {"labels": {"$patch": 5}}},
            {"metadata": {"finalizers": [{"$patch": "replace"}, 5]}},
            {"metadata": {"$setElementOrder/finalizers": "x"}},
            {"metadata": {"$retainKeys": 7}},
            {"metadata": {"$deleteFromPrimitiveList/finalizers": "x"}},
            {"metadata": {"labels": [{"$patch": "merge"}]}},
        ]
    )
    common = st.one_of(typed, NOT_AN_OBJECT.filter(lambda v: not isinstance(v, dict)))
    if ptype == "application/strategic-merge-patch+json":
        return st.one_of(common, directives)
    if ptype == "application/apply-patch+yaml":
        gvk = st.sampled_from([{"apiVersion": "nope/v9"}, {"kind": "Nope"}, {"apiVersion": 5}])
        return st.one_of(
            common, gvk.map(lambda g: {"apiVersion": rt.api_version, "kind": rt.kind, **g})
        )
    return common


def _as_json_patch(wrong: dict[str, Any]) -> list[dict[str, Any]]:
    path: list[str] = []
    value: Any = wrong
    while isinstance(value, dict) and len(value) == 1:
        key, value = next(iter(value.items()))
        path.append(key)
        if not isinstance(value, dict) or not value:
            break
    return [{"op": "add", "path": "/" + "/".join(path), "value": value}]


@pytest.mark.parametrize("rt", [rt for rt in STORED if "patch" in rt.verbs], ids=ids)
@settings(FUZZ, max_examples=6)
@given(data=st.data())
def test_malformed_patches_are_refused(
    fuzz_sim: KubeServer, rt: ResourceType, data: st.DataObject
) -> None:
    """JSON patch, merge patch, strategic merge patch and apply, drawn per example."""
    name = target(fuzz_sim, rt)
    ptype = data.draw(st.sampled_from(PATCH_TYPES))
    patch = data.draw(bad_patch(rt, ptype))
    if ptype == "application/apply-patch+yaml" and isinstance(patch, dict):
        patch = {"apiVersion": rt.api_version, "kind": rt.kind, **patch}
        meta = patch.setdefault("metadata", {})
        if isinstance(meta, dict):  # a wrong-typed metadata stays as drawn
            patch["metadata"] = {"name": name, **meta}
    body = json.dumps(patch)
    before = fuzz_sim.store.rv
    query = "?fieldManager=fuzz" if ptype.startswith("application/apply") else ""
    status, st_ = call(fuzz_sim, "PATCH", f"{collection(rt)}/{name}{query}", body, ptype)
    refused(fuzz_sim, status, st_, f"PATCH {rt.plural}/{name} {ptype}: {body[:160]}")
    assert fuzz_sim.store.rv == before


# ---------------------------------------------------------------- selectors and options

_KEY = st.from_regex(r"[a-z][a-z0-9]{0,6}", fullmatch=True)
BAD_LABEL_SELECTORS = st.one_of(
    st.tuples(_KEY, st.sampled_from(["=~", "!!=", "<>", "==="]), _KEY).map("".join),
    _KEY.map(lambda k: f"{k} in (a"),
    _KEY.map(lambda k: f"{k} notin a,b)"),
    _KEY.map(lambda k: f"{k}=" + "v" * 64),
    _KEY.map(lambda k: "k" * 64 + f"={k}"),
    st.sampled_from(["a b", "(", "!", "a=b,,c", "a in ()", "a=(b)", "-a=b", "a/b/c=d"]),
)
BAD_FIELD_SELECTORS = st.one_of(
    _KEY.map(lambda k: f"spec.{k}x=1"),
    st.sampled_from(["metadata.name", "metadata.name==", "=x", "metadata.name=a=b,", "a b=c"]),
)
BAD_LIST_OPTIONS = st.one_of(
    st.tuples(st.just("labelSelector"), BAD_LABEL_SELECTORS),
    st.tuples(st.just("fieldSelector"), BAD_FIELD_SELECTORS),
    st.tuples(st.just("limit"), st.sampled_from(["abc", "1.5", "0x10", "9" * 30, ""]).filter(bool)),
    st.tuples(st.just("continue"), st.text(min_size=1, max_size=20)),
    st.tuples(st.just("resourceVersion"), st.sampled_from(["abc", "-1", "1.0", "9" * 30, " 5"])),
    st.tuples(st.just("resourceVersionMatch"), st.sampled_from(["Bogus", "exact", "Exact"])),
    st.tuples(st.just("timeoutSeconds"), st.sampled_from(["abc", "1.5", "9" * 30])),
)


@pytest.mark.parametrize("rt", [rt for rt in STORED if "list" in rt.verbs], ids=ids)
@FUZZ
@given(option=BAD_LIST_OPTIONS)
def test_malformed_list_options_are_refused(
    fuzz_sim: KubeServer, rt: ResourceType, option: tuple[str, str]
) -> None:
    key, value = option
    before = fuzz_sim.store.rv
    path = f"{collection(rt)}?{key}={quote(value, safe='')}"
    status, st_ = call(fuzz_sim, "GET", path)
    refused(fuzz_sim, status, st_, f"GET {path}")
    assert fuzz_sim.store.rv == before


BAD_WRITE_OPTIONS = st.one_of(
    st.tuples(st.just("fieldValidation"), st.sampled_from(["bogus", "strict", "Warn ", "1"])),
    st.tuples(st.just("dryRun"), st.sampled_from(["all", "None", "true", "All,x", "1"])),
    st.tuples(st.just("fieldManager"), st.just("m" * 129)),
)


@pytest.mark.parametrize("rt", [rt for rt in RESOURCES if "create" in rt.verbs], ids=ids)
@FUZZ
@given(option=BAD_WRITE_OPTIONS)
def test_malformed_write_options_are_refused(
    fuzz_sim: KubeServer, rt: ResourceType, option: tuple[str, str]
) -> None:
    """A create that would otherwise be accepted (or refused for its body) is refused for the
    option first, and stores nothing."""
    key, value = option
    before = fuzz_sim.store.rv
    path = f"{collection(rt)}?{key}={quote(value, safe='')}"
    body = json.dumps({"metadata": {"name": "opt"}, **MINIMAL.get(rt.kind, {})})
    status, st_ = call(fuzz_sim, "POST", path, body)
    refused(fuzz_sim, status, st_, f"POST {path}")
    assert fuzz_sim.store.rv == before


# ---------------------------------------------------------------- HTTP framing (fixed cases)

CM_POST = b"POST /api/v1/namespaces/default/configmaps HTTP/1.1\r\nHost: x\r\n"
CM_BODY = b'{"metadata":{"name":"framed"}}'


@pytest.mark.parametrize(
    "head",
    [
        b"Content-Length: abc\r\n",
        b"Content-Length: -1\r\n",
        b"Content-Length: 5\r\nContent-Length: 6\r\n",
        b"Content-Length: 99999999999999999999999\r\n",
    ],
    ids=["letters", "negative", "two-values", "overflow"],
)
def test_bad_content_length_is_go_plain_400(fuzz_sim: KubeServer, head: bytes) -> None:
    """net/http refuses the request line's framing before any handler: a plain-text 400 and
    the connection closed (kube-apiserver closes it too)."""
    before = fuzz_sim.store.rv
    status, headers, body = exchange(fuzz_sim, CM_POST + head + b"\r\n" + CM_BODY)
    assert status == 400
    assert headers.get("connection") == "close"
    assert body.startswith(b"400 Bad Request")
    assert fuzz_sim.store.rv == before
    assert fuzz_sim.take_internal_errors() == []


def test_bad_chunk_framing_is_the_upstream_500_and_closes(fuzz_sim: KubeServer) -> None:
    before = fuzz_sim.store.rv
    data = CM_POST + b"Transfer-Encoding: chunked\r\nConnection: close\r\n\r\nzz\r\n" + CM_BODY
    status, _, body = exchange(fuzz_sim, data)
    st_ = json.loads(body)
    assert status == 500
    assert st_["message"] == "invalid byte in chunk length"
    assert "reason" not in st_
    assert fuzz_sim.store.rv == before
    assert fuzz_sim.take_internal_errors() == []


# ---------------------------------------------------------------- deletes

BAD_DELETE = st.one_of(
    st.tuples(
        st.just("body"),
        st.sampled_from(
            [
                '{"gracePeriodSeconds":"x"}',
                '{"gracePeriodSeconds":1.5}',
                '{"propagationPolicy":"Bogus"}',
                '{"propagationPolicy":5}',
                '{"preconditions":{"uid":5}}',
                '{"preconditions":"x"}',
                '{"dryRun":"All"}',
                '{"dryRun":["Bogus"]}',
                '{"orphanDependents":"yes"}',
                '{"orphanDependents":true,"propagationPolicy":"Foreground"}',
                '{"kind":"DeleteOptions","apiVersion":"nope/v1"}',
                "[1]",
                '"x"',
                "{",
            ]
        ),
    ),
    st.tuples(
        st.just("query"),
        st.sampled_from(
            [
                "gracePeriodSeconds=abc",
                "gracePeriodSeconds=" + "9" * 30,
                "propagationPolicy=Bogus",
                "dryRun=bogus",
            ]
        ),
    ),
)


@pytest.mark.parametrize("rt", [rt for rt in STORED if "delete" in rt.verbs], ids=ids)
@FUZZ
@given(bad=BAD_DELETE)
def test_malformed_deletes_are_refused(
    fuzz_sim: KubeServer, rt: ResourceType, bad: tuple[str, str]
) -> None:
    name = target(fuzz_sim, rt)
    where, text = bad
    path = f"{collection(rt)}/{name}" + (f"?{text}" if where == "query" else "")
    before = fuzz_sim.store.rv
    status, st_ = call(fuzz_sim, "DELETE", path, text if where == "body" else b"")
    refused(fuzz_sim, status, st_, f"DELETE {path} {text}")
    assert fuzz_sim.store.rv == before


@pytest.mark.parametrize(
    "filler",
    [
        b"X-Filler: " + b"f" * (1024 * 1024 + 8192) + b"\r\n",
        b"".join(b"X-F%d: %s\r\n" % (i, b"f" * 1000) for i in range(1100)),
    ],
    ids=["one-long-line", "many-headers"],
)
def test_oversized_headers_are_a_plain_431_and_close(fuzz_sim: KubeServer, filler: bytes) -> None:
    """Headers past Go's MaxHeaderBytes (1 MiB + 4 KiB of slack): net/http's plain-text 431,
    connection closed (the simulator refuses earlier: see the README)."""
    before = fuzz_sim.store.rv
    data = CM_POST + filler + b"Content-Length: %d\r\n\r\n" % len(CM_BODY) + CM_BODY
    status, headers, body = exchange(fuzz_sim, data)
    assert status == 431
    assert body == b"431 Request Header Fields Too Large"
    assert headers.get("connection") == "close"
    assert fuzz_sim.store.rv == before
    assert fuzz_sim.take_internal_errors() == []
