"""``python -m lab.imds`` as a child process: ready line, real client, clean SIGTERM exit."""

from __future__ import annotations

from pathlib import Path

import pytest

from lab.component import ComponentNotReady
from lab.imds import ImdsProcess
from tests.imds.conftest import REGION, SeededInstance, botocore_region, get


def test_child_process_serves_and_exits_cleanly(
    aws_url: str, node: SeededInstance, tmp_path: Path
) -> None:
    proc = ImdsProcess(
        aws_url,
        REGION,
        instance_id=node.instance_id,
        imdsv2="required",
        log_path=tmp_path / "imds.log",
    )
    with proc:
        assert proc.url.startswith("http://127.0.0.1:")
        assert botocore_region(proc.url) == REGION
        assert get(proc.url, "latest/meta-data/instance-id").status == 401  # --imdsv2 required
        assert proc.control.state()["tokens"] == 1
        code = proc.stop()
    assert code == 0
    assert proc.stop() == 0  # idempotent: the same exit code again


def test_child_process_maps_source_addresses(
    aws_url: str, node: SeededInstance, tmp_path: Path
) -> None:
    with ImdsProcess(
        aws_url, REGION, source_addresses={"127.0.0.1": node.instance_id}, client_hops=2
    ) as proc:
        assert get(proc.url, "latest/meta-data/instance-id").body == node.instance_id
        state = proc.control.state()["settings"]
        assert state["source_addresses"] == {"127.0.0.1": node.instance_id}
        assert state["client_hops"] == 2
        assert state["default_instance_id"] is None


def test_readiness_failure_carries_the_log(aws_url: str, tmp_path: Path) -> None:
    proc = ImdsProcess(aws_url, extra_args=("--client-hops", "0"), log_path=tmp_path / "imds.log")
    with pytest.raises(ComponentNotReady, match=r"--client-hops=0: must be >= 1"):
        proc.start()
    bad_map = ImdsProcess(aws_url, extra_args=("--map", "10.0.0.1"), log_path=tmp_path / "b.log")
    with pytest.raises(ComponentNotReady, match=r"--map='10.0.0.1': expected IP=INSTANCE_ID"):
        bad_map.start()
