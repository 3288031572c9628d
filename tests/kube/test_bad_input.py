"""Bad input never crashes the simulator: each answer is what kube-apiserver gives.

Raw HTTP over a socket on 127.0.0.1 (no client library smoothing anything over). Sources of the
expected answers: ``k8s.io/apiserver`` ``endpoints/handlers`` (``limitedReadBody``,
``transformDecodeError``, ``interpretStrategicMergePatchError``), ``k8s.io/apimachinery``
``util/strategicpatch`` (``removeDirectives``, ``sliceElementType``), Go's ``encoding/json``
(``exceeded max depth``, ``UnmarshalTypeError``) and ``net/http`` (bad ``Content-Length``).
Every test runs under the ``sim`` fixture, which fails it if a handler raised.
"""

from __future__ import annotations

import json
import socket
from typing import Any

import pytest

from lab.kube.server import KubeServer

CMS = "/api/v1/namespaces/default/configmaps"
SMP = "application/strategic-merge-patch+json"


def send(
    sim: KubeServer, data: bytes, *, timeout: float = 10.0, check_closed: bool = False
) -> tuple[int, bytes, bool]:
    """Send raw bytes; return (status, body, and with ``check_closed`` whether the server
    closed the connection after its answer: waits up to 2 s for that)."""
    with socket.create_connection(("127.0.0.1", sim.port), timeout=timeout) as s:
        s.sendall(data)
        buf = b""
        while b"\r\n\r\n" not in buf:
            chunk = s.recv(65536)
            if not chunk:
                break
            buf += chunk
        head, _, body = buf.partition(b"\r\n\r\n")
        status = int(head.split(b" ", 2)[1])
        length = None
        for line in head.split(b"\r\n")[1:]:
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value)
        closed = False
        while length is None or len(body) < length:
            chunk = s.recv(65536)
            if not chunk:
                closed = True
                break
            body += chunk
        if not closed and check_closed:
            s.settimeout(2.0)
            try:
                closed = s.recv(1) == b""
            except TimeoutError:
                closed = False
        return status, body, closed


def request(
    sim: KubeServer, method: str, path: str, body: bytes | str, *, ctype: str = "application/json"
) -> tuple[int, dict[str, Any]]:
    data = body.encode() if isinstance(body, str) else body
    head = (
        f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: {ctype}\r\n"
        f"Content-Length: {len(data)}\r\n\r\n"
    ).encode()
    status, payload, _ = send(sim, head + data)
    return status, json.loads(payload)


def create_cm(sim: KubeServer, name: str, **extra: Any) -> None:
    status, _ = request(sim, "POST", CMS, json.dumps({"metadata": {"name": name}, **extra}))
    assert status == 201


def nested(depth: int, open_: str = '{"a":', close: str = "}") -> str:
    return open_ * depth + "1" + close * depth


# ---------------------------------------------------------------- nesting


def test_json_nested_past_go_limit_is_400_with_go_text(sim: KubeServer) -> None:
    body = '{"metadata":{"name":"deep","labels":' + nested(10000) + "}}"
    status, st = request(sim, "POST", CMS, body)
    assert status == 400
    assert st["reason"] == "BadRequest"
    assert st["message"] == (
        "the object provided is unrecognized (must be of type ConfigMap): couldn't get "
        "version/kind; json parse error: invalid character '{' exceeded max depth "
        '({"metadata":{"name":"deep","la ...)'
    )
    assert "\n" not in st["message"]
    assert request(sim, "GET", CMS + "/deep", "")[0] == 404


def test_arrays_nested_deep_are_400_too(sim: KubeServer) -> None:
    body = '{"metadata":{"name":"deep"},"data":' + nested(12000, "[", "]") + "}"
    status, st = request(sim, "POST", CMS, body)
    assert status == 400
    assert "invalid character '[' exceeded max depth" in st["message"]


def test_nesting_the_simulator_cannot_take_is_400_naming_both_limits(sim: KubeServer) -> None:
    body = '{"metadata":{"name":"deep"},"data":' + nested(3000) + "}"
    status, st = request(sim, "POST", CMS, body)
    assert status == 400
    assert "the simulator decodes at most" in st["message"]
    assert "10000" in st["message"]


def test_deep_yaml_apply_is_400(sim: KubeServer) -> None:
    body = "metadata:\n  name: deep\ndata: " + "[" * 10001 + "]" * 10001
    status, st = request(
        sim, "PATCH", CMS + "/deep?fieldManager=t", body, ctype="application/apply-patch+yaml"
    )
    assert status == 400
    assert st["message"].startswith("error decoding YAML: ")
    assert request(sim, "GET", CMS + "/deep", "")[0] == 404


