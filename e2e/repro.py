"""``invoke lab.repro``: replay a catalog scenario so a person sees the bug happen.

``k8s-84926`` is narrated step by step against the *running* lab (``invoke lab.up``): the
controller is restarted with or without the legacy switch, AWS's group order is flipped
between create and delete, and each step shows its evidence (the node group's rules before
and after, the ELB's groups, the trail rows, the Service's events). The other scenarios need
the kubelet stand-in's hooks or a fresh world, so they run their catalog module
(``e2e/test_<id>.py``, the reproduce or the fixed tests) on a fresh embedded lab, verbosely;
the command says which it does.

This module lives under ``e2e/`` because it drives scenarios; ``tasks.py`` calls it.
"""

from __future__ import annotations

import subprocess
import sys
import time
from typing import Any

from rich.console import Console
from rich.table import Table

from e2e.catalog import CATALOG, by_id
from e2e.support import ANN, Rule, describe_elb, elb_name, events_for, ingress_rules, wait_for
from lab import labctl
from lab.aws import AwsControlClient, make_client
from lab.aws.render import render_trail

SG_RETRY = ("--sg-delete-retry", "0.5s,5s")


def list_catalog(console: Console) -> None:
    table = Table(title="failure catalog", title_justify="left")
    for col in ("id", "what", "legacy switch"):
        table.add_column(col)
    for s in CATALOG:
        table.add_row(s.id, s.title, s.legacy_switch or "-")
    console.print(table)
    console.print("replay one: invoke lab.repro <id> [--fixed]")


def repro(scenario_id: str, *, fixed: bool, name: str, console: Console) -> int:
    scenario = by_id(scenario_id)
    console.rule(f"[bold]{scenario.id}[/]: {scenario.title}")
    console.print(f"source: {scenario.source}")
    console.print(
        ("fixed behaviour: " + scenario.fix) if fixed else ("symptom: " + scenario.symptom)
    )
    if scenario.id == "k8s-84926":
        return _repro_84926(fixed=fixed, name=name, console=console)
    return _run_module(scenario.module, fixed=fixed, console=console)


def _run_module(module: str, *, fixed: bool, console: Console) -> int:
    selector = "fixed" if fixed else "reproduce"
    console.print(
        f"this scenario runs its catalog module on a fresh embedded lab (not the running one): "
        f"[bold]{module}[/] -k {selector}"
    )
    cmd = [sys.executable, "-m", "pytest", module, "-k", selector, "-v", "-p", "no:cacheprovider"]
    return subprocess.run(cmd, check=False).returncode


# --- k8s-84926, narrated ------------------------------------------------------------------


def _rules_table(
    title: str, rules: frozenset[Rule], names: dict[str, str], before: frozenset[Rule] | None = None
) -> Table:
    table = Table(title=title, title_justify="left")
    for col in ("protocol", "ports", "source", ""):
        table.add_column(col)
    shown = sorted(rules | (before or frozenset()))
    for rule in shown:
        ports = "all" if rule.from_port is None else f"{rule.from_port}-{rule.to_port}"
        source = names.get(rule.source, rule.source)
        mark = ""
        if before is not None and rule not in rules:
            mark = "[red]REVOKED[/]"
        elif before is not None and rule not in before:
            mark = "[green]added[/]"
        style = "strike dim" if mark.startswith("[red]") else ""
        table.add_row(
            "all" if rule.protocol == "-1" else rule.protocol, ports, source, mark, style=style
        )
    return table


def _step(console: Console, n: int, text: str) -> None:
    console.print(f"\n[bold cyan]step {n}[/] {text}")


