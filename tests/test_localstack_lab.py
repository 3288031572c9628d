"""``--aws localstack``: a lab whose AWS is a LocalStack, behind the lab's recording proxy.

A LocalStack stand-in (stock moto in a child process with LocalStack's health route,
``tests/aws/localstack_standin.py``) is reached through ``--aws-endpoint``. ``lab.up`` seeds the
topology there, the controller initializes the nodes through the proxy, ``lab.trail`` shows its
calls answered by the upstream, a fault added through the lab's fault API (the proxy's
``/_lab/faults``) answers the controller's next call, and ``lab.down`` leaves nothing in the
LocalStack. Front-door refusals are one line each and change nothing. The pytest side: the
catalog's ``aws_needs`` skips with the reason where LocalStack lacks ELB or the lab's model.
"""

from __future__ import annotations

import io
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from lab import labview
from lab.aws import AwsControlClient
from lab.aws.clients import make_client
from lab.aws.topology import TOPOLOGY_TAG
from lab.compose import wait_for
from lab.frontdoor.down import down
from lab.frontdoor.up import up
from lab.spec import up_request
from lab.state import LabError
from tests.aws.localstack_standin import localstack_stand_in
from tests.aws.upstreams import closed_port
from tests.test_front_door import assert_one_line_error, invoke, nothing_left

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def standin() -> Iterator[str]:
    with localstack_stand_in() as url:
        yield url


def _topology_instances(url: str) -> list[str]:
    ec2 = make_client("ec2", url, "us-east-1")
    found = ec2.describe_instances(
        Filters=[
            {"Name": f"tag:{TOPOLOGY_TAG}", "Values": ["ccm-lab"]},
            {"Name": "instance-state-name", "Values": ["pending", "running"]},
        ]
    )
    return sorted(i["InstanceId"] for r in found["Reservations"] for i in r["Instances"])


def test_lab_up_on_localstack_records_calls_and_faults_reach_the_controller(
    tmp_path: Path, standin: str
) -> None:
    console = Console(file=io.StringIO(), width=120)
    state = up(
        up_request(
            name="ls",
            nodes=2,
            backend="sim",
            aws="localstack",
            aws_endpoint=standin,
            # the controller reads instances often
            extra_args=["--node-status-update-frequency", "1s"],
        ),
        root=tmp_path,
        console=console,
        timeout=180,  # generous: under load a start takes several times its idle 10 s
    )
    try:
        assert (state.aws, state.aws_upstream) == ("localstack", standin)
        assert state.aws_endpoint != standin, "the lab's endpoint is the proxy in front of it"
        # the topology lives in the LocalStack, and the nodes name its instances
        assert _topology_instances(standin) == sorted(n.instance_id for n in state.nodes)
        control = AwsControlClient(state.aws_endpoint, token=state.token)
        mine = [e for e in control.trail() if "ccm-lab-controller" in e.user_agent]
        assert "DescribeInstances" in {e.action for e in mine}
        host = standin.removeprefix("http://")
        assert {e.answered_by for e in mine} == {f"upstream:{host}"}
        assert labview.trail(name="ls", action="describeinstances", root=tmp_path, console=console)
        doc = labview.status(name="ls", root=tmp_path)
        assert doc["problems"] == []
        labview.render_status(doc, console)
        assert f"AWS: localstack at {standin}" in console.file.getvalue()  # type: ignore[attr-defined]

        rule = control.add_fault(
            action="DescribeInstances",
            code="RequestLimitExceeded",
            status=503,
            caller="ccm-lab-controller",
            count=1,
        )

        def hit() -> list[object]:
            return [
                e
                for e in control.trail("DescribeInstances")
                if e.injected and "ccm-lab-controller" in e.user_agent
            ]

        (event,) = wait_for(hit, timeout=120, what="the fault answering the controller")
        assert event.error_code == "RequestLimitExceeded"  # type: ignore[attr-defined]
        assert event.answered_by == f"fault:{rule.id}"  # type: ignore[attr-defined]
    finally:
        down(name="ls", root=tmp_path, console=console)
    assert not (tmp_path / "ls").exists()
    assert _topology_instances(standin) == [], "lab.down leaves none of its resources there"


