"""The lab as pytest fixtures: one lab per session (per xdist worker), reset between tests.

Options: ``--backend sim|kind|existing`` (default ``sim``; ``existing`` attaches to the cluster
``--kubeconfig PATH`` names: its own nodes, no stand-in of ours, nothing created or deleted in
it by the lab; tests marked ``standin`` or ``owncluster`` skip there), ``--aws moto|localstack``
(``--aws-endpoint URL``: a running LocalStack; without it one is started through Docker, and
without Docker the lab fixtures skip saying so; a case marked ``aws_needs("elb", ...)`` is
skipped with the reason where the endpoint lacks a feature, ``lab.aws.proxied.FEATURES``),
``--k8s-version``, ``--insecure-api`` (sim: the simulator over plain HTTP without a token;
by default it serves HTTPS and requires the lab's token, as ``invoke lab.up`` runs it), and
another controller build under test: ``--controller-cmd TEMPLATE`` or ``--controller
upstream=PATH`` (with ``--controller-ready-log``/``--controller-ready-url``); then every
``lab.start_controller()`` runs that build, and a test that asks for our controller's own
flags (``legacy=``, ``args=``) is skipped saying so. Conformance mode (``--expect
fixed|reproduce``, ``--conformance-report DIR``) runs only the catalog's declared
controller-agnostic cases and gives each a verdict for that build: :mod:`lab.conformance`.
The session starts one :class:`lab.compose.Lab`; the function-scoped
``lab`` fixture hands it to a test freshly reset (AWS state and trail, Kubernetes objects,
node registrations, metadata injections; the controller stopped). Tests start the controller
with the flags their scenario needs (``lab.start_controller(legacy=[...])``).

Server-side errors fail the test that caused them: the simulator's handler exceptions are
collected and checked at teardown. Backends this machine cannot run are skipped with the
reason, never faked.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from lab.clock import check_speed
from lab.compose import Lab
from lab.conformance import (
    EXPECTATIONS,
    FAILURE_ID,
    MARKER_HELP,
    ConformancePlugin,
    Declaration,
    DeclarationError,
)
from lab.controllerproc import (
    ControllerCommand,
    ControllerCommandError,
    ControllerProcess,
    choose_command,
)
from lab.preflight import check_kubeconfig_file
from lab.spec import AwsKind, Backend, LabSpec
from lab.state import LabError
from lab.versions.release import DEFAULT_K8S_VERSION

if TYPE_CHECKING:
    from kubernetes.client import ApiClient, CoreV1Api
    from mypy_boto3_ec2 import EC2Client
    from mypy_boto3_elb import ElasticLoadBalancingClient

    from lab.aws.trail import Trail
    from lab.debug.dap import DapClient
    from lab.imds import ImdsServer

#: The session's lab once it is started. moto's backends are process-global, so a fixture that
#: starts another in-process lab (e.g. a cluster of another release) must stop this lab's
#: controller first and mark it used, or two controllers reconcile one AWS.
SESSION_LAB = pytest.StashKey[Lab]()
#: The controller build under test (``--controller-cmd``/``--controller``); None: ours.
CONTROLLER_COMMAND = pytest.StashKey[ControllerCommand | None]()
#: conformance mode's plugin (``--expect``); absent otherwise
CONFORMANCE = pytest.StashKey[ConformancePlugin]()


def quiesce_session_lab(config: pytest.Config) -> None:
    """Stop the session lab's controller (if it runs) and have its next user reset it."""
    lab = config.stash.get(SESSION_LAB, None)
    if lab is None:
        return
    lab.stop_controller()
    lab.fresh = False


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("ccm-lab")
    _add_lab_options(group)
    _add_controller_options(group)
    _add_conformance_options(group)


