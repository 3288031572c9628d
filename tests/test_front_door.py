"""The front door, as a user meets it: the real ``invoke`` commands, each known defect.

Every case runs ``invoke`` in a directory of its own (so ``.lab/`` is the test's) and asserts
the message a user reads, that no traceback is printed, and what is left running afterwards:
nothing after a failed ``lab.up``, the previous controller after a failed restart, no debug
controller or adapter after ``lab.down``.
"""

from __future__ import annotations

import base64
import json
import os
import re
import signal
import ssl
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from lab.component import ProcessRef
from lab.compose import wait_for
from lab.state import DaemonState, LabState, read_state, write_state

REPO = Path(__file__).resolve().parents[1]
INVOKE = str(Path(sys.executable).parent / "invoke")

pytestmark = pytest.mark.slow


@dataclass(frozen=True)
class Result:
    code: int
    out: str

    @property
    def lines(self) -> list[str]:
        return [line for line in self.out.splitlines() if line.strip()]


def invoke(
    cwd: Path, *args: str, timeout: float = 120, env: dict[str, str] | None = None
) -> Result:
    done = subprocess.run(
        [INVOKE, "--search-root", str(REPO), *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "COLUMNS": "200", **(env or {})},
        check=False,
    )
    return Result(done.returncode, done.stdout + done.stderr)


def assert_one_line_error(result: Result, *fragments: str) -> None:
    assert result.code != 0, result.out
    assert "Traceback" not in result.out, result.out
    errors = [line for line in result.lines if line.startswith("error:")]
    assert len(errors) == 1, result.out
    for fragment in fragments:
        assert fragment in errors[0], errors[0]


def nothing_left(cwd: Path, name: str) -> None:
    assert not (cwd / ".lab" / name).exists(), "no state or logs of a lab that is not up"
    daemons = [
        p
        for p in Path("/proc").glob("[0-9]*")
        if _cmdline(p).count(str(cwd / ".lab" / name)) and "lab.daemon" in _cmdline(p)
    ]
    assert not daemons, "no lab daemon left running"