def test_deep_strategic_merge_patch_is_400_and_changes_nothing(sim: KubeServer) -> None:
    create_cm(sim, "cm", data={"k": "v"})
    body = '{"metadata":{"labels":' + nested(10001) + "}}"
    status, st = request(sim, "PATCH", CMS + "/cm", body, ctype=SMP)
    assert status == 400
    assert st["message"] == "invalid character '{' exceeded max depth"
    status, st = request(sim, "PATCH", CMS + "/cm", body, ctype="application/merge-patch+json")
    assert status == 400
    assert st["message"] == "error decoding patch: invalid character '{' exceeded max depth"
    status, cm = request(sim, "GET", CMS + "/cm", "")
    assert cm["metadata"].get("labels") is None
    assert cm["metadata"]["resourceVersion"]


def test_yaml_alias_bomb_is_refused_as_go_yaml_does(sim: KubeServer) -> None:
    lines = ['a0: &a0 ["x","x","x","x","x","x","x","x","x","x"]']
    for i in range(1, 9):
        lines.append(f"a{i}: &a{i} [" + ",".join([f"*a{i - 1}"] * 10) + "]")
    body = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: bomb\n" + "\n".join(lines)
    status, st = request(
        sim, "PATCH", CMS + "/bomb?fieldManager=t", body, ctype="application/apply-patch+yaml"
    )
    assert status == 400
    assert st["message"] == "error decoding YAML: yaml: document contains excessive aliasing"


# ---------------------------------------------------------------- strategic merge directives


def test_delete_directive_in_absent_primitive_list_is_dropped(sim: KubeServer) -> None:
    create_cm(sim, "cm")
    body = '{"metadata":{"finalizers":[{"$patch":"delete"}]}}'
    status, cm = request(sim, "PATCH", CMS + "/cm", body, ctype=SMP)
    # strategicpatch.removeDirectives: the key was not in the original, so the patch's list
    # minus its directives is taken (empty, so omitted)
    assert status == 200
    assert "finalizers" not in cm["metadata"]


def test_delete_directive_in_present_primitive_list_is_the_upstream_error(
    sim: KubeServer,
) -> None:
    create_cm(sim, "cm")
    status, _ = request(sim, "PATCH", CMS + "/cm", '{"metadata":{"finalizers":["x/y"]}}', ctype=SMP)
    assert status == 200
    body = '{"metadata":{"finalizers":[{"$patch":"delete"}]}}'
    status, st = request(sim, "PATCH", CMS + "/cm", body, ctype=SMP)
    # sliceElementType's plain error, which kube-apiserver answers as 500 without a reason
    assert status == 500
    assert "reason" not in st
    assert st["message"] == "list element types are not identical: [[x/y] [map[$patch:delete]]]"
    assert sim.take_internal_errors() == []  # a deliberate answer, not a simulator crash
    _, cm = request(sim, "GET", CMS + "/cm", "")
    assert cm["metadata"]["finalizers"] == ["x/y"]


# ---------------------------------------------------------------- field types


def test_service_ports_as_object_is_400_with_go_type_error(sim: KubeServer) -> None:
    body = {"metadata": {"name": "s"}, "spec": {"ports": {"port": 80}}}
    status, st = request(sim, "POST", "/api/v1/namespaces/default/services", json.dumps(body))
    assert status == 400
    assert st["reason"] == "BadRequest"
    assert st["message"] == (
        'Service in version "v1" cannot be handled as a Service: json: cannot unmarshal object '
        "into Go struct field ServiceSpec.spec.ports of type []v1.ServicePort"
    )


def test_configmap_data_number_is_400_and_not_stored(sim: KubeServer) -> None:
    body = {"metadata": {"name": "c5"}, "data": {"a": 5}}
    status, st = request(sim, "POST", CMS, json.dumps(body))
    assert status == 400
    assert st["message"] == (
        'ConfigMap in version "v1" cannot be handled as a ConfigMap: json: cannot unmarshal '
        "number into Go struct field ConfigMap.data of type string"
    )
    assert request(sim, "GET", CMS + "/c5", "")[0] == 404


