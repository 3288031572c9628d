"""The simulator as a component and a process: TLS and tokens, kubeconfig, faults, state.

Also the generic wire rules: /version and health endpoints, unknown paths, method-not-allowed,
handler exceptions recorded for the test that caused them.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from lab.component import ComponentNotReady
from lab.kube.process import KubeProcess
from lab.kube.server import KubeServer
from lab.versions.release import DEFAULT_K8S_VERSION
from tests.kube.conftest import make_cm, raw

ROOT = Path(__file__).resolve().parents[2]


def test_version_health_and_unknown_paths(sim: KubeServer) -> None:
    status, version = raw(sim, "GET", "/version?timeout=5s")
    assert status == 200
    assert (version["major"], version["minor"]) == ("1", DEFAULT_K8S_VERSION.split(".")[1])
    assert version["gitVersion"] == f"v{DEFAULT_K8S_VERSION}.0"
    for path in ("/healthz", "/livez", "/readyz"):
        import urllib.request

        with urllib.request.urlopen(sim.url + path) as resp:
            assert resp.read() == b"ok"
    status, body = raw(sim, "GET", "/api/v1/widgets")
    assert status == 404
    assert body["message"] == "the server could not find the requested resource"
    status, body = raw(sim, "DELETE", "/api/v1/namespaces")
    assert status == 405
    assert body["reason"] == "MethodNotAllowed"
    status, body = raw(sim, "GET", "/apis/coordination.k8s.io/v1/namespaces/default/leases/missing")
    assert status == 404
    assert body["message"] == 'leases.coordination.k8s.io "missing" not found'
    assert body["details"] == {"name": "missing", "group": "coordination.k8s.io", "kind": "leases"}


def test_tls_and_bearer_token(tmp_path: Path) -> None:
    with KubeServer(tls=True) as sim:
        assert sim.url.startswith("https://127.0.0.1:")
        cfg = yaml.safe_load(sim.kubeconfig_path.read_text())
        assert cfg["clusters"][0]["cluster"]["certificate-authority-data"]
        assert cfg["users"][0]["user"]["token"] == sim.token
        core = client.CoreV1Api(sim.api_client())
        assert core.create_namespaced_config_map("default", make_cm("tls")).metadata.name == "tls"
        anonymous = client.Configuration()
        anonymous.host = sim.url
        anonymous.ssl_ca_cert = str(sim.workdir / "pki" / "ca.crt")
        with client.ApiClient(anonymous) as ac, pytest.raises(ApiException) as info:
            client.CoreV1Api(ac).list_namespace()
        assert info.value.status == 401
        assert sim.control.state()["objects"]["/configmaps"]
        written = sim.write_kubeconfig(tmp_path / "kc")
        assert yaml.safe_load(written.read_text())["clusters"][0]["cluster"]["server"] == sim.url


#: what kube-apiserver's authentication filter answers a request it cannot authenticate
#: (``apierrors.NewUnauthorized("Unauthorized")`` through ``responsewriters.ErrorNegotiated``)
UPSTREAM_401 = {
    "kind": "Status",
    "apiVersion": "v1",
    "metadata": {},
    "status": "Failure",
    "message": "Unauthorized",
    "reason": "Unauthorized",
    "code": 401,
}


def _call(
    url: str, method: str = "GET", *, token: str | None = None, ca: str | None = None
) -> tuple[int, dict[str, Any], dict[str, str]]:
    import ssl
    import urllib.error
    import urllib.request

    req = urllib.request.Request(url, method=method, data=b"{}" if method == "POST" else None)
    if token is not None:
        req.add_header("Authorization", f"Bearer {token}")
    ctx = ssl.create_default_context(cafile=ca) if ca else None
    try:
        with urllib.request.urlopen(req, timeout=10, context=ctx) as resp:
            raw_body = resp.read()
            parsed = json.loads(raw_body) if raw_body[:1] == b"{" else {"text": raw_body.decode()}
            return resp.status, parsed, dict(resp.headers)
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"{}"), dict(exc.headers)


def test_with_a_token_every_path_needs_credentials_as_upstream_answers() -> None:
    """AlwaysAllow makes kube-apiserver turn anonymous auth off: no credentials (or unknown
    ones) are 401 on every path, /version and the health checks included, in its Status."""
    with KubeServer(tls=True) as sim:
        ca = str(sim.workdir / "pki" / "ca.crt")
        for path in ("/api/v1/namespaces", "/version", "/readyz", "/apis", "/openapi/v2"):
            for token in (None, "not-the-token"):
                status, body, _ = _call(sim.url + path, token=token, ca=ca)
                assert (path, token, status, body) == (path, token, 401, UPSTREAM_401)
        status, body, _ = _call(sim.url + "/version", token=sim.token, ca=ca)
        assert status == 200
        assert body["gitVersion"] == f"v{DEFAULT_K8S_VERSION}.0"


def test_lab_reset_without_the_token_is_refused_and_resets_nothing() -> None:
    with KubeServer(tls=True) as sim:
        ca = str(sim.workdir / "pki" / "ca.crt")
        core = client.CoreV1Api(sim.api_client())
        core.create_namespaced_config_map("default", make_cm("kept"))
        for token in (None, "not-the-token"):
            status, body, headers = _call(sim.url + "/_lab/reset", "POST", token=token, ca=ca)
            assert status == 401
            assert "WWW-Authenticate" not in headers, "kube-apiserver sends no challenge"
            assert body["reason"] == "Unauthorized"
            assert "/_lab/" in body["message"]
            assert "state.json" in body["message"], "says where the token is"
            assert token is None or token not in body["message"], "never echoes a token"
        assert core.read_namespaced_config_map("kept", "default").metadata.name == "kept"
        sim.control.reset()  # the lab's own client sends the token
        with pytest.raises(ApiException) as gone:
            core.read_namespaced_config_map("kept", "default")
        assert gone.value.status == 404


def test_an_open_api_can_keep_its_control_plane_closed() -> None:
    """``--insecure-api``: plain HTTP and anonymous access to the API, ``/_lab`` still closed."""
    with KubeServer(control_token="lab-secret") as sim:
        assert sim.url.startswith("http://")
        cfg = yaml.safe_load(sim.kubeconfig_path.read_text())
        assert cfg["users"][0]["user"] == {}, "the kubeconfig carries no token"
        status, _, _ = _call(sim.url + "/api/v1/namespaces/default/configmaps")
        assert status == 200
        status, body, _ = _call(sim.url + "/_lab/state")
        assert (status, body["reason"]) == (401, "Unauthorized")
        status, _, _ = _call(sim.url + "/_lab/state", token="lab-secret")
        assert status == 200
        assert sim.control.state()["objects"] is not None


def test_fault_injection_fails_next_requests_and_adds_latency(
    sim: KubeServer, core: client.CoreV1Api
) -> None:
    sim.control.add_fault(
        verb="create", resource="configmaps", status=503, count=2, message="etcd sad"
    )
    for _ in range(2):
        with pytest.raises(ApiException) as info:
            core.create_namespaced_config_map("default", make_cm("f"))
        assert info.value.status == 503
        assert "etcd sad" in info.value.body
    core.create_namespaced_config_map("default", make_cm("f"))
    core.list_namespaced_config_map("default")  # other verbs were never affected
    slow = sim.control.add_latency(verb="get", resource="configmaps", latency_ms=300, count=1)
    start = time.monotonic()
    core.read_namespaced_config_map("f", "default")
    assert time.monotonic() - start >= 0.3
    assert [(r.fired, r.exhausted) for r in sim.control.faults()] == [(2, True), (1, True)]
    sim.control.remove_fault(slow.id)
    sim.control.add_fault(verb="*", resource="nodes", status=429)
    assert [(r.status, r.reason) for r in sim.control.faults()] == [
        (503, "ServiceUnavailable"),
        (429, "TooManyRequests"),
    ]
    sim.control.clear_faults()
    core.list_node()


def test_handler_exceptions_are_recorded(
    sim: KubeServer, core: client.CoreV1Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("simulated bug")

    monkeypatch.setattr(sim.store, "get", broken)
    with pytest.raises(ApiException) as info:
        core.read_namespaced_config_map("x", "default")
    assert info.value.status == 500
    # Go's panic recovery: the client learns nothing of the bug, the lab keeps the details
    assert info.value.body == (
        "This request caused apiserver to panic. Look in the logs for details.\n"
    )
    errors = sim.control.errors()
    assert len(errors) == 1
    assert "RuntimeError: simulated bug" in errors[0]
    assert sim.take_internal_errors() == errors


def test_seed_and_reset(sim: KubeServer, core: client.CoreV1Api) -> None:
    stored = sim.control.seed(
        [
            {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "seeded"}},
            {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {"name": "seeded", "namespace": "kube-node-lease"},
                "spec": {"holderIdentity": "seeded", "leaseDurationSeconds": 40},
            },
        ]
    )
    assert [o["kind"] for o in stored] == ["Node", "Lease"]
    assert core.read_node("seeded").metadata.uid == stored[0]["metadata"]["uid"]
    sim.control.reset()
    with pytest.raises(ApiException):
        core.read_node("seeded")


def test_process_mode_state_roundtrip(tmp_path: Path) -> None:
    kubeconfig, state = tmp_path / "kubeconfig", tmp_path / "state.json"
    env = dict(os.environ, PYTHONPATH=str(ROOT))

    def start() -> tuple[subprocess.Popen[str], str]:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "lab.kube",
                "--port",
                "0",
                "--kubeconfig",
                str(kubeconfig),
                "--state",
                str(state),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
            cwd=ROOT,
        )
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith("ccm-lab kube simulator ready at http://127.0.0.1:"), line
        return proc, line.rsplit(" ", 1)[1].strip()

    proc, url = start()
    try:
        api = client.ApiClient(client.Configuration(host=url))
        core = client.CoreV1Api(api)
        core.create_namespaced_config_map("default", make_cm("persisted"))
        rv = core.list_namespaced_config_map("default").metadata.resource_version
        api.close()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=15) == 0
        assert proc.stdout is not None
        assert proc.stdout.read() == ""
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.communicate()
    proc, url = start()
    try:
        api = client.ApiClient(client.Configuration(host=url))
        core = client.CoreV1Api(api)
        assert core.read_namespaced_config_map("persisted", "default").data == {"k": "v"}
        assert int(core.list_namespaced_config_map("default").metadata.resource_version) >= int(rv)
        assert yaml.safe_load(kubeconfig.read_text())["clusters"][0]["cluster"]["server"] == url
        api.close()
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=15) == 0
        proc.communicate()


def test_stop_is_idempotent_and_ends_watches() -> None:
    sim = KubeServer()
    sim.start()
    sim.start()
    import http.client

    conn = http.client.HTTPConnection("127.0.0.1", sim.port, timeout=10)
    conn.request("GET", "/api/v1/configmaps?watch=1&resourceVersion=0")
    resp = conn.getresponse()
    assert resp.status == 200
    sim.stop()
    sim.stop()
    resp.read()
    conn.close()


@pytest.mark.parametrize(
    ("version", "expected"),
    [
        ("1.22", {"major": "1", "minor": "22", "gitVersion": "v1.22.0"}),
        (
            "v1.33.1",
            {
                "minor": "33",
                "gitVersion": "v1.33.1",
                "emulationMinor": "33",
                "minCompatibilityMinor": "32",
            },
        ),
    ],
)
def test_version_reports_the_version_the_server_runs(
    version: str, expected: dict[str, str]
) -> None:
    with KubeServer(version=version) as kube:
        status, body = raw(kube, "GET", "/version")
        openapi = raw(kube, "GET", "/openapi/v3/api/v1")[1]
    assert status == 200
    assert {k: body[k] for k in expected} == expected
    assert ("emulationMajor" in body) == (version != "1.22")  # fields added in 1.33
    assert openapi["info"]["version"] == expected["gitVersion"]


def test_version_is_checked() -> None:
    with pytest.raises(ValueError, match=r"'one\.thirty'"):
        KubeServer(version="one.thirty")


def test_kube_process_serves_tls_and_stops_cleanly(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    with KubeProcess(kubeconfig, version="1.31", tls=True, log_path=tmp_path / "kube.log") as kube:
        assert kube.url.startswith("https://127.0.0.1:")
        api = kube.api_client()
        try:
            info = client.VersionApi(api).get_code()
            assert info.git_version == "v1.31.0"
            client.CoreV1Api(api).create_namespaced_config_map("default", make_cm("p"))
        finally:
            api.close()
        assert kube.control.state()["objects"]["/configmaps"]
        assert kube.stop() == 0
    assert kube.stop() == 0  # idempotent: the same exit code again
    assert not kube.running


def test_kube_process_readiness_failure_carries_the_log(tmp_path: Path) -> None:
    kube = KubeProcess(tmp_path / "kc", version="2", log_path=tmp_path / "kube.log")
    with pytest.raises(
        ComponentNotReady, match=r"(?s)exited with status 2.*'2' is not of the form"
    ):
        kube.start()
    assert not kube.running


@pytest.mark.parametrize(
    ("fault", "names"),
    [
        ({"verb": "explode"}, "verb='explode'"),
        ({"status": 0}, "status=0"),
        ({"status": 500, "count": -1}, "count=-1"),
        ({"status": 500, "probability": 2}, "probability=2"),
        ({"status": 500, "latency_ms": 600_001}, "latency_ms=600001"),
        ({"effect": "latency"}, "latency_ms=0"),
        ({"effect": "latency", "latency_ms": 10, "status": 503}, "status=503"),
        ({"status": 500, "colour": "red"}, "colour='red'"),
    ],
)
def test_bad_fault_is_refused_naming_the_field(
    sim: KubeServer, fault: dict[str, object], names: str
) -> None:
    status, body = raw(
        sim,
        "POST",
        "/_lab/faults",
        json.dumps(fault).encode(),
        {"Content-Type": "application/json"},
    )
    assert (status, body["reason"]) == (400, "BadRequest")
    assert names in body["message"]
    assert sim.control.faults() == []


def test_fault_probability_is_seeded(sim: KubeServer, core: client.CoreV1Api) -> None:
    def run() -> list[int]:
        sim.control.clear_faults()
        sim.control.add_fault(verb="list", resource="configmaps", probability=0.5, seed=3)
        outcomes = []
        for _ in range(20):
            try:
                core.list_namespaced_config_map("default")
                outcomes.append(200)
            except ApiException as exc:
                outcomes.append(exc.status)
        return outcomes

    first = run()
    assert first == run()
    assert set(first) == {200, 500}
    sim.control.clear_faults()
