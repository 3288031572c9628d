"""``invoke lab.up --aws real`` and its ``lab.down``: a lab on a real AWS account's instances.

Role: :func:`up_real_aws` creates the lab's EC2 world (VPC, subnets, internet gateway, route
table, node security group, one instance per node) in the account of boto3's usual credential
chain, every resource tagged with a new run id (``lab.aws.realaccount``); then the sim cluster
whose nodes are those instances, the metadata service, the recording proxy in front of the
account with the run's guard (``lab.aws.runproxy``) and our controller pointed at it. The run's
record (``aws-run.json``) is written before anything is created, so :func:`down_real` always
finds the run id; it removes what carries the run's tag. ``--dry-run`` prints the plan only.

The spec arrives judged by the rule table (consent, the few flags ``--aws real`` takes); the
run's region, cluster id, zones and run id complete it before it is written for the daemon.

Neighbours: ``lab.frontdoor.up`` (usage text, the node wait), ``.controller``, ``.processes``.
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.markup import escape

from lab.frontdoor.controller import replace_controller
from lab.frontdoor.processes import (
    REAL_RUN_FILE,
    daemons_for,
    refuse_if_up,
    start_daemon,
    stop_processes,
)
from lab.frontdoor.up import usage_text, wait_nodes_initialized
from lab.labview import status_console
from lab.spec import AwsKind, Backend, LabSpec, Scope, check, write_spec, zones_of
from lab.state import (
    STATE_FILE,
    LabError,
    LabState,
    lab_dir,
    make_private_dir,
    read_state,
    write_private,
)

if TYPE_CHECKING:
    from lab.aws.topology import TopologySpec


def up_real_aws(
    spec: LabSpec,
    *,
    root: Path | None = None,
    console: Console | None = None,
    timeout: float = 120.0,
) -> list[str]:
    """``lab.up --aws real``: the plan (``spec.dry_run``) or what was created. A failure stops
    what started and removes what the run created."""
    from lab.aws import realaccount

    out = console or status_console()
    check(spec, Scope.UP)
    if spec.aws != AwsKind.REAL:
        raise LabError(f"--aws {spec.aws}: up_real_aws is lab.up's --aws real path")
    directory = lab_dir(spec.name, root)
    refuse_if_up(directory, spec.name, f"`invoke lab.down --name {spec.name}` removes it first")
    region = realaccount.default_region()
    if region is None:
        raise LabError(
            "--aws real: no AWS region is configured; set AWS_REGION (or a profile's region)"
        )
    run_id = realaccount.new_run_id()
    world = realaccount.run_spec(run_id, region, nodes=spec.nodes, vpc_cidr=spec.vpc_cidr)
    plan = realaccount.plan_up(world, run_id) + real_lab_plan(world, run_id)
    if spec.dry_run:
        out.print(f"dry run: lab {spec.name!r} in AWS region {region} (run id {run_id}) would:")
        for line in plan:
            out.print(f"  {escape(line)}")
        out.print("nothing was created or changed (--dry-run)")
        return plan
    try:
        clients = realaccount.account_clients(region, run_id)
    except realaccount.RealAwsError as exc:
        raise LabError(f"--aws real: {exc}") from None
    final = spec.replace(
        backend=Backend.SIM,
        region=region,
        zones=zones_of(region),
        cluster_id=world.cluster_id,
        vpc_cidr=world.vpc_cidr,
        run_id=run_id,
        state_dir=directory,
    )
    return _run(final, world, clients.ec2, directory=directory, out=out, timeout=timeout)


def _run(
    spec: LabSpec, world: TopologySpec, ec2: Any, *, directory: Path, out: Console, timeout: float
) -> list[str]:
    """Record the run, create its world, start the lab on it; undo everything on a failure."""
    from lab.aws import runworld

    assert spec.run_id is not None  # the rule table's real-has-a-run
    make_private_dir(directory)
    record = {
        "run_id": spec.run_id,
        "region": spec.region,
        "cluster_id": spec.cluster_id,
        "endpoint": ec2.meta.endpoint_url,
        "nodes": spec.nodes,
        "vpc_cidr": spec.vpc_cidr,
    }
    # written before anything is created: whatever happens next, lab.down finds the run id
    write_private(directory / REAL_RUN_FILE, json.dumps(record, indent=2) + "\n")
    try:
        state, created = _create_and_start(
            spec, world, ec2, directory=directory, out=out, timeout=timeout
        )
    except BaseException as exc:
        after = read_state(directory)
        if after is not None:
            stop_processes(after)
        for ref in daemons_for(directory):
            ref.terminate(timeout=120)
        (directory / STATE_FILE).unlink(missing_ok=True)
        removed = runworld.teardown(ec2, spec.run_id)
        shutil.rmtree(directory, ignore_errors=True)
        gone = ", ".join(o.line() for o in removed) or "nothing had been created"
        raise LabError(
            f"--aws real: the lab did not come up ({exc}); removed again: {gone}"
        ) from None
    # the lab is up: what follows only prints, and never takes a lab that came up down again
    _print_usage(state, ec2, run_id=str(spec.run_id), out=out)
    return created


def _create_and_start(
    spec: LabSpec, world: TopologySpec, ec2: Any, *, directory: Path, out: Console, timeout: float
) -> tuple[LabState, list[str]]:
    from lab.aws import realaccount, runworld

    region, run_id = spec.region, spec.run_id
    started = time.monotonic()
    with out.status(f"creating the run's world in {region} (run id {run_id})"):
        created = runworld.create_world(ec2, world)
    out.print(f"[green]✓[/] run {run_id} in {region} created, each tagged "
              f"{realaccount.RUN_TAG}={run_id}:")  # fmt: skip
    for item in created:
        out.print(f"  {escape(item.line())}")
    write_spec(directory, spec)
    state = start_daemon(name=spec.name, directory=directory, console=out, timeout=timeout)
    out.print(f"[green]✓[/] servers up in {time.monotonic() - started:.1f}s")
    state = replace_controller(state, legacy=(), args=(), console=out)
    with out.status("waiting for the controller to initialize every node"):
        wait_nodes_initialized(state, timeout=timeout)
    out.print(f"[green]✓[/] nodes initialized ({time.monotonic() - started:.1f}s since start)")
    return state, [item.line() for item in created]


def _print_usage(state: LabState, ec2: Any, *, run_id: str, out: Console) -> None:
    from lab.aws.realaccount import RUN_TAG

    out.print(usage_text(state))
    out.print(
        f"AWS: the account at {ec2.meta.endpoint_url} through the lab's recording proxy "
        f"{state.aws_endpoint} (run guard: the controller's creates tagged "
        f"{RUN_TAG}={run_id}, changes to anything else refused)\n"
        f"`invoke lab.down --name {state.name}` removes what carries the run's tag"
    )


def real_lab_plan(spec: TopologySpec, run_id: str) -> list[str]:
    """What ``lab.up --aws real`` starts on this host once the run's world exists."""
    from lab.aws.realaccount import RUN_TAG

    tag = f"{RUN_TAG}={run_id}"
    return [
        f"start the sim cluster {spec.cluster_id}: {len(spec.nodes)} node(s), each the run's "
        "instance of its name (its id, private IP and DNS name, zone), and the lab's metadata "
        "service answering for them",
        f"start the recording proxy in front of the account (calls signed again with your "
        f"credentials, only for callers signed with the lab's own key pair) with the run guard: "
        f"the controller's creates tagged {tag}, changes to anything without that tag and "
        "account-wide changes refused",
        f"start our controller (cluster id {spec.cluster_id}, the lab's key pair) against the "
        "proxy; the load balancers, target groups and security groups it creates carry the "
        "run's tag, so lab.down removes them",
    ]


