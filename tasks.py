"""The front door: ``invoke lab.*`` and ``invoke check``.

Task bodies stay thin and call importable functions in ``lab.frontdoor`` (and ``e2e.repro``), so
tests call the same code. ``invoke --list`` shows everything.

Every task validates its input before it changes anything; a mistake ends in one line naming
the flag, the value and the fix (exit 1; ``INVOKE_DEBUG=1`` or ``invoke --debug`` adds the
traceback). This module is one of the few places that sees both ``lab`` and ``controller``: it
checks ``--legacy-behavior`` ids and ``--args`` against the controller's own registry and
parser before the lab is touched.
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
import os
import shlex
import sys
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from invoke.collection import Collection
from invoke.context import Context
from invoke.exceptions import Exit

from lab.frontdoor.cli import PassThroughTask
from lab.frontdoor.cli import lab_task as task
from lab.versions.release import DEFAULT_K8S_VERSION

PY_PATHS = "."  # ruff skips .venv, .lab and git-ignored files
#: controller flags the lab sets itself; --args may not override them
LAB_OWNED_FLAGS = ("--kubeconfig", "--cloud-config", "--metrics-addr", "--address-file")

T = TypeVar("T")


def _debugging() -> bool:
    return bool(os.environ.get("INVOKE_DEBUG")) or logging.getLogger("invoke").isEnabledFor(
        logging.DEBUG
    )


def _run(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """Call a lab function; a LabError (or any failure) becomes one line and exit 1."""
    from lab.state import LabError

    try:
        return fn(*args, **kwargs)
    except LabError as exc:
        raise Exit(f"error: {exc}", code=1) from None
    except BrokenPipeError:
        raise  # the reader went away: the task ends quietly (lab.frontdoor.cli)
    except KeyboardInterrupt:
        raise Exit("interrupted", code=130) from None
    except Exit:
        raise
    except Exception as exc:
        if _debugging():
            raise
        first = str(exc).splitlines()[0] if str(exc) else ""
        raise Exit(
            f"error: {type(exc).__name__}: {first} (this is a bug in the lab; "
            "`INVOKE_DEBUG=1 invoke ...` shows the traceback)",
            code=1,
        ) from None


def _split(value: str) -> list[str]:
    return [v.strip() for v in value.split(",") if v.strip()]


def _controller_flags(legacy_behavior: str, args: str) -> tuple[list[str], list[str]]:
    """Check ``--legacy-behavior`` and ``--args`` with the controller's own registry and
    parser; returns them split. Exits with one line on the first problem."""
    from controller.app import build_parser
    from controller.legacy import BEHAVIORS

    legacy = _split(legacy_behavior)
    unknown = [b for b in legacy if b not in BEHAVIORS]
    if unknown:
        raise Exit(
            f"error: --legacy-behavior {','.join(unknown)}: unknown id; known ids: "
            f"{', '.join(sorted(BEHAVIORS))}",
            code=1,
        )
    try:
        extra = shlex.split(args)
    except ValueError as exc:
        raise Exit(f"error: --args {args!r}: {exc}", code=1) from None
    owned = [a for a in extra if a.split("=", 1)[0] in LAB_OWNED_FLAGS]
    if owned:
        raise Exit(
            f"error: --args {args!r}: {owned[0].split('=', 1)[0]} is set by the lab; leave it out",
            code=1,
        )
    errors = io.StringIO()
    with contextlib.redirect_stderr(errors):
        try:
            build_parser().parse_args(extra)
        except SystemExit:
            reason = errors.getvalue().strip().splitlines()[-1:] or ["invalid"]
            message = reason[0].removeprefix("python -m controller: error: ")
            raise Exit(
                f"error: --args {args!r}: {message} (`python -m controller --help` lists the "
                "controller's flags)",
                code=1,
            ) from None
    return legacy, extra


def _controller_command(
    controller_cmd: str, controller: str, ready_log: str, ready_url: str
) -> Any:
    """``--controller-cmd`` / ``--controller`` / ``--controller-ready-log|url`` checked and
    parsed (a ``ControllerCommand``, or None for ours). Exits with one line on a problem."""
    from lab.controllerproc import ControllerCommandError, choose_command

    try:
        return choose_command(
            controller_cmd=controller_cmd,
            controller=controller,
            ready_log=ready_log,
            ready_url=ready_url,
        )
    except ControllerCommandError as exc:
        raise Exit(f"error: {exc}", code=1) from None


#: the help of the flags that choose another controller build (lab.up, lab.controller.restart)
CONTROLLER_HELP = {
    "controller_cmd": "run this command as the controller instead of ours; the lab fills "
    "{kubeconfig} {cloud_config} {imds_endpoint} {aws_endpoint} {metrics_addr} {metrics_port} "
    "{secure_port} {region} {log_dir}",
    "controller": "ours (default) | upstream=PATH: an aws-cloud-controller-manager binary with "
    "the lab's flags",
    "controller_ready_log": "with another build: ready when a log line matches this regex "
    "(default: a 200 from http://{metrics_addr}/healthz)",
    "controller_ready_url": "with another build: ready when this URL answers 200",
}


# --- check ---------------------------------------------------------------------------------


@task
def lint(c: Context) -> None:
    """ruff lint and format check."""
    c.run(f"ruff check {PY_PATHS}", pty=False)
    c.run(f"ruff format --check {PY_PATHS}", pty=False)
    c.run(
        "check-jsonschema --builtin-schema vendor.github-workflows .github/workflows/*.yml",
        pty=False,
    )


@task
def types(c: Context) -> None:
    """mypy --strict on lab/ and controller/."""
    c.run("mypy", pty=False)


@task
def contracts(c: Context) -> None:
    """import-linter: independence, where boto3 may be imported, and the layers."""
    c.run("lint-imports", pty=False)


@task(pre=[lint, types, contracts], default=True)
def check(c: Context) -> None:
    """ruff, mypy --strict and the import contracts."""


@task
def fmt(c: Context) -> None:
    """Apply ruff's fixes and formatting."""
    c.run(f"ruff check --fix {PY_PATHS}", pty=False)
    c.run(f"ruff format {PY_PATHS}", pty=False)