@pytest.mark.parametrize(
    ("spec", "text"),
    [
        (
            {"ports": [{"port": "80"}]},
            "cannot unmarshal string into Go struct field "
            "ServicePort.spec.ports.port of type int32",
        ),
        (
            {"ports": [{"port": 99999999999}]},
            "cannot unmarshal number 99999999999 into Go "
            "struct field ServicePort.spec.ports.port of type int32",
        ),
        (
            {"ports": [{"port": 80, "targetPort": {"x": 1}}]},
            "cannot unmarshal object into Go "
            "struct field ServicePort.spec.ports.targetPort of type int32",
        ),
        (
            {"selector": ["a"]},
            "cannot unmarshal array into Go struct field "
            "ServiceSpec.spec.selector of type map[string]string",
        ),
    ],
)
def test_nested_type_errors_name_struct_path_and_type(
    sim: KubeServer, spec: dict[str, Any], text: str
) -> None:
    body = {"metadata": {"name": "s"}, "spec": spec}
    status, st = request(sim, "POST", "/api/v1/namespaces/default/services", json.dumps(body))
    assert status == 400
    assert st["message"].endswith("json: " + text)


def test_patch_that_breaks_a_type_is_422_on_field_patch(sim: KubeServer) -> None:
    create_cm(sim, "cm", data={"k": "v"})
    status, st = request(
        sim, "PATCH", CMS + "/cm", '{"data":{"a":5}}', ctype="application/merge-patch+json"
    )
    assert status == 422
    assert st["reason"] == "Invalid"
    assert st["details"]["causes"][0]["field"] == "patch"
    assert st["message"].endswith(
        "json: cannot unmarshal number into Go struct field ConfigMap.data of type string"
    )
    _, cm = request(sim, "GET", CMS + "/cm", "")
    assert cm["data"] == {"k": "v"}


# ---------------------------------------------------------------- sizes


def test_body_over_3_mib_is_413_and_connection_closed(sim: KubeServer) -> None:
    data = json.dumps({"metadata": {"name": "big"}, "data": {"a": "x" * (4 << 20)}}).encode()
    head = (
        f"POST {CMS} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(data)}\r\n\r\n"
    ).encode()
    status, body, closed = send(sim, head + data, check_closed=True)
    st = json.loads(body)
    assert status == 413
    assert st["reason"] == "RequestEntityTooLarge"
    assert st["message"] == "Request entity too large: limit is 3145728"
    assert closed
    assert request(sim, "GET", CMS + "/big", "")[0] == 404


def test_chunked_body_over_3_mib_is_413(sim: KubeServer) -> None:
    chunk = b"x" * (1 << 20)
    data = b"".join(b"%x\r\n%s\r\n" % (len(chunk), chunk) for _ in range(4)) + b"0\r\n\r\n"
    head = f"POST {CMS} HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n".encode()
    status, body, closed = send(sim, head + data, check_closed=True)
    assert status == 413
    assert closed
    assert json.loads(body)["message"] == "Request entity too large: limit is 3145728"


def test_object_over_etcd_limit_is_etcds_error(sim: KubeServer) -> None:
    body = json.dumps({"metadata": {"name": "big"}, "data": {"a": "x" * (2 << 20)}})
    status, st = request(sim, "POST", CMS, body)
    assert status == 500
    assert "reason" not in st
    assert st["message"] == "etcdserver: request is too large"
    assert request(sim, "GET", CMS + "/big", "")[0] == 404
    create_cm(sim, "grow", data={"a": "x" * (1 << 20)})
    patch = json.dumps({"data": {"b": "y" * (1 << 20)}})
    status, st = request(sim, "PATCH", CMS + "/grow", patch, ctype="application/merge-patch+json")
    assert status == 500
    assert st["message"] == "etcdserver: request is too large"
    _, cm = request(sim, "GET", CMS + "/grow", "")
    assert set(cm["data"]) == {"a"}


# ---------------------------------------------------------------- framing


@pytest.mark.parametrize("value", ["abc", "-1", "1, 2"])
def test_bad_content_length_is_400_and_closed(sim: KubeServer, value: str) -> None:
    data = f"POST {CMS} HTTP/1.1\r\nHost: x\r\nContent-Length: {value}\r\n\r\n{{}}".encode()
    status, body, closed = send(sim, data, check_closed=True)
    assert status == 400
    assert body == b"400 Bad Request"
    assert closed


def test_bad_chunk_framing_is_answered_and_closed(sim: KubeServer) -> None:
    data = (
        f"POST {CMS} HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
        "zz\r\n{}\r\n0\r\n\r\n"
    ).encode()
    status, body, closed = send(sim, data, check_closed=True)
    # limitedReadBody hands the chunked reader's plain error to scope.err: 500, no reason
    assert status == 500
    assert json.loads(body)["message"] == "invalid byte in chunk length"
    assert closed


