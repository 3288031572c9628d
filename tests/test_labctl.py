"""``invoke lab.up`` / ``lab.down`` through their functions: a real lab in the background.

Asserts the issue's promise: up initializes every node, state.json carries what tools need,
and down leaves no process, port or state behind.
"""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from rich.console import Console

from lab import labview
from lab.frontdoor.down import down
from lab.frontdoor.up import up
from lab.preflight import check_vpc_cidr_free
from lab.spec import up_request
from lab.state import LabError, load_state


@pytest.mark.slow
def test_up_status_down_leaves_nothing_behind(tmp_path: Path) -> None:
    console = Console(file=io.StringIO(), width=120)
    state = up(up_request(name="t", nodes=2, backend="sim"), root=tmp_path, console=console)
    try:
        assert state.backend == "sim"
        assert state.vpc_id
        assert state.node_security_group
        assert state.controller
        assert {n.name for n in state.nodes} == {"ccm-lab-control-plane", "ccm-lab-worker"}
        assert all(n.instance_id.startswith("i-") for n in state.nodes)
        assert load_state("t", tmp_path) == state, "state.json round-trips"

        doc = labview.status(name="t", root=tmp_path)
        assert doc["problems"] == []
        live = doc["live"]
        assert live["controller_healthy"] is True
        by_name = {n["name"]: n for n in live["nodes"]}
        for node in state.nodes:
            seen = by_name[node.name]
            assert seen["provider_id"] == node.provider_id
            assert not any("uninitialized" in t for t in seen["taints"])
            assert seen["zone"] == node.zone
        labview.render_status(doc, console)
        assert "ccm-lab-worker" in console.file.getvalue()  # type: ignore[attr-defined]

        processes = [ref for _, ref in state.processes()]
        urls = [url for _, url in state.endpoints()]
        assert len(processes) == 2
        assert all(ref.alive() for ref in processes)
        assert all(labview.port_open(u) for u in urls)
        directory = tmp_path / "t"
        assert directory.stat().st_mode & 0o777 == 0o700, ".lab/<name> is private"
        for path in directory.rglob("*"):
            if path.is_file():
                assert path.stat().st_mode & 0o077 == 0, f"{path} is readable by others"
    finally:
        down(name="t", root=tmp_path, console=console)
    assert not any(ref.alive() for ref in processes)
    assert not any(labview.port_open(u) for u in urls)
    assert not (tmp_path / "t").exists()


def test_commands_on_a_missing_lab_say_how_to_start_one(tmp_path: Path) -> None:
    with pytest.raises(LabError, match=r"invoke lab\.up --name nope"):
        labview.status(name="nope", root=tmp_path)
    console = Console(file=io.StringIO())
    down(name="nope", root=tmp_path, console=console)
    assert "not up" in console.file.getvalue()  # type: ignore[attr-defined]


def test_vpc_cidr_colliding_on_kind_is_refused_naming_the_collision(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from lab.cluster import kind_network
    from tests.cluster.fakecli import FakeCLI

    fake = FakeCLI(tmp_path / "fake")
    fake.set(networks={"other-lab": {"Subnet": "10.0.0.0/20", "Labels": {}}})
    monkeypatch.setattr(kind_network, "route_blocks", lambda *a, **k: [])
    docker = str(fake.bin / "docker")
    with pytest.raises(LabError) as info:
        check_vpc_cidr_free("10.0.0.0/16", docker=docker)
    assert str(info.value).startswith(
        "--vpc-cidr 10.0.0.0/16 overlaps 10.0.0.0/20 (docker network other-lab)"
    )
    check_vpc_cidr_free("10.1.0.0/16", docker=docker)  # free: no error
