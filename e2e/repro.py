"""``invoke lab.repro``: replay a catalog scenario so a person sees the bug happen.

By default a scenario runs on a **scratch lab** of its own (an embedded sim lab started for the
replay and stopped after it), so the user's running lab is never touched. ``k8s-84926`` is
narrated step by step: it runs the catalog module's own steps (``e2e.test_k8s_84926.
run_scenario``, with a narrator) and shows the evidence those steps collected (the node group's
rules before and after, the trail rows, the Service's events) and the verdict of the module's
own assertions. Seed 004's scenarios (``k8s-109414``, ``k8s-109718``, ``k8s-110309``,
``k8s-110195``) run their module's steps on a scratch lab of the buggy release (``--fixed``:
the first fixed one), narrated (the module's ``REPLAY``, an ``e2e.catalog.ReleaseReplay``, names
its versions, ``run_scenario`` and assertions; :data:`RELEASE_SCENARIOS` lists them), then
show the cluster's evidence, where the requests went (``lab.traffic``) and the verdict of the
module's assertions. Every other scenario runs its catalog module (its reproduce or fixed
tests) on a fresh embedded lab, verbosely.

``--in-place`` runs ``k8s-84926`` on the running lab ``--name`` instead, and afterwards restores
what it changed: the node group's rules exactly as before, no leaked security group or
Service, AWS's group order as it was, and the controller with the flags it had.

Every replay checks what it was given (the id, ``--in-place`` and the running lab) before it
prints anything; its header's symptom is the case replayed (:data:`REPLAYED_SYMPTOM` where a
narrated replay shows one case of several); every step prints its result (the scenario's steps
tell an ``e2e.catalog.Narrator``); and it ends in one plain verdict line, ``REPRODUCED: symptom``
or ``FIXED: fix`` (``NOT REPRODUCED: ...`` / ``NOT FIXED: ...`` with the first assertion that
failed, exit 1), judged by the catalog module's own assertions or, for a module run, by its
pytest run.

This module lives under ``e2e/`` because it drives scenarios; ``tasks.py`` calls it.
"""

from __future__ import annotations

import dataclasses
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from e2e import test_k8s_109414, test_k8s_109718, test_k8s_110195, test_k8s_110309
from e2e.catalog import CATALOG, ReleaseReplay, Scenario, by_id
from e2e.support import (
    Rule,
    elb_name,
    group_exists,
    group_id_by_name,
    ingress_rules,
    wait_gone,
)
from e2e.test_k8s_84926 import Evidence, assert_fixed, assert_wrong_on_delete, run_scenario
from lab import labview
from lab.aws import AwsControlClient, make_client
from lab.aws.render import render_trail
from lab.compose import Lab
from lab.frontdoor.controller import restart_controller
from lab.spec import LabSpec
from lab.state import LabError, LabState, load_state

#: the checkout the catalog modules are in (their pytest runs there, wherever invoke was run)
REPO_ROOT = Path(__file__).resolve().parents[1]
#: the replay's retry window: long enough to see several DependencyViolation retries
SG_RETRY = ("--sg-delete-retry", "0.5s,5s")
#: the replay's Service names start so; nothing else is touched by a restore
REPLAY_PREFIX = "web-84926-"


def list_catalog(console: Console) -> None:
    table = Table(title="failure catalog", title_justify="left")
    for col in ("id", "what", "legacy switch"):
        table.add_column(col)
    for s in CATALOG:
        table.add_row(s.id, s.title, s.legacy_switch or "-")
    console.print(table)
    console.print("replay one: invoke lab.repro <id> [--fixed] [--in-place]")


#: what a narrated replay shows where it replays one case of a scenario whose catalog symptom
#: sums up several (the header and the verdict name what this replay shows, nothing else)
REPLAYED_SYMPTOM = {
    "k8s-84926": "AWS lists the ELB's groups reversed on create and in creation order on "
    "delete (the write-up's sequence): the ELB's group is let in on create, but the delete "
    "takes the node group for the ELB's own, revokes its self rule (node-to-node traffic cut) "
    "and then retries DeleteSecurityGroup on the ELB's group in vain (DependencyViolation)",
}


def symptom(scenario: Scenario) -> str:
    """The symptom a replay of ``scenario`` shows (its header and its REPRODUCED line)."""
    return REPLAYED_SYMPTOM.get(scenario.id, scenario.symptom)