# --- lab -----------------------------------------------------------------------------------


@task(
    default=True,
    help={
        "name": "lab name (state under .lab/<name>/)",
        "backend": "auto (kind if Docker answers, else sim) | sim | kind | existing "
        "(attach to --kubeconfig's cluster)",
        "kubeconfig": "with --backend existing: the kubeconfig of the cluster to attach to "
        "(the lab creates and deletes nothing in it)",
        "aws": "moto (default: the lab's own, with its fidelity layer) | localstack (behind the "
        "lab's recording proxy; sim backend; scenarios needing ELB or the fidelity layer skip) | "
        "real (your AWS account: needs --i-accept-aws-charges; the sim cluster on the run's "
        "instances and our controller behind the recording proxy; every resource tagged "
        "ccm-lab/run-id, the controller's too)",
        "aws_endpoint": "localstack: the URL of a running LocalStack, e.g. http://127.0.0.1:4566 "
        "(default: start localstack/localstack in Docker)",
        "i_accept_aws_charges": "with --aws real: go ahead and create billable resources",
        "dry_run": "with --aws real: print what would be created and change nothing",
        "controller_image": "kind: run this controller image in-cluster (a DaemonSet on the "
        "control plane, upstream's flags and RBAC; local images loaded with kind load) "
        "instead of a local process",
        "nodes": "number of nodes, 1 to 20 (the first is the control plane)",
        "k8s_version": f"Kubernetes version the cluster behaves as (default {DEFAULT_K8S_VERSION})",
        "legacy_behavior": "comma-separated legacy behaviours for the controller",
        "args": 'extra controller flags, quoted (e.g. "--concurrent-service-syncs 4")',
        "no_controller": "bring the world up without starting the controller",
        "expose_to_nodes": "kind: serve AWS and metadata on the nodes' gateway (in-cluster use)",
        "clock_speed": "lab seconds per real second for grace periods, probes, health checks "
        "(default 10; 1 = real time)",
        "feature_gates": "sim: data-plane feature gates, e.g. ProxyTerminatingEndpoints=true",
        "vpc_cidr": "the VPC block, /16 to /19 (kind: its first zone subnet is the nodes' Docker "
        "network; default: the first 10.x.0.0/16 free of Docker networks and host routes)",
        "insecure_api": "sim: serve the API simulator over plain HTTP to anyone (default: HTTPS "
        "with the lab's CA and token, both in its kubeconfig)",
        **CONTROLLER_HELP,
    },
)
def up(
    c: Context,
    name: str = "default",
    backend: str = "auto",
    aws: str = "moto",
    nodes: int = 2,
    k8s_version: str = DEFAULT_K8S_VERSION,
    legacy_behavior: str = "",
    args: str = "",
    no_controller: bool = False,
    expose_to_nodes: bool = False,
    clock_speed: float = 10.0,
    feature_gates: str = "",
    vpc_cidr: str = "",
    insecure_api: bool = False,
    controller_cmd: str = "",
    controller: str = "",
    controller_ready_log: str = "",
    controller_ready_url: str = "",
    aws_endpoint: str = "",
    controller_image: str = "",
    kubeconfig: str = "",
    i_accept_aws_charges: bool = False,
    dry_run: bool = False,
) -> None:
    """Bring a lab up: AWS endpoint, metadata, cluster, controller."""
    flags = {k: v for k, v in locals().items() if k != "c"}
    from lab.frontdoor.realaccount import up_real_aws
    from lab.frontdoor.up import up as lab_up
    from lab.spec import AwsKind

    spec = _run(_up_spec, flags)
    _run(up_real_aws if spec.aws == AwsKind.REAL else lab_up, spec)