def test_half_sent_requests_are_dropped_after_the_read_timeout() -> None:
    with KubeServer(read_timeout=0.5, idle_timeout=1.0) as kube:
        socks = []
        for _ in range(20):
            s = socket.create_connection(("127.0.0.1", kube.port), timeout=10)
            s.sendall(f"POST {CMS} HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{{".encode())
            socks.append(s)
        idle = socket.create_connection(("127.0.0.1", kube.port), timeout=10)
        try:
            for s in [*socks, idle]:
                assert s.recv(1024) == b""  # the server closed it (recv would block otherwise)
            status, _, _ = send(kube, b"GET /readyz HTTP/1.1\r\nHost: x\r\n\r\n")
            assert status == 200
        finally:
            for s in [*socks, idle]:
                s.close()
        assert kube.take_internal_errors() == []


def test_server_keeps_serving_after_all_of_it(sim: KubeServer) -> None:
    for value in ("abc", "-1"):
        send(sim, f"POST {CMS} HTTP/1.1\r\nHost: x\r\nContent-Length: {value}\r\n\r\n".encode())
    request(sim, "POST", CMS, nested(10001))
    status, _ = request(sim, "POST", CMS, json.dumps({"metadata": {"name": "ok"}}))
    assert status == 201


def test_apply_with_a_wrong_type_is_the_field_managers_error(sim: KubeServer) -> None:
    body = json.dumps(
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "typed"}, "data": {"a": 5}}
    )
    status, st = request(
        sim, "PATCH", CMS + "/typed?fieldManager=t", body, ctype="application/apply-patch+yaml"
    )
    # structuredmerge.go's plain error (ObjectToTyped), passed through as 500 without reason
    assert status == 500
    assert "reason" not in st
    assert st["message"].startswith(
        "failed to create typed patch object (/typed; /v1, Kind=ConfigMap): .data: expected string"
    )
    assert request(sim, "GET", CMS + "/typed", "")[0] == 404


@pytest.mark.parametrize(
    ("ctype", "body"),
    [
        ("application/merge-patch+json", '{"metadata":null}'),
        ("application/json-patch+json", '[{"op":"remove","path":"/metadata"}]'),
    ],
)
def test_patch_dropping_metadata_names_no_python_value(
    sim: KubeServer, ctype: str, body: str
) -> None:
    create_cm(sim, "cm")
    status, st = request(sim, "PATCH", CMS + "/cm", body, ctype=ctype)
    assert status == 400
    assert st["message"] == "the name of the object () does not match the name on the URL (cm)"


# ---------------------------------------------------------------- found by the fuzzer
# (tests/kube/test_fuzz_bad_input.py); each was a 5xx, a dropped connection or an accepted
# request before its fix


def test_update_with_non_object_metadata_is_400(sim: KubeServer) -> None:
    create_cm(sim, "cm")
    status, st = request(sim, "PUT", CMS + "/cm", '{"metadata":"x"}')
    assert status == 400
    assert st["message"] == (
        'ConfigMap in version "v1" cannot be handled as a ConfigMap: json: cannot unmarshal '
        "string into Go struct field ConfigMap.metadata of type v1.ObjectMeta"
    )


def test_unknown_patch_directive_in_a_map_is_the_upstream_500(sim: KubeServer) -> None:
    create_cm(sim, "cm")
    _, before = request(sim, "GET", CMS + "/cm", "")
    for body, shown in (
        ('{"$patch":"bogus"}', "unknown patch type: bogus in map: map[$patch:bogus]"),
        (
            '{"metadata":{"labels":{"$patch":5}}}',
            "unknown patch type: %!s(float64=5) in map: map[$patch:5]",
        ),
    ):
        status, st = request(sim, "PATCH", CMS + "/cm", body, ctype=SMP)
        # handleDirectiveInMergeMap's ErrBadPatchType, passed through as a plain error
        assert (status, st["message"]) == (500, shown)
        assert "reason" not in st
    _, after = request(sim, "GET", CMS + "/cm", "")
    assert after == before  # the labels patch used to store `labels: {}`


@pytest.mark.parametrize(
    ("key", "message"),
    [
        ("$retainKeys", "invalid patch format of retainKeys"),
        ("$setElementOrder/finalizers", "invalid patch format of setElementOrder list"),
        ("$deleteFromPrimitiveList/finalizers", "invalid patch format of primitive list"),
    ],
)
def test_directive_lists_that_are_not_lists_are_400(
    sim: KubeServer, key: str, message: str
) -> None:
    create_cm(sim, "cm")
    status, st = request(sim, "PATCH", CMS + "/cm", json.dumps({"metadata": {key: "x"}}), ctype=SMP)
    assert (status, st["reason"], st["message"]) == (400, "BadRequest", message)