def _add_lab_options(group: Any) -> None:
    """The session lab's shape: backend, cluster, AWS endpoint, release."""
    group.addoption(
        "--backend",
        choices=tuple(Backend),
        default=os.environ.get("CCM_LAB_BACKEND", "sim"),
        help="cluster backend for lab fixtures (default: sim, the embedded API simulator)",
    )
    group.addoption(
        "--kubeconfig",
        default=os.environ.get("CCM_LAB_KUBECONFIG", ""),
        help="with --backend existing: the kubeconfig of the cluster the lab attaches to",
    )
    group.addoption(
        "--aws",
        choices=("moto", "localstack"),
        default=os.environ.get("CCM_LAB_AWS", "moto"),
        help="AWS endpoint for lab fixtures (default: moto with the fidelity layer; "
        "localstack: behind the lab's recording proxy)",
    )
    group.addoption(
        "--aws-endpoint",
        default=os.environ.get("CCM_LAB_AWS_ENDPOINT") or None,
        help="--aws localstack: the URL of a running LocalStack (default: start one in Docker)",
    )
    group.addoption(
        "--insecure-api",
        action="store_true",
        default=os.environ.get("CCM_LAB_INSECURE_API", "") not in ("", "0"),
        help="sim: serve the session lab's API simulator over plain HTTP without a token "
        "(default: HTTPS and the lab's token, as invoke lab.up serves it)",
    )
    group.addoption(
        "--k8s-version",
        default=os.environ.get("CCM_LAB_K8S_VERSION", DEFAULT_K8S_VERSION),
        help="Kubernetes version the cluster (or its kubelet stand-in) behaves as",
    )


def _add_controller_options(group: Any) -> None:
    """Another controller build under test, and how ours starts."""
    group.addoption(
        "--controller-cmd",
        default="",
        help="run this command as the controller under test instead of ours; the lab fills "
        "{kubeconfig} {cloud_config} {imds_endpoint} {aws_endpoint} {metrics_addr} "
        "{metrics_port} {secure_port} {region} {log_dir}",
    )
    group.addoption(
        "--controller",
        default="",
        help="ours (default) | upstream=PATH: an aws-cloud-controller-manager binary",
    )
    group.addoption(
        "--controller-ready-log",
        default="",
        help="with another build: ready when a log line matches this regex",
    )
    group.addoption(
        "--controller-launch",
        choices=("fork", "exec"),
        default=os.environ.get("CCM_LAB_CONTROLLER_LAUNCH", "fork"),
        help="our controller's starts: fork (default) from a server that imported it once, "
        "or exec (python -m controller afresh each time, as lab.up does)",
    )
    group.addoption(
        "--controller-ready-url",
        default="",
        help="with another build: ready when this URL answers 200",
    )


def _add_conformance_options(group: Any) -> None:
    """Conformance mode and the catalog's clock."""
    group.addoption(
        "--expect",
        choices=EXPECTATIONS,
        default=None,
        help="conformance mode for the build under test: run only the catalog's "
        "controller-agnostic cases of this expectation and give each a verdict",
    )
    group.addoption(
        "--conformance-report",
        default=None,
        metavar="DIR",
        help="with --expect: write DIR/conformance.md and DIR/conformance.xml (JUnit)",
    )
    group.addoption(
        "--report-only",
        action="append",
        default=[],
        metavar="FAILURE",
        help="with --expect fixed: report this documented failure's verdict without failing the "
        "run on 'not fixed' (a fix beyond what the build's upstream has: shared-elb-sg for "
        "cloud-provider-aws v1.33.0); repeat it, or give a comma-separated list",
    )
    group.addoption(
        "--catalog-speed",
        type=_clock_speed,
        default=None,
        metavar="N",
        help="lab seconds per real second for the e2e catalog's labs (default 10: what the "
        "catalog is written and judged at; higher only to measure the clock's share)",
    )


def _clock_speed(text: str) -> float:
    """``--catalog-speed``'s value, or argparse's usage error naming it."""
    import argparse

    try:
        return check_speed(float(text))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"--catalog-speed must be a number > 0 (lab seconds per real second), got {text!r}"
        ) from None


