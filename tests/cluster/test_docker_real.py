"""The lab's Docker operations against a real engine (marker ``docker``).

A private ``dockerd`` runs in namespaces this module makes (``tests/cluster/dockerd.py``), so
its bridges and routes never reach the host; without root or ``dockerd`` the group skips with
the reason. What runs for real: the kind provider's network step (``--subnet``, ``--gateway``,
``--ip-range``, owner label), the gateway it reads back, node discovery from containers labelled
as kind labels them (made from a ``docker import``-ed minimal root filesystem, no registry), the
owned network's removal, free-block selection against the engine's networks, and the
``docker save`` half of the image-archive fallback. The same sequences run against the fake
``docker``/``kind`` and must give the same answers, so the fakes the other tests rely on are
checked against the real engine here.
"""

from __future__ import annotations

import io
import ipaddress
import json
import os
import shutil
import subprocess
import sys
import tarfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from lab.cluster.base import ClusterSpec, NodeSpec, Role
from lab.cluster.kind import KindProvider
from lab.cluster.kind_network import UsedBlock, choose_vpc_cidr, docker_blocks
from lab.cluster.kind_steps import EnsureNetwork, KindContext
from lab.exec import CommandError, SubprocessRunner
from lab.versions.release import KubeVersion

from . import dockerd
from .fakecli import FakeCLI

pytestmark = [pytest.mark.docker, pytest.mark.timeout(300)]

IMAGE = "ccm-lab-test/min:1"


@pytest.fixture(scope="module")
def engine() -> Iterator[SubprocessRunner]:
    reason = dockerd.unavailable()
    if reason is not None:
        pytest.skip(f"docker group: {reason}")
    daemon = dockerd.PrivateDockerd()
    try:
        problem = daemon.start()
        if problem is not None:
            pytest.skip(f"docker group: a private dockerd did not start: {problem}")
        _import_image(daemon)
        yield daemon.runner()
    finally:
        daemon.stop()


def _import_image(daemon: dockerd.PrivateDockerd) -> None:
    subprocess.run(
        ["docker", "--host", daemon.host, "import", "-", IMAGE],
        input=dockerd.minimal_rootfs(),
        capture_output=True,
        check=True,
        timeout=60,
    )


def spec(name: str) -> ClusterSpec:
    roles = (NodeSpec(Role.CONTROL_PLANE), NodeSpec(Role.WORKER))
    return ClusterSpec(name, KubeVersion.parse("1.29"), roles)


def provider(runner: SubprocessRunner, name: str, tmp_path: Path, **kwargs: Any) -> KindProvider:
    return KindProvider(name, state_dir=tmp_path / name, runner=runner, **kwargs)


def run_node(runner: SubprocessRunner, name: str, cluster: str, role: str, network: str) -> None:
    runner.run(
        ["docker", "run", "--detach", "--name", name, "--network", network,
         "--label", f"io.x-k8s.kind.cluster={cluster}", "--label", f"io.x-k8s.kind.role={role}",
         IMAGE, "/bin/sleep", "600"],
        timeout=60,
    )  # fmt: skip


def ipam(runner: SubprocessRunner, network: str) -> list[dict[str, str]]:
    out = runner.run(["docker", "network", "inspect", network], timeout=30).stdout
    config: list[dict[str, str]] = json.loads(out)[0]["IPAM"]["Config"]
    return config


def test_network_step_creates_a_network_that_reports_its_gateway(
    engine: SubprocessRunner, tmp_path: Path
) -> None:
    p = provider(engine, "net1", tmp_path, network_subnet="10.20.0.0/20",
                 network_ip_range="10.20.8.0/21")  # fmt: skip
    ctx = KindContext(spec=spec("net1"), provider=p)
    step = EnsureNetwork()
    step.execute(ctx)
    try:
        assert ipam(engine, "ccm-lab-net1") == [
            {"Subnet": "10.20.0.0/20", "IPRange": "10.20.8.0/21", "Gateway": "10.20.0.1"}
        ]
        assert p.host_address() == "10.20.0.1"
        labels = json.loads(engine.run(["docker", "network", "inspect", "ccm-lab-net1"]).stdout)[0][
            "Labels"
        ]
        assert labels == {"io.x-k8s.ccm-lab.cluster": "net1"}
        step.execute(KindContext(spec=spec("net1"), provider=p))  # reused, not re-created
    finally:
        step.undo(ctx)
    # "No such network" (docker.io 20.10 CLI) or "network ... not found" (newer CLIs)
    with pytest.raises(CommandError, match=r"No such network|not found"):
        engine.run(["docker", "network", "inspect", "ccm-lab-net1"])