@pytest.mark.parametrize(
    ("flags", "match"),
    [
        ({"aws_endpoint": "ftp://h:1"}, r"--aws-endpoint 'ftp://h:1': not an http\(s\) URL"),
        ({"aws_endpoint": "http://h:1/path"}, r"--aws-endpoint 'http://h:1/path'.*no path"),
        ({"aws_endpoint": "http://h:0"}, r"--aws-endpoint 'http://h:0': port 0"),
        ({"aws": "moto", "aws_endpoint": "http://h:1"}, r"names a LocalStack; add --aws local"),
        ({"aws": "dynamo"}, r"--aws 'dynamo': choose one of moto, localstack, real"),
        ({"backend": "kind"}, r"--aws localstack runs with --backend sim only"),
        ({"backend": "existing"}, r"--aws localstack runs with --backend sim only"),
    ],
    ids=["scheme", "path", "port-0", "endpoint-without-localstack", "unknown", "kind", "existing"],
)
def test_bad_aws_flags_are_refused_before_anything_changes(
    tmp_path: Path, flags: dict[str, Any], match: str
) -> None:
    given: dict[str, Any] = {"aws": "localstack", "backend": "sim", **flags}
    if given["backend"] == "existing":  # a kubeconfig that names a server (never contacted)
        kubeconfig = tmp_path / "kubeconfig"
        kubeconfig.write_text(
            "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
            "clusters: [{name: c, cluster: {server: 'https://127.0.0.1:1'}}]\n"
            "contexts: [{name: c, context: {cluster: c, user: u}}]\nusers: [{name: u, user: {}}]\n"
        )
        given["kubeconfig"] = kubeconfig
    with pytest.raises(LabError, match=match):
        up(up_request(name="x", **given), root=tmp_path, console=Console(file=io.StringIO()))
    assert not (tmp_path / "x").exists()


@pytest.mark.parametrize(
    ("args", "fragments"),
    [
        (
            ("--aws", "localstack", "--aws-endpoint", "http://127.0.0.1:{closed}"),
            ("--aws-endpoint http://127.0.0.1:", "no LocalStack answers", "running there"),
        ),
        (
            ("--aws", "localstack", "--backend", "sim"),
            ("--aws localstack without --aws-endpoint", "Docker", "--aws-endpoint URL"),
        ),
    ],
    ids=["unreachable", "no-docker"],
)
def test_bad_localstack_flags_are_one_line_and_change_nothing(
    tmp_path: Path, args: tuple[str, ...], fragments: tuple[str, ...]
) -> None:
    if args[-1] == "sim":
        from lab.aws.localstack_docker import docker_unavailable

        if docker_unavailable() is None:
            pytest.skip("a Docker engine answers here, so a LocalStack would be started")
    argv = [a.replace("{closed}", str(closed_port())) for a in args]
    result = invoke(tmp_path, "lab.up", "--name", "x", *argv)
    assert_one_line_error(result, *fragments)
    nothing_left(tmp_path, "x")


def test_catalog_cases_skip_with_the_reason_localstack_lacks(standin: str, tmp_path: Path) -> None:
    """``pytest --aws localstack`` without ``--aws-endpoint`` where Docker answers: the session
    lab starts a LocalStack container (the fake ``docker``; its published port is scripted to
    be where the stand-in listens: no image runs here), a scenario needing ELB and the lab's
    ELB model is skipped naming what that LocalStack's health report lacks, and the container
    is removed when the session ends."""
    from lab.aws.localstack_docker import IMAGE, LABEL
    from tests.cluster.fakecli import FakeCLI

    fake = FakeCLI(tmp_path / "fake")
    fake.set(images=[IMAGE], publish_to=int(standin.rsplit(":", 1)[1]))
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-rs",
            "-p",
            "no:cacheprovider",
            "-p",
            "no:xdist",
            "e2e/test_k8s_84256.py",
            "--aws",
            "localstack",
        ],
        cwd=REPO,
        env={**os.environ, "PATH": f"{fake.bin}{os.pathsep}{os.environ['PATH']}"},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    out = done.stdout + done.stderr
    assert done.returncode == 0, out
    skips = [line for line in out.splitlines() if line.startswith("SKIPPED")]
    assert skips, out
    assert all("needs the Classic ELB API (elb)" in line for line in skips), skips
    assert all("a LocalStack Pro feature" in line for line in skips), skips
    assert all(standin in line for line in skips), "named from the running LocalStack's report"
    assert " passed" not in out.splitlines()[-1], out
    runs = [c for c in fake.calls() if c[1:2] == ["run"]]
    assert len(runs) == 1, fake.calls()
    assert runs[0][-1] == IMAGE
    assert any(arg.startswith(f"{LABEL}=pytest-") for arg in runs[0]), runs[0]
    assert fake.state["containers"] == [], "the session's LocalStack container is removed"
    assert _topology_instances(standin), "seeded there (a container's state goes with it)"