def _up_spec(flags: dict[str, Any]) -> Any:
    """``lab.up``'s flags as the lab's ``LabSpec``: our controller's flags checked against its
    registry and parser, another build's command parsed, then the rule table (``lab.spec``)
    judges the whole; a refusal is one line naming the flag, the value and the fix."""
    from pathlib import Path

    from lab.spec import up_request

    legacy, extra = _controller_flags(flags["legacy_behavior"], flags["args"])
    command = _controller_command(
        flags["controller_cmd"],
        flags["controller"],
        flags["controller_ready_log"],
        flags["controller_ready_url"],
    )
    kubeconfig = flags["kubeconfig"]
    return up_request(
        name=flags["name"],
        backend=flags["backend"],
        aws=flags["aws"],
        nodes=flags["nodes"],
        k8s_version=flags["k8s_version"],
        legacy=tuple(legacy),
        extra_args=tuple(extra),
        controller=not flags["no_controller"],
        controller_command=command,
        expose_to_nodes=flags["expose_to_nodes"],
        clock_speed=flags["clock_speed"],
        feature_gates=flags["feature_gates"],
        vpc_cidr=flags["vpc_cidr"] or None,
        insecure_api=flags["insecure_api"],
        aws_endpoint=flags["aws_endpoint"] or None,
        controller_image=flags["controller_image"] or None,
        kubeconfig=Path(kubeconfig).expanduser() if kubeconfig else None,
        accept_aws_charges=flags["i_accept_aws_charges"],
        dry_run=flags["dry_run"],
    )


@task(
    help={
        "name": "lab name",
        "dry_run": "an --aws real lab: list what carries its run's tag and remove nothing",
    }
)
def down(c: Context, name: str = "default", dry_run: bool = False) -> None:
    """Stop a lab and remove its state; fails, keeping the logs, if anything is left behind.
    An --aws real lab: removes what carries its run's tag and lists it."""
    from lab.frontdoor.down import down as lab_down

    _run(lab_down, name=name, dry_run=dry_run)