def test_nodes_discovered_from_real_containers_and_owned_network_removed(
    engine: SubprocessRunner, tmp_path: Path
) -> None:
    p = provider(engine, "disc", tmp_path, network_subnet="10.21.0.0/20",
                 network_ip_range="10.21.8.0/21", kind_binary="true")  # fmt: skip
    EnsureNetwork().execute(KindContext(spec=spec("disc"), provider=p))
    names = ["disc-control-plane", "disc-worker", "disc-external-load-balancer"]
    try:
        for name, role in zip(
            names, ["control-plane", "worker", "external-load-balancer"], strict=True
        ):
            run_node(engine, name, "disc", role, "ccm-lab-disc")
        run_node(engine, "other-worker", "other", "worker", "ccm-lab-disc")
        nodes = p.nodes()
        assert [(n.name, n.role) for n in nodes] == [
            ("disc-control-plane", Role.CONTROL_PLANE),
            ("disc-worker", Role.WORKER),
        ]
        ips = [ipaddress.ip_address(str(n.ip)) for n in nodes]
        assert all(ip in ipaddress.ip_network("10.21.8.0/21") for ip in ips), ips
        assert set(p.gateways.values()) == {"10.21.0.1"}
    finally:
        engine.run(["docker", "rm", "--force", *names, "other-worker"], timeout=60)
    p.delete()  # kind is `true` here: what is checked is the network half
    p.delete()
    assert (
        "ccm-lab-disc"
        not in engine.run(["docker", "network", "ls", "--format", "{{.Name}}"]).stdout
    )


def test_free_block_selection_sees_the_engines_networks(engine: SubprocessRunner) -> None:
    engine.run(["docker", "network", "create", "--subnet", "10.0.0.0/16", "taken"])
    try:
        used = docker_blocks(engine)
        assert UsedBlock(ipaddress.IPv4Network("10.0.0.0/16"), "docker network taken") in used
        assert choose_vpc_cidr(used) == "10.1.0.0/16"
        with pytest.raises(
            CommandError, match="Pool overlaps with other one on this address space"
        ):
            engine.run(["docker", "network", "create", "--subnet", "10.0.0.0/20", "clash"])
    finally:
        engine.run(["docker", "network", "rm", "taken"])