def _cmdline(proc: Path) -> str:
    try:
        return (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def state_of(cwd: Path, name: str) -> LabState:
    state = read_state(cwd / ".lab" / name)
    assert state is not None
    return state


@pytest.fixture(scope="module")
def lab_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A running lab ``fd`` (sim) in a directory of its own, shared by this module's tests."""
    cwd = tmp_path_factory.mktemp("front-door")
    up = invoke(cwd, "lab.up", "--name", "fd", "--backend", "sim", timeout=180)
    assert up.code == 0, up.out
    try:
        yield cwd
    finally:
        invoke(cwd, "lab.down", "--name", "fd")


# --- bad input to lab.up: one line, nothing left ------------------------------------------


@pytest.mark.parametrize(
    ("args", "fragments"),
    [
        (("--legacy-behavior", "k8s-99999"), ("--legacy-behavior k8s-99999", "known ids")),
        (("--nodes", "0"), ("--nodes 0",)),
        (("--k8s-version", "abc"), ("--k8s-version 'abc'", "1.33")),
        (("--backend", "bogus"), ("--backend 'bogus'", "sim")),
        (("--backend", "kind"), ("--backend kind", "Docker", "--backend sim")),
        (("--args", "--bogus-flag"), ("--args '--bogus-flag'", "unrecognized")),
        (("--clock-speed", "0"), ("--clock-speed 0.0", "number > 0")),
        (("--vpc-cidr", "10.0.0.1/16"), ("--vpc-cidr '10.0.0.1/16'", "host bits", "10.42.0.0/16")),
        (("--vpc-cidr", "10.0.0.0/24"), ("--vpc-cidr '10.0.0.0/24'", "/16 to /19")),
        (("--insecure-api", "--backend", "kind"), ("--insecure-api", "kind", "--backend sim")),
        (
            ("--aws", "real", "--i-accept-aws-charges", "--dry-run", "--backend", "kind"),
            ("--aws real --backend kind", "sim cluster", "--backend sim"),
        ),
    ],
    ids=[
        "legacy",
        "nodes",
        "version",
        "backend",
        "kind-without-docker",
        "args",
        "clock-speed",
        "vpc-host-bits",
        "vpc-too-small",
        "insecure-api-on-kind",
        "real-aws-with-a-cluster-flag",
    ],
)
def test_bad_lab_up_flags_change_nothing(
    tmp_path: Path, args: tuple[str, ...], fragments: tuple[str, ...]
) -> None:
    if args == ("--backend", "kind"):
        from lab.pytest_plugin import docker_engine_answers

        if docker_engine_answers():
            pytest.skip("a Docker engine answers here, so --backend kind is not refused")
    result = invoke(tmp_path, "lab.up", "--name", "x", *args)
    assert_one_line_error(result, *fragments)
    nothing_left(tmp_path, "x")


def test_the_front_door_imports_no_aws_or_kubernetes_sdk_until_it_needs_one() -> None:
    """Validating a flag, reading state and printing an error import neither moto, boto3 nor
    the Kubernetes client (together seconds of imports per command); each is imported where
    a task uses it."""
    probe = (
        "import sys, tasks, lab.aws, lab.frontdoor.up, lab.frontdoor.down, lab.labview, "
        "lab.spec, lab.preflight; import lab.spec as s; s.up_request(name='x'); "
        "print(sorted({m.split('.')[0] for m in sys.modules} "
        "& {'moto', 'boto3', 'botocore', 'kubernetes'}))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, cwd=REPO, check=True
    )
    assert done.stdout.strip() == "[]", done.stdout


def test_a_bad_lab_name_is_refused(tmp_path: Path) -> None:
    result = invoke(tmp_path, "lab.up", "--name", "../Bad")
    assert_one_line_error(result, "--name '../Bad'")
    assert not (tmp_path / ".lab").exists()


def test_a_controller_that_cannot_start_takes_the_new_lab_down(tmp_path: Path) -> None:
    """The flag passes the controller's parser but the controller refuses it at start-up: the
    lab was already up, and is taken down again."""
    result = invoke(tmp_path, "lab.up", "--name", "x", "--args", "--concurrent-service-syncs 0")
    assert_one_line_error(
        result, "the controller did not start", "--concurrent-service-syncs must be at least 1"
    )
    assert "nothing is left" in result.out
    assert "exited with code None" not in result.out
    nothing_left(tmp_path, "x")


# --- the running lab ----------------------------------------------------------------------


def test_every_control_plane_refuses_a_request_without_the_lab_token(lab_dir: Path) -> None:
    """The kubeconfig carries the CA and token (HTTPS); the AWS endpoint's /_lab/ and
    /moto-api/, the metadata service's and the simulator's /_lab/ and the daemon's API answer
    401 without the lab's token and change nothing; the lab's own commands still work."""
    state = state_of(lab_dir, "fd")
    assert state.token
    assert str(state.kube_endpoint).startswith("https://127.0.0.1:")
    import yaml

    kubeconfig = yaml.safe_load(Path(state.kubeconfig).read_text())
    assert kubeconfig["users"][0]["user"] == {"token": state.token}
    ca = base64.b64decode(kubeconfig["clusters"][0]["cluster"]["certificate-authority-data"])
    context = ssl.create_default_context(cadata=ca.decode())
    assert state.daemon is not None
    before = invoke(lab_dir, "lab.trail", "--name", "fd", "--json", "--last", "0")
    assert before.code == 0, before.out
    for url in (
        f"{state.aws_endpoint}/_lab/reset",
        f"{state.aws_endpoint}/moto-api/reset",
        f"{state.imds_endpoint}/_lab/reset",
        f"{state.kube_endpoint}/_lab/reset",
        f"{state.daemon.control_url}/kubelet/stop-heartbeat?node=ccm-lab-worker",
    ):
        for sent in ({}, {"Authorization": "Bearer not-the-lab-token"}):
            request = urllib.request.Request(url, data=b"{}", method="POST", headers=sent)
            with pytest.raises(urllib.error.HTTPError) as refused:
                urllib.request.urlopen(request, timeout=10, context=context)
            with refused.value as answer:
                assert (url, answer.code) == (url, 401)
                text = answer.read().decode()
            assert "state.json" in text, text
    after = invoke(lab_dir, "lab.trail", "--name", "fd", "--json", "--last", "0")
    assert after.code == 0, after.out
    assert after.lines[: len(before.lines)] == before.lines, "the trail was not reset"
    nodes = invoke(lab_dir, "lab.kubectl", "--name", "fd", "--", "get", "nodes", "-o", "name")
    assert nodes.code == 0, nodes.out
    assert nodes.out.split() == ["node/ccm-lab-control-plane", "node/ccm-lab-worker"]
    status = invoke(lab_dir, "lab.status", "--name", "fd", "--json")
    assert status.code == 0, status.out
    assert json.loads(status.out)["problems"] == []


def test_repro_list_and_help(lab_dir: Path) -> None:
    listed = invoke(lab_dir, "lab.repro", "--list")
    assert listed.code == 0, listed.out
    assert "k8s-84926" in listed.out
    assert "debug-attach" in listed.out
    helped = invoke(lab_dir, "lab.repro", "--help")
    assert helped.code == 0, helped.out
    assert "--in-place" in helped.out
    assert "no scenario" not in helped.out
    unknown = invoke(lab_dir, "lab.repro", "k8s-00000")
    assert_one_line_error(unknown, "no scenario 'k8s-00000'", "k8s-84926")


@pytest.mark.parametrize(
    ("args", "fragments"),
    [
        (("--legacy-behavior", "k8s-99999"), ("--legacy-behavior k8s-99999",)),
        (("--args", "--bogus-flag"), ("--args '--bogus-flag'",)),
        (("--args", "--kubeconfig /tmp/x"), ("--kubeconfig is set by the lab",)),
        (
            ("--controller-cmd", "acm --kubeconfig={kubeconfig} --port={port}"),
            ("unknown placeholder {port}", "{metrics_port}"),
        ),
        (("--controller-cmd", "acm 'unclosed"), ("--controller-cmd", "No closing quotation")),
        (
            ("--controller", "upstream=/nonexistent/acm"),
            ("--controller 'upstream=/nonexistent/acm'", "no executable file", "make"),
        ),
        (("--controller", "kops"), ("--controller 'kops'", "upstream=PATH")),
        (
            ("--controller-ready-log", "started"),
            ("--controller-ready-log 'started'", "--controller-cmd"),
        ),
        (
            ("--controller-cmd", "sh {kubeconfig}", "--legacy-behavior", "k8s-84926"),
            ("--legacy-behavior 'k8s-84926'", "write every flag into --controller-cmd"),
        ),
    ],
    ids=[
        "legacy",
        "unknown-flag",
        "lab-owned-flag",
        "cmd-placeholder",
        "cmd-quoting",
        "preset-missing-binary",
        "preset-unknown",
        "ready-log-without-cmd",
        "cmd-with-our-flags",
    ],
)
def test_bad_restart_flags_leave_the_controller_running(
    lab_dir: Path, args: tuple[str, ...], fragments: tuple[str, ...]
) -> None:
    before = state_of(lab_dir, "fd").controller
    assert before is not None
    result = invoke(lab_dir, "lab.controller.restart", "--name", "fd", *args)
    assert_one_line_error(result, *fragments)
    after = state_of(lab_dir, "fd").controller
    assert after == before, "nothing changed"
    assert after.process.alive()


def test_a_restart_that_fails_brings_the_previous_controller_back(lab_dir: Path) -> None:
    before = state_of(lab_dir, "fd").controller
    assert before is not None
    result = invoke(
        lab_dir, "lab.controller.restart", "--name", "fd", "--args", "--concurrent-service-syncs 0"
    )
    assert_one_line_error(
        result, "--concurrent-service-syncs must be at least 1", "the previous controller"
    )
    after = state_of(lab_dir, "fd").controller
    assert after is not None
    assert after.process.alive()
    assert (after.legacy_behavior, after.extra_args) == (
        before.legacy_behavior,
        before.extra_args,
    )
    status = invoke(lab_dir, "lab.status", "--name", "fd", "--json")
    assert status.code == 0, status.out
    assert json.loads(status.out)["live"]["controller_healthy"] is True


def test_restart_with_another_build_and_back(lab_dir: Path) -> None:
    """``--controller-cmd``: the lab runs the command it renders (here our controller as an
    outside build, ready when its health URL answers), records it, shows it, and a restart
    without it brings our controller back."""
    cmd = (
        f"{sys.executable} -m controller --kubeconfig {{kubeconfig}} "
        "--cloud-config {cloud_config} --metrics-addr {metrics_addr}"
    )
    result = invoke(lab_dir, "lab.controller.restart", "--name", "fd", "--controller-cmd", cmd)
    assert result.code == 0, result.out
    ctl = state_of(lab_dir, "fd").controller
    assert ctl is not None
    assert ctl.command_name == "custom"
    assert ctl.command[1:3] == ("-m", "controller")
    assert "{kubeconfig}" in ctl.command, "the template is kept for a later restore"
    assert state_of(lab_dir, "fd").kubeconfig in ctl.flags, "the rendered command line"
    assert ctl.health_url is not None
    assert ctl.health_url.endswith("/healthz")
    status = invoke(lab_dir, "lab.status", "--name", "fd")
    assert status.code == 0, status.out
    assert "build custom" in status.out
    debug = invoke(lab_dir, "lab.debug", "--name", "fd")
    assert_one_line_error(debug, "another controller build", "lab.controller.restart")
    assert state_of(lab_dir, "fd").controller == ctl, "lab.debug changed nothing"
    back = invoke(lab_dir, "lab.controller.restart", "--name", "fd")
    assert back.code == 0, back.out
    ours = state_of(lab_dir, "fd").controller
    assert ours is not None
    assert ours.command == ()
    assert not ctl.process.alive()
    doc = invoke(lab_dir, "lab.status", "--name", "fd", "--json")
    assert json.loads(doc.out)["live"]["controller_healthy"] is True


def test_node_tasks_name_the_bad_node_and_print_one_line(lab_dir: Path) -> None:
    missing = invoke(lab_dir, "lab.nodes.exclude", "--name", "fd", "--node", "nope")
    assert_one_line_error(missing, "no node 'nope'", "ccm-lab-worker")
    done = invoke(lab_dir, "lab.nodes.exclude", "-n", "fd", "--node", "ccm-lab-worker")
    assert done.code == 0, done.out
    assert done.lines == [
        "node ccm-lab-worker: node.kubernetes.io/exclude-from-external-load-balancers set"
    ]
    back = invoke(lab_dir, "lab.nodes.include", "-n", "fd", "--node", "ccm-lab-worker")
    assert back.code == 0, back.out


def test_kubectl_arguments_pass_verbatim(lab_dir: Path) -> None:
    jsonpath = invoke(
        lab_dir,
        "lab.kubectl",
        "--name",
        "fd",
        "--",
        "get",
        "nodes",
        "-o",
        "jsonpath={.items[*].metadata.name}",
    )
    assert jsonpath.code == 0, jsonpath.out
    assert jsonpath.out.split() == ["ccm-lab-control-plane", "ccm-lab-worker"]
    selector = invoke(
        lab_dir, "lab.kubectl", "--name", "fd", "--", "get", "nodes", "-l", "app in (web)"
    )
    assert selector.code == 0, selector.out
    assert "No resources found" in selector.out


def test_env_is_enough_for_a_clean_aws_sdk(lab_dir: Path) -> None:
    exports = invoke(lab_dir, "lab.env", "--name", "fd")
    assert exports.code == 0, exports.out
    script = (
        exports.out
        + f"{sys.executable} -c 'import boto3; "
        + 'print(len(boto3.client("ec2").describe_instances()["Reservations"]))\'\n'
        + "kubectl get nodes -o name\n"
    )
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "KUBECONFIG"))}
    clean["PATH"] = f"{Path(sys.executable).parent}:{clean.get('PATH', '')}"
    clean["HOME"] = str(lab_dir)  # no ~/.aws
    done = subprocess.run(
        ["bash", "-c", script], env=clean, capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["2", "node/ccm-lab-control-plane", "node/ccm-lab-worker"]


def test_trail_json_lines_and_action_in_any_case(lab_dir: Path) -> None:
    result = invoke(lab_dir, "lab.trail", "--name", "fd", "--action", "describeinstances", "--json")
    assert result.code == 0, result.out
    events = [json.loads(line) for line in result.lines]
    assert events
    assert {e["action"] for e in events} == {"DescribeInstances"}
    miss = invoke(lab_dir, "lab.trail", "--name", "fd", "--action", "NoSuchAction")
    assert_one_line_error(miss, "--action NoSuchAction", "DescribeInstances")


def test_status_piped_is_not_cut_and_names_why_a_service_is_pending(lab_dir: Path) -> None:
    svc = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": "broken",
            "annotations": {
                "service.beta.kubernetes.io/aws-load-balancer-healthcheck-interval": "soon"
            },
        },
        "spec": {"type": "LoadBalancer", "ports": [{"port": 80}]},
    }
    manifest = lab_dir / "broken.json"
    manifest.write_text(json.dumps(svc))
    created = invoke(lab_dir, "lab.kubectl", "--name", "fd", "--", "apply", "-f", str(manifest))
    assert created.code == 0, created.out
    try:

        def pending_reason() -> str | None:
            status = invoke(lab_dir, "lab.status", "--name", "fd", env={"COLUMNS": "80"})
            return status.out if "SyncLoadBalancerFailed" in status.out else None

        out = wait_for(pending_reason, timeout=30, what="the Warning in lab.status")
        assert "pending" in out
        assert "base-10 integer" in out, "the reason, whole"
        assert max(len(line) for line in out.splitlines()) > 80, "not cut at 80 columns"
        assert "aws:///" in out, "providerIDs are shown whole"
    finally:
        invoke(lab_dir, "lab.kubectl", "--name", "fd", "--", "delete", "-f", str(manifest))


