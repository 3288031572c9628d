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

from controller.app import (
    ControllerManager,
    Options,
    _controllers,
    build_parser,
    main,
    options_from_args,
    parse_duration,
)
from controller.cloud import LB_FINALIZER, ServiceKey
from controller.fake import FakeCloud, FakeInstance, FakeKube
from controller.legacy import BEHAVIORS, LegacyFlags
from controller.runtime.leader import LeaderElectionConfig
from controller.tagging import TAGGING_LABEL, TaggingOptions
from tests.controller.builders import make_node, make_service, provider_id, uninitialized

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


def test_manager_runs_the_tagging_controller_only_when_named() -> None:
    kube, cloud = FakeKube(), FakeCloud()
    cloud.add_instance(FakeInstance("i-1", private_ip="10.0.0.7"), node_name="n1")
    kube.create("nodes", make_node("n1", provider_id("aws:///us-east-1a/i-1")))
    tagging = TaggingOptions(tags={"team": "a"}, resources=("instance",))
    off = ControllerManager(kube, cloud, fast_options(tagging=tagging)).start()
    try:
        wait_for(lambda: off.running)
        assert off.tagging is None
    finally:
        off.stop()
    assert off.wait(10) == 0
    on = ControllerManager(
        kube, cloud, fast_options(controllers=("cloud-node", "tagging"), tagging=tagging)
    ).start()
    try:
        wait_for(lambda: cloud.tags.get("i-1") == {"team": "a"})
        wait_for(lambda: TAGGING_LABEL in kube.get("nodes", "n1")["metadata"]["labels"])
        kube.delete("nodes", "n1")
        wait_for(lambda: cloud.tags.get("i-1") == {})
    finally:
        on.stop()
    assert on.wait(10) == 0


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
        managers[leader].stop()
        assert managers[leader].wait(10) == 0
        # the stopped leader released its lease (no waiting out the 1 s lease duration) and
        # the standby took it over: the lease says so, and so does the work it now does
        kube.create("services", make_service("api"))
        wait_for(lambda: ServiceKey("default/api") in clouds[standby].load_balancers)
        lease = kube.leases["kube-system/cloud-controller-manager"]["spec"]
        assert lease["holderIdentity"] == f"m{standby}"
        assert lease["leaseTransitions"] == 1
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
    assert f"known ids: {', '.join(sorted(BEHAVIORS))}" in r.stderr
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


TAGGING = ["--controllers", "*,tagging", "--resources", "instance"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ([*TAGGING, "--tags", "team=a,aws:owner=b"], "key 'aws:owner' starts with 'aws:'"),
        ([*TAGGING, "--tags", "team=AWS:x"], "value 'AWS:x' starts with 'aws:'"),
        ([*TAGGING, "--tags", "=a"], "--tags: empty key in ='a'"),
        ([*TAGGING, "--tags", "k" * 129 + "=a"], "is longer than 128 characters"),
        ([*TAGGING, "--tags", "team=" + "v" * 257], "value of 'team' is longer than 256"),
        ([*TAGGING, "--tags", "team"], "--tags: 'team' must be formatted as key=value"),
        ([*TAGGING], "--tags must not be empty"),
        (["--controllers", "*,tagging", "--tags", "a=b"], "--resources must not be empty"),
        ([*TAGGING, "--tags", "a=b", "--resources", "volume"], "'volume' is not a supported"),
        ([*TAGGING, "--tags", "a=b", "--tagging-controller-concurrent-node-syncs", "0"], "got 0"),
        ([*TAGGING, "--tags", "a=b", "--tagging-controller-rate-limit", "-1"], "got -1.0"),
    ],
)
def test_cli_refuses_bad_tagging_options_before_any_cloud_call(
    args: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Exit 2 naming the flag and value, before the cloud config or AWS is touched (the
    cloud config path does not exist: reading it would be another error)."""
    assert main([*args, "--cloud-config", "/nonexistent/cloud.conf"]) == 2
    err = capsys.readouterr().err
    assert message in err
    assert "cloud.conf" not in err


def test_controllers_flag_as_upstream() -> None:
    assert _controllers("*") == ("service", "cloud-node", "cloud-node-lifecycle")
    assert _controllers("*,tagging") == (
        "service",
        "cloud-node",
        "cloud-node-lifecycle",
        "tagging",
    )
    assert _controllers("*,-service") == ("cloud-node", "cloud-node-lifecycle")
    assert _controllers("tagging") == ("tagging",)


def test_tags_flag_merges_and_tagging_is_off_unless_named(
    capsys: pytest.CaptureFixture[str],
) -> None:
    args = build_parser().parse_args(["--tags", "a=1,b=x=y", "--tags", "a=2", "--tags", '"c=3"'])
    options = options_from_args(args, LegacyFlags())
    assert dict(options.tagging.tags) == {"a": "2", "b": "x=y", "c": "3"}
    assert "tagging" not in options.controllers
    # bad tag keys are not refused while the controller is off (upstream validates on start)
    assert main(["--tags", "aws:x=1", "--cloud-config", "/nonexistent/cloud.conf"]) == 2
    assert "cannot read /nonexistent/cloud.conf" in capsys.readouterr().err


def test_cli_leader_election_timing_is_validated() -> None:
    r = run_cli("--leader-elect", "--leader-elect-renew-deadline", "20s")
    assert r.returncode == 2
    assert "must be greater than the renew deadline" in r.stderr
