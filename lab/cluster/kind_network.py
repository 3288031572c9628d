"""The kind nodes' Docker network: an address block free on this host, and its gateway.

A kind lab's nodes sit on a bridge network whose subnet is the lab VPC's first zone subnet, so
each kubelet's ``--node-ip`` is a valid private IP of its fake instance (``lab.cluster.kind``).
A bridge adds a route on the host: a block that overlaps another Docker network fails
("Pool overlaps with other one on this address space"), and one that overlaps a host route (a
home LAN on 10.0.0.x, a VPN) silently takes that traffic away from it. So the VPC block is
chosen here, before anything is created: the first of :data:`CANDIDATES` that overlaps neither
an existing Docker network (``docker network inspect`` of every network) nor a host route
(``ip -j route``, else ``/proc/net/route``), or the block the user named (``--vpc-cidr``),
checked the same way, with an error naming what it collides with.

The network is created with an explicit ``--gateway`` (the subnet's first host): without one,
Docker (docker.io 20.10 checked) reports no ``Gateway`` in ``docker network inspect`` and gives
the bridge the first address of ``--ip-range`` instead (see ``tests/cluster/fakecli.py``).
"""

from __future__ import annotations

import dataclasses
import ipaddress
import json
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from lab.exec import CommandError, Runner

IPv4Net = ipaddress.IPv4Network

#: VPC blocks tried in order: /16s of 10.0.0.0/8 (the lab's historical 10.0.0.0/16 first).
CANDIDATES: tuple[str, ...] = tuple(f"10.{i}.0.0/16" for i in range(256))


class NetworkCollision(ValueError):
    """The wanted block overlaps a Docker network or a host route (named in the message)."""


@dataclasses.dataclass(frozen=True)
class UsedBlock:
    """An address block in use on this host, and by what."""

    network: IPv4Net
    owner: str  # "docker network kind", "host route via wlan0"


def docker_blocks(runner: Runner, docker: str = "docker") -> list[UsedBlock]:
    """Every IPv4 subnet of every Docker network."""
    names = runner.run([docker, "network", "ls", "--quiet"], timeout=30).stdout.split()
    if not names:
        return []
    inspected = json.loads(runner.run([docker, "network", "inspect", *names], timeout=30).stdout)
    used = []
    for net in inspected:
        for config in (net.get("IPAM") or {}).get("Config") or []:
            subnet = _ipv4(config.get("Subnet"))
            if subnet is not None:
                used.append(UsedBlock(subnet, f"docker network {net.get('Name', '?')}"))
    return used


def route_blocks(
    runner: Runner | None = None, *, proc_route: Path = Path("/proc/net/route")
) -> list[UsedBlock]:
    """The host's IPv4 routes other than the default route (``ip -j route``, or the kernel's
    table when ``ip`` is missing)."""
    if runner is not None:
        try:
            result = runner.run(["ip", "-j", "route", "show"], timeout=10, check=False)
        except CommandError:  # no `ip` on PATH
            result = None
        if result is not None and result.ok and result.stdout.strip():
            return _from_ip_json(json.loads(result.stdout))
    if not proc_route.exists():
        return []
    return _from_proc_route(proc_route.read_text())


def _from_ip_json(routes: Sequence[dict[str, Any]]) -> list[UsedBlock]:
    used = []
    for route in routes:
        dst = route.get("dst")
        if not dst or dst == "default":
            continue
        net = _ipv4(dst if "/" in dst else f"{dst}/32")
        if net is not None:
            used.append(UsedBlock(net, f"host route via {route.get('dev', '?')}"))
    return used


def _from_proc_route(text: str) -> list[UsedBlock]:
    used = []
    for line in text.splitlines()[1:]:
        fields = line.split()
        if len(fields) < 8:
            continue
        dest, mask = _le_ip(fields[1]), _le_ip(fields[7])
        if mask == "0.0.0.0":
            continue  # the default route
        net = _ipv4(f"{dest}/{mask}")
        if net is not None:
            used.append(UsedBlock(net, f"host route via {fields[0]}"))
    return used


def _le_ip(hex_text: str) -> str:
    """``/proc/net/route`` writes addresses as little-endian hex."""
    return str(ipaddress.IPv4Address(int(hex_text, 16).to_bytes(4, "little")))


def _ipv4(text: Any) -> IPv4Net | None:
    try:
        net = ipaddress.ip_network(str(text), strict=False)
    except ValueError:
        return None
    return net if isinstance(net, IPv4Net) else None


def collision(block: str, used: Iterable[UsedBlock]) -> UsedBlock | None:
    net = ipaddress.ip_network(block)
    return next((u for u in used if u.network.overlaps(net)), None)


def choose_vpc_cidr(
    used: Sequence[UsedBlock],
    *,
    wanted: str | None = None,
    candidates: Sequence[str] = CANDIDATES,
    ignore: Iterable[str] = (),
) -> str:
    """``wanted`` if it is free, else raise :class:`NetworkCollision`; with no ``wanted``, the
    first free candidate. ``ignore`` names Docker networks that are the lab's own (reused)."""
    skip = {f"docker network {name}" for name in ignore}
    relevant = [u for u in used if u.owner not in skip]
    if wanted is not None:
        hit = collision(wanted, relevant)
        if hit is not None:
            raise NetworkCollision(
                f"--vpc-cidr {wanted} overlaps {hit.network} ({hit.owner}); choose a block "
                "that overlaps no Docker network and no host route (`docker network inspect`, "
                "`ip route`), or leave --vpc-cidr out to have a free one chosen"
            )
        return wanted
    for block in candidates:
        if collision(block, relevant) is None:
            return block
    raise NetworkCollision(
        f"no free block among {candidates[0]} .. {candidates[-1]}: every one overlaps a Docker "
        "network or a host route; remove unused Docker networks (`docker network prune`) or "
        "name a block with --vpc-cidr"
    )


def gateway_of(subnet: str) -> str:
    """The address the lab gives the bridge: the subnet's first host."""
    return str(next(ipaddress.ip_network(subnet).hosts()))


def ipam_gateway(inspect_json: str) -> str | None:
    """The IPv4 gateway ``docker network inspect NAME`` reports, or None (none configured)."""
    for net in json.loads(inspect_json):
        for config in (net.get("IPAM") or {}).get("Config") or []:
            gateway = config.get("Gateway")
            if gateway and ":" not in gateway:
                return str(gateway)
    return None