def test_traffic_shows_the_pods_a_new_users_deployment_answers_from(lab_dir: Path) -> None:
    """`kubectl create deployment` + `expose --type=LoadBalancer`, then `invoke lab.traffic`."""

    def kubectl(*args: str) -> Result:
        return invoke(lab_dir, "lab.kubectl", "--name", "fd", "--", *args)

    assert kubectl("create", "deployment", "web", "--image=nginx", "--replicas=3").code == 0
    try:
        assert kubectl("expose", "deployment", "web", "--type=LoadBalancer", "--port=80").code == 0
        assert kubectl("rollout", "status", "deployment/web", "--timeout=60s").code == 0

        def three_pods() -> dict[str, Any] | None:
            result = invoke(
                lab_dir, "lab.traffic", "web", "--name", "fd", "--requests", "300", "--json"
            )
            if result.code != 0:
                return None
            doc: dict[str, Any] = json.loads(result.out)
            return doc if len(doc["answered"]) == 3 else None

        doc = wait_for(three_pods, timeout=60, what="three pods answering")
        assert doc["service"] == "default/web"
        assert sum(doc["answered"].values()) == 300
        assert doc["dropped"] == []
        table = invoke(lab_dir, "lab.traffic", "web", "--name", "fd")
        assert table.code == 0, table.out
        assert "100 answered" in table.out
        assert all(pod in table.out for pod in doc["answered"])
        status = invoke(lab_dir, "lab.status", "--name", "fd")
        assert status.code == 0, status.out
        assert "3 ready" in status.out, "the Service's endpoints"
        assert "pods (3)" in status.out
        assert all(pod in status.out for pod in doc["answered"])
        assert "1/1 InService" in status.out, "the ELB's health checks, from DescribeInstanceHealth"
        as_json = json.loads(invoke(lab_dir, "lab.status", "--name", "fd", "--json").out)
        (svc,) = [s for s in as_json["live"]["services"] if s["name"] == "default/web"]
        assert [i["state"] for i in svc["instances"]] == ["InService"]
        missing = invoke(lab_dir, "lab.traffic", "nope", "--name", "fd")
        assert_one_line_error(missing, "service default/nope not found")
        internal = invoke(lab_dir, "lab.traffic", "kubernetes", "--name", "fd")
        assert_one_line_error(internal, "type ClusterIP", "LoadBalancer")
        bad = invoke(lab_dir, "lab.traffic", "web", "--name", "fd", "--requests", "0")
        assert_one_line_error(bad, "--requests 0")
        # a pod told to take a lab day to start keeps the lab from settling: the answer comes
        # anyway, saying who was busy
        slow = {"sim.ccm-lab.io/start-seconds": "86400"}
        overrides = json.dumps({"metadata": {"annotations": slow}})
        assert kubectl("run", "slow", "--image=nginx", f"--overrides={overrides}").code == 0
        noted = invoke(lab_dir, "lab.traffic", "web", "--name", "fd")
        assert noted.code == 0, noted.out
        assert "100 answered" in noted.out
        assert "modelled without waiting for the lab to settle" in noted.out
        assert "follow-up for ('default', 'slow')" in noted.out
    finally:
        kubectl("delete", "service,deployment", "web")
        kubectl("delete", "pod", "slow", "--ignore-not-found", "--wait=false")