def pytest_configure(config: pytest.Config) -> None:
    """Check the controller flags once, before any lab starts (a usage error names them)."""
    try:
        command = choose_command(
            controller_cmd=config.getoption("--controller-cmd", ""),
            controller=config.getoption("--controller", ""),
            ready_log=config.getoption("--controller-ready-log", ""),
            ready_url=config.getoption("--controller-ready-url", ""),
        )
    except ControllerCommandError as exc:
        raise pytest.UsageError(str(exc)) from None
    config.stash[CONTROLLER_COMMAND] = command
    config.addinivalue_line("markers", MARKER_HELP)
    config.addinivalue_line(
        "markers",
        "aws_needs(*features): needs these of the lab's AWS features (lab.aws.proxied.FEATURES: "
        "elb, elbv2, fidelity, elb-model); skipped with the reason where the endpoint lacks one",
    )
    options_spec(config, command)
    expect = config.getoption("--expect", None)
    report_dir = config.getoption("--conformance-report", None)
    report_only = _report_only(config.getoption("--report-only", []) or [], expect)
    if expect is None:
        if report_dir:
            raise pytest.UsageError(
                f"--conformance-report {report_dir!r}: reports a conformance run; give --expect "
                f"{'|'.join(EXPECTATIONS)} too"
            )
        return
    if command is None:
        raise pytest.UsageError(
            f"--expect {expect}: judges another controller build; give it with --controller-cmd "
            "TEMPLATE or --controller upstream=PATH (our own: --controller-cmd "
            "'{python} -m controller --kubeconfig {kubeconfig} --cloud-config {cloud_config} "
            "--metrics-addr {metrics_addr}' plus the flags it should run with)"
        )
    plugin = ConformancePlugin(
        expect=expect,
        build=f"{command.name}: {' '.join(command.template)}",
        report_dir=Path(report_dir) if report_dir else None,
        report_only=report_only,
    )
    config.stash[CONFORMANCE] = plugin
    config.pluginmanager.register(plugin, "ccm-lab-conformance")


def _report_only(given: list[str], expect: str | None) -> frozenset[str]:
    """``--report-only``'s failure ids (usage errors name the value)."""
    ids = frozenset(i.strip() for text in given for i in text.split(",") if i.strip())
    if ids and expect != "fixed":
        raise pytest.UsageError(
            f"--report-only {','.join(sorted(ids))}: keeps a 'not fixed' verdict from failing a "
            "conformance run; give --expect fixed too"
        )
    bad = sorted(i for i in ids if not FAILURE_ID.fullmatch(i))
    if bad:
        raise pytest.UsageError(
            f"--report-only {bad[0]!r}: a documented failure's id (lower-case words and digits "
            "joined by dashes, e.g. shared-elb-sg)"
        )
    return ids


def options_spec(config: pytest.Config, command: ControllerCommand | None) -> LabSpec:
    """The session lab's :class:`LabSpec` from the options, judged by the rule table once,
    before any lab starts (a refusal is a usage error naming the flag); a kubeconfig of
    ``--backend existing`` must be a file that names an API server (``lab.preflight``)."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    backend = config.getoption("--backend", "sim")
    kubeconfig = config.getoption("--kubeconfig", "")
    try:
        spec = LabSpec(
            name=f"pytest-{worker}",
            k8s_version=config.getoption("--k8s-version", DEFAULT_K8S_VERSION),
            backend=backend,
            kubeconfig=Path(kubeconfig) if kubeconfig else None,
            insecure_api=bool(config.getoption("--insecure-api", False)),
            aws=config.getoption("--aws", "moto"),
            aws_endpoint=config.getoption("--aws-endpoint", None),
            controller_command=command,
            controller_launch=config.getoption("--controller-launch", "fork"),
        )
        if spec.kubeconfig is not None:
            check_kubeconfig_file(spec.kubeconfig)
    except LabError as exc:
        raise pytest.UsageError(str(exc)) from None
    if spec.kubeconfig is not None:
        spec = spec.replace(kubeconfig=spec.kubeconfig.expanduser().resolve())
    return spec


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Every conformance marker says which failure and which expectation (a usage error
    naming the case otherwise), in every run, not only in conformance mode."""
    from lab.aws.proxied import unknown_features

    for item in items:
        try:
            Declaration.of(item)
        except DeclarationError as exc:
            raise pytest.UsageError(str(exc)) from None
        for marker in item.iter_markers("aws_needs"):
            bad = unknown_features(tuple(marker.args))
            if bad or not marker.args:
                raise pytest.UsageError(
                    f"{item.nodeid}: aws_needs{marker.args!r}: name features of "
                    "lab.aws.proxied.FEATURES (elb, elbv2, fidelity, elb-model)"
                )


