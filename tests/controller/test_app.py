"""The controller manager end to end on the fake apiserver (real informers and threads),
and the CLI's error exits."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from controller.app import ControllerManager, Options, main, parse_duration
from controller.cloud import LB_FINALIZER, ServiceKey
from controller.fake import FakeCloud, FakeInstance, FakeKube
from controller.runtime.leader import LeaderElectionConfig
from tests.controller.builders import make_node, make_service, uninitialized

REPO = Path(__file__).resolve().parents[2]


def wait_for(cond: Callable[[], object], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(0.02)
    raise AssertionError("condition not met in time")


def fast_options(**kw: Any) -> Options:
    return dataclasses.replace(Options(metrics_addr="127.0.0.1:0", node_monitor_period=0.1), **kw)


def test_manager_runs_all_controllers_and_serves_metrics() -> None:
    kube, cloud = FakeKube(), FakeCloud()
    cloud.add_instance(FakeInstance("i-1", private_ip="10.0.0.7"), node_name="n1")
    kube.create("nodes", make_node("n1", uninitialized()))
    kube.create("services", make_service("web"))
    manager = ControllerManager(kube, cloud, fast_options()).start()
    try:
        wait_for(lambda: manager.running)
        wait_for(lambda: ServiceKey("default/web") in cloud.load_balancers)
        wait_for(lambda: kube.get("services", "default/web")["status"]["loadBalancer"])
        wait_for(lambda: not kube.get("nodes", "n1")["spec"]["taints"])
        assert kube.get("services", "default/web")["metadata"]["finalizers"] == [LB_FINALIZER]
        assert manager.server is not None
        with urllib.request.urlopen(manager.server.url + "/readyz", timeout=5) as resp:
            assert resp.status == 200
        with urllib.request.urlopen(manager.server.url + "/metrics", timeout=5) as resp:
            text = resp.read().decode()
        assert 'ccm_sync_total{controller="service",outcome="success"}' in text
        assert "ccm_leader 1.0" in text
        # The lifecycle loop runs on its period: a terminated instance's NotReady node goes.
        cloud.set_state("i-1", "terminated")
        node = kube.get("nodes", "n1")
        node["metadata"]["creationTimestamp"] = "2020-01-01T00:00:00Z"
        node["status"]["conditions"] = [{"type": "Ready", "status": "False"}]
        kube.update("nodes", node)
        wait_for(lambda: kube.stores["nodes"].get("n1") is None)
    finally:
        manager.stop()
    assert manager.wait(10) == 0


def test_only_the_leader_acts_and_a_standby_takes_over_on_release() -> None:
    kube = FakeKube()
    clouds = [FakeCloud(), FakeCloud()]
    kube.create("nodes", make_node("n1"))
    managers = [
        ControllerManager(
            kube,
            clouds[i],
            fast_options(
                leader_elect=True,
                leader=LeaderElectionConfig(
                    identity=f"m{i}", lease_duration=1.0, renew_deadline=0.6, retry_period=0.1
                ),
            ),
        ).start()
        for i in range(2)
    ]
    try:
        wait_for(lambda: any(m.running for m in managers))
        leader = 0 if managers[0].running else 1
        standby = 1 - leader
        kube.create("services", make_service("web"))
        wait_for(lambda: ServiceKey("default/web") in clouds[leader].load_balancers)
        assert clouds[standby].calls == []
        assert not managers[standby].running
        began = time.monotonic()
        managers[leader].stop()
        assert managers[leader].wait(10) == 0
        kube.create("services", make_service("api"))
        wait_for(lambda: ServiceKey("default/api") in clouds[standby].load_balancers)
        assert time.monotonic() - began < 5
    finally:
        for m in managers:
            m.stop()
            m.wait(10)


def test_parse_duration() -> None:
    assert [parse_duration(x) for x in ("500ms", "5s", "2m", "1h", "7")] == [
        0.5,
        5.0,
        120.0,
        3600.0,
        7.0,
    ]


def run_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "controller", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, **(env or {})},
        check=False,
    )


def test_cli_unknown_legacy_behavior_lists_known_ids() -> None:
    r = run_cli("--legacy-behavior", "k8s-84926,nope")
    assert r.returncode == 2
    assert "unknown id 'nope'" in r.stderr
    assert "known ids: k8s-81636, k8s-84256" in r.stderr
    assert "Traceback" not in r.stderr


def test_cli_bad_cloud_config_names_the_key(tmp_path: Path) -> None:
    conf = tmp_path / "cloud.conf"
    conf.write_text("[Global]\nDisableSecurityGroupIngress = maybe\n")
    r = run_cli("--cloud-config", str(conf))
    assert r.returncode == 2
    assert "DisableSecurityGroupIngress" in r.stderr
    assert "'maybe'" in r.stderr
    assert "Traceback" not in r.stderr


def test_cli_missing_cloud_config_file(tmp_path: Path) -> None:
    r = run_cli("--cloud-config", str(tmp_path / "absent.conf"))
    assert r.returncode == 2
    assert "absent.conf" in r.stderr


def test_cli_cloud_init_error_exits_1_without_traceback(tmp_path: Path) -> None:
    conf = tmp_path / "cloud.conf"
    conf.write_text("[Global]\n")
    r = run_cli(
        "--cloud-config",
        str(conf),
        env={"AWS_EC2_METADATA_SERVICE_ENDPOINT": "http://127.0.0.1:9/"},
    )
    assert r.returncode == 1
    assert "cloud provider could not start" in r.stderr
    assert "127.0.0.1:9" in r.stderr
    assert "Traceback" not in r.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--metrics-addr", "nonsense"], "want HOST:PORT"),
        (["--node-monitor-period", "fast"], "invalid duration 'fast'"),
        (["--sg-delete-retry", "5s"], "INTERVAL,TIMEOUT"),
        (["--controllers", "service,routes"], "unknown controller(s) routes"),
    ],
)
def test_cli_bad_flags(args: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(args)
    assert exc.value.code == 2
    assert message in capsys.readouterr().err


def test_cli_leader_election_timing_is_validated() -> None:
    r = run_cli("--leader-elect", "--leader-elect-renew-deadline", "20s")
    assert r.returncode == 2
    assert "must be greater than the renew deadline" in r.stderr
