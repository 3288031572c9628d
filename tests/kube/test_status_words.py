"""Every refusal in kube-apiserver's words: no Python type names, reprs or Python decoder texts.

A failed JSON-patch ``test`` operation used to say ``10.96.0.5 (<class 'str'>) is not equal to
tested value 1.2.3.4 (<class 'str'>)`` and a missing path printed the whole object as a Python
dict; kube-apiserver answers every failed JSON-patch operation with apimachinery's generic 422
(``NewGenericServerResponse``: the fixed message, empty details, the library's text dropped).
A malformed JSON body said ``Expecting value: line 1 column 2 (char 1)`` (Python's decoder)
where Go's scanner says ``invalid character 'o' in literal null (expecting 'u')``, and YAML
errors carried PyYAML's ``in "<unicode string>", line 1, column 4`` marks.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from lab.kube.server import KubeServer

JSON, JP, MP, SP = (
    "application/json",
    "application/json-patch+json",
    "application/merge-patch+json",
    "application/strategic-merge-patch+json",
)
AP, YAML = "application/apply-patch+yaml", "application/yaml"
CMS = "/api/v1/namespaces/default/configmaps"
SVC = "/api/v1/namespaces/default/services/s"
REJECTED = "the server rejected our request due to an error in our request"
#: what only Python prints: type names, reprs of containers, its decoders' and YAML's marks
PYTHONISMS = re.compile(
    r"<class |Traceback|NoneType|\b(Key|Type|Value|Attribute|Index|JSONDecode)Error\b"
    r"|Expecting (value|property|',')|line \d+ column \d+|\(char \d+\)|<unicode string>"
    r"|\{'[^']*': |\['[^']*', |\bdict\(|\bJsonPatch|\bJsonPointer"
)

BAD_PATCHES: list[Any] = [
    [{"op": "test", "path": "/spec/clusterIP", "value": "1.2.3.4"}],
    [{"op": "test", "path": "/spec/nothere", "value": "x"}],
    [{"op": "remove", "path": "/spec/nothere"}],
    [{"op": "replace", "path": "/spec/nothere", "value": 1}],
    [{"op": "add", "path": "/nope/deeper", "value": 1}],
    [{"op": "add", "path": "/spec/ports/9", "value": 1}],
    [{"op": "add", "path": "/spec/ports/x", "value": 1}],
    [{"op": "move", "from": "/spec/zz", "path": "/spec/a"}],
    [{"op": "copy", "from": "/spec/zz", "path": "/spec/a"}],
    [{"op": "bogus", "path": "/spec"}],
    [{"path": "/spec"}],
    [{"op": "add", "value": 1}],
    [{"op": "add", "path": "spec", "value": 1}],
    [{"op": "add", "path": "/spec/ports/0/port"}],
    [{"op": 1, "path": "/spec"}],
    [{"op": "add", "path": 1, "value": 1}],
    [{"op": "remove", "path": "/spec/ports/-"}],
    [{"op": "remove", "path": ""}],
    [{"op": "replace", "path": "", "value": [1]}],
]

BAD_BODIES: list[tuple[str, str, str, bytes]] = [
    ("PATCH", SVC, JP, b"[not json"),
    ("PATCH", SVC, JP, b"[1]"),
    ("PATCH", SVC, JP, b'"x"'),
    ("PATCH", SVC, MP, b"{bad"),
    ("PATCH", SVC, SP, b"{bad"),
    ("PATCH", SVC, SP, b"[1]"),
    ("PATCH", SVC + "?fieldManager=m", AP, b"a: [b"),
    ("PATCH", SVC + "?fieldManager=m", AP, b"{"),
    ("PATCH", SVC + "?fieldManager=m", AP, b"\t- x"),
    ("PATCH", SVC + "?fieldManager=m", AP, b"a: *x"),
    ("PATCH", SVC + "?fieldManager=m", AP, b"- 1"),
    ("POST", CMS, JSON, b"{bad"),
    ("POST", CMS, JSON, b'{"metadata": {"name": "x"},}'),
    ("POST", CMS, JSON, b"NaN"),
    ("POST", CMS, JSON, b'{"a": tru}'),
    ("POST", CMS, JSON, b"\xff\xfe"),
    ("POST", CMS, JSON, b"[1]"),
    ("POST", CMS, JSON, b'{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":1}}'),
    ("POST", CMS, YAML, b"a: [b"),
    ("POST", CMS + "?fieldValidation=Strict", JSON, b'{"metadata":{"name":"z"},"bogus":1}'),
    ("PATCH", CMS + "/cm", SP, b'{"data":{"a":1}}'),
    ("PATCH", CMS + "/cm", MP, b'{"data":[1]}'),
    ("DELETE", CMS + "/cm", JSON, b"{bad"),
    ("DELETE", CMS + "/cm", JSON, b"[1]"),
    ("DELETE", CMS + "/cm", JSON, b'{"gracePeriodSeconds":"x"}'),
    ("GET", CMS + "?limit=abc", "", b""),
    ("GET", CMS + "?labelSelector=a%20in%20(", "", b""),
    ("GET", CMS + "?fieldSelector=a", "", b""),
    ("GET", CMS + "/cm?resourceVersion=x", "", b""),
]


@pytest.fixture
def http(sim: KubeServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=sim.url) as http:
        service = {"metadata": {"name": "s"}, "spec": {"ports": [{"port": 80}]}}
        assert http.post("/api/v1/namespaces/default/services", json=service).status_code == 201
        cm = {"metadata": {"name": "cm"}, "data": {"a": "b"}}
        assert http.post(CMS, json=cm).status_code == 201
        yield http


def _words(body: bytes) -> list[str]:
    """Every human text of a Status (message, cause messages), or the plain body."""
    try:
        status = json.loads(body)
    except ValueError:
        return [body.decode(errors="replace")]
    causes = (status.get("details") or {}).get("causes") or []
    return [status.get("message", ""), *(c.get("message", "") for c in causes)]


@pytest.mark.parametrize("patch", BAD_PATCHES, ids=json.dumps)
def test_a_failed_json_patch_is_apimachinery_s_generic_422(http: httpx.Client, patch: Any) -> None:
    r = http.patch(SVC, content=json.dumps(patch), headers={"content-type": JP})
    assert (r.status_code, r.json()) == (
        422,
        {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": REJECTED,
            "reason": "Invalid",
            "details": {},
            "code": 422,
        },
    )


@pytest.mark.parametrize(("method", "path", "ctype", "body"), BAD_BODIES)
def test_no_python_in_any_refusal(
    http: httpx.Client, method: str, path: str, ctype: str, body: bytes
) -> None:
    headers = {"content-type": ctype} if ctype else {}
    r = http.request(method, path, content=body, headers=headers)
    assert 400 <= r.status_code < 600, r.text
    for text in _words(r.content):
        assert not PYTHONISMS.search(text), text


@pytest.mark.parametrize(
    ("ctype", "body", "message"),
    [
        (JSON, b"{bad", "invalid character 'b' looking for beginning of object key string"),
        (JSON, b"[1 2]", "invalid character '2' after array element"),
        (JSON, b'{"a" 1}', "invalid character '1' after object key"),
        (JSON, b'{"a":1 "b":2}', "invalid character '\"' after object key:value pair"),
        (JSON, b"NaN", "invalid character 'N' looking for beginning of value"),
        (JSON, b'{"a": tru}', "invalid character '}' in literal true (expecting 'e')"),
        (JSON, b'{"a": "', "unexpected end of JSON input"),
        (JSON, b"\xff", "invalid character '\u00ff' looking for beginning of value"),
    ],
)
def test_malformed_json_is_described_by_go_s_scanner(
    http: httpx.Client, ctype: str, body: bytes, message: str
) -> None:
    r = http.post(CMS, content=body, headers={"content-type": ctype})
    assert r.status_code == 400
    assert message in r.json()["message"], r.json()["message"]


def test_malformed_patches_and_yaml_in_go_s_words(http: httpx.Client) -> None:
    r = http.patch(SVC, content=b"{bad", headers={"content-type": MP})
    assert r.json()["message"] == (
        "error decoding patch: invalid character 'b' looking for beginning of object key string"
    )
    r = http.patch(SVC, content=b"[1]", headers={"content-type": JP})
    assert (r.status_code, r.json()["message"]) == (
        400,
        "json: cannot unmarshal number into Go value of type jsonpatch.Operation",
    )
    r = http.patch(SVC + "?fieldManager=m", content=b"a: [b", headers={"content-type": AP})
    assert r.json()["message"] == (
        "error decoding YAML: error converting YAML to JSON: yaml: line 1: "
        "did not find expected ',' or ']'"
    )


def test_the_official_client_sees_the_same_422(sim: KubeServer, api_client: Any) -> None:
    core = client.CoreV1Api(api_client)
    core.create_namespaced_config_map("default", {"metadata": {"name": "t"}, "data": {"k": "v"}})
    with pytest.raises(ApiException) as err:
        core.patch_namespaced_config_map(
            "t", "default", [{"op": "test", "path": "/data/k", "value": "other"}]
        )
    assert err.value.status == 422
    assert json.loads(err.value.body)["message"] == REJECTED


def test_a_simulator_bug_is_answered_as_an_apiserver_panic(
    sim: KubeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(req: Any) -> Any:
        raise KeyError("spec")

    monkeypatch.setattr(sim.api, "_dispatch", broken)
    r = httpx.get(sim.url + CMS)
    monkeypatch.undo()
    errors = sim.take_internal_errors()
    assert (r.status_code, r.headers["content-type"], r.text) == (
        500,
        "text/plain; charset=utf-8",
        "This request caused apiserver to panic. Look in the logs for details.\n",
    )
    assert len(errors) == 1
    assert "KeyError" in errors[0]  # the details stay with the lab
