"""The real thing, where Docker and kind exist: build the image, load it into kind, roll it out."""

from __future__ import annotations

import json
import os
import urllib.parse
from pathlib import Path

import pytest

from lab.cluster.kind import (
    KindProvider,
    KindVersionError,
    check_kind_version,
    parse_kind_version,
)
from lab.exec import SubprocessRunner
from lab.incluster import deploy, lab_settings, undeploy
from tests.incluster.support import docker_and_kind_missing


@pytest.mark.kind
@pytest.mark.slow
@pytest.mark.timeout(900)
def test_build_load_and_deploy_on_kind(tmp_path: Path, request: pytest.FixtureRequest) -> None:
    """Really build the image, load it into a one-node kind cluster and roll it out; the pod
    reaches the lab's AWS endpoint and IMDS on the nodes' gateway, elects itself leader and
    turns ready."""
    reason = docker_and_kind_missing()
    if reason:
        pytest.skip(reason)
    from lab.aws import AwsServer
    from lab.cluster.base import ClusterSpec, NodeSpec, Role
    from lab.cluster.versions import KubeVersion
    from lab.imds import ImdsServer

    name = f"ccm-incluster-{os.getpid()}"
    provider = KindProvider(name, state_dir=tmp_path)
    version = KubeVersion.parse(request.config.getoption("--k8s-version"))
    spec = ClusterSpec(name, version, (NodeSpec(Role.CONTROL_PLANE),))
    runner = SubprocessRunner()
    kind_version = parse_kind_version(runner.run(["kind", "version"]).stdout)
    try:
        check_kind_version(kind_version, version, explicit_image=False)
    except KindVersionError as exc:  # e.g. 1.33 asked of kind v0.20.0: not a pair kind supports
        pytest.skip(f"--k8s-version {version}: {exc}")
    try:
        provider.provision(spec)
        host = provider.host_address()
        # listen on every address so pods reach them through the gateway
        with AwsServer(host="0.0.0.0") as aws, ImdsServer(aws.url, host="0.0.0.0") as imds:
            settings = lab_settings(
                host=host,
                aws_port=urllib.parse.urlsplit(aws.url).port or 0,
                imds_port=urllib.parse.urlsplit(imds.url).port or 0,
            )
            deploy(provider, settings=settings, runner=runner, kubeconfig=provider.kubeconfig())
            lease = runner.run(
                [
                    "kubectl",
                    "--kubeconfig",
                    str(provider.kubeconfig()),
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
            undeploy(settings, runner=runner, kubeconfig=provider.kubeconfig())
    finally:
        provider.delete()
