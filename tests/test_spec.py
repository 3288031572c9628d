"""``lab.spec``: one rule table, each rule refusing in one line; the spec's JSON round trip;
the daemon reading its spec from the lab directory and answering bad bodies with 400.

Every rule of :data:`lab.spec.RULES` has a case here (a test fails when one is added without
one): a spec that breaks exactly that rule gets exactly that rule's refusal, one line naming
the flag and the value.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from lab.controllerproc import ControllerCommand
from lab.spec import (
    AUTO,
    RULES,
    SPEC_FILE,
    AwsKind,
    Backend,
    LabSpec,
    Scope,
    SpecError,
    check,
    read_spec,
    up_request,
    write_spec,
)
from lab.state import LabError
from tests.daemon_support import serving

CMD = ControllerCommand(("acm", "--kubeconfig={kubeconfig}"), name="custom")

#: rule name -> (the spec's options, the flag and value its refusal starts with)
CASES: dict[str, tuple[dict[str, Any], str]] = {
    "name": ({"name": "../Bad"}, "--name '../Bad': use 1-32 lowercase"),
    "no-controller-with-command": (
        {"controller": False, "controller_command": CMD},
        "--no-controller with --controller-cmd/--controller (custom): drop one",
    ),
    "command-with-our-flags": (
        {"controller_command": CMD, "legacy": ("k8s-84926",)},
        "--legacy-behavior 'k8s-84926': that is our controller's flag",
    ),
    "image-reference": (
        {"controller_image": "bad image", "backend": "kind"},
        "--controller-image 'bad image': expected an image reference",
    ),
    "image-is-the-controller": (
        {"controller_image": "img:1", "backend": "kind", "controller": False},
        "--controller-image img:1 with --no-controller: the image is the controller",
    ),
    "image-needs-kind": (
        {"controller_image": "img:1", "backend": "sim"},
        "--controller-image img:1: an image runs in-cluster on kind's nodes",
    ),
    "kubeconfig-names-existing": (
        {"kubeconfig": Path("kc"), "backend": "sim"},
        "--kubeconfig 'kc': names the cluster of --backend existing",
    ),
    "existing-needs-kubeconfig": (
        {"backend": "existing"},
        "--backend existing: give --kubeconfig PATH",
    ),
    "existing-as-it-is": (
        {"backend": "existing", "kubeconfig": Path("kc"), "insecure_api": True},
        "--insecure-api: shapes a cluster the lab makes",
    ),
    "aws-known": ({"aws": "nimbus"}, "--aws 'nimbus': choose one of moto, localstack, real"),
    "real-takes-few-flags": (
        {"aws": "real", "accept_aws_charges": True, "feature_gates": "X=true"},
        "--feature-gates: --aws real runs the sim cluster on the run's instances",
    ),
    "endpoint-names-localstack": (
        {"aws_endpoint": "http://h:1"},
        "--aws-endpoint 'http://h:1' names a LocalStack; add --aws localstack",
    ),
    "endpoint-url": (
        {"aws": "localstack", "aws_endpoint": "ftp://h:1"},
        "--aws-endpoint 'ftp://h:1': not an http(s) URL",
    ),
    "localstack-not-on-kind": (
        {"aws": "localstack", "backend": "kind"},
        "--aws localstack runs with --backend sim only so far: on kind",
    ),
    "localstack-not-on-existing": (
        {"aws": "localstack", "backend": "existing", "kubeconfig": Path("kc")},
        "--aws localstack runs with --backend sim only so far (an existing",
    ),
    "consent-is-for-real": ({"dry_run": True}, "--dry-run: belongs to --aws real"),
    "real-needs-consent": (
        {"aws": "real", "run_id": "r-1"},
        "--aws real: creates billable resources",
    ),
    "real-runs-sim": (
        {"aws": "real", "accept_aws_charges": True, "backend": "kind"},
        "--aws real --backend kind: a real-account lab runs the sim cluster",
    ),
    "run-id-is-for-real": ({"run_id": "r-1"}, "run_id 'r-1': names the real-account run"),
    "vpc-cidr": ({"vpc_cidr": "10.0.0.0/24"}, "--vpc-cidr '10.0.0.0/24': the lab's VPC holds"),
    "clock-speed": ({"clock_speed": 0}, "--clock-speed 0: lab seconds per real second"),
    "nodes": ({"nodes": 0}, "--nodes 0: a lab has 1 to 20 nodes"),
    "nodes-at-most": ({"nodes": 21}, "--nodes 21: a lab has 1 to 20 nodes"),
    "k8s-version": ({"k8s_version": "abc"}, "--k8s-version 'abc': expected a Kubernetes version"),
    "backend-known": ({"backend": "bogus"}, "--backend 'bogus': choose one of auto, sim, kind"),
    "k8s-modelled": ({"k8s_version": "1.19"}, "--k8s-version 1.19: the lab models Kubernetes"),
    "kind-node-image": (
        {"k8s_version": "1.20.1", "backend": "kind"},
        "--k8s-version 1.20.1 on kind:",
    ),
    "feature-gates-are-sim": (
        {"feature_gates": "X=true", "backend": "kind"},
        "--feature-gates 'X=true': these set the sim backend's data plane",
    ),
    "feature-gates": ({"feature_gates": "Nope=true"}, "--feature-gates 'Nope=true': "),
    "insecure-api-is-sim": (
        {"insecure_api": True, "backend": "kind"},
        "--insecure-api opens the sim backend's API simulator",
    ),
    "expose-is-kind": (
        {"expose_to_nodes": True, "backend": "sim"},
        "--expose-to-nodes is for kind",
    ),
    "controller-launch": ({"controller_launch": "spawn"}, "--controller-launch 'spawn': choose"),
    "zones": ({"zones": ()}, "zones: give at least one availability zone"),
    "backend-chosen": ({"backend": AUTO}, "--backend auto: the front door chooses"),
    "real-has-a-run": (
        {"aws": "real", "accept_aws_charges": True},
        "--aws real: the lab runs on a run's instances",
    ),
}


def _judge(options: dict[str, Any]) -> list[tuple[str, str]]:
    """Every refusal of every scope for a spec of ``options``: a refusal of the SPEC scope
    happens while it is made (then it is the only one reported)."""
    try:
        spec = LabSpec(**options)
    except SpecError as exc:
        return [(exc.rule, str(exc))]
    found = [(r.name, m) for scope in (Scope.UP, Scope.FINAL) for r, m in _each(spec, scope)]
    return found


def _each(spec: LabSpec, scope: Scope) -> list[tuple[Any, str]]:
    from lab.spec import refusals

    return refusals(spec, scope)


def test_every_rule_has_a_case() -> None:
    assert sorted(CASES) == sorted(r.name for r in RULES)


@pytest.mark.parametrize("rule", [r.name for r in RULES])
def test_a_spec_that_breaks_one_rule_gets_that_rules_refusal(rule: str) -> None:
    options, expected = CASES[rule]
    found = _judge(options)
    assert [name for name, _ in found] == [rule], found
    message = found[0][1]
    assert message.startswith(expected), message
    assert "\n" not in message


def test_a_spec_made_breaking_a_rule_is_a_value_error_and_a_lab_error() -> None:
    with pytest.raises(ValueError, match=r"^--clock-speed 0") as caught:
        LabSpec(clock_speed=0)
    assert isinstance(caught.value, LabError)
    assert caught.value.rule == "clock-speed"  # type: ignore[attr-defined]


def test_backend_and_aws_are_str_enums_equal_to_their_words() -> None:
    spec = LabSpec(backend="kind", aws="moto")
    assert spec.backend is Backend.KIND
    assert spec.backend == "kind"  # type: ignore[comparison-overlap]
    assert spec.aws is AwsKind.MOTO
    assert spec.aws == "moto"  # type: ignore[comparison-overlap]
    assert spec.cluster_name == "ccm-lab-default"
    assert LabSpec(aws="localstack").aws is AwsKind.LOCALSTACK


def test_auto_is_a_request_resolved_on_the_same_table() -> None:
    request = up_request(name="x", feature_gates="")
    assert request.backend == AUTO
    assert not request.final
    assert request.resolve(Backend.SIM).final
    gated = up_request(name="x", k8s_version="1.29", feature_gates="ProxyTerminatingEndpoints=true")
    with pytest.raises(SpecError, match=r"^--feature-gates .*: these set the sim backend's"):
        gated.resolve(Backend.KIND)
    insecure = up_request(name="x", insecure_api=True)
    with pytest.raises(SpecError, match=r"^--insecure-api opens the sim backend's"):
        insecure.resolve(Backend.KIND)
    imaged = up_request(name="x", controller_image="img:1")
    assert imaged.expose_to_nodes, "an image's pod reaches the endpoints on the gateway"
    with pytest.raises(SpecError, match=r"^--controller-image img:1: an image runs in-cluster"):
        imaged.resolve(Backend.SIM)


def test_json_round_trip_and_file(tmp_path: Path) -> None:
    spec = LabSpec(
        name="t",
        backend="existing",
        kubeconfig=tmp_path / "kc",
        controller_command=CMD,
        extra_args=(),
        zones=("us-east-1a",),
        state_dir=tmp_path,
        vpc_cidr="10.42.0.0/16",
    )
    data = json.loads(json.dumps(spec.to_json()))
    assert data["version"] == 1
    assert LabSpec.from_json(data) == spec
    write_spec(tmp_path, spec)
    assert (tmp_path / SPEC_FILE).stat().st_mode & 0o777 == 0o600
    assert read_spec(tmp_path) == spec
    assert read_spec(tmp_path / "none") is None


def test_json_of_another_format_or_an_unresolved_spec_is_refused(tmp_path: Path) -> None:
    with pytest.raises(LabError, match=r"format version 0, this checkout reads version 1"):
        LabSpec.from_json({**LabSpec().to_json(), "version": 0})
    with pytest.raises(LabError, match=r"unknown field 'colour'"):
        LabSpec.from_json({**LabSpec().to_json(), "colour": "red"})
    with pytest.raises(SpecError, match=r"^--backend auto: the front door chooses"):
        up_request(name="x").to_json()


def test_check_raises_the_first_refusal_of_a_scope() -> None:
    spec = up_request(name="x")
    check(spec, Scope.SPEC, Scope.UP)
    with pytest.raises(SpecError) as caught:
        check(spec, Scope.FINAL)
    assert caught.value.rule == "backend-chosen"


# --- the daemon: spec.json in, route table out ------------------------------------------------


def test_the_daemon_reads_its_spec_from_the_lab_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from lab import daemon

    served: list[LabSpec] = []

    def serve(spec: LabSpec) -> int:
        served.append(spec)
        return 0

    monkeypatch.setattr(daemon, "serve", serve)
    write_spec(tmp_path, LabSpec(name="d", nodes=3, backend="sim", clock_speed=5))
    assert daemon.main(["--state-dir", str(tmp_path)]) == 0
    assert served == [LabSpec(name="d", nodes=3, clock_speed=5, state_dir=tmp_path.resolve())]


def test_the_daemon_without_a_spec_fails_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from lab import daemon

    assert daemon.main(["--state-dir", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert "failed to start: no spec.json there" in err
    assert len(err.strip().splitlines()) == 1


class _FakeKubelet:
    node_names = ("n1",)

    def __init__(self) -> None:
        self.stopped: list[str] = []

    def stop_heartbeat(self, node: str) -> None:
        self.stopped.append(node)

    def resume_heartbeat(self, node: str) -> None:
        self.stopped.remove(node)


class _FakeLab:
    token = "t0k"
    config = LabSpec()

    def __init__(self) -> None:
        self.capabilities = type("Caps", (), {"kubelet_stand_in": True})()
        self.sim = type("Sim", (), {"stand_in": _FakeKubelet()})()


@pytest.fixture
def control() -> Iterator[tuple[str, _FakeLab]]:
    lab = _FakeLab()
    with serving(lab) as url:
        yield url, lab


def test_the_typed_client_drives_the_route_table(control: tuple[str, _FakeLab]) -> None:
    from lab.daemon_client import DaemonClient, HeartbeatAnswer

    url, lab = control
    client = DaemonClient(url, token="t0k")
    assert client.healthy()
    assert client.stop_heartbeat("n1") == HeartbeatAnswer("n1", "stop")
    assert lab.sim.stand_in.stopped == ["n1"]
    assert client.resume_heartbeat("n1") == HeartbeatAnswer("n1", "resume")
    with pytest.raises(LabError, match=r"^no node 'n2' in this lab; nodes: n1$"):
        client.stop_heartbeat("n2")
    assert not DaemonClient(url, token="wrong").healthy()


@pytest.mark.parametrize(
    ("path", "body", "fragment"),
    [
        ("/traffic", b'{"service": 7}', "'service' must be a str"),
        ("/traffic", b'{"service": "web", "requests": "many"}', "'requests' must be a int"),
        ("/traffic", b"[1, 2]", "give a JSON object"),
        ("/traffic", b"{not json", "the body is not JSON"),
        ("/kubelet/stop-heartbeat", b'{"node": ["n1"]}', "'node' must be a str"),
    ],
    ids=["service-type", "requests-type", "not-an-object", "not-json", "node-type"],
)
def test_bad_bodies_are_answered_400_with_a_json_error(
    control: tuple[str, _FakeLab], path: str, body: bytes, fragment: str
) -> None:
    url, _ = control
    request = urllib.request.Request(
        f"{url}{path}",
        data=body,
        method="POST",
        headers={"Authorization": "Bearer t0k", "Content-Type": "application/json"},
    )
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=10)
    with refused.value as answer:
        assert answer.code == 400
        assert fragment in json.loads(answer.read())["error"]