@task(help={"name": "lab name", "json": "print state.json plus live health as JSON"})
def status(c: Context, name: str = "default", json_: bool = False) -> None:
    """Nodes, Services with their ELBs, endpoints and the controller; exit 1 if broken."""
    from lab.labview import render_status
    from lab.labview import status as lab_status

    doc = _run(lab_status, name=name)
    if json_:
        print(json.dumps(doc, indent=2, sort_keys=True))
    else:
        render_status(doc)
    if doc["problems"]:
        raise Exit(f"lab {name!r} is not healthy: {doc['problems'][0]}", code=1)


@task(help={"name": "lab name", "lines": "how many lines (default 60)"})
def logs(c: Context, name: str = "default", lines: int = 60) -> None:
    """The controller's log (tail)."""
    from lab.component import tail
    from lab.state import load_state

    state = _run(load_state, name)
    current = state.debug.log if state.debug else state.controller.log if state.controller else ""
    if not current:
        raise Exit("error: the controller has not been started in this lab", code=1)
    from pathlib import Path

    print(tail(Path(current), lines))


@task(
    help={
        "name": "lab name",
        "action": "only this AWS action, e.g. DeleteSecurityGroup (any case)",
        "service": "only ec2 | elb | elbv2 | sts",
        "errors": "only failed calls",
        "last": "show the last N calls (0 = all)",
        "json": "JSON lines (one call per line) instead of a table",
    }
)
def trail(
    c: Context,
    name: str = "default",
    action: str = "",
    service: str = "",
    errors: bool = False,
    last: int = 50,
    json_: bool = False,
) -> None:
    """The lab's CloudTrail: every AWS call the controller (or anyone) made."""
    from lab.labview import trail as lab_trail

    _run(
        lab_trail,
        name=name,
        action=action or None,
        service=service or None,
        errors_only=errors,
        last=last,
        as_json=json_,
    )


@task(
    name="add",
    help={
        "name": "lab name",
        "api": "aws (default: the AWS endpoint) | kube (the API simulator of a sim lab)",
        "action": "aws: the action to fault (any case, e.g. DescribeInstances) or '*' for every "
        "call",
        "service": "aws: only calls to ec2 | elb | elbv2 | sts",
        "code": "aws: the AWS error code to answer, e.g. Throttling (HTTP 400; others 500)",
        "status": "the HTTP status of the error, 400..599",
        "message": "the error's message",
        "count": "fire for the next N matching calls only (default: until cleared)",
        "probability": "fire for each matching call with this probability, 0..1",
        "latency": "delay each matching call by this many ms (alone: a delay, no error)",
        "seed": "random seed of --probability (same seed, same calls)",
        "verb": "kube: get | list | watch | create | update | patch | delete | "
        "deletecollection (default: any)",
        "resource": "kube: plural resource, e.g. services (default: any)",
        "subresource": "kube: e.g. status; '' for the main resource only (default: any)",
        "reason": "kube: the Status reason (default: the one for --status; 500 InternalError)",
    },
)
def fault_add(
    c: Context,
    name: str = "default",
    api: str = "aws",
    action: str = "",
    service: str = "",
    code: str = "",
    status: str = "",
    message: str = "",
    count: str = "",
    probability: str = "",
    latency: str = "",
    seed: str = "",
    verb: str = "",
    resource: str = "",
    subresource: str | None = None,
    reason: str = "",
) -> None:
    """Make chosen AWS (or sim Kubernetes API) calls fail or slow down until cleared."""
    given = {k: v for k, v in locals().items() if k not in ("c", "name")}
    from lab.frontdoor.faults import FaultFlags, add_fault

    _run(add_fault, FaultFlags(**given), name=name)


@task(name="list", default=True, help={"name": "lab name", "json": "the rules as JSON"})
def fault_list(c: Context, name: str = "default", json_: bool = False) -> None:
    """The lab's fault rules, AWS and Kubernetes, with how often each fired."""
    from lab.frontdoor.faults import list_faults

    _run(list_faults, name=name, as_json=json_)