@pytest.mark.parametrize("gateway", [None, "10.22.0.1"])
def test_the_fakes_allocate_and_report_as_the_engine_does(
    engine: SubprocessRunner, tmp_path: Path, gateway: str | None
) -> None:
    """Same network, two nodes: the fake ``docker``+``kind`` and the real engine must agree on
    the IPAM answer (no Gateway without --gateway) and on each container's IP and gateway."""
    create = ["docker", "network", "create", "--driver", "bridge", "--subnet", "10.22.0.0/20",
              "--ip-range", "10.22.8.0/21", *(["--gateway", gateway] if gateway else []),
              "same"]  # fmt: skip
    fake = FakeCLI(tmp_path / "fake")
    fake.set(kind_version="kind v0.29.0")
    fake.runner().run(create)
    config = tmp_path / "two.yaml"
    config.write_text(
        "kind: Cluster\napiVersion: kind.x-k8s.io/v1alpha4\n"
        "nodes:\n- role: control-plane\n- role: worker\n"
    )
    fake.runner().run(
        ["kind", "create", "cluster", "--name", "same", "--config", str(config),
         "--kubeconfig", str(tmp_path / "kc")],
        env={"KIND_EXPERIMENTAL_DOCKER_NETWORK": "same"},
    )  # fmt: skip
    fake_containers = json.loads(
        fake.runner().run(["docker", "inspect", "same-control-plane", "same-worker"]).stdout
    )
    engine.run(create)
    try:
        run_node(engine, "same-control-plane", "same", "control-plane", "same")
        run_node(engine, "same-worker", "same", "worker", "same")
        real = json.loads(
            engine.run(["docker", "inspect", "same-control-plane", "same-worker"]).stdout
        )
        assert (
            ipam(engine, "same")
            == json.loads(fake.runner().run(["docker", "network", "inspect", "same"]).stdout)[0][
                "IPAM"
            ]["Config"]
        )

        def addresses(containers: list[dict[str, Any]]) -> list[tuple[str, str]]:
            nets = [c["NetworkSettings"]["Networks"]["same"] for c in containers]
            return [(n["IPAddress"], n["Gateway"]) for n in nets]

        assert addresses(fake_containers) == addresses(real)
    finally:
        engine.run(["docker", "rm", "--force", "same-control-plane", "same-worker"], timeout=60)
        engine.run(["docker", "network", "rm", "same"])


def test_image_archive_fallback_saves_a_loadable_archive(
    engine: SubprocessRunner, tmp_path: Path
) -> None:
    """``kind load docker-image`` failing (kind#3795): the image goes through a real ``docker
    save`` (``--platform`` first, without it where this CLI or engine lacks it). kind itself is
    a script here that fails the first way and checks the archive the second way."""
    kind = tmp_path / "kind"
    seen = tmp_path / "archive-images.json"
    kind.write_text(
        f"#!{sys.executable} -I\n"
        "import json, sys, tarfile\n"
        "if sys.argv[1:3] == ['load', 'docker-image']:\n"
        "    sys.stderr.write('ERROR: failed to load image: ctr: content digest not found')\n"
        "    sys.exit(1)\n"
        "with tarfile.open(sys.argv[3]) as tar:\n"
        "    manifest = json.load(tar.extractfile('manifest.json'))\n"
        "tags = [t for m in manifest for t in m['RepoTags']]\n"
        f"open({str(seen)!r}, 'w').write(json.dumps(tags))\n"
    )
    kind.chmod(0o755)
    p = provider(engine, "load", tmp_path, kind_binary=str(kind))
    p.load_image(IMAGE)
    assert json.loads(seen.read_text()) == [IMAGE]
    assert not list((tmp_path / "load" / "images").iterdir()), "the archive is removed"
    with tarfile.open(fileobj=io.BytesIO(dockerd.minimal_rootfs())) as tar:
        assert "bin/sleep" in tar.getnames()


_SEES = """#!{python} -I
import os, sys
print("sees system containerd" if os.path.exists({marker!r}) else "sees none")
"""


def test_the_private_dockerd_cannot_see_a_system_containerd(tmp_path: Path) -> None:
    """dockerd adopts a system containerd whose socket it finds; that containerd lives in the
    host's mount namespace and would not see the private one's mounts. The command hides the
    directory first: a program started in dockerd's place does not see the socket that is
    there for everyone else (here a stand-in directory and socket file, so the host's own
    /run/containerd is never touched)."""
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        pytest.skip("needs root and unshare to make a mount namespace")
    system = tmp_path / "run-containerd"
    system.mkdir()
    (system / "containerd.sock").write_text("")
    fake = tmp_path / "dockerd"
    fake.write_text(_SEES.format(python=sys.executable, marker=str(system / "containerd.sock")))
    fake.chmod(0o755)
    daemon = dockerd.PrivateDockerd()
    try:
        argv = daemon.command(hide=str(system), dockerd=str(fake))
        seen = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
        assert seen.returncode == 0, seen.stderr
        assert seen.stdout.strip() == "sees none", seen.stdout + seen.stderr
        assert (system / "containerd.sock").exists(), "hidden only inside the namespace"
    finally:
        daemon.stop()
