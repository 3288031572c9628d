"""The front door: ``invoke lab.*`` and ``invoke check``.

Task bodies stay thin and call importable functions in ``lab.labctl`` (and ``lab.debug``), so
tests call the same code. ``invoke --list`` shows everything.
"""

from __future__ import annotations

import json

from invoke.collection import Collection
from invoke.context import Context
from invoke.exceptions import Exit
from invoke.tasks import task

PY_PATHS = "."  # ruff skips .venv, .lab and git-ignored files


def _split(value: str) -> list[str]:
    return [v.strip() for v in value.split(",") if v.strip()]


def _run(fn, *args, **kwargs):  # type: ignore[no-untyped-def]
    """Call a lab function; turn its LabError into a clean non-zero exit."""
    from lab.labctl import LabError

    try:
        return fn(*args, **kwargs)
    except LabError as exc:
        raise Exit(f"error: {exc}", code=1) from None


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
    """import-linter: controller/ and lab/ independent; boto3 only where allowed."""
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
        "backend": "auto (kind if Docker answers, else sim) | sim | kind | existing",
        "aws": "moto (default) | localstack",
        "nodes": "number of nodes (first is the control plane)",
        "k8s_version": "Kubernetes version the cluster behaves as (e.g. 1.22, 1.33)",
        "legacy_behavior": "comma-separated legacy behaviours for the controller",
        "no_controller": "bring the world up without starting the controller",
        "expose_to_nodes": "kind: serve AWS and metadata on the nodes' gateway (in-cluster use)",
    },
)
def up(
    c: Context,
    name: str = "default",
    backend: str = "auto",
    aws: str = "moto",
    nodes: int = 2,
    k8s_version: str = "1.33",
    legacy_behavior: str = "",
    no_controller: bool = False,
    expose_to_nodes: bool = False,
) -> None:
    """Bring a lab up: AWS endpoint, metadata, cluster, controller."""
    from lab.labctl import up as lab_up

    _run(
        lab_up,
        name=name,
        nodes=nodes,
        k8s_version=k8s_version,
        legacy=_split(legacy_behavior),
        controller=not no_controller,
        backend=backend,
        aws=aws,
        expose_to_nodes=expose_to_nodes,
    )


@task
def down(c: Context, name: str = "default") -> None:
    """Stop a lab and remove its state; fails if any process or port is left behind."""
    from lab.labctl import down as lab_down

    _run(lab_down, name=name)


@task(help={"json": "print state.json plus live health as JSON"})
def status(c: Context, name: str = "default", json_: bool = False) -> None:
    """Nodes (taints, providerIDs), Services with ELB names, endpoints, controller health."""
    from lab.labctl import render_status
    from lab.labctl import status as lab_status

    doc = _run(lab_status, name=name)
    if json_:
        print(json.dumps(doc, indent=2, sort_keys=True))
    else:
        render_status(doc)


@task
def logs(c: Context, name: str = "default", lines: int = 60) -> None:
    """The controller's log (tail)."""
    from lab.labctl import load_state

    state = _run(load_state, name)
    path = (state.get("controller") or {}).get("log")
    if not path:
        raise Exit("error: the controller has not been started in this lab", code=1)
    with open(path, encoding="utf-8", errors="replace") as fh:
        print("".join(fh.readlines()[-lines:]), end="")


@task(
    help={
        "action": "only this AWS action, e.g. DeleteSecurityGroup",
        "service": "only ec2 | elb | elbv2 | sts",
        "errors": "only failed calls",
        "last": "show the last N calls (0 = all)",
        "json": "JSON lines instead of a table",
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
    from lab.labctl import trail as lab_trail

    _run(
        lab_trail,
        name=name,
        action=action or None,
        service=service or None,
        errors_only=errors,
        last=last,
        as_json=json_,
    )


@task
def kubectl(c: Context, name: str = "default") -> None:
    """kubectl against the lab: `invoke lab.kubectl -- get nodes`."""
    import shlex

    from lab.labctl import kubectl as lab_kubectl

    code = _run(lab_kubectl, shlex.split(getattr(c, "remainder", "") or ""), name=name)
    if code:
        raise Exit(code=code)


@task(name="restart", help={"legacy_behavior": "comma-separated legacy behaviour ids"})
def controller_restart(
    c: Context, name: str = "default", legacy_behavior: str = "", args: str = ""
) -> None:
    """Restart only the controller, with other flags."""
    from lab.labctl import restart_controller

    _run(restart_controller, name=name, legacy=_split(legacy_behavior), args=args.split())


@task(
    name="deploy",
    help={
        "image": "image to build and load",
        "no_build": "load an image built already",
        "legacy_behavior": "comma-separated legacy behaviour ids",
    },
)
def controller_deploy(
    c: Context,
    name: str = "default",
    image: str = "",
    no_build: bool = False,
    legacy_behavior: str = "",
) -> None:
    """Run the controller in-cluster on a kind lab: docker build, kind load, kubectl apply."""
    from lab.incluster import DEFAULT_IMAGE, deploy_to_lab

    _run(
        deploy_to_lab,
        name,
        image=image or DEFAULT_IMAGE,
        build=not no_build,
        legacy=_split(legacy_behavior),
    )


@task(name="undeploy")
def controller_undeploy(c: Context, name: str = "default") -> None:
    """Remove the in-cluster controller from a kind lab."""
    from lab.incluster import undeploy_from_lab

    _run(undeploy_from_lab, name)


def _node_task(action: str, doc: str):  # type: ignore[no-untyped-def]
    @task(name=action, help={"node": "node name", "value": "IP or providerID (default: the lab's)"})
    def node_task(c: Context, node: str, name: str = "default", value: str = "") -> None:
        from lab.labctl import node_action

        result = _run(node_action, action, node, value=value, name=name)
        print(json.dumps(result.get("metadata", result), indent=2, default=str)[:2000])

    node_task.__doc__ = doc
    return node_task


@task(help={"port": "debugpy port (0 = kernel's choice)"})
def debug(c: Context, name: str = "default", legacy_behavior: str = "", port: int = 0) -> None:
    """Run the lab's controller under debugpy, waiting for your debugger to attach."""
    from lab.labctl import debug_controller

    _run(debug_controller, name=name, legacy=_split(legacy_behavior), port=port)


@task(
    positional=["scenario"],
    help={
        "scenario": "catalog id, e.g. k8s-84926 (see --list)",
        "fixed": "show the fixed behaviour instead of the bug",
        "list": "list the catalog",
    },
)
def repro(
    c: Context,
    scenario: str | None = None,
    name: str = "default",
    fixed: bool = False,
    list_: bool = False,
) -> None:
    """Replay a failure-catalog scenario step by step, showing the evidence."""
    from rich.console import Console

    from e2e.repro import list_catalog
    from e2e.repro import repro as run_repro

    console = Console()
    if list_ or not scenario:
        list_catalog(console)
        return
    try:
        code = _run(run_repro, scenario, fixed=fixed, name=name, console=console)
    except KeyError as exc:
        raise Exit(f"error: {exc.args[0]}", code=2) from None
    if code:
        raise Exit(code=code)


ns = Collection()
ns.add_collection(Collection("check", check, lint, types, contracts))
ns.add_task(fmt)
lab_ns = Collection("lab", up, down, status, logs, trail, kubectl, debug, repro)
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