@task(
    name="clear",
    help={
        "name": "lab name",
        "api": "aws | kube (default: both)",
        "id": "only the rule with this id (as lab.fault.list shows it; with --api, default aws)",
    },
)
def fault_clear(c: Context, name: str = "default", api: str = "", id_: str = "") -> None:
    """Remove the lab's fault rules (or one)."""
    from lab.frontdoor.faults import clear_faults

    _run(clear_faults, name=name, api=api, rule_id=id_)


@task(
    positional=["service"],
    help={
        "service": "the LoadBalancer Service: NAME or NAMESPACE/NAME",
        "name": "lab name",
        "requests": "how many requests to send (default 100; modelled on sim)",
        "from": "the client: a CIDR (addresses drawn from it) or a node name",
        "port": "the Service port (default its first)",
        "seed": "random seed (same seed, same answer)",
        "json": "one JSON object instead of tables",
    },
)
def traffic(
    c: Context,
    service: str,
    name: str = "default",
    requests: int = 100,
    from_: str = "",
    port: int = 0,
    seed: int = 0,
    json_: bool = False,
) -> None:
    """Where requests to a LoadBalancer Service go, hop by hop (sim: modelled; kind: sent)."""
    from lab.labview import render_traffic
    from lab.labview import traffic as lab_traffic

    doc = _run(
        lab_traffic,
        service,
        name=name,
        requests=requests,
        source=from_ or None,
        port=port or None,
        seed=seed,
    )
    if json_:
        print(json.dumps(doc, sort_keys=True))
    else:
        render_traffic(doc)


def _after_double_dash(argv: Sequence[str]) -> list[str]:
    """The words after ``--`` exactly as the shell passed them (invoke re-joins them)."""
    return list(argv[argv.index("--") + 1 :]) if "--" in argv else []


@task(
    klass=PassThroughTask,
    positional=["args"],
    help={
        "name": "lab name",
        "args": "kubectl's arguments, after `--` and exactly as typed (default: none)",
    },
)
def kubectl(c: Context, name: str = "default", args: str | None = None) -> None:
    """kubectl against the lab: `invoke lab.kubectl -- get nodes -o wide`."""
    from lab.frontdoor.nodes import kubectl as lab_kubectl

    code = _run(lab_kubectl, _after_double_dash(sys.argv), name=name)
    if code:
        raise Exit(code=code)


@task(help={"name": "lab name"})
def env(c: Context, name: str = "default") -> None:
    """Exports for a shell: `eval "$(invoke lab.env)"` (kubeconfig, AWS, metadata)."""
    from lab.labview import environment, render_environment

    print(render_environment(_run(environment, name=name)), end="")


@task(
    name="restart",
    help={
        "name": "lab name",
        "legacy_behavior": "comma-separated legacy behaviour ids",
        "args": "extra controller flags, quoted",
        **CONTROLLER_HELP,
    },
)
def controller_restart(
    c: Context,
    name: str = "default",
    legacy_behavior: str = "",
    args: str = "",
    controller_cmd: str = "",
    controller: str = "",
    controller_ready_log: str = "",
    controller_ready_url: str = "",
) -> None:
    """Restart only the controller, with other flags or another build (the old one stays if
    the new fails)."""
    from lab.frontdoor.controller import restart_controller

    legacy, extra = _controller_flags(legacy_behavior, args)
    command = _controller_command(
        controller_cmd, controller, controller_ready_log, controller_ready_url
    )
    _run(restart_controller, name=name, legacy=legacy, args=extra, command=command)


