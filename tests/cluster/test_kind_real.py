"""A real kind cluster (marker ``kind``): skipped, with the reason, where Docker or kind is absent.

Creates a one-node cluster at ``--k8s-version`` (when the installed kind can drive that image), with
an AWS-style provider ID, and checks what a kubelet with ``--cloud-provider=external`` registers:
the provider ID we passed (not kind's ``kind://`` default), the uninitialized taint, the
provided-node-ip annotation — and that the sim's kubelet stand-in builds the same labels.
"""

from __future__ import annotations

import shutil
import uuid
from pathlib import Path

import pytest

from lab.cluster.base import ClusterSpec, NodeSpec, ProviderID, Role
from lab.cluster.kind import KindProvider
from lab.cluster.kind_steps import KindVersionError, check_kind_version, parse_kind_version
from lab.cluster.kubeapi import raw
from lab.cluster.node_shapes import node_manifest
from lab.exec import CommandError, SubprocessRunner
from lab.versions.release import node_image


def _docker_engine_problem() -> str | None:
    if shutil.which("docker") is None:
        return "the docker CLI is not on PATH"
    try:
        SubprocessRunner().run(["docker", "info", "--format", "{{.ServerVersion}}"], timeout=5)
    except CommandError as err:
        return f"no Docker engine answers `docker info` ({err.reason})"
    return None


def _skip_reason() -> str | None:
    problem = _docker_engine_problem()
    if problem is None and shutil.which("kind") is None:
        problem = "the kind CLI is not on PATH"
    return problem


@pytest.mark.kind
@pytest.mark.timeout(900)
def test_real_kind_cluster_registers_external_cloud_provider_node(
    tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """At ``--k8s-version`` (CI runs each pinned pair: 1.22 on kind v0.20.0, latest on
    v0.32.0), skipped with the reason where the kind on PATH cannot drive that image."""
    reason = _skip_reason()
    if reason is not None:
        pytest.skip(f"needs a Docker engine and kind: {reason}")
    from kubernetes import client, config

    kind_version = parse_kind_version(SubprocessRunner().run(["kind", "version"]).stdout)
    version = node_image(request.config.getoption("--k8s-version")).version
    try:
        check_kind_version(kind_version, version, explicit_image=False)
    except KindVersionError as exc:
        pytest.skip(f"--k8s-version {version}: {exc}")
    name = f"ccm-lab-t{uuid.uuid4().hex[:6]}"
    provider_id = ProviderID("aws:///us-east-1a/i-0123456789abcdef0")
    provider = KindProvider(name, state_dir=tmp_path / name)
    spec = ClusterSpec(name, version, (NodeSpec(Role.CONTROL_PLANE, provider_id=provider_id),))
    try:
        provider.provision(spec)
        api_client = config.new_client_from_config(str(provider.kubeconfig()))  # type: ignore[no-untyped-call]
        api = client.CoreV1Api(api_client)
        (info,) = provider.nodes()
        node = raw(api.read_node(info.name, _preload_content=False))
        assert node["metadata"]["name"] == f"{name}-control-plane"
        assert node["spec"]["providerID"] == provider_id
        taints = {(t["key"], t["effect"]) for t in node["spec"].get("taints", [])}
        assert ("node.cloudprovider.kubernetes.io/uninitialized", "NoSchedule") in taints
        assert node["metadata"]["annotations"]["alpha.kubernetes.io/provided-node-ip"] == info.ip
        # The sim's kubelet stand-in must register the same shape as this real kubelet.
        standin = node_manifest(
            version=version,
            name=info.name,
            ip=str(info.ip),
            role=Role.CONTROL_PLANE,
            provider_id=provider_id,
            # what kind does to a one-node cluster after kubeadm
            control_plane_taints=False,
            exclusion_label=kind_version < (0, 22, 0),
        )
        assert node["metadata"]["labels"] == standin["metadata"]["labels"]
        assert standin["metadata"]["annotations"].items() <= node["metadata"]["annotations"].items()
        assert node["status"]["nodeInfo"]["kubeletVersion"] == str(version)
        assert provider.capabilities().host_address_for_nodes
    finally:
        provider.delete()