def verdict(scenario: Scenario, *, fixed: bool, failure: str | None) -> str:
    """The replay's one-line verdict: ``REPRODUCED: symptom`` or ``FIXED: fix`` when what was
    asked for holds (``failure`` None), otherwise ``NOT REPRODUCED: ...`` / ``NOT FIXED: ...``
    with the first assertion that failed."""
    word, what = ("FIXED", scenario.fix) if fixed else ("REPRODUCED", symptom(scenario))
    if failure is None:
        return f"{word}: {what}"
    return f"NOT {word}: {' '.join(failure.split())}"


def repro(scenario_id: str, *, fixed: bool, name: str, in_place: bool, console: Console) -> int:
    """Replay ``scenario_id``; everything is checked (the id, --in-place, the running lab)
    before anything is printed."""
    try:
        scenario = by_id(scenario_id)
    except KeyError:
        known = ", ".join(s.id for s in CATALOG)
        raise LabError(f"no scenario {scenario_id!r}; the catalog has: {known}") from None
    if in_place and scenario.id != "k8s-84926":
        raise LabError(
            f"{scenario.id} replays only on a scratch lab (it needs a fresh world or the kubelet "
            "stand-in's hooks); drop --in-place"
        )
    if in_place:
        labview.require_daemon(_lab_to_host(name))
    console.rule(f"[bold]{scenario.id}[/]: {scenario.title}")
    console.print(f"source: {scenario.source}")
    console.print(
        ("fixed behaviour: " + scenario.fix) if fixed else ("symptom: " + symptom(scenario)),
        soft_wrap=True,
    )
    if scenario.id == "k8s-84926":
        return _narrate_84926(fixed=fixed, name=name, in_place=in_place, console=console)
    if scenario.id in RELEASE_SCENARIOS:
        return _narrate_release(scenario, fixed=fixed, console=console)
    return _run_module(scenario, fixed=fixed, console=console)


def _lab_to_host(name: str) -> LabState:
    """The running lab an in-place replay uses, checked before anything is printed."""
    state = load_state(name)
    if state.node_security_group is None:
        raise LabError(f"lab {name!r} records no node security group; it cannot host the replay")
    return state


def _run_module(scenario: Scenario, *, fixed: bool, console: Console) -> int:
    selector = "fixed" if fixed else "reproduce"
    console.print(
        f"running its catalog module on a scratch embedded lab (your labs are not touched): "
        f"[bold]{scenario.module}[/] -k {selector}"
    )
    cmd = [
        sys.executable,
        "-m",
        "pytest",
        scenario.module,
        "-k",
        selector,
        "-v",
        "-p",
        "no:cacheprovider",
    ]
    code = subprocess.run(cmd, check=False, cwd=REPO_ROOT).returncode
    failure = None if code == 0 else f"its {selector} cases did not pass (pytest exit {code})"
    console.print(verdict(scenario, fixed=fixed, failure=failure), markup=False, soft_wrap=True)
    return code


# --- release scenarios (seed 004), narrated ------------------------------------------------

#: scenarios whose module runs the same steps on a buggy and a fixed release of the data plane
#: (its ``REPLAY``: the versions, ``run_scenario(lab, say)`` and the module's assertions)
RELEASE_SCENARIOS: dict[str, ReleaseReplay[Any]] = {
    "k8s-109414": test_k8s_109414.REPLAY,
    "k8s-109718": test_k8s_109718.REPLAY,
    "k8s-110309": test_k8s_110309.REPLAY,
    "k8s-110195": test_k8s_110195.REPLAY,
}


def _narrate_release(scenario: Scenario, *, fixed: bool, console: Console) -> int:
    replay = RELEASE_SCENARIOS[scenario.id]
    version = replay.fixed if fixed else replay.buggy
    gates = replay.gate
    started = time.monotonic()
    say = ConsoleNarrator(console)
    console.print(
        f"on a scratch embedded lab of Kubernetes {version} "
        f"({'the first fixed' if fixed else 'a buggy'} release"
        + (f", feature gates {gates}" if gates else "")
        + "; your labs are not touched)"
    )
    config = LabSpec(
        name=f"repro-{scenario.id}",
        k8s_version=version,
        nodes=3,
        zones=("us-east-1a",),
        feature_gates=gates,
    )
    with Lab(config) as lab:
        evidence = replay.run_scenario(lab, say)
    objects = Table(title="what the cluster shows", title_justify="left")
    objects.add_column("evidence")
    objects.add_column("value", overflow="fold")
    for field in dataclasses.fields(evidence):
        if field.name != "traffic":
            objects.add_row(field.name.replace("_", " "), _shown(getattr(evidence, field.name)))
    console.print(objects)
    labview.render_traffic(evidence.traffic.to_json(), console)
    failure = _failure(replay.assert_fixed if fixed else replay.assert_reproduced, evidence)
    console.print(f"({time.monotonic() - started:.1f}s; the verdict is the catalog module's own)")
    console.print(verdict(scenario, fixed=fixed, failure=failure), markup=False, soft_wrap=True)
    return 0 if failure is None else 1


