"""Health and metrics endpoints over real HTTP on a free loopback port."""

from __future__ import annotations

import urllib.error
import urllib.request

import pytest

from controller.runtime.metrics import Metrics
from controller.runtime.server import HealthServer


def get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def test_health_ready_and_metrics() -> None:
    metrics = Metrics()
    metrics.observe_sync("service", "error", 0.25)
    metrics.observe_cloud_call(
        service="ec2", action="DescribeInstances", outcome="Throttling", seconds=0.01
    )
    metrics.set_depth("service", 3)
    problem: list[str] = ["informers syncing"]
    with HealthServer(metrics=metrics.render) as server:
        host, port = server.address
        assert host == "127.0.0.1"
        assert port > 0
        server.ready["informers"] = lambda: problem[0] if problem else None
        assert get(server.url + "/healthz") == (200, "ok\n")
        code, body = get(server.url + "/readyz")
        assert code == 500
        assert "[-]informers failed: informers syncing" in body
        problem.clear()
        code, body = get(server.url + "/readyz?verbose")
        assert code == 200
        assert "[+]informers ok" in body
        code, body = get(server.url + "/metrics")
        assert code == 200
        assert 'ccm_sync_total{controller="service",outcome="error"} 1.0' in body
        assert (
            'ccm_cloud_api_calls_total{action="DescribeInstances",outcome="Throttling",'
            'service="ec2"} 1.0'
        ) in body
        assert 'ccm_workqueue_depth{queue="service"} 3.0' in body
        assert get(server.url + "/nope")[0] == 404
    server.stop()  # idempotent
    with pytest.raises(RuntimeError):
        _ = server.address