def test_repro_runs_on_a_scratch_lab_and_in_place_restores(lab_dir: Path) -> None:
    before = state_of(lab_dir, "fd")
    scratch = invoke(lab_dir, "lab.repro", "k8s-84926", timeout=300)
    assert scratch.code == 0, scratch.out
    assert "scratch" in scratch.out
    assert state_of(lab_dir, "fd").controller == before.controller, "the lab was not touched"

    in_place = invoke(lab_dir, "lab.repro", "k8s-84926", "--in-place", "--name", "fd", timeout=300)
    assert in_place.code == 0, in_place.out
    assert "restored" in in_place.out
    after = state_of(lab_dir, "fd")
    assert after.controller is not None
    assert after.controller.legacy_behavior == ()
    assert after.controller.process.alive()
    import boto3

    ec2 = boto3.client(
        "ec2",
        endpoint_url=after.aws_endpoint,
        region_name=after.region,
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )
    group = ec2.describe_security_groups(GroupIds=[str(after.node_security_group)])
    perms = group["SecurityGroups"][0]["IpPermissions"]
    assert [(p["IpProtocol"], [g["GroupId"] for g in p["UserIdGroupPairs"]]) for p in perms] == [
        ("-1", [after.node_security_group])
    ], "the node group has exactly its self rule again"
    names = [g["GroupName"] for g in ec2.describe_security_groups()["SecurityGroups"]]
    assert not [n for n in names if n.startswith("k8s-elb-")], "no leaked ELB group"


# --- processes the lab must account for ---------------------------------------------------


