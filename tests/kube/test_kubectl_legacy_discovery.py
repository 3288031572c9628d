"""kubectl's fallback to legacy discovery, against the simulator's legacy documents.

kubectl asks ``/api`` and ``/apis`` for aggregated discovery first; older clients (and a server
that does not answer with the aggregated ``Content-Type``) take the legacy path: ``/api/v1``
and one ``/apis/<group>/<version>`` request per group version. A small forwarding proxy in
front of the simulator removes the aggregated media range from ``Accept``, so the real kubectl
walks the legacy documents, and records the paths it requested.
"""

from __future__ import annotations

import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import yaml

from lab.exec import SubprocessRunner
from lab.kube.resources import groups
from lab.kube.server import KubeServer
from tests.kube.test_kubectl import KUBECTL, TIMEOUT, table

pytestmark = pytest.mark.skipif(not KUBECTL.exists(), reason=f"kubectl not installed at {KUBECTL}")


class _LegacyOnlyProxy(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, upstream: str) -> None:
        super().__init__(("127.0.0.1", 0), _ProxyHandler)
        self.upstream = upstream
        self.paths: list[str] = []
        self.lock = threading.Lock()


class _ProxyHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _LegacyOnlyProxy

    def log_message(self, format: str, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        with self.server.lock:
            self.server.paths.append(self.path.split("?", 1)[0])
        accept = ",".join(
            part
            for part in self.headers.get("Accept", "").split(",")
            if "apidiscovery.k8s.io" not in part
        )
        req = urllib.request.Request(self.server.upstream + self.path, headers={"Accept": accept})
        try:
            with urllib.request.urlopen(req, timeout=10) as resp:
                status, ctype, body = resp.status, resp.headers["Content-Type"], resp.read()
        except urllib.error.HTTPError as exc:
            status, ctype, body = exc.code, exc.headers["Content-Type"], exc.read()
        self.send_response(status)
        self.send_header("Content-Type", ctype or "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture
def proxy(sim: KubeServer) -> Iterator[_LegacyOnlyProxy]:
    if sim.token:
        pytest.skip("the legacy-discovery proxy forwards plain HTTP without credentials")
    server = _LegacyOnlyProxy(sim.url)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.1})
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def test_kubectl_reads_legacy_discovery(
    sim: KubeServer, proxy: _LegacyOnlyProxy, tmp_path: Path
) -> None:
    config = sim.kubeconfig()
    config["clusters"][0]["cluster"]["server"] = f"http://127.0.0.1:{proxy.server_address[1]}"
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(yaml.safe_dump(config))
    runner = SubprocessRunner()
    base = [str(KUBECTL), "--kubeconfig", str(kubeconfig), "--cache-dir", str(tmp_path / "c")]

    out = runner.run([*base, "api-resources"], timeout=TIMEOUT).stdout
    rows = {r[0]: r for r in table(out)[1:]}
    assert rows["leases"][1:] == ["coordination.k8s.io/v1", "true", "Lease"]
    assert rows["services"][1:] == ["svc", "v1", "true", "Service"]

    expected = {"/api", "/apis", "/api/v1"} | {
        f"/apis/{group}/{version}"
        for group, versions in groups().items()
        if group
        for version in versions
    }
    assert expected <= set(proxy.paths), f"legacy documents not all requested: {proxy.paths}"

    svc = table(runner.run([*base, "get", "svc", "kubernetes"], timeout=TIMEOUT).stdout)
    assert svc[1][:3] == ["kubernetes", "ClusterIP", "10.96.0.1"]