def test_lone_surrogate_escape_decodes_as_go_does(sim: KubeServer) -> None:
    """Go's decoder turns a lone ``\\ud800`` into U+FFFD; it used to drop the connection."""
    status, st = request(sim, "POST", CMS, '{"metadata":{"name":"\\ud800"}}')
    assert status == 422
    assert 'metadata.name: Invalid value: "\ufffd"' in st["message"]
    status, cm = request(sim, "POST", CMS, '{"metadata":{"name":"s"},"data":{"k":"a\\udc00"}}')
    assert status == 201
    assert cm["data"] == {"k": "a\ufffd"}


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ("limit=" + "9" * 20, 'strconv.ParseInt: parsing "' + "9" * 20 + '": value out of range'),
        ("limit=abc", 'strconv.ParseInt: parsing "abc": invalid syntax'),
        ("timeoutSeconds=abc", 'strconv.ParseInt: parsing "abc": invalid syntax'),
        ("resourceVersion=-1", "invalid resource version: -1"),
    ],
)
def test_list_integers_parse_as_go_does(sim: KubeServer, query: str, message: str) -> None:
    status, st = request(sim, "GET", f"{CMS}?{query}", "")
    assert (status, st["reason"], st["message"]) == (400, "BadRequest", message)


def test_review_create_checks_field_validation(sim: KubeServer) -> None:
    status, st = request(
        sim,
        "POST",
        "/apis/authentication.k8s.io/v1/selfsubjectreviews?fieldValidation=bogus",
        '{"apiVersion":"authentication.k8s.io/v1","kind":"SelfSubjectReview"}',
    )
    assert status == 400
    assert st["message"].startswith('fieldValidation: Unsupported value: "bogus"')


def test_content_length_past_int63_is_go_plain_400(sim: KubeServer) -> None:
    head = f"POST {CMS} HTTP/1.1\r\nHost: x\r\nContent-Length: {2**63}\r\n\r\n".encode()
    status, body, closed = send(sim, head + b"{}", check_closed=True)
    assert status == 400
    assert body.startswith(b"400 Bad Request")
    assert closed


@pytest.mark.parametrize(
    ("body", "status", "message"),
    [
        (
            '{"dryRun":["Bogus"]}',  # used to delete for real
            422,
            'DeleteOptions.meta.k8s.io "" is invalid: dryRun: Unsupported value: "Bogus": '
            'supported values: "All"',
        ),
        (
            "[1]",  # used to be ignored, and the object deleted
            400,
            "couldn't get version/kind; json parse error: json: cannot unmarshal array into Go "
            'value of type struct { APIVersion string "json:\\"apiVersion,omitempty\\""; '
            'Kind string "json:\\"kind,omitempty\\"" }',
        ),
        (
            '{"preconditions":"x"}',  # used to be a 500 (AttributeError)
            400,
            "json: cannot unmarshal string into Go struct field DeleteOptions.preconditions of "
            "type v1.Preconditions",
        ),
        (
            '{"gracePeriodSeconds":1.5}',  # used to be truncated to 1
            400,
            "json: cannot unmarshal number 1.5 into Go struct field "
            "DeleteOptions.gracePeriodSeconds of type int64",
        ),
        (
            '{"kind":"Pod","apiVersion":"v1"}',
            400,
            "decoded object cannot be converted to DeleteOptions",
        ),
    ],
)
def test_malformed_delete_options_refuse_and_keep_the_object(
    sim: KubeServer, body: str, status: int, message: str
) -> None:
    create_cm(sim, "cm")
    got, st = request(sim, "DELETE", CMS + "/cm", body)
    assert (got, st["message"]) == (status, message)
    assert request(sim, "GET", CMS + "/cm", "")[0] == 200


def test_delete_grace_period_query_parses_as_int64(sim: KubeServer) -> None:
    create_cm(sim, "cm")
    status, st = request(sim, "DELETE", CMS + "/cm?gracePeriodSeconds=" + "9" * 20, "")
    assert (status, st["message"]) == (
        400,
        'strconv.ParseInt: parsing "' + "9" * 20 + '": value out of range',
    )
    assert request(sim, "GET", CMS + "/cm", "")[0] == 200
