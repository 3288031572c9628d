"""Choosing the kind nodes' address block: Docker networks and host routes it must not
overlap, read the way the host reports them, and the errors that name the collision."""

from __future__ import annotations

import ipaddress
import json
from pathlib import Path

import pytest

from lab.cluster.kind_network import (
    NetworkCollision,
    UsedBlock,
    choose_vpc_cidr,
    docker_blocks,
    gateway_of,
    ipam_gateway,
    route_blocks,
)
from lab.exec import RecordingRunner, Reply, SubprocessRunner

from .fakecli import FakeCLI

# /proc/net/route as the kernel writes it (little-endian hex): default via 192.168.1.1 on
# wlan0, the LAN 192.168.1.0/24, Docker's docker0 172.17.0.0/16, a VPN's 10.0.0.0/16.
PROC_ROUTE = """\
Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT
wlan0\t00000000\t0101A8C0\t0003\t0\t0\t600\t00000000\t0\t0\t0
wlan0\t0001A8C0\t00000000\t0001\t0\t0\t600\t00FFFFFF\t0\t0\t0
docker0\t000011AC\t00000000\t0001\t0\t0\t0\t0000FFFF\t0\t0\t0
tun0\t0000000A\t00000000\t0001\t0\t0\t0\t0000FFFF\t0\t0\t0
"""

IP_JSON = [
    {"dst": "default", "gateway": "192.168.1.1", "dev": "wlan0"},
    {"dst": "192.168.1.0/24", "dev": "wlan0", "protocol": "kernel"},
    {"dst": "10.0.0.7", "dev": "tun0"},
]


def net(text: str) -> ipaddress.IPv4Network:
    return ipaddress.IPv4Network(text)


def test_proc_net_route_is_read_little_endian_without_the_default(tmp_path: Path) -> None:
    path = tmp_path / "route"
    path.write_text(PROC_ROUTE)
    assert route_blocks(None, proc_route=path) == [
        UsedBlock(net("192.168.1.0/24"), "host route via wlan0"),
        UsedBlock(net("172.17.0.0/16"), "host route via docker0"),
        UsedBlock(net("10.0.0.0/16"), "host route via tun0"),
    ]


def test_ip_json_routes_and_fallback_to_proc(tmp_path: Path) -> None:
    runner = RecordingRunner([Reply(("ip",), stdout=json.dumps(IP_JSON))])
    assert route_blocks(runner) == [
        UsedBlock(net("192.168.1.0/24"), "host route via wlan0"),
        UsedBlock(net("10.0.0.7/32"), "host route via tun0"),
    ]
    assert runner.argvs == [("ip", "-j", "route", "show")]
    path = tmp_path / "route"
    path.write_text(PROC_ROUTE)
    no_ip = RecordingRunner([Reply(("ip",), returncode=127, stderr="ip: not found")])
    assert len(route_blocks(no_ip, proc_route=path)) == 3
    missing = SubprocessRunner(base_env={"PATH": str(tmp_path / "empty")})
    assert len(route_blocks(missing, proc_route=path)) == 3


def test_docker_blocks_from_every_network(tmp_path: Path) -> None:
    fake = FakeCLI(tmp_path)
    fake.set(
        networks={
            "kind": {"Subnet": "172.18.0.0/16", "Gateway": "172.18.0.1", "Labels": {}},
            "mine": {"Subnet": "10.3.0.0/20", "Labels": {}},
        }
    )
    assert docker_blocks(fake.runner()) == [
        UsedBlock(net("172.18.0.0/16"), "docker network kind"),
        UsedBlock(net("10.3.0.0/20"), "docker network mine"),
    ]
    assert fake.calls() == [
        ["docker", "network", "ls", "--quiet"],
        ["docker", "network", "inspect", "kind", "mine"],
    ]
    fake.set(networks={})
    assert docker_blocks(fake.runner()) == []


def test_first_free_block_is_chosen() -> None:
    used = [
        UsedBlock(net("10.0.0.0/24"), "host route via wlan0"),
        UsedBlock(net("10.1.0.0/20"), "docker network other"),
        UsedBlock(net("172.18.0.0/16"), "docker network kind"),
    ]
    assert choose_vpc_cidr(used) == "10.2.0.0/16"
    assert choose_vpc_cidr([]) == "10.0.0.0/16"
    # the lab's own network, reused, is no collision
    assert choose_vpc_cidr(used, ignore=["other"]) == "10.1.0.0/16"


def test_a_wanted_block_that_collides_names_the_collision() -> None:
    used = [UsedBlock(net("10.42.3.0/24"), "host route via tun0")]
    with pytest.raises(NetworkCollision) as info:
        choose_vpc_cidr(used, wanted="10.42.0.0/16")
    message = str(info.value)
    assert "--vpc-cidr 10.42.0.0/16 overlaps 10.42.3.0/24 (host route via tun0)" in message
    assert "leave --vpc-cidr out" in message
    assert choose_vpc_cidr(used, wanted="10.43.0.0/16") == "10.43.0.0/16"


def test_nothing_free_is_a_clear_error() -> None:
    used = [UsedBlock(net("10.0.0.0/8"), "host route via tun0")]
    with pytest.raises(NetworkCollision, match=r"no free block among 10\.0\.0\.0/16 \.\. "):
        choose_vpc_cidr(used)


def test_gateway_helpers() -> None:
    assert gateway_of("10.1.0.0/20") == "10.1.0.1"
    v6 = {"Subnet": "fc00::/64", "Gateway": "fc00::1"}
    with_gw = [{"IPAM": {"Config": [v6, {"Subnet": "10.1.0.0/20", "Gateway": "10.1.0.1"}]}}]
    assert ipam_gateway(json.dumps(with_gw)) == "10.1.0.1"
    # docker.io 20.10, network created with --subnet and no --gateway
    assert ipam_gateway(json.dumps([{"IPAM": {"Config": [{"Subnet": "10.0.0.0/20"}]}}])) is None