@task(
    name="deploy",
    help={
        "name": "lab name",
        "image": "image to build and load",
        "no_build": "load an image built already",
        "legacy_behavior": "comma-separated legacy behaviour ids",
        "base_image": "build FROM this image (a local one where no registry is reachable)",
    },
)
def controller_deploy(
    c: Context,
    name: str = "default",
    image: str = "",
    no_build: bool = False,
    legacy_behavior: str = "",
    base_image: str = "",
) -> None:
    """Run the controller in-cluster on a kind lab: docker build, kind load, kubectl apply."""
    from lab.incluster import DEFAULT_IMAGE, deploy_to_lab

    legacy, _ = _controller_flags(legacy_behavior, "")
    _run(
        deploy_to_lab,
        name,
        image=image or DEFAULT_IMAGE,
        build=not no_build,
        legacy=legacy,
        base_image=base_image or None,
    )


@task(name="undeploy", help={"name": "lab name"})
def controller_undeploy(c: Context, name: str = "default") -> None:
    """Remove the in-cluster controller from a kind lab."""
    from lab.incluster import undeploy_from_lab

    _run(undeploy_from_lab, name)


def _node_task(action: str, doc: str) -> Any:
    # ``name`` comes first so that -n means --name here as everywhere (node gets -o).
    @task(
        name=action,
        help={
            "name": "lab name",
            "node": "node name (`invoke lab.status` lists them)",
            "value": "IP or providerID (default: the lab's)",
        },
    )
    def node_task(c: Context, name: str = "default", node: str = "", value: str = "") -> None:
        from lab.frontdoor.nodes import node_action

        if not node:
            raise Exit(f"error: lab.nodes.{action} needs --node NAME", code=1)
        print(_run(node_action, action, node, value=value, name=name))

    node_task.__doc__ = doc
    return node_task


@task(
    help={
        "name": "lab name",
        "legacy_behavior": "comma-separated legacy behaviour ids",
        "args": "extra controller flags, quoted",
        "port": "debugpy port (0 = kernel's choice)",
    }
)
def debug(
    c: Context, name: str = "default", legacy_behavior: str = "", args: str = "", port: int = 0
) -> None:
    """Run the lab's controller under debugpy, waiting for your debugger to attach."""
    from lab.frontdoor.debug import debug_controller

    legacy, extra = _controller_flags(legacy_behavior, args)
    _run(debug_controller, name=name, legacy=legacy, args=extra, port=port)


@task(
    positional=["scenario"],
    help={
        "scenario": "catalog id, e.g. k8s-84926; --list lists them",
        "name": "lab name for --in-place",
        "fixed": "show the fixed behaviour instead of the bug",
        "in_place": "run on the running lab --name (restoring what it changes), not a scratch lab",
    },
)
def repro(
    c: Context, scenario: str, name: str = "default", fixed: bool = False, in_place: bool = False
) -> None:
    """Replay a failure-catalog scenario step by step, showing the evidence (--list: ids)."""
    from e2e.repro import list_catalog
    from e2e.repro import repro as run_repro
    from lab.labview import status_console

    console = status_console()
    if scenario in ("--list", "-l", "list"):
        list_catalog(console)
        return
    if scenario in ("--help", "-h"):
        here = os.path.dirname(os.path.abspath(__file__))
        c.run(f"{shlex.quote(sys.argv[0])} -r {shlex.quote(here)} --help lab.repro", pty=False)
        return
    code = _run(run_repro, scenario, fixed=fixed, name=name, in_place=in_place, console=console)
    if code:
        raise Exit(code=code)