def test_down_during_debug_stops_the_debug_controller(tmp_path: Path) -> None:
    up = invoke(tmp_path, "lab.up", "--name", "dbg", "--backend", "sim", timeout=180)
    assert up.code == 0, up.out
    output = (tmp_path / "debug-task.log").open("w")
    debug = subprocess.Popen(
        [INVOKE, "--search-root", str(REPO), "lab.debug", "--name", "dbg"],
        cwd=tmp_path,
        stdout=output,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        recorded = wait_for(
            lambda: state_of(tmp_path, "dbg").debug, timeout=60, what="the debug session"
        )
        status = invoke(tmp_path, "lab.status", "--name", "dbg")
        assert "under the debugger" in status.out
        assert recorded.address in status.out
        down = invoke(tmp_path, "lab.down", "--name", "dbg")
        assert down.code == 0, down.out
        assert "nothing left" in down.out or "no process, port or state left" in down.out
        assert not recorded.process.alive()
        assert recorded.adapter is None or not recorded.adapter.alive()
        from lab.debug.launcher import port_is_listening

        host, port = recorded.address.rsplit(":", 1)
        assert not port_is_listening(host, int(port))
        debug.wait(timeout=30)
    finally:
        if debug.poll() is None:
            os.killpg(debug.pid, signal.SIGKILL)
            debug.wait()
        output.close()
        invoke(tmp_path, "lab.down", "--name", "dbg")
    nothing_left(tmp_path, "dbg")


def test_status_and_down_after_the_daemon_died(tmp_path: Path) -> None:
    up = invoke(tmp_path, "lab.up", "--name", "dead", "--backend", "sim", timeout=180)
    assert up.code == 0, up.out
    state = state_of(tmp_path, "dead")
    assert state.daemon is not None
    state.daemon.process.signal(signal.SIGKILL)
    wait_for(lambda: not state.daemon.process.alive(), timeout=10, what="the daemon gone")
    for args in (("lab.status", "--name", "dead"), ("lab.status", "--name", "dead", "--json")):
        result = invoke(tmp_path, *args)
        assert result.code == 1, result.out
        assert "Traceback" not in result.out
        assert "MaxRetryError" not in result.out
        assert "daemon" in result.lines[-1]
        assert "invoke lab.down" in result.lines[-1]
    down = invoke(tmp_path, "lab.down", "--name", "dead")
    assert down.code == 0, down.out
    assert state.controller is not None
    assert not state.controller.process.alive()
    nothing_left(tmp_path, "dead")


def test_down_never_signals_a_process_that_reused_a_recorded_pid(tmp_path: Path) -> None:
    """A state whose daemon pid now belongs to another process (same pid, another start
    time): lab.down leaves that process alone."""
    up = invoke(tmp_path, "lab.up", "--name", "reuse", "--backend", "sim", "--no-controller")
    assert up.code == 0, up.out
    state = state_of(tmp_path, "reuse")
    assert state.daemon is not None
    bystander = subprocess.Popen(["sleep", "60"])
    try:
        real = state.daemon.process
        other = ProcessRef.of(bystander.pid)
        assert other is not None
        impostor = ProcessRef(bystander.pid, other.start_time + 1)
        # the bystander's pid with a start time that is not its own, as after a pid reuse
        write_state(state.replace(daemon=DaemonState(impostor, state.daemon.control_url, "x")))
        refused = invoke(tmp_path, "lab.down", "--name", "reuse")
        assert bystander.poll() is None, "the bystander was not signalled"
        assert_one_line_error(refused, "left a listener on", state.aws_endpoint)
        assert (tmp_path / ".lab" / "reuse").exists(), "state and logs kept for the user"
        real.terminate()
        down = invoke(tmp_path, "lab.down", "--name", "reuse")
        assert down.code == 0, down.out
    finally:
        bystander.kill()
        bystander.wait()
    nothing_left(tmp_path, "reuse")


def test_repro_narrates_a_release_scenario_with_its_traffic(tmp_path: Path) -> None:
    """Seed 004's scenarios replay on a scratch lab of the buggy release, step by step, and end
    with the cluster's evidence, the traffic table and the module's own verdict."""
    result = invoke(tmp_path, "lab.repro", "k8s-109414", timeout=300)
    assert result.code == 0, result.out
    assert "Kubernetes 1.22.8" in result.out
    assert "step 1. start the controller" in result.out
    assert "what the cluster shows" in result.out
    assert "team-b/api-1" in result.out, "B's pod answers for A's Service"
    assert "(the Failed pod's address)" in result.out, "step 3's result"
    _assert_narrated(result.out, "REPRODUCED: Service A's requests answered by namespace B's pod")


# Part B: flags, pipes, dead labs, narrations, help --------------------------------------------


def _task_arguments() -> dict[str, list[Any]]:
    """Every task ``invoke --list`` shows with its arguments, from invoke's own metadata (the
    collection ``tasks.py`` defines, loaded as invoke loads it)."""
    from invoke import Collection
    from invoke.loader import FilesystemLoader

    module, _ = FilesystemLoader(start=str(REPO)).load("tasks")
    collection = Collection.from_module(module)
    return {
        name: collection[name].get_arguments()
        for name in collection.task_names
        if isinstance(collection[name], type(collection["lab.up"]))
    }


def _numeric_flags() -> list[tuple[str, str, list[str]]]:
    """(task, --flag, the task's positional placeholders) for every flag whose default is a
    number, in every task."""
    found = []
    for task_name, arguments in sorted(_task_arguments().items()):
        positionals = ["x" for a in arguments if a.positional]
        for argument in arguments:
            default = argument.default
            if isinstance(default, (int, float)) and not isinstance(default, bool):
                found.append((task_name, f"--{argument.names[0]}", positionals))
    return found


def test_numeric_flags_are_found_in_every_task() -> None:
    flags = {(task, flag) for task, flag, _ in _numeric_flags()}
    assert {("lab.up", "--nodes"), ("lab.up", "--clock-speed")} <= flags
    assert ("lab.traffic", "--requests") in flags
    assert len({task for task, _ in flags}) >= 5, flags


@pytest.mark.parametrize(
    ("task", "flag", "positionals"), _numeric_flags(), ids=lambda v: str(v).strip("-[]")
)
@pytest.mark.parametrize("value", ["abc", "-3"])
def test_every_numeric_flag_refuses_a_non_number_in_one_line(
    tmp_path: Path, task: str, flag: str, positionals: list[str], value: str
) -> None:
    """`lab.up --nodes two`, `--clock-speed fast`, `lab.traffic web --requests abc`: one line
    naming the flag and the value, before anything is started or written."""
    result = invoke(tmp_path, task, *positionals, f"{flag}={value}")
    assert result.code == 1, result.out
    assert "Traceback" not in result.out, result.out
    assert "ValueError" not in result.out, result.out
    assert result.lines == [line for line in result.lines if line.startswith("error:")]
    assert len(result.lines) == 1, result.out
    assert flag in result.lines[0], result.out
    assert value in result.lines[0], result.out
    assert "give" in result.lines[0], "and what to give instead"
    assert not (tmp_path / ".lab").exists()


@pytest.mark.parametrize(
    "args",
    [("lab.repro", "--list"), ("lab.trail", "--name", "nolab", "--json")],
    ids=["repro-list", "error-path"],
)
def test_a_closed_pipe_ends_a_task_quietly_without_a_lab(
    tmp_path: Path, args: tuple[str, ...]
) -> None:
    code, err = _into_a_closed_pipe(tmp_path, *args)
    if args[0] == "lab.repro":
        assert code == 141, err
        assert err == ""
    else:  # the error line goes to stderr, the pipe is not written
        assert code == 1, err
        assert err.startswith("error: no lab named 'nolab'"), err


def _into_a_closed_pipe(cwd: Path, *args: str) -> tuple[int, str]:
    """Run ``invoke ARGS`` with standard output a pipe whose reader has already gone (what
    `| head -3` leaves once head has its lines): its exit code and standard error."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        done = subprocess.run(
            [INVOKE, "--search-root", str(REPO), *args],
            cwd=cwd,
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            timeout=120,
            env={**os.environ, "COLUMNS": "200"},
            check=False,
        )
    finally:
        os.close(write_end)
    return done.returncode, done.stderr


def test_every_json_output_survives_a_closed_pipe(lab_dir: Path) -> None:
    """`lab.trail --json | head -3` and every other task with --json (found from invoke's
    metadata) end quietly when the reader goes: exit 141 (SIGPIPE's), nothing on stderr."""
    tasks = _task_arguments()
    with_json = sorted(t for t, args in tasks.items() if any(a.names[0] == "json" for a in args))
    assert {"lab.trail", "lab.status", "lab.traffic"} <= set(with_json)
    kubectl = ("lab.kubectl", "--name", "fd", "--")
    created = invoke(lab_dir, *kubectl, "create", "service", "loadbalancer", "piped", "--tcp=80:80")
    assert created.code == 0, created.out
    try:
        for task in with_json:
            positional = ["piped"] if task == "lab.traffic" else []
            code, err = _into_a_closed_pipe(lab_dir, task, *positional, "--name", "fd", "--json")
            assert (code, err) == (141, ""), (task, code, err)
        code, err = _into_a_closed_pipe(lab_dir, "lab.trail", "--name", "fd", "--last", "0")
        assert (code, err) == (141, ""), "the table too"
    finally:
        invoke(lab_dir, *kubectl, "delete", "service", "piped")


def test_a_dead_lab_is_dead_not_up(tmp_path: Path) -> None:
    """After the daemon is killed: lab.up says the lab is dead and what to do (and changes
    nothing), lab.kubectl says so in one line instead of kubectl's connection errors."""
    up = invoke(tmp_path, "lab.up", "--name", "gone", "--backend", "sim", "--no-controller")
    assert up.code == 0, up.out
    state = state_of(tmp_path, "gone")
    assert state.daemon is not None
    state.daemon.process.signal(signal.SIGKILL)
    wait_for(lambda: not state.daemon.process.alive(), timeout=10, what="the daemon gone")
    again = invoke(tmp_path, "lab.up", "--name", "gone", "--backend", "sim")
    assert_one_line_error(again, "lab 'gone' is dead", "invoke lab.down --name gone", "lab.log")
    assert "already up" not in again.out
    assert state_of(tmp_path, "gone") == state, "the dead lab's state is left for lab.down"
    kubectl = invoke(tmp_path, "lab.kubectl", "--name", "gone", "--", "get", "nodes")
    assert_one_line_error(kubectl, "daemon", "not running", "invoke lab.down --name gone")
    assert "connection" not in kubectl.out.lower()
    down = invoke(tmp_path, "lab.down", "--name", "gone")
    assert down.code == 0, down.out
    nothing_left(tmp_path, "gone")


def test_repro_checks_everything_before_printing(tmp_path: Path) -> None:
    for args, fragment in (
        (("k8s-84926", "--in-place", "--name", "nolab"), "no lab named 'nolab'"),
        (("k8s-00000",), "no scenario 'k8s-00000'"),
        (("k8s-109414", "--in-place"), "drop --in-place"),
    ):
        result = invoke(tmp_path, "lab.repro", *args)
        assert_one_line_error(result, fragment)
        assert len(result.lines) == 1, f"no header before the error: {result.out}"


def test_every_scenario_has_a_replay_and_a_one_line_verdict() -> None:
    from e2e.catalog import CATALOG
    from e2e.repro import RELEASE_SCENARIOS, symptom, verdict

    for scenario in CATALOG:
        assert (REPO / scenario.module).exists() or scenario.id in RELEASE_SCENARIOS
        assert symptom(scenario).strip()
        for fixed, word in ((False, "REPRODUCED: "), (True, "FIXED: ")):
            good = verdict(scenario, fixed=fixed, failure=None)
            bad = verdict(scenario, fixed=fixed, failure="assert x\n  where x = 1")
            assert good.startswith(word), good
            assert bad.startswith("NOT " + word), bad
            assert "\n" not in good + bad
            assert "not hold" not in good + bad, "no double negative"


def _assert_narrated(out: str, verdict_word: str) -> None:
    """Each numbered step prints a result (→) before the next step; the last line is the
    one verdict line."""
    lines = [line for line in out.splitlines() if line.strip()]
    steps = [i for i, line in enumerate(lines) if line.startswith("step ")]
    assert len(steps) >= 3, out
    for start, end in zip(steps, [*steps[1:], len(lines)], strict=True):
        assert any(line.startswith("   → ") for line in lines[start + 1 : end]), lines[start]
    assert lines[-1].startswith(verdict_word), lines[-1]
    assert sum(line.startswith(("REPRODUCED:", "FIXED:", "NOT ")) for line in lines) == 1


def test_repro_84926_header_steps_and_verdict_agree(tmp_path: Path) -> None:
    from e2e.repro import REPLAYED_SYMPTOM

    result = invoke(tmp_path, "lab.repro", "k8s-84926", timeout=300, env={"COLUMNS": "400"})
    assert result.code == 0, result.out
    assert "never let in" not in result.out, "the header describes the case replayed"
    assert f"symptom: {REPLAYED_SYMPTOM['k8s-84926']}" in result.out
    _assert_narrated(result.out, "REPRODUCED: ")
    assert "the ELB's group is let into the node group" in result.out
    assert "60 of 60 answered" in result.out, "step 3's result"
    assert "self rule: REVOKED" in result.out
    (failed,) = [line for line in result.lines if "event SyncLoadBalancerFailed" in line]
    assert re.search(r"Load Balancer [0-9a-f]{32}: still in use", failed), "the message whole"


def test_repro_of_a_module_scenario_ends_in_its_verdict(tmp_path: Path) -> None:
    result = invoke(tmp_path, "lab.repro", "imds-required", timeout=600)
    assert result.code == 0, result.out
    assert result.lines[-1].startswith("REPRODUCED: "), result.lines[-1]


def test_kubectl_without_double_dash_says_how_in_one_line(tmp_path: Path) -> None:
    result = invoke(tmp_path, "lab.kubectl", "get", "nodes")
    assert_one_line_error(result, "lab.kubectl get", "after `--`", "lab.kubectl [--name N] -- get")
    assert "No idea" not in result.out
    named = invoke(tmp_path, "lab.kubectl", "--name", "x", "get", "pods", "-n", "kube-system")
    assert_one_line_error(named, "after `--`")


def _help_flags(text: str) -> list[str]:
    """The option lines of ``invoke --help TASK``: each line's flag names."""
    options = text.split("Options:", 1)[1] if "Options:" in text else ""
    return [m.group(1) for m in re.finditer(r"^  (-\S.*?)(?:  |$)", options, re.M)]


def test_help_shows_values_defaults_and_the_one_short_flag(tmp_path: Path) -> None:
    for task_name, arguments in _task_arguments().items():
        shown = invoke(tmp_path, "--help", task_name)
        assert shown.code == 0, shown.out
        for names in _help_flags(shown.out):
            assert not names.startswith("--, "), names
            shorts = [n for n in names.split(", ") if re.fullmatch(r"-\w( \S+)?", n)]
            assert shorts in ([], ["-n STRING"]), names
            if shorts:
                assert "--name=STRING" in names, "-n is --name everywhere"
        words = " ".join(shown.out.split())
        for argument in arguments:
            default = argument.default
            if default not in (None, "", 0) and not isinstance(default, bool):
                shown_as = f"{default:g}" if isinstance(default, float) else str(default)
                assert shown_as in words, (task_name, argument.name)
    up = " ".join(invoke(tmp_path, "--help", "lab.up").out.split())
    for shown in ("--clock-speed=", "--nodes=INT", "(default: 2)", "(default: default)"):
        assert shown in up
    report = invoke(tmp_path, "--help", "lab.report").out
    assert "ours (default)" not in report, "lab.report requires a build"


def _readme_task_rows() -> list[str]:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    table = text.split("| task | what it does |", 1)[1].split("\n\n", 1)[0]
    return [line.split(" | ", 1)[0] for line in table.splitlines() if line.startswith("| `")]


def _listed_tasks(tmp_path: Path) -> list[str]:
    listed = invoke(tmp_path, "--list")
    assert listed.code == 0, listed.out
    return [m.group(1) for m in re.finditer(r"^  (\S+)", listed.out, re.M)]


def test_readme_task_table_lists_every_task_and_flag(tmp_path: Path) -> None:
    """Every task `invoke --list` shows has a row of the README's task table, and that row
    names every flag its `invoke --help` shows (a positional one by its upper-case name)."""
    rows = _readme_task_rows()
    positional = {
        t: {a.name for a in args if a.positional} for t, args in _task_arguments().items()
    }
    missing = []
    for task_name in _listed_tasks(tmp_path):
        parent, _, leaf = task_name.rpartition(".")
        row = next(
            (r for r in rows if f"`{task_name}" in r or f" {task_name}" in r
             or (parent and f"{parent}." in r and re.search(rf"/ {re.escape(leaf)}\b", r))),
            None,
        )  # fmt: skip
        if row is None:
            missing.append(task_name)
            continue
        shown = invoke(tmp_path, "--help", task_name).out
        for names in _help_flags(shown):
            flag = next(n for n in names.split(", ") if n.startswith("--")).split("=")[0]
            name = flag.removeprefix("--")
            wanted = name.upper() if name in positional.get(task_name, set()) else flag
            if wanted not in row:
                missing.append(f"{task_name} {wanted}")
    assert not missing, f"not in the README's task table: {missing}"


def test_readme_says_how_to_run_invoke_and_what_is_not_used() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert ". .venv/bin/activate" in readme
    assert "make aws-cloud-controller-manager" in readme
    assert "go build -o aws-cloud-controller-manager" not in readme, "one build command"
    hint = (REPO / "lab" / "controllerproc.py").read_text(encoding="utf-8")
    assert "make aws-cloud-controller-manager" in hint
    assert "pytest-kind" in readme
    assert "Docker SDK" in readme


# Part A: controller commands, faults, status ------------------------------------------------


OURS_AS_A_BUILD = (
    "-m controller --kubeconfig {kubeconfig} --cloud-config {cloud_config} "
    "--metrics-addr {metrics_addr}"
)


@pytest.mark.parametrize("program", ["python", "{python}"])
def test_a_controller_command_finds_its_program_as_a_shell_would(
    lab_dir: Path, program: str
) -> None:
    """The README's template with a bare ``python`` runs the lab's interpreter (its virtualenv
    comes first on the search path, whatever the caller's PATH), and ``{python}`` names it."""
    bare_path = {"PATH": "/usr/bin:/bin"}  # the lab's virtualenv is not on it
    result = invoke(
        lab_dir,
        "lab.controller.restart",
        "--name",
        "fd",
        "--controller-cmd",
        f"{program} {OURS_AS_A_BUILD}",
        env=bare_path,
    )
    try:
        assert result.code == 0, result.out
        ctl = state_of(lab_dir, "fd").controller
        assert ctl is not None
        assert ctl.command[0] == program, "the template is kept as typed"
        assert ctl.process.alive()
        status = invoke(lab_dir, "lab.status", "--name", "fd", "--json")
        assert json.loads(status.out)["live"]["controller_healthy"] is True
    finally:
        back = invoke(lab_dir, "lab.controller.restart", "--name", "fd")
        assert back.code == 0, back.out


def test_a_failed_controller_command_says_its_status_and_output_and_keeps_its_log(
    tmp_path: Path,
) -> None:
    result = invoke(
        tmp_path, "lab.up", "--name", "x", "--controller-cmd", "sh -c 'echo hi >&2; exit 3'"
    )
    assert_one_line_error(result, "the controller did not start", "exited with status 3", "hi")
    (error,) = [line for line in result.lines if line.startswith("error:")]
    log = Path(error.split("(log: ", 1)[1].split(")", 1)[0])
    assert log.exists(), f"the log the error names, {log}, is kept"
    assert log.read_text().strip() == "hi"
    assert log.parent == tmp_path / ".lab" / "x.last-failed-start"
    nothing_left(tmp_path, "x")


def test_a_failed_restart_command_says_its_status_and_output(lab_dir: Path) -> None:
    before = state_of(lab_dir, "fd").controller
    assert before is not None
    result = invoke(
        lab_dir, "lab.controller.restart", "--name", "fd", "--controller-cmd",
        "sh -c 'echo oops >&2; exit 4'",
    )  # fmt: skip
    assert_one_line_error(result, "exited with status 4", "oops", "the previous controller")
    (error,) = [line for line in result.lines if line.startswith("error:")]
    assert Path(error.split("(log: ", 1)[1].split(")", 1)[0]).read_text().strip() == "oops"
    after = state_of(lab_dir, "fd").controller
    assert after is not None
    assert after.process.alive()
    assert after.command == before.command


def test_a_missing_controller_program_is_refused_before_anything_starts(tmp_path: Path) -> None:
    result = invoke(
        tmp_path,
        "lab.up",
        "--name",
        "x",
        "--controller-cmd",
        "no-such-ccm --kubeconfig {kubeconfig}",
    )
    assert_one_line_error(result, "--controller-cmd", "no program 'no-such-ccm'", "{python}")
    assert "servers up" not in result.out, "nothing was started"
    assert not (tmp_path / ".lab").exists()
    nothing_left(tmp_path, "x")
    relative = invoke(tmp_path, "lab.up", "--name", "x", "--controller-cmd", "./ccm {kubeconfig}")
    assert_one_line_error(relative, "no program './ccm'", "no executable file there")
    assert not (tmp_path / ".lab").exists()


def _ec2(state: LabState) -> Any:
    import boto3
    from botocore.config import Config

    return boto3.client(
        "ec2",
        endpoint_url=state.aws_endpoint,
        region_name=state.region,
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
        config=Config(retries={"total_max_attempts": 1}),  # see each answer, not a retry's
    )


def test_lab_fault_add_list_clear_is_what_an_sdk_sees(lab_dir: Path) -> None:
    from botocore.exceptions import ClientError

    ec2 = _ec2(state_of(lab_dir, "fd"))
    assert ec2.describe_vpcs()["Vpcs"]
    try:
        added = invoke(
            lab_dir, "lab.fault.add", "--name", "fd", "--action", "describevpcs", "--code",
            "RequestLimitExceeded", "--message", "slow down", "--count", "2",
        )  # fmt: skip
        assert added.code == 0, added.out
        assert "DescribeVpcs" in added.out, "the action as botocore spells it"
        for _ in range(2):
            with pytest.raises(ClientError) as refused:
                ec2.describe_vpcs()
            assert refused.value.response["Error"]["Code"] == "RequestLimitExceeded"
            assert refused.value.response["Error"]["Message"] == "slow down"
        assert ec2.describe_vpcs()["Vpcs"], "count 2: the third call goes through"
        listed = invoke(lab_dir, "lab.fault.list", "--name", "fd", "--json")
        assert listed.code == 0, listed.out
        (rule,) = json.loads(listed.out)
        assert (rule["api"], rule["action"], rule["fired"], rule["count"]) == (
            "aws", "DescribeVpcs", 2, 2
        )  # fmt: skip
        forever = invoke(
            lab_dir, "lab.fault.add", "--name", "fd", "--action", "DescribeVpcs", "--code",
            "InternalError", "--service", "ec2",
        )  # fmt: skip
        assert forever.code == 0, forever.out
        with pytest.raises(ClientError):
            ec2.describe_vpcs()
        status = invoke(lab_dir, "lab.status", "--name", "fd")
        assert "fault rules (1 active)" in status.out, status.out
        assert "InternalError" in status.out
        doc = json.loads(invoke(lab_dir, "lab.status", "--name", "fd", "--json").out)
        assert [r["code"] for r in doc["live"]["faults"]] == [
            "RequestLimitExceeded",
            "InternalError",
        ]
        cleared = invoke(lab_dir, "lab.fault.clear", "--name", "fd")
        assert cleared.code == 0, cleared.out
        assert ec2.describe_vpcs()["Vpcs"]
        assert json.loads(invoke(lab_dir, "lab.fault.list", "--name", "fd", "--json").out) == []
        assert "fault rules" not in invoke(lab_dir, "lab.status", "--name", "fd").out
    finally:
        invoke(lab_dir, "lab.fault.clear", "--name", "fd")


def test_lab_fault_on_the_simulated_kubernetes_api(lab_dir: Path) -> None:
    try:
        added = invoke(
            lab_dir, "lab.fault.add", "--name", "fd", "--api", "kube", "--verb", "get",
            "--resource", "configmaps", "--status", "429", "--message", "busy",
        )  # fmt: skip
        assert added.code == 0, added.out
        got = invoke(lab_dir, "lab.kubectl", "--name", "fd", "--", "get", "configmap", "anything")
        assert got.code != 0
        assert "busy" in got.out, got.out
        listed = json.loads(invoke(lab_dir, "lab.fault.list", "--name", "fd", "--json").out)
        assert [(r["api"], r["verb"], r["reason"]) for r in listed] == [
            ("kube", "get", "TooManyRequests")
        ]
        one = invoke(lab_dir, "lab.fault.clear", "--name", "fd", "--api", "kube", "--id", "f1")
        assert one.code == 0, one.out
        again = invoke(lab_dir, "lab.kubectl", "--name", "fd", "--", "get", "configmap", "anything")
        assert "busy" not in again.out
        assert "NotFound" in again.out or "not found" in again.out
    finally:
        invoke(lab_dir, "lab.fault.clear", "--name", "fd")


@pytest.mark.parametrize(
    ("args", "fragments"),
    [
        (("--action", "DescribeInstance", "--code", "X"), ("--action", "DescribeInstances")),
        (("--code", "Throttling"), ("--action", "'*'")),
        (("--action", "DescribeVpcs"), ("--code", "--latency")),
        (("--action", "*", "--code", "X", "--count", "0"), ("--count '0'",)),
        (("--action", "*", "--code", "X", "--count", "two"), ("--count 'two'", "integer")),
        (("--action", "*", "--code", "X", "--probability", "1.5"), ("--probability '1.5'",)),
        (("--action", "*", "--latency", "-5"), ("--latency '-5'",)),
        (("--action", "*", "--code", "X", "--status", "200"), ("--status '200'", "400")),
        (("--action", "*", "--code", "X", "--service", "s3"), ("--service 's3'", "ec2")),
        (("--action", "*", "--code", "X", "--verb", "get"), ("--verb", "--api aws")),
        (("--api", "kube", "--verb", "fetch"), ("--verb 'fetch'", "watch")),
        (("--api", "gcp"), ("--api 'gcp'", "aws", "kube")),
    ],
    ids=[
        "unknown-action", "no-action", "no-code", "count-0", "count-text", "probability",
        "latency", "status", "service", "kube-flag-on-aws", "kube-verb", "api",
    ],
)  # fmt: skip
def test_bad_fault_flags_add_nothing(
    lab_dir: Path, args: tuple[str, ...], fragments: tuple[str, ...]
) -> None:
    result = invoke(lab_dir, "lab.fault.add", "--name", "fd", *args)
    assert_one_line_error(result, *fragments)
    assert json.loads(invoke(lab_dir, "lab.fault.list", "--name", "fd", "--json").out) == []


def test_the_aws_control_plane_reads_json_whatever_the_content_type(lab_dir: Path) -> None:
    """``curl -d '{...}'`` sends ``application/x-www-form-urlencoded`` (and so does urllib
    without a header); a ``text/plain`` body is JSON too: each rule is added."""
    state = state_of(lab_dir, "fd")
    try:
        for content_type in ("application/x-www-form-urlencoded", "text/plain"):
            body = json.dumps({"action": "DescribeVpcs", "code": "Throttling"}).encode()
            request = urllib.request.Request(
                f"{state.aws_endpoint}/_lab/faults",
                data=body,
                method="POST",
                headers={"Authorization": f"Bearer {state.token}", "Content-Type": content_type},
            )
            with urllib.request.urlopen(request, timeout=10) as answer:
                assert (content_type, answer.status) == (content_type, 201)
                assert json.loads(answer.read())["action"] == "DescribeVpcs"
        listed = json.loads(invoke(lab_dir, "lab.fault.list", "--name", "fd", "--json").out)
        assert [r["code"] for r in listed] == ["Throttling", "Throttling"]
    finally:
        invoke(lab_dir, "lab.fault.clear", "--name", "fd")


def test_status_exits_1_while_a_service_is_pending_with_a_warning(lab_dir: Path) -> None:
    svc = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": "stuck",
            "annotations": {
                "service.beta.kubernetes.io/aws-load-balancer-healthcheck-interval": "often"
            },
        },
        "spec": {"type": "LoadBalancer", "ports": [{"port": 80}]},
    }
    manifest = lab_dir / "stuck.json"
    manifest.write_text(json.dumps(svc))
    created = invoke(lab_dir, "lab.kubectl", "--name", "fd", "--", "apply", "-f", str(manifest))
    assert created.code == 0, created.out
    try:

        def warned() -> Result | None:
            status = invoke(lab_dir, "lab.status", "--name", "fd")
            return status if "SyncLoadBalancerFailed" in status.out else None

        status = wait_for(warned, timeout=30, what="the Warning in lab.status")
        assert status.code == 1, status.out
        assert "Service default/stuck is pending: SyncLoadBalancerFailed" in status.lines[-1]
        as_json = invoke(lab_dir, "lab.status", "--name", "fd", "--json")
        assert as_json.code == 1
        doc = json.JSONDecoder().raw_decode(as_json.out)[0]  # then the one-line reason
        assert any("default/stuck" in p for p in doc["problems"])
    finally:
        invoke(lab_dir, "lab.kubectl", "--name", "fd", "--", "delete", "-f", str(manifest))