def use_controller_under_test(lab: Lab, config: pytest.Config) -> Lab:
    """Have ``lab`` run the session's controller build (if one was given) and skip a test
    that needs ours. Every fixture that makes a lab calls it."""
    lab.needs_our_controller = functools.partial(_without_ours, config)
    command = config.stash.get(CONTROLLER_COMMAND, None)
    launch = config.getoption("--controller-launch", "fork")
    if (lab.config.controller_command, lab.config.controller_launch) != (command, launch):
        lab.config = lab.config.replace(controller_command=command, controller_launch=launch)
    return lab


def _without_ours(config: pytest.Config, reason: str) -> bool:
    """A case asked for our controller's flags while another build runs: in conformance mode
    a declared case runs the build without them (True); any other case is skipped."""
    plugin = config.stash.get(CONFORMANCE, None)
    if plugin is not None and plugin.stands_in(reason):
        return True
    pytest.skip(f"--controller-cmd: {reason}")


def docker_engine_answers() -> bool:
    if shutil.which("docker") is None:
        return False
    try:
        done = subprocess.run(
            ["docker", "info", "--format", "{{.ServerVersion}}"],
            capture_output=True,
            timeout=5,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


def _skip_unsupported(config: pytest.Config) -> None:
    backend = config.getoption("--backend")
    aws = config.getoption("--aws")
    if backend == Backend.KIND:
        if not docker_engine_answers():
            pytest.skip("--backend kind needs a Docker engine; `docker info` does not answer here")
        if shutil.which("kind") is None:
            pytest.skip("--backend kind needs the kind CLI on PATH")
    # --aws localstack on kind or existing: the rule table refused it at configure time
    if aws == AwsKind.LOCALSTACK and config.getoption("--aws-endpoint") is None:
        from lab.aws.localstack_docker import IMAGE, docker_unavailable

        why = docker_unavailable()
        if why is not None:
            pytest.skip(
                f"--aws localstack without --aws-endpoint starts {IMAGE} with Docker, and {why}"
            )


@pytest.fixture(scope="session")
def lab_config(request: pytest.FixtureRequest) -> LabSpec:
    """Override in a conftest to shape the session's lab (nodes, version, zones...)."""
    return options_spec(request.config, request.config.stash.get(CONTROLLER_COMMAND, None))


@pytest.fixture(scope="session")
def lab_session(request: pytest.FixtureRequest, lab_config: LabSpec) -> Iterator[Lab]:
    _skip_unsupported(request.config)
    lab = use_controller_under_test(Lab(lab_config), request.config)
    lab.start()
    request.config.stash[SESSION_LAB] = lab
    try:
        yield lab
    finally:
        lab.stop()


@pytest.fixture(autouse=True)
def _aws_needs(request: pytest.FixtureRequest) -> None:
    """A case marked ``aws_needs(...)`` is skipped, with the reason, where the session lab's
    AWS endpoint lacks one of those features (``--aws localstack``); before any other fixture
    starts something for it."""
    needed = tuple(
        name for marker in request.node.iter_markers("aws_needs") for name in marker.args
    )
    if not needed or request.config.getoption("--aws", "moto") == "moto":
        return
    session: Lab = request.getfixturevalue("lab_session")
    missing = session.aws_lacks(*needed)
    if missing:
        from lab.aws.proxied import FEATURES

        name, why = next(iter(missing.items()))
        pytest.skip(f"needs {FEATURES[name]} ({name}): {why}")


@pytest.fixture
def lab(request: pytest.FixtureRequest, lab_session: Lab) -> Iterator[Lab]:
    """The session's lab, reset to the freshly seeded world (controller stopped)."""
    marker = request.node.get_closest_marker("standin")
    if marker is not None and not lab_session.capabilities.kubelet_stand_in:
        why = marker.args[0] if marker.args else "it drives the kubelet stand-in"
        pytest.skip(f"needs the sim backend's kubelet stand-in: {why}")
    marker = request.node.get_closest_marker("owncluster")
    if marker is not None and lab_session.config.backend == Backend.EXISTING:
        why = marker.args[0] if marker.args else "it runs workloads on the lab's own nodes"
        pytest.skip(f"needs a cluster the lab made (sim or kind), not --backend existing: {why}")
    if not lab_session.fresh:
        lab_session.reset()
    lab_session.fresh = False
    lab_session.take_internal_errors()  # what an earlier test left is not this test's
    yield lab_session
    # The controller keeps running until the next reset (which kills it) or the session ends.
    errors = lab_session.take_internal_errors()
    if errors:
        pytest.fail(
            "a lab component failed while serving this test:\n"
            + "\n".join(
                f"{component}: {line}" for component, lines in errors.items() for line in lines
            )
        )


@pytest.fixture
def kube_api(lab: Lab) -> ApiClient:
    """The official client's ``ApiClient`` for the lab's cluster."""
    api: ApiClient = lab.api_client()
    return api


@pytest.fixture
def core_v1(kube_api: ApiClient) -> CoreV1Api:
    from kubernetes import client

    return client.CoreV1Api(kube_api)


@pytest.fixture
def ec2(lab: Lab) -> EC2Client:
    """boto3 EC2 client for the lab's AWS endpoint."""
    return lab.aws.client("ec2")


@pytest.fixture
def elb(lab: Lab) -> ElasticLoadBalancingClient:
    """boto3 Classic ELB client for the lab's AWS endpoint."""
    return lab.aws.client("elb")


@pytest.fixture
def trail(lab: Lab) -> Trail:
    """The AWS call trail (``trail.calls(action=...)``), emptied at the start of each test."""
    return lab.aws.trail


@pytest.fixture
def imds(lab: Lab) -> ImdsServer:
    """The lab's instance metadata service (``.url``, ``.control`` for spot/events/IMDSv2)."""
    return lab.imds


@pytest.fixture
def controller(lab: Lab) -> ControllerProcess:
    """The controller started with default flags (restart with ``lab.start_controller``)."""
    return lab.start_controller()


class NodePatches:
    """The node edits the write-ups did by hand, bound to the lab's cluster."""

    def __init__(self, lab: Lab) -> None:
        from kubernetes import client

        self.lab = lab
        self.core = client.CoreV1Api(lab.api_client())

    def fix_ip(self, node: str, ip: str | None = None) -> dict[str, Any]:
        from lab import nodes

        return nodes.fix_provided_ip(self.core, node, ip or self.lab.node(node).private_ip)

    def include(self, node: str) -> dict[str, Any]:
        from lab import nodes

        return nodes.include(self.core, node)

    def exclude(self, node: str) -> dict[str, Any]:
        from lab import nodes

        return nodes.exclude(self.core, node)

    def set_provider_id(self, node: str, provider_id: str | None = None) -> dict[str, Any]:
        from lab import nodes

        return nodes.set_provider_id(
            self.core, node, provider_id or self.lab.node(node).provider_id
        )


@pytest.fixture
def node_patches(lab: Lab) -> NodePatches:
    return NodePatches(lab)


@pytest.fixture
def debugged_controller(
    lab: Lab, tmp_path_factory: pytest.TempPathFactory
) -> Callable[..., AbstractContextManager[DapClient]]:
    """``with debugged_controller({file: [line]}, legacy=[...]) as dap:`` runs the controller
    under debugpy (waiting for the client), attaches a DAP client with those breakpoints and
    stops everything on exit, leaving no process or port behind."""
    from lab.debug import Debuggee, attach_session

    @contextmanager
    def start(
        breakpoints: Mapping[str | Path, Iterable[int]],
        *,
        legacy: Iterable[str] = (),
        args: Sequence[str] = (),
    ) -> Iterator[DapClient]:
        workdir = tmp_path_factory.mktemp("debug")
        spec = lab.controller_spec(legacy=legacy, args=args)
        argv = spec.argv(address_file=workdir / "controller.address")[1:]
        with (
            Debuggee(
                argv, workdir, wait_for_client=True, cwd=Path.cwd(), env=spec.environ()
            ) as dbg,
            attach_session(
                dbg.endpoint.host, dbg.endpoint.port, breakpoints=breakpoints, timeout=30
            ) as dap,
        ):
            yield dap

    return start