# --- k8s-84926, narrated ------------------------------------------------------------------


class ConsoleNarrator:
    """An ``e2e.catalog.Narrator`` printing numbered steps and each step's result."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self.steps = 0

    def __call__(self, text: str) -> None:
        self.steps += 1
        self.console.print(f"[bold cyan]step {self.steps}.[/] {text}")

    def result(self, text: str) -> None:
        self.console.print(f"   → {text}", markup=False, highlight=False, soft_wrap=True)


def _narrate_84926(*, fixed: bool, name: str, in_place: bool, console: Console) -> int:
    started = time.monotonic()
    say = ConsoleNarrator(console)

    target_cm = _running_lab(name, console) if in_place else _scratch_lab(console)
    with target_cm as target:
        ec2 = make_client("ec2", target.aws_url, target.region)
        elb = make_client("elb", target.aws_url, target.region)
        core = target.core
        evidence = run_scenario(
            target.lab,
            core,
            ec2,
            elb,
            legacy=not fixed,
            order_on_create="reversed",
            order_on_delete="creation",
            service=f"{REPLAY_PREFIX}{int(time.time()) % 100000}",
            sg_retry=SG_RETRY,
            say=say,
        )
        target.evidence = evidence
        _show_evidence(evidence, target, console)
        failure = _failure(assert_fixed if fixed else assert_wrong_on_delete, evidence)
    scenario = by_id("k8s-84926")
    console.print(f"({time.monotonic() - started:.1f}s; the verdict is the catalog module's own)")
    console.print(verdict(scenario, fixed=fixed, failure=failure), markup=False, soft_wrap=True)
    return 0 if failure is None else 1


def _shown(value: Any) -> str:
    if isinstance(value, (set, frozenset)):
        return ", ".join(sorted(map(str, value))) or "(none)"
    if isinstance(value, dict):
        return "; ".join(f"{k}: {v}" for k, v in sorted(value.items())) or "(none)"
    return str(value)


def _failure(check: Callable[[Any], None], evidence: Any) -> str | None:
    """None when ``check`` holds on ``evidence``, else its assertion's first line."""
    try:
        check(evidence)
    except AssertionError as exc:
        return (str(exc).splitlines() or [check.__doc__ or check.__name__])[0]
    return None


def _show_evidence(ev: Evidence, target: _Target, console: Console) -> None:
    names = {ev.node_group: f"{ev.node_group} (nodes)", ev.elb_group: f"{ev.elb_group} (ELB's)"}
    console.print(_rules_table("node group: ingress before", ev.rules_before, names))
    console.print(
        _rules_table("node group after create", ev.rules_after_create, names, ev.rules_before)
    )
    console.print(
        _rules_table("node group after delete", ev.rules_after_delete, names, ev.rules_before)
    )
    calls = [
        e
        for e in target.lab.aws.trail.events()
        if e.action in ("RevokeSecurityGroupIngress", "DeleteLoadBalancer", "DeleteSecurityGroup")
    ]
    console.print(render_trail(calls, title="what the controller did to delete it"))
    for reason, message in zip(ev.event_reasons, ev.event_messages, strict=True):
        console.print(f"  event {reason}: {message}", markup=False, soft_wrap=True)


def _rules_table(
    title: str, rules: frozenset[Rule], names: dict[str, str], before: frozenset[Rule] | None = None
) -> Table:
    table = Table(title=title, title_justify="left")
    for col in ("protocol", "ports", "source", ""):
        table.add_column(col)
    for rule in sorted(rules | (before or frozenset())):
        ports = "all" if rule.from_port is None else f"{rule.from_port}-{rule.to_port}"
        mark = ""
        if before is not None and rule not in rules:
            mark = "[red]REVOKED[/]"
        elif before is not None and rule not in before:
            mark = "[green]added[/]"
        table.add_row(
            "all" if rule.protocol == "-1" else rule.protocol,
            ports,
            names.get(rule.source, rule.source),
            mark,
            style="strike dim" if mark.startswith("[red]") else "",
        )
    return table


# --- where it runs ------------------------------------------------------------------------


@dataclass
class _Target:
    lab: Any  # a Lab, or _RunningLab which offers the same parts
    core: Any
    aws_url: str
    region: str
    evidence: Evidence | None = None