def down_real(directory: Path, name: str, *, dry_run: bool, out: Console) -> list[str]:
    """``lab.down`` of a real-account lab: remove (``dry_run``: list) what carries its run's
    tag, found through the run's record."""
    from lab.aws import realaccount, runworld

    path = directory / REAL_RUN_FILE
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
        run_id, region = str(record["run_id"]), str(record["region"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise LabError(f"{path} is damaged ({exc!r}); its run id is lost") from None
    try:
        ec2 = realaccount.account_client(region, run_id)
    except realaccount.RealAwsError as exc:
        raise LabError(f"lab {name!r} (AWS run {run_id}): {exc}") from None
    if record.get("endpoint") and ec2.meta.endpoint_url != record["endpoint"]:
        raise LabError(
            f"lab {name!r}: run {run_id} was created at {record['endpoint']}, this shell's AWS "
            f"endpoint is {ec2.meta.endpoint_url}; run lab.down with the same AWS settings"
        )
    with out.status(f"finding what run {run_id} created in {region}"):
        removed = runworld.teardown(ec2, run_id, dry_run=dry_run)
    lines = [item.line() for item in removed]
    verb = "would remove" if dry_run else "removed"
    out.print(f"lab {name!r}: run {run_id} in {region}: {verb} {len(lines)} resource(s)"
              + (":" if lines else ""))  # fmt: skip
    for line in lines:
        out.print(f"  {escape(line)}")
    if dry_run:
        out.print("nothing was removed (--dry-run)")
        return lines
    shutil.rmtree(directory, ignore_errors=True)
    out.print(f"[green]✓[/] lab {name!r} is down (every resource tagged with run {run_id} is gone)")
    return lines