def _repro_84926(*, fixed: bool, name: str, console: Console) -> int:
    started = time.monotonic()
    state = labctl.load_state(name)
    url, region = state["aws_endpoint"], state["region"]
    control = AwsControlClient(url)
    ec2, elb = make_client("ec2", url, region), make_client("elb", url, region)
    node_group = state["node_security_group"]
    core = labctl.core_api(state)
    svc_name = f"web-84926-{int(time.time()) % 100000}"
    names = {node_group: f"{node_group} (nodes)"}
    try:
        _step(
            console,
            1,
            "controller "
            + ("as fixed upstream" if fixed else "with --legacy-behavior=k8s-84926")
            + " (security-group delete retries shortened: every 0.5 s for 5 s)",
        )
        labctl.restart_controller(
            name=name, legacy=() if fixed else ("k8s-84926",), args=SG_RETRY, console=console
        )
        self_rule = Rule("-1", None, None, node_group)
        if self_rule not in ingress_rules(ec2, node_group):
            console.print(
                "[yellow]the node group lost its self rule in an earlier run; restoring it first[/]"
            )
            ec2.authorize_security_group_ingress(
                GroupId=node_group,
                IpPermissions=[{"IpProtocol": "-1", "UserIdGroupPairs": [{"GroupId": node_group}]}],
            )
        before = ingress_rules(ec2, node_group)
        console.print(_rules_table(f"node group {node_group}: ingress before", before, names))

        _step(console, 2, "AWS will list the ELB's groups [bold]reversed[/] (its own group last)")
        control.set_fidelity(elb_sg_order="reversed")
        svc = core.create_namespaced_service(
            "default",
            {
                "apiVersion": "v1",
                "kind": "Service",
                "metadata": {
                    "name": svc_name,
                    "annotations": {
                        ANN + "extra-security-groups": node_group,
                        ANN + "additional-resource-tags": "Team=payments",
                    },
                },
                "spec": {
                    "type": "LoadBalancer",
                    "selector": {"app": svc_name},
                    "ports": [{"port": 80, "targetPort": 8080}],
                },
            },
        )
        lb = elb_name({"metadata": {"uid": svc.metadata.uid}})
        console.print(
            f"created Service default/{svc_name} naming the node group in "
            f"extra-security-groups; its ELB is {lb}"
        )
        desc = wait_for(lambda: describe_elb(elb, lb), timeout=20, what="the ELB")
        for g in desc["SecurityGroups"]:
            if g != node_group:
                names[g] = f"{g} (k8s-elb-{lb[:8]}…)"
        console.print(
            "ELB groups as AWS returns them now: "
            + ", ".join(names.get(g, g) for g in desc["SecurityGroups"])
        )
        wait_for(lambda: _hostname(core, svc_name), timeout=20, what="the Service hostname")
        after_create = ingress_rules(ec2, node_group)
        console.print(_rules_table("node group after create", after_create, names, before))

        _step(
            console,
            3,
            "AWS now lists the ELB's groups in [bold]creation[/] order "
            "(the node group last); delete the Service",
        )
        control.set_fidelity(elb_sg_order="creation")
        mark = max((e.seq for e in control.trail()), default=0)
        core.delete_namespaced_service(svc_name, "default")
        wait_for(lambda: describe_elb(elb, lb) is None, timeout=20, what="the ELB deleted")
        wait_for(lambda: _sg_outcome(control, mark), timeout=20, what="the group's deletion")
        after_delete = ingress_rules(ec2, node_group)
        console.print(_rules_table("node group after delete", after_delete, names, before))
        calls = [
            e
            for e in control.trail(since_seq=mark)
            if e.action
            in ("RevokeSecurityGroupIngress", "DeleteLoadBalancer", "DeleteSecurityGroup")
        ]
        console.print(render_trail(calls, title="what the controller did to delete it"))
        events = events_for(core, "Service", svc_name)
        for e in events:
            colour = "red" if e.type == "Warning" else "green"
            console.print(f"  event [{colour}]{e.type} {e.reason}[/] x{e.count}: {e.message[:150]}")

        _step(console, 4, "verdict")
        violations = [e for e in calls if e.error_code == "DependencyViolation"]
        lines = [
            ("node group kept its self rule", self_rule in after_delete),
            (
                "ELB group was let into the node group on create",
                any(r.source != node_group for r in after_create - before),
            ),
            ("DeleteSecurityGroup never hit DependencyViolation", not violations),
            ("node group rules exactly as before", after_delete == before),
        ]
        for text, ok in lines:
            console.print(f"  {'[green]yes[/]' if ok else '[red]NO[/] '}  {text}")
        if violations:
            console.print(f"  {len(violations)} DependencyViolation retries before giving up")
        console.print(
            f"\n({time.monotonic() - started:.1f}s) the controller keeps these flags; "
            f"`invoke lab.controller.restart --name {name}` restores the defaults"
        )
        healthy = all(ok for _, ok in lines)
        return 0 if healthy == fixed else 1
    finally:
        control.set_fidelity(elb_sg_order="creation")
        core.api_client.close()


def _hostname(core: Any, name: str) -> str | None:
    svc = core.read_namespaced_service(name, "default")
    ingress = svc.status.load_balancer.ingress or []
    return ingress[0].hostname if ingress else None


def _sg_outcome(control: AwsControlClient, mark: int) -> bool:
    """True once the controller either deleted the group or gave up on it."""
    deletes = [e for e in control.trail(since_seq=mark) if e.action == "DeleteSecurityGroup"]
    if any(e.error_code is None for e in deletes):
        return True
    # Legacy: every attempt fails; wait until the retry window (5 s) has passed.
    return bool(deletes) and deletes[-1].time - deletes[0].time >= 4.5