@task(
    help={
        "expect": "fixed: the build has every documented fix | reproduce: which documented "
        "failures the build shows",
        "scenarios": "comma-separated catalog ids (default: every scenario with "
        "controller-agnostic cases)",
        "out": "directory for conformance.md and conformance.xml (default .lab/conformance)",
        "workers": "pytest-xdist workers (default 0: one process)",
        **CONTROLLER_HELP,
        # the build judged: one of these two is required (ours is judged with --controller-cmd)
        "controller_cmd": "the command of the build to judge (this or --controller is "
        "required); the lab fills {kubeconfig} {cloud_config} {imds_endpoint} {aws_endpoint} "
        "{metrics_addr} {metrics_port} {secure_port} {region} {log_dir}",
        "controller": "upstream=PATH: judge this aws-cloud-controller-manager binary, run with "
        "the lab's flags (this or --controller-cmd is required)",
    }
)
def report(
    c: Context,
    expect: str = "",
    scenarios: str = "",
    out: str = ".lab/conformance",
    workers: int = 0,
    controller_cmd: str = "",
    controller: str = "",
    controller_ready_log: str = "",
    controller_ready_url: str = "",
) -> None:
    """Run the catalog in conformance mode against a controller build; write Markdown + JUnit."""
    import subprocess
    from pathlib import Path

    from lab.conformance import EXPECTATIONS, pytest_argv

    if expect not in EXPECTATIONS:
        raise Exit(f"error: --expect {expect!r}: choose {' or '.join(EXPECTATIONS)}", code=1)
    command = _controller_command(
        controller_cmd, controller, controller_ready_log, controller_ready_url
    )
    if command is None:
        raise Exit(
            "error: lab.report judges a controller build: give --controller-cmd TEMPLATE or "
            "--controller upstream=PATH",
            code=1,
        )
    modules = _report_modules(scenarios)
    here = Path(__file__).resolve().parent
    report_dir = Path(out).resolve()
    argv = pytest_argv(
        expect=expect,
        modules=[str(here / m) for m in modules],
        report_dir=report_dir,
        controller_cmd=controller_cmd,
        controller=controller,
        ready_log=controller_ready_log,
        ready_url=controller_ready_url,
        workers=workers,
    )
    done = subprocess.run(argv, cwd=here, check=False)
    markdown = report_dir / "conformance.md"
    if markdown.exists():
        print(markdown.read_text(encoding="utf-8"))
        print(f"written: {markdown} and {report_dir / 'conformance.xml'}")
    if done.returncode:
        raise Exit(code=done.returncode)


def _report_modules(scenarios: str) -> list[str]:
    """``--scenarios``: the catalog modules to judge (default: every scenario with
    controller-agnostic cases); one line and exit 1 for an unknown or unjudgeable id."""
    from e2e.catalog import CATALOG, NOT_CONTROLLER_AGNOSTIC, by_id

    chosen = _split(scenarios)
    try:
        picked = [by_id(s) for s in chosen] if chosen else list(CATALOG)
    except KeyError as exc:
        raise Exit(f"error: --scenarios {scenarios!r}: {exc.args[0]}", code=1) from None
    for scenario in picked:
        if chosen and scenario.id in NOT_CONTROLLER_AGNOSTIC:
            raise Exit(
                f"error: --scenarios {scenario.id}: no controller-agnostic case "
                f"({NOT_CONTROLLER_AGNOSTIC[scenario.id]})",
                code=1,
            )
    return [s.module for s in picked if s.id not in NOT_CONTROLLER_AGNOSTIC]


ns = Collection()
ns.add_collection(Collection("check", check, lint, types, contracts))
ns.add_task(fmt)
lab_ns = Collection(
    "lab", up, down, status, logs, trail, traffic, kubectl, env, debug, repro, report
)
lab_ns.add_collection(Collection("fault", fault_list, fault_add, fault_clear))
lab_ns.add_collection(
    Collection("controller", controller_restart, controller_deploy, controller_undeploy)
)
lab_ns.add_collection(
    Collection(
        "nodes",
        _node_task("fix-ip", "Set alpha.kubernetes.io/provided-node-ip to the instance's IP."),
        _node_task("include", "Remove the LB exclusion and legacy master labels."),
        _node_task("exclude", "Add the LB exclusion label."),
        _node_task("provider-id", "Set spec.providerID (aws:///<az>/<instance-id>)."),
        _node_task("stop-heartbeat", "Stop the kubelet stand-in heartbeating (NotReady)."),
        _node_task("resume-heartbeat", "Resume the kubelet stand-in heartbeats."),
    )
)
ns.add_collection(lab_ns)
