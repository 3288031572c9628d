"""The real thing, where Docker and kind exist: build the image, load it into kind, roll it out."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from lab.cluster.kind_steps import KindVersionError, check_kind_version, parse_kind_version
from lab.compose import Lab
from lab.exec import SubprocessRunner
from lab.incluster import deploy, undeploy
from lab.spec import LabSpec
from lab.versions.release import KubeVersion
from tests.incluster.support import docker_and_kind_missing, lab_world_settings


@pytest.mark.kind
@pytest.mark.slow
@pytest.mark.timeout(900)
def test_build_load_and_deploy_on_kind(tmp_path: Path, request: pytest.FixtureRequest) -> None:
    """Really build the image, load it into a one-node kind lab and roll it out; the pod
    reaches the lab's AWS endpoint and IMDS on the nodes' gateway (the lab's world: an
    instance for the node, the metadata service answering as the control plane's instance),
    elects itself leader and turns ready."""
    reason = docker_and_kind_missing()
    if reason:
        pytest.skip(reason)
    version = KubeVersion.parse(request.config.getoption("--k8s-version"))
    runner = SubprocessRunner()
    kind_version = parse_kind_version(runner.run(["kind", "version"]).stdout)
    try:
        check_kind_version(kind_version, version, explicit_image=False)
    except KindVersionError as exc:  # e.g. 1.33 asked of kind v0.20.0: not a pair kind supports
        pytest.skip(f"--k8s-version {version}: {exc}")
    lab = Lab(
        LabSpec(
            name=f"incluster-{os.getpid()}",
            backend="kind",
            nodes=1,
            k8s_version=str(version),
            expose_to_nodes=True,
            state_dir=tmp_path / "lab",
        )
    )
    try:
        lab.start()
        settings = lab_world_settings(lab)
        kubeconfig = lab.kubeconfig_path
        deploy(lab.cluster, settings=settings, runner=runner, kubeconfig=kubeconfig)
        lease = runner.run(
            [
                "kubectl",
                "--kubeconfig",
                str(kubeconfig),
                "get",
                "lease",
                "-n",
                "kube-system",
                "cloud-controller-manager",
                "-o",
                "json",
            ]
        )
        assert json.loads(lease.stdout)["spec"]["holderIdentity"]
        undeploy(settings, runner=runner, kubeconfig=kubeconfig)
    finally:
        lab.stop()