@contextmanager
def _scratch_lab(console: Console) -> Iterator[_Target]:
    from kubernetes import client

    console.print("on a scratch embedded lab (your labs are not touched); starting it")
    with Lab(LabSpec(name="repro-k8s-84926")) as lab:
        yield _Target(lab, client.CoreV1Api(lab.api_client()), lab.aws.url, lab.config.region)


@contextmanager
def _running_lab(name: str, console: Console) -> Iterator[_Target]:
    state = _lab_to_host(name)
    console.print(f"on your running lab {name!r} (--in-place); what it changes is restored after")
    control = AwsControlClient(state.aws_endpoint, token=state.token)
    ec2 = make_client("ec2", state.aws_endpoint, state.region)
    order = control.fidelity().elb_sg_order
    rules = ingress_rules(ec2, str(state.node_security_group))  # checked by _lab_to_host
    core = labview.core_api(state)
    target = _Target(_RunningLab(state, console), core, state.aws_endpoint, state.region)
    try:
        yield target
    finally:
        _restore(state, target, ec2=ec2, control=control, order=order, rules=rules, console=console)
        core.api_client.close()


def _restore(
    state: LabState,
    target: _Target,
    *,
    ec2: Any,
    control: AwsControlClient,
    order: str,
    rules: frozenset[Rule],
    console: Console,
) -> None:
    """Put the running lab back as it was before the replay."""
    previous = state.controller
    restart_controller(
        name=state.name,
        legacy=previous.legacy_behavior if previous else (),
        args=previous.extra_args if previous else (),
        console=console,
    )
    leaked = {target.evidence.elb_group} if target.evidence else set()
    for svc in target.core.list_namespaced_service("default").items:
        if not svc.metadata.name.startswith(REPLAY_PREFIX):
            continue  # only the replay's own Service: anything else is the user's
        name = svc.metadata.name
        group = group_id_by_name(
            ec2, f"k8s-elb-{elb_name({'metadata': {'uid': svc.metadata.uid}})}"
        )
        leaked |= {group} if group else set()
        target.core.delete_namespaced_service(name, "default")
        try:
            wait_gone(target.core, name, timeout=20)  # the restored controller cleans up
        except TimeoutError:
            target.core.patch_namespaced_service(
                name, "default", {"metadata": {"finalizers": None}}
            )
    control.set_fidelity(elb_sg_order=order)
    group = str(state.node_security_group)
    now = ingress_rules(ec2, group)
    for rule in now - rules:
        ec2.revoke_security_group_ingress(GroupId=group, IpPermissions=[_permission(rule)])
    for rule in rules - now:
        ec2.authorize_security_group_ingress(GroupId=group, IpPermissions=[_permission(rule)])
    for leaked_group in sorted(g for g in leaked if group_exists(ec2, g)):
        ec2.delete_security_group(GroupId=leaked_group)
    console.print(
        "[green]✓[/] restored: node group rules as before, no replay Service or group left, "
        "AWS's group order and the controller's flags as they were"
    )


def _permission(rule: Rule) -> dict[str, Any]:
    perm: dict[str, Any] = {"IpProtocol": rule.protocol}
    if rule.from_port is not None:
        perm["FromPort"], perm["ToPort"] = rule.from_port, rule.to_port
    if rule.source.startswith("sg-"):
        perm["UserIdGroupPairs"] = [{"GroupId": rule.source}]
    else:
        perm["IpRanges"] = [{"CidrIp": rule.source}]
    return perm


class _RemoteTrail:
    """The parts of ``lab.aws.trail.Trail`` the scenario reads, over the control plane."""

    def __init__(self, control: AwsControlClient) -> None:
        self.control = control

    @property
    def last_seq(self) -> int:
        return max((e.seq for e in self.control.trail()), default=0)

    def events(self) -> list[Any]:
        return list(self.control.trail())


@dataclass
class _RemoteAws:
    control: AwsControlClient
    trail: _RemoteTrail


@dataclass
class _Group:
    group_id: str


@dataclass
class _Topology:
    node_security_group: _Group


class _RunningLab:
    """A running lab (``invoke lab.up``) offering the parts of :class:`Lab` a scenario uses."""

    def __init__(self, state: LabState, console: Console) -> None:
        control = AwsControlClient(state.aws_endpoint, token=state.token)
        self.state = state
        self.console = console
        self.aws = _RemoteAws(control, _RemoteTrail(control))
        self.topology = _Topology(_Group(str(state.node_security_group)))

    def start_controller(self, *, legacy: Any = (), args: Any = ()) -> None:
        restart_controller(
            name=self.state.name, legacy=list(legacy), args=list(args), console=self.console
        )
