"""``invoke lab.up`` / ``lab.down`` through their functions: a real lab in the background.

Asserts the issue's promise: up initializes every node, state.json carries what tools need,
and down leaves no process, port or state behind.
"""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from rich.console import Console

from lab import labctl
from lab.component import pid_alive


@pytest.mark.slow
def test_up_status_down_leaves_nothing_behind(tmp_path: Path) -> None:
    console = Console(file=io.StringIO(), width=120)
    state = labctl.up(name="t", nodes=2, backend="sim", root=tmp_path, console=console)
    try:
        for key in (
            "backend",
            "kubeconfig",
            "aws_endpoint",
            "imds_endpoint",
            "region",
            "cluster_id",
            "vpc_id",
            "node_security_group",
            "nodes",
            "controller",
        ):
            assert state[key], key
        assert state["backend"] == "sim"
        assert len(state["nodes"]) == 2
        assert {n["name"] for n in state["nodes"]} == {"ccm-lab-control-plane", "ccm-lab-worker"}
        assert all(n["instance_id"].startswith("i-") for n in state["nodes"])

        doc = labctl.status(name="t", root=tmp_path)
        live = doc["live"]
        assert live["controller_healthy"] is True
        by_name = {n["name"]: n for n in live["nodes"]}
        for node in state["nodes"]:
            seen = by_name[node["name"]]
            assert seen["provider_id"] == node["provider_id"]
            assert not any("uninitialized" in t for t in seen["taints"])
            assert seen["zone"] == node["zone"]
        labctl.render_status(doc, console)
        assert "ccm-lab-worker" in console.file.getvalue()  # type: ignore[attr-defined]

        pids = [state["controller"]["pid"], state["daemon"]["pid"]]
        urls = labctl.endpoints(state)
        assert all(pid_alive(p) for p in pids)
        assert all(labctl.port_open(u) for u in urls)
    finally:
        labctl.down(name="t", root=tmp_path, console=console)
    assert not any(pid_alive(p) for p in pids)
    assert not any(labctl.port_open(u) for u in urls)
    assert not (tmp_path / "t").exists()


def test_commands_on_a_missing_lab_say_how_to_start_one(tmp_path: Path) -> None:
    with pytest.raises(labctl.LabError, match=r"invoke lab\.up --name nope"):
        labctl.status(name="nope", root=tmp_path)
    console = Console(file=io.StringIO())
    assert labctl.down(name="nope", root=tmp_path, console=console) == []
    assert "not up" in console.file.getvalue()  # type: ignore[attr-defined]
