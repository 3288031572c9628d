"""What the fake ``docker`` and ``kind`` do in rehearsal mode (``state["rehearsal"]``).

Called from the fake executables (``tests/cluster/fakecli.py``), which keep answering every
command as the pinned releases do; in rehearsal mode they also make the things those commands
make for real, inside the rehearsal's network namespace:

* ``docker network create``: a Linux bridge with the network's gateway address (the bridge
  Docker makes), removed by ``docker network rm``;
* ``kind create cluster``: a rehearsal cluster process (``tests.rehearsal.cluster``) with a node
  namespace per container on that bridge; ``kind create`` returns once its API answers and its
  nodes registered, with the kubeconfig kind would write; ``kind delete cluster`` stops it.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parent.parent.parent
#: real seconds ``kind create`` waits for the cluster process (kind's own --wait bounds it too)
CREATE_TIMEOUT = 120.0


def bridge_name(network: str) -> str:
    return "br-" + hashlib.sha1(network.encode()).hexdigest()[:12]


def network_created(name: str, net: dict[str, Any]) -> None:
    import ipaddress

    subnet = ipaddress.ip_network(net["Subnet"])
    gateway = net.get("Gateway") or net["_bridge"]
    dev = bridge_name(name)
    for args in (
        ["link", "add", dev, "type", "bridge"],
        ["addr", "add", f"{gateway}/{subnet.prefixlen}", "dev", dev],
        ["link", "set", dev, "up"],
    ):
        subprocess.run(["ip", *args], check=True, capture_output=True)
    net["_dev"] = dev


def network_removed(net: dict[str, Any]) -> None:
    if net.get("_dev"):
        subprocess.run(["ip", "link", "del", net["_dev"]], check=False, capture_output=True)


def cluster_created(
    root: Path, name: str, *, version: str, net: dict[str, Any], nodes: list[dict[str, Any]]
) -> tuple[int, Path]:
    """Start the cluster process; (its pid, the kubeconfig it wrote) once it is ready."""
    import ipaddress

    directory = root / "rehearsal" / name
    directory.mkdir(parents=True, exist_ok=True)
    for stale in ("ready", "failed"):
        (directory / stale).unlink(missing_ok=True)
    if not net.get("_dev"):
        raise RuntimeError("the rehearsal needs the lab's own Docker network (a bridge)")
    spec = {
        "name": name,
        "version": version,
        "bridge": net["_dev"],
        "gateway": net.get("Gateway") or net["_bridge"],
        "prefix": ipaddress.ip_network(net["Subnet"]).prefixlen,
        "nodes": nodes,
    }
    (directory / "spec.yaml").write_text(yaml.safe_dump(spec))
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    with (directory / "cluster.out").open("wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "tests.rehearsal.cluster", "--dir", str(directory),
             "--spec", str(directory / "spec.yaml")],
            stdout=out, stderr=subprocess.STDOUT, start_new_session=True, env=env, cwd=REPO,
        )  # fmt: skip
    deadline = time.monotonic() + CREATE_TIMEOUT
    while not (directory / "ready").exists():
        if process.poll() is not None or (directory / "failed").exists():
            process.wait(30)
            raise RuntimeError(f"the rehearsal cluster {name} failed to start:\n{_tail(directory)}")
        if time.monotonic() > deadline:
            process.terminate()
            process.wait(30)
            raise RuntimeError(
                f"the rehearsal cluster {name} was not ready in {CREATE_TIMEOUT}s:\n"
                + _tail(directory)
            )
        time.sleep(0.05)
    json.loads((directory / "ready").read_text())
    return process.pid, directory / "kubeconfig"


def _tail(directory: Path) -> str:
    """The end of the cluster's log, else of its output (an import error never logs)."""
    for name in ("cluster.log", "cluster.out"):
        path = directory / name
        if path.exists() and path.stat().st_size:
            return path.read_text(errors="replace")[-2000:]
    return "(no output)"


def cluster_deleted(pid: int) -> None:
    """SIGTERM the cluster process and wait for it to end (it removes what it made)."""
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if not _alive(pid):
            return
        time.sleep(0.05)
    os.kill(pid, signal.SIGKILL)


def _alive(pid: int) -> bool:
    """Running, not a zombie (an orphan's exit status may wait for a parent that never reaps
    it: the rehearsal's pytest is the init of its PID namespace)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"
