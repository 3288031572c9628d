"""The controller at scale: Services x nodes, AWS calls per Service and per node join, steady
state, restart, memory.

Two labs in one run (sim backend; the controller as a child process with its default flags
unless ``--workers`` says otherwise; each lab starts from a wiped moto):

A. **Per-ELB security groups** (the default cloud config): calls per Service for a first batch
   (default 10) beside upstream's sequence for a new Classic ELB (upstream-ccm.md §3.4), one
   node join, then ``--probe`` Services (default 70) to show where this mode stops: every ELB
   adds one rule to the node group, whose quota is 60 rules (AWS's default; moto enforces it),
   so at most ~59 Services converge and the rest retry for ever. 500 Services cannot converge
   in this mode, upstream's or ours, without a quota increase.
B. **Shared ``ElbSecurityGroup``** (the configuration a cluster with hundreds of ELBs needs):
   the full size (default 500 Services x 50 nodes) in a baseline batch and the rest, then:

* convergence time (from the first create until every Service has its ELB hostname and every
  ELB holds exactly the eligible instances, read back from Kubernetes and AWS);
* the controller's AWS calls per Service on create, from the lab's call trail (only calls whose
  user agent carries the controller's ``ccm-lab-controller`` marker), split into read and
  mutating calls, beside upstream's §3.4 sequence for the same configuration;
* the calls one node joining costs with the baseline batch and with all Services present,
  beside upstream's ``UpdateLoadBalancer`` (§3.5) for the same number of ELBs;
* the calls in a quiet window (default 30 s) with nothing changing, and when a restarted
  controller re-ensures every Service: the target is zero mutating calls;
* the controller's RSS (``/proc/<pid>/status`` VmRSS) idle, at the baseline and at full size;
* the mean latency of the unfiltered ``DescribeSecurityGroups`` sent on every ensure.

``--nlb`` runs B once more with NLB Services (``aws-load-balancer-type: nlb``; no shared group,
the node rules are CIDR rules, so the lab's rules-per-group quota is raised to AWS's largest,
1,000, as a cluster of hundreds of NLBs needs on AWS): create, joins, steady state, restart,
beside upstream's ``UpdateLoadBalancer`` model for an NLB (a describe and the whole ensure,
12 calls per NLB).
``--compare REF`` runs every lab once more with the controller of git ``REF`` (a temporary
worktree, :mod:`benchmarks.worktree`; same interpreter and virtualenv, ``PYTHONPATH`` at the
worktree) and prints each B / NLB / A figure as "this checkout vs REF (ratio)", so before and
after share the run and the machine's load. ``--skip-a`` leaves A out, ``--skip-b`` B's
Classic ELBs (with ``--nlb``: the NLB run alone).

Every figure with a baseline carries a ratio against it (same run). Nothing is asserted.

    .venv/bin/python -m benchmarks.controller [--quick] [--services N] [--nodes N] [--probe N]
        [--nlb] [--compare REF] [--skip-a] [--skip-b]
"""

from __future__ import annotations

import argparse
import contextlib
import ipaddress
import json
import signal
import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from kubernetes import client

from benchmarks.worktree import resolve, worktree
from lab.aws.topology import cluster_tag_key
from lab.aws.trail import TrailEvent
from lab.cluster.base import Role
from lab.cluster.kubelet import NodeRegistration
from lab.compose import Lab
from lab.controllerproc import ControllerCommand
from lab.spec import LabSpec

CONTROLLER_UA = "ccm-lab-controller"  # controller/aws/clients.py: user_agent_extra
UNINIT = "node.cloudprovider.kubernetes.io/uninitialized"
EXCLUDE_LB = "node.kubernetes.io/exclude-from-external-load-balancers"
NLB_TYPE = "service.beta.kubernetes.io/aws-load-balancer-type"
BENCH_LABEL = "ccm-lab-bench"
READ_PREFIXES = ("Describe", "Get", "List")

# Upstream EnsureLoadBalancer for a new CLB with no annotations, no ElbSecurityGroup, one port
# and one node security group (upstream-ccm.md §3.4; the DescribeInstances snapshot is cached
# for 10 minutes and DescribeAvailabilityZones once, so neither is a per-Service cost).
UPSTREAM_CREATE: tuple[tuple[str, str, int], ...] = (
    ("2", "DescribeSubnets", 1),
    ("2", "DescribeRouteTables", 1),
    ("3", "DescribeSecurityGroups (group-name, vpc-id)", 1),
    ("3", "CreateSecurityGroup", 1),
    ("4", "DescribeSecurityGroups (GroupIds=[lbSG])", 1),
    ("4", "AuthorizeSecurityGroupIngress (LB SG: port + ICMP 3/4)", 1),
    ("5.1", "DescribeLoadBalancers", 1),
    ("5.2", "CreateLoadBalancer", 1),
    ("5.4", "DescribeLoadBalancerAttributes", 1),
    ("5.4", "ModifyLoadBalancerAttributes (AWS defaults differ: on most ensures)", 1),
    ("5.5", "DescribeLoadBalancers (refresh)", 1),
    ("7", "ConfigureHealthCheck (a new ELB always differs)", 1),
    ("8", "DescribeSecurityGroups (no filter: every group)", 1),
    ("8", "DescribeSecurityGroups (ip-permission.group-id=lbSG)", 1),
    ("8", "DescribeSecurityGroups (GroupIds=[nodeSG])", 1),
    ("8", "AuthorizeSecurityGroupIngress (node SG: all from lbSG)", 1),
    ("9", "RegisterInstancesWithLoadBalancer", 1),
)
# The same with ``ElbSecurityGroup`` set (setupSg=false: §3.4 steps 3-4 skipped) once the node
# group already allows the shared group (true from the second ELB on: §3.6 step 6 adds nothing).
UPSTREAM_CREATE_SHARED: tuple[tuple[str, str, int], ...] = tuple(
    (step, action, n)
    for step, action, n in UPSTREAM_CREATE
    if step not in ("3", "4") and "nodeSG" not in action and "node SG" not in action
)
# Upstream UpdateLoadBalancer per CLB when a node joins whose security group already carries
# the ELB's rule (§3.5): DescribeLoadBalancers, RegisterInstances, then
# updateInstanceSecurityGroupsForLoadBalancer's two DescribeSecurityGroups. Plus one
# DescribeInstances for the whole join (the cached snapshot misses the new instance).
UPSTREAM_JOIN_PER_LB: tuple[tuple[str, int], ...] = (
    ("DescribeLoadBalancers", 1),
    ("RegisterInstancesWithLoadBalancer", 1),
    ("DescribeSecurityGroups (no filter)", 1),
    ("DescribeSecurityGroups (ip-permission.group-id)", 1),
)
UPSTREAM_JOIN_FIXED = 1  # DescribeInstances
# Upstream UpdateLoadBalancer per NLB (one TCP port, TCP health check) when a node joins:
# DescribeLoadBalancers, then the whole EnsureLoadBalancer (§3.5, §3.8; the call list in
# controller/aws/README.md): DescribeSubnets, DescribeRouteTables, DescribeLoadBalancers,
# DescribeListeners, DescribeTargetGroups, DescribeTargetHealth, RegisterTargets,
# DescribeLoadBalancers (after an existing listener), DescribeLoadBalancerAttributes,
# DescribeSubnets (the subnets' CIDRs), DescribeSecurityGroups (every group).
UPSTREAM_NLB_JOIN_PER_LB = 12


_T = TypeVar("_T")


def need(component: _T | None, what: str) -> _T:
    if component is None:
        raise RuntimeError(f"the lab's {what} is not running")
    return component


def is_read(action: str) -> bool:
    return action.startswith(READ_PREFIXES)


@dataclass(frozen=True)
class Calls:
    """The controller's AWS calls in one window of the trail."""

    events: tuple[TrailEvent, ...]

    @property
    def total(self) -> int:
        return len(self.events)

    @property
    def reads(self) -> int:
        return sum(1 for e in self.events if is_read(e.action))

    @property
    def writes(self) -> int:
        return self.total - self.reads

    def by_action(self) -> Counter[str]:
        return Counter(e.action for e in self.events)

    def mutating(self) -> Counter[str]:
        return Counter(e.action for e in self.events if not is_read(e.action))


def wait(pred: Callable[[], Any], *, timeout: float, what: str, interval: float = 0.25) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = pred()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(interval)


class Bench:
    """One lab, one controller, and the measurements taken against them."""

    def __init__(self, lab: Lab, *, nlb: bool = False) -> None:
        self.lab = lab
        self.nlb = nlb
        self.register = "RegisterTargets" if nlb else "RegisterInstancesWithLoadBalancer"
        self.aws = need(lab.aws, "AWS endpoint")
        self.topology = need(lab.topology, "topology")
        self.kubelet = need(lab.sim.kubelet, "kubelet stand-in")
        # Any: the kubernetes models type every field Optional; these objects are all set.
        self.core: Any = client.CoreV1Api(lab.api_client())
        self.elb = self.aws.client("elb", max_attempts=3)
        self.elbv2 = self.aws.client("elbv2", max_attempts=3)
        self.ec2 = self.aws.client("ec2", max_attempts=3)
        self.created = 0
        self.joined = 0

    # -- trail ------------------------------------------------------------------------------
    @property
    def mark(self) -> int:
        return int(self.aws.trail.last_seq)

    def calls(self, since: int, until: int | None = None) -> Calls:
        return Calls(
            tuple(
                e
                for e in self.aws.trail.events()
                if e.seq > since
                and (until is None or e.seq <= until)
                and CONTROLLER_UA in e.user_agent
            )
        )

    def wait_quiet(self, quiet: float, *, timeout: float) -> None:
        """Until the controller has made no AWS call for ``quiet`` seconds."""
        deadline = time.monotonic() + timeout
        last, since = self.mark, time.monotonic()
        while time.monotonic() - since < quiet:
            if time.monotonic() > deadline:
                raise TimeoutError("the controller never went quiet")
            time.sleep(0.2)
            now = self.mark
            if now != last:
                last, since = now, time.monotonic()

    # -- cluster ----------------------------------------------------------------------------
    def rss_kib(self) -> int:
        pid = need(self.lab.controller, "controller").pid
        for line in Path(f"/proc/{pid}/status").read_text(encoding="utf-8").splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
        raise RuntimeError(f"no VmRSS for pid {pid}")

    def eligible_instances(self) -> frozenset[str]:
        ids = set()
        for node in self.core.list_node().items:
            value = (node.metadata.labels or {}).get(EXCLUDE_LB)
            if value is not None and value != "false":
                continue
            if node.metadata.deletion_timestamp is None and node.spec.provider_id:
                ids.add(node.spec.provider_id.rsplit("/", 1)[-1])
        return frozenset(ids)

    def nodes_initialized(self) -> bool:
        nodes = self.core.list_node().items
        return bool(nodes) and all(
            not any(t.key == UNINIT for t in (n.spec.taints or [])) for n in nodes
        )

    def create_services(self, count: int) -> None:
        for _ in range(count):
            name = f"bench-{self.created:04d}"
            self.created += 1
            self.core.create_namespaced_service(
                "default",
                {
                    "apiVersion": "v1",
                    "kind": "Service",
                    "metadata": {
                        "name": name,
                        "labels": {BENCH_LABEL: "1"},
                        "annotations": {NLB_TYPE: "nlb"} if self.nlb else {},
                    },
                    "spec": {
                        "type": "LoadBalancer",
                        "selector": {"app": name},
                        "ports": [{"name": "http", "port": 80, "targetPort": 8080}],
                    },
                },
            )

    def lb_names(self) -> dict[str, str]:
        """Service name -> ELB name for every bench Service that has its hostname."""
        resp = self.core.list_namespaced_service(
            "default", label_selector=f"{BENCH_LABEL}=1", _preload_content=False
        )
        out: dict[str, str] = {}
        for svc in json.loads(resp.data)["items"]:
            ingress = (svc.get("status") or {}).get("loadBalancer", {}).get("ingress") or []
            if ingress and ingress[0].get("hostname"):
                uid = svc["metadata"]["uid"]
                out[svc["metadata"]["name"]] = ("a" + uid.replace("-", ""))[:32]
        return out

    def elb_instances(self) -> dict[str, frozenset[str]]:
        if self.nlb:
            return self.nlb_instances()
        out = {}
        for page in self.elb.get_paginator("describe_load_balancers").paginate():
            for lb in page["LoadBalancerDescriptions"]:
                out[lb["LoadBalancerName"]] = frozenset(
                    i["InstanceId"] for i in lb.get("Instances", [])
                )
        return out

    def nlb_instances(self) -> dict[str, frozenset[str]]:
        """NLB name -> the instances its target groups hold (any state but draining)."""
        names = {}
        for page in self.elbv2.get_paginator("describe_load_balancers").paginate():
            for lb in page["LoadBalancers"]:
                names[lb["LoadBalancerArn"]] = lb["LoadBalancerName"]
        out: dict[str, frozenset[str]] = {}
        for page in self.elbv2.get_paginator("describe_target_groups").paginate():
            for tg in page["TargetGroups"]:
                health = self.elbv2.describe_target_health(TargetGroupArn=tg["TargetGroupArn"])
                ids = frozenset(
                    d["Target"]["Id"]
                    for d in health["TargetHealthDescriptions"]
                    if d.get("TargetHealth", {}).get("State") != "draining"
                )
                for arn in tg.get("LoadBalancerArns", []):
                    out[names.get(arn, arn)] = out.get(names.get(arn, arn), frozenset()) | ids
        return out

    def converged(self, eligible: frozenset[str]) -> bool:
        names = self.lb_names()
        if len(names) < self.created:
            return False
        have = self.elb_instances()
        return all(have.get(lb) == eligible for lb in names.values())

    def wait_converged(self, since: int, batch: int, *, timeout: float) -> None:
        """Wait until every bench Service has converged; ``batch`` were created after
        ``since``. Cheap trigger first (the controller's registrations in the trail, so polling
        does not compete with the endpoint for this process), then the real check, read back
        from the Kubernetes API and AWS."""
        t0 = time.monotonic()
        eligible = self.eligible_instances()
        wait(
            lambda: self.aws.trail.count(self.register, since_seq=since) >= batch,
            timeout=timeout,
            what=f"{batch} load balancer registrations",
        )
        wait(
            lambda: self.converged(eligible),
            timeout=max(10.0, timeout - (time.monotonic() - t0)),
            what="every Service's hostname and every ELB holding the eligible instances",
            interval=0.5,
        )

    def add_node(self) -> tuple[str, str]:
        """A new worker: an instance like the topology's, then its kubelet registers."""
        topo = self.topology
        cfg = self.lab.config
        self.joined += 1
        name = f"{cfg.cluster_id}-joiner{self.joined}"
        zone = cfg.zones[0]
        subnet = topo.subnets[zone]
        ip = str(ipaddress.ip_network(subnet.cidr)[2000 + self.joined])
        reply = self.ec2.run_instances(
            ImageId=topo.image_id,
            InstanceType="m5.large",
            MinCount=1,
            MaxCount=1,
            SubnetId=subnet.subnet_id,
            PrivateIpAddress=ip,
            SecurityGroupIds=[topo.node_security_group.group_id],
            Placement={"AvailabilityZone": zone},
            TagSpecifications=[
                {
                    "ResourceType": "instance",
                    "Tags": [
                        {"Key": "Name", "Value": name},
                        {"Key": cluster_tag_key(cfg.cluster_id), "Value": "owned"},
                    ],
                }
            ],
        )
        iid = reply["Instances"][0]["InstanceId"]
        wait(
            lambda: (
                self.ec2.describe_instances(InstanceIds=[iid])["Reservations"][0]["Instances"][0][
                    "State"
                ]["Name"]
                == "running"
            ),
            timeout=30,
            what=f"{iid} running",
        )
        self.kubelet.register(
            NodeRegistration(
                name=name,
                ip=ip,
                version=self.lab.version,
                role=Role.WORKER,
                provider_id=f"aws:///{zone}/{iid}",
            )
        )
        return name, iid

    def join(self, *, timeout: float) -> tuple[float, Calls]:
        """One node joins; returns time until every ELB holds it and the calls it cost."""
        before = self.mark
        t0 = time.monotonic()
        _, iid = self.add_node()
        wait(
            lambda: (
                self.aws.trail.count(
                    self.register,
                    since_seq=before,
                    params={"Targets" if self.nlb else "Instances": iid},
                )
                >= self.created
            ),
            timeout=timeout,
            what=f"{iid} registered with every ELB",
        )
        eligible = self.eligible_instances()
        wait(lambda: self.converged(eligible), timeout=timeout, what="ELBs converged after join")
        elapsed = time.monotonic() - t0
        self.wait_quiet(2.0, timeout=timeout)
        return elapsed, self.calls(before)


@dataclass
class ScaleRun:
    """Measurements of one lab taken through the batches (see :func:`scale_run`)."""

    mode: str
    services: int
    base_n: int
    build: str = "this checkout"
    rss_idle: int = 0
    eligible: int = 0
    base_t: float = 0.0
    base: Calls = Calls(())
    rss_base: int = 0
    base_join_t: float = 0.0
    base_join: Calls = Calls(())
    full_t: float = 0.0
    full: Calls = Calls(())
    rss_full: int = 0
    join_t: float = 0.0
    join: Calls = Calls(())
    quiet: float = 0.0
    steady: Calls = Calls(())
    restart_t: float = 0.0
    restart: Calls = Calls(())
    rss_restart: int = 0


@dataclass(frozen=True)
class Build:
    """Which controller runs: this checkout's (``tree`` None) or another commit's code."""

    label: str
    tree: Path | None = None

    def start(self, lab: Lab, workers: int) -> None:
        args = ["--concurrent-service-syncs", str(workers)]
        if self.tree is None:
            lab.start_controller(args=args)
            return
        # The same interpreter and virtualenv; -P keeps the working directory (this
        # checkout) off sys.path so PYTHONPATH's worktree supplies ``controller``.
        command = ControllerCommand(
            (
                "env",
                f"PYTHONPATH={self.tree}",
                sys.executable,
                "-P",
                "-m",
                "controller",
                "--kubeconfig={kubeconfig}",
                "--cloud-config={cloud_config}",
                "--metrics-addr={metrics_addr}",
                *args,
            ),
            ready_url="http://{metrics_addr}/readyz",
            name=self.label,
        )
        lab.start_controller(command=command)


#: the rules-per-security-group quota of an NLB run: AWS's largest (its default, 60, holds
#: about 55 NLB Services on one node group; hundreds need the quota raised on AWS too)
NLB_RULES_QUOTA = 1000


def start_lab(
    nodes: int, *, shared_sg: bool, workers: int, build: Build, nlb: bool = False
) -> tuple[Lab, Bench, str]:
    """A lab and its controller; with ``shared_sg`` the cloud config names one
    ``ElbSecurityGroup`` (created here in the cluster VPC) for every ELB."""
    lab = Lab(LabSpec(name="bench-controller", nodes=nodes, zones=("us-east-1a", "us-east-1b")))
    lab.start()
    try:
        # moto's state is process-wide and outlives a stopped lab: start from a wiped world.
        lab.reset()
        bench = Bench(lab, nlb=nlb)
        if nlb:  # each NLB adds rules to the node group: AWS's largest quota, as on AWS
            bench.aws.control.set_fidelity(sg_rules_quota=NLB_RULES_QUOTA)
        sg = ""
        if shared_sg:
            sg = bench.ec2.create_security_group(
                GroupName="bench-shared-elb",
                Description="shared ELB group (ElbSecurityGroup)",
                VpcId=bench.topology.vpc_id,
            )["GroupId"]
            lab.write_cloud_config(extra_global=[("ElbSecurityGroup", sg)])
        build.start(lab, workers)
        wait(bench.nodes_initialized, timeout=120, what="nodes initialized")
        bench.wait_quiet(1.0, timeout=60)
    except BaseException:
        lab.stop()
        raise
    return lab, bench, sg


def scale_run(
    nodes: int,
    services: int,
    base_n: int,
    *,
    quiet: float,
    workers: int,
    timeout: float,
    say: Callable[[str], None],
    build: Build,
    nlb: bool = False,
) -> ScaleRun:
    """Shared ``ElbSecurityGroup`` (or NLBs, ``nlb``): baseline batch, join, rest of the
    Services, join, steady state, restart."""
    mode = "NLB" if nlb else "ElbSecurityGroup"
    out = ScaleRun(mode=mode, services=services, base_n=base_n, quiet=quiet, build=build.label)
    t0 = time.monotonic()
    lab, bench, _ = start_lab(nodes, shared_sg=not nlb, workers=workers, build=build, nlb=nlb)
    try:
        say(f"lab ({nodes} nodes) and controller up in {time.monotonic() - t0:.1f} s")
        out.rss_idle = bench.rss_kib()
        out.eligible = len(bench.eligible_instances())

        mark = bench.mark
        t_batch = time.monotonic()  # from the first create: creating is part of converging
        bench.create_services(base_n)
        bench.wait_converged(mark, base_n, timeout=timeout)
        out.base_t = time.monotonic() - t_batch
        bench.wait_quiet(1.0, timeout=60)
        out.base = bench.calls(mark)
        out.rss_base = bench.rss_kib()
        say(f"converged {base_n} Services in {out.base_t:.1f} s")
        out.base_join_t, out.base_join = bench.join(timeout=timeout)
        say(f"node join with {base_n}: {out.base_join_t:.1f} s, {out.base_join.total} calls")

        rest = services - base_n
        mark = bench.mark
        t_batch = time.monotonic()
        bench.create_services(rest)
        bench.wait_converged(mark, rest, timeout=timeout)
        out.full_t = time.monotonic() - t_batch
        bench.wait_quiet(1.0, timeout=120)
        out.full = bench.calls(mark)
        out.rss_full = bench.rss_kib()
        say(f"converged {rest} more Services in {out.full_t:.1f} s")
        out.join_t, out.join = bench.join(timeout=timeout)
        say(f"node join with {services}: {out.join_t:.1f} s, {out.join.total} calls")

        mark = bench.mark
        time.sleep(quiet)  # the measurement window itself: nothing changes
        out.steady = bench.calls(mark)
        say(f"steady {quiet:.0f} s: {out.steady.total} calls")

        mark = bench.mark
        t_restart = time.monotonic()
        build.start(lab, workers)
        wait(
            lambda: (
                bench.aws.trail.count("DescribeLoadBalancerAttributes", since_seq=mark) >= services
            ),
            timeout=timeout,
            what="every Service re-ensured after restart",
        )
        out.restart_t = time.monotonic() - t_restart
        bench.wait_quiet(2.0, timeout=120)
        out.restart = bench.calls(mark)
        out.rss_restart = bench.rss_kib()
        say(f"restart re-ensure: {out.restart_t:.1f} s, {out.restart.total} calls")
    finally:
        lab.stop()
    return out


@dataclass
class ManagedRun:
    """Per-ELB groups (the default): the §3.4 sequence, and where the node group's rule
    quota stops it."""

    base_n: int
    base_t: float = 0.0
    base: Calls = Calls(())
    base_join_t: float = 0.0
    base_join: Calls = Calls(())
    probe: int = 0
    converged: int = 0
    node_rules: int = 0
    limit_errors: int = 0
    window: float = 0.0
    retries: Calls = Calls(())


def managed_run(
    nodes: int,
    base_n: int,
    *,
    probe: int,
    window: float,
    workers: int,
    timeout: float,
    say: Callable[[str], None],
    build: Build,
) -> ManagedRun:
    out = ManagedRun(base_n=base_n, probe=probe, window=window)
    lab, bench, _ = start_lab(nodes, shared_sg=False, workers=workers, build=build)
    try:
        mark = bench.mark
        t_batch = time.monotonic()
        bench.create_services(base_n)
        bench.wait_converged(mark, base_n, timeout=timeout)
        out.base_t = time.monotonic() - t_batch
        bench.wait_quiet(1.0, timeout=60)
        out.base = bench.calls(mark)
        say(f"per-ELB groups: converged {base_n} Services in {out.base_t:.1f} s")
        out.base_join_t, out.base_join = bench.join(timeout=timeout)
        if probe > base_n:
            # Past the node group's rule quota (AWS default 60 inbound rules per group).
            mark = bench.mark
            bench.create_services(probe - base_n)
            wait(
                lambda: (
                    bench.aws.trail.count(
                        error_code="RulesPerSecurityGroupLimitExceeded", since_seq=mark
                    )
                    >= probe - len(bench.lb_names())
                ),
                timeout=timeout,
                what="every Service to converge or hit the rule quota once",
            )
            stable, since = len(bench.lb_names()), time.monotonic()
            while time.monotonic() - since < 5.0:  # no more hostnames appearing
                time.sleep(0.5)
                now = len(bench.lb_names())
                if now != stable:
                    stable, since = now, time.monotonic()
            out.converged = stable
            mark = bench.mark
            time.sleep(window)
            out.retries = bench.calls(mark)
            out.limit_errors = bench.aws.trail.count(
                error_code="RulesPerSecurityGroupLimitExceeded", since_seq=mark
            )
            node_sg = bench.topology.node_security_group.group_id
            group = bench.ec2.describe_security_groups(GroupIds=[node_sg])["SecurityGroups"][0]
            out.node_rules = sum(
                len(p.get("UserIdGroupPairs", [])) + len(p.get("IpRanges", []))
                for p in group.get("IpPermissions", [])
            )
            say(f"per-ELB groups: {out.converged} of {probe} converged at the rule quota")
    finally:
        lab.stop()
    return out


# -- report -----------------------------------------------------------------------------------


def ratio(a: float, b: float) -> str:
    return f"{a / b:.2f}x" if b else "n/a"


def fmt_counter(counter: Counter[str], per: int = 1) -> str:
    def num(x: float) -> str:
        return f"{x:.2f}".rstrip("0").rstrip(".")

    return ", ".join(f"{k} {num(v / per)}" for k, v in sorted(counter.items())) or "-"


def split(calls: Calls, per: int) -> str:
    per = max(per, 1)
    return (
        f"{calls.total / per:.2f} ({calls.reads / per:.2f} read, {calls.writes / per:.2f} mutating)"
    )


def upstream(seq: Sequence[tuple[str, str, int]]) -> tuple[int, int, int]:
    total = sum(n for _, _, n in seq)
    writes = sum(n for _, a, n in seq if not is_read(a))
    return total, total - writes, writes


def unfiltered_sg_latency(calls: Calls) -> float:
    lat = [
        e.latency_ms
        for e in calls.events
        if e.action == "DescribeSecurityGroups"
        and not any(k in e.params for k in ("Filters", "GroupIds"))
    ]
    return sum(lat) / len(lat) if lat else 0.0


def report(m: ManagedRun, r: ScaleRun, nodes: int) -> None:
    up_m = upstream(UPSTREAM_CREATE)
    up_s = upstream(UPSTREAM_CREATE_SHARED)
    per_lb_join = sum(n for _, n in UPSTREAM_JOIN_PER_LB)
    rest = r.services - r.base_n
    per_base = r.base.total / r.base_n
    per_full = r.full.total / max(rest, 1)
    up_join = UPSTREAM_JOIN_FIXED + r.services * per_lb_join
    rows: list[tuple[str, str]] = [
        ("A. per-ELB security groups (default config)", ""),
        (
            f"  calls per Service on create, {m.base_n} Services",
            f"{split(m.base, m.base_n)}; upstream §3.4 {up_m[0]} ({up_m[1]} read, "
            f"{up_m[2]} mutating): ours/upstream {ratio(m.base.total / m.base_n, up_m[0])}",
        ),
        (f"  time to converge {m.base_n} Services", f"{m.base_t:.1f} s"),
        (
            f"  node join with {m.base_n} Services",
            f"{m.base_join.total} calls ({m.base_join.writes} mutating) in {m.base_join_t:.1f} s;"
            f" upstream {UPSTREAM_JOIN_FIXED + m.base_n * per_lb_join}",
        ),
    ]
    if m.probe > m.base_n:
        rows += [
            (
                f"  {m.probe} Services: converged",
                f"{m.converged} (node group holds {m.node_rules} rules; quota 60)",
            ),
            (
                f"  {m.window:.0f} s later, the others retrying",
                f"{m.retries.total} calls, {m.retries.writes} mutating, "
                f"{m.limit_errors} RulesPerSecurityGroupLimitExceeded",
            ),
        ]
    rows += [
        (f"B. shared ElbSecurityGroup, {r.services} Services x {nodes} nodes", ""),
        (f"  time to converge, first {r.base_n} Services", f"{r.base_t:.1f} s"),
        (f"  time to converge, {rest} more (to {r.services})", f"{r.full_t:.1f} s"),
        (f"  time to converge, all {r.services}", f"{r.base_t + r.full_t:.1f} s"),
        (
            f"  ms per Service, batch to {r.services} vs first {r.base_n}",
            f"{r.full_t / max(rest, 1) * 1000:.0f} vs {r.base_t / r.base_n * 1000:.0f} "
            f"({ratio(r.full_t / max(rest, 1), r.base_t / r.base_n)})",
        ),
        (f"  calls per Service on create, batch to {r.services}", split(r.full, rest)),
        (f"  calls per Service on create, first {r.base_n}", split(r.base, r.base_n)),
        (f"    ratio at {r.services} / at {r.base_n}", ratio(per_full, per_base)),
        (
            "    upstream §3.4 with ElbSecurityGroup",
            f"{up_s[0]} ({up_s[1]} read, {up_s[2]} mutating); "
            f"ours/upstream {ratio(per_full, up_s[0])}",
        ),
        (
            f"  node join with {r.services} Services",
            f"{r.join.total} calls ({r.join.reads} read, {r.join.writes} mutating) "
            f"in {r.join_t:.1f} s",
        ),
        (
            f"    upstream §3.5 ({per_lb_join} per ELB + {UPSTREAM_JOIN_FIXED})",
            f"{up_join}; ours/upstream {ratio(r.join.total, up_join)}",
        ),
        (
            f"    calls per ELB on join, at {r.services} vs at {r.base_n}",
            f"{r.join.total / r.services:.2f} vs {r.base_join.total / r.base_n:.2f} "
            f"({ratio(r.join.total / r.services, r.base_join.total / r.base_n)}); "
            f"join time {r.join_t:.1f} s vs {r.base_join_t:.1f} s",
        ),
        (
            f"  steady state, {r.quiet:.0f} s nothing changing",
            f"{r.steady.total} calls, {r.steady.writes} mutating (target 0)",
        ),
        (
            f"  restart re-ensuring {r.services} Services",
            f"{r.restart.total} calls ({r.restart.total / r.services:.2f}/Service, "
            f"{ratio(r.restart.total / r.services, per_full)} of create), "
            f"{r.restart.writes} mutating (target 0), {r.restart_t:.1f} s",
        ),
        (
            f"  controller RSS at {r.services} Services",
            f"{r.rss_full / 1024:.1f} MiB; idle {r.rss_idle / 1024:.1f}, at {r.base_n} "
            f"{r.rss_base / 1024:.1f} (at {r.services} / idle {ratio(r.rss_full, r.rss_idle)}); "
            f"after restart {r.rss_restart / 1024:.1f}",
        ),
        (
            "  unfiltered DescribeSecurityGroups, mean latency",
            f"{unfiltered_sg_latency(r.full):.1f} ms (batch to {r.services}) vs "
            f"{unfiltered_sg_latency(r.base):.1f} ms (first {r.base_n})",
        ),
    ]
    width = max(len(k) for k, _ in rows)
    print()
    for name, value in rows:
        print(f"{name:<{width}}  {value}")
    print()
    print("calls by action")
    print(f"  A create, per Service:      {fmt_counter(m.base.by_action(), m.base_n)}")
    print(f"  A join at {m.base_n}:            {fmt_counter(m.base_join.by_action())}")
    if m.probe > m.base_n:
        print(f"  A retries in {m.window:.0f} s:      {fmt_counter(m.retries.by_action())}")
    print(f"  B create, per Service (to {r.services}): {fmt_counter(r.full.by_action(), rest)}")
    print(
        f"  B create, per Service (first {r.base_n}): {fmt_counter(r.base.by_action(), r.base_n)}"
    )
    print(f"  B join at {r.services}: {fmt_counter(r.join.by_action())}")
    print(f"  B join at {r.base_n}: {fmt_counter(r.base_join.by_action())}")
    print(f"  B steady state: {fmt_counter(r.steady.by_action())}")
    print(f"  B restart: {fmt_counter(r.restart.by_action())}")
    if r.restart.writes or r.steady.writes:
        print(
            f"  B mutating: restart {fmt_counter(r.restart.mutating())}; "
            f"steady {fmt_counter(r.steady.mutating())}"
        )
    print("upstream new CLB (§3.4; * = skipped with ElbSecurityGroup):")
    for step, action, n in UPSTREAM_CREATE:
        star = " " if (step, action, n) in UPSTREAM_CREATE_SHARED else "*"
        print(f"  {star} {step:<4} {action} x{n}")


def compare_rows(
    label: str, now: ScaleRun, before: ScaleRun | None, up_join_per_lb: int
) -> list[tuple[str, str]]:
    """One mode's figures for this checkout beside the other build's (same run) and
    upstream's model: each with a ratio."""
    rest = max(now.services - now.base_n, 1)

    def pair(a: float, b: float | None, fmt: str = "{:.0f}") -> str:
        if b is None:
            return fmt.format(a)
        return f"{fmt.format(a)} vs {fmt.format(b)} ({ratio(a, b)})"

    def up(calls: int, n: int) -> str:
        model = UPSTREAM_JOIN_FIXED + n * up_join_per_lb
        return f"; upstream model {model}: {ratio(calls, model)}"

    b = before
    return [
        (f"{label} [{now.build}" + (f" vs {b.build}]" if b else "]"), ""),
        (
            f"  calls per Service on create (to {now.services})",
            pair(now.full.total / rest, b and b.full.total / rest, "{:.2f}"),
        ),
        (
            f"  node join at {now.base_n} Services, calls",
            pair(now.base_join.total, b and b.base_join.total)
            + up(now.base_join.total, now.base_n),
        ),
        (
            f"  node join at {now.services} Services, calls",
            pair(now.join.total, b and b.join.total) + up(now.join.total, now.services),
        ),
        (
            f"  node join at {now.services} Services, seconds",
            pair(now.join_t, b and b.join_t, "{:.1f}"),
        ),
        (
            f"  steady state {now.quiet:.0f} s, calls",
            pair(now.steady.total, b and b.steady.total),
        ),
        (
            f"  restart re-ensuring {now.services}, calls",
            pair(now.restart.total, b and b.restart.total)
            + f"; mutating {now.restart.writes}"
            + (f" vs {b.restart.writes}" if b else ""),
        ),
        (
            f"  restart re-ensuring {now.services}, seconds",
            pair(now.restart_t, b and b.restart_t, "{:.1f}"),
        ),
        (f"  join at {now.services} by action", fmt_counter(now.join.by_action())),
        ("  steady state by action", fmt_counter(now.steady.by_action()) or "none"),
        ("  restart by action", fmt_counter(now.restart.by_action())),
    ]


def print_rows(rows: Sequence[tuple[str, str]]) -> None:
    width = max(len(k) for k, _ in rows)
    print()
    for name, value in rows:
        print(f"{name:<{width}}  {value}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="50 Services x 10 nodes, 10 s quiet")
    parser.add_argument("--services", type=int, help="full size (default 500; quick 50)")
    parser.add_argument("--nodes", type=int, help="lab nodes (default 50; quick 10)")
    parser.add_argument("--baseline", type=int, default=10, help="Services in the first batch")
    parser.add_argument("--quiet", type=float, help="steady-state window, s (default 30; quick 10)")
    parser.add_argument(
        "--probe", type=int, help="Services pushed past the rule quota in A (default 70; quick 0)"
    )
    parser.add_argument("--workers", type=int, default=1, help="--concurrent-service-syncs")
    parser.add_argument("--timeout", type=float, default=900.0, help="per phase, s")
    parser.add_argument(
        "--compare",
        metavar="REF",
        help="also measure the controller of git REF (a temporary worktree) in the same run",
    )
    parser.add_argument("--nlb", action="store_true", help="also run B with NLB Services")
    parser.add_argument("--skip-a", action="store_true", help="leave out A (per-ELB groups)")
    parser.add_argument(
        "--skip-b", action="store_true", help="leave out B's Classic ELBs (with --nlb: NLB only)"
    )
    args = parser.parse_args()
    services = args.services if args.services is not None else (50 if args.quick else 500)
    nodes = args.nodes if args.nodes is not None else (10 if args.quick else 50)
    quiet = args.quiet if args.quiet is not None else (10.0 if args.quick else 30.0)
    probe = args.probe if args.probe is not None else (0 if args.quick else 70)
    base_n = min(args.baseline, services)
    for flag, value in (("--services", services), ("--nodes", nodes), ("--baseline", base_n)):
        if value < 1:
            parser.error(f"{flag} {value}: give a positive number")
    if args.compare:
        try:
            resolve(args.compare)
        except ValueError as exc:
            parser.error(str(exc))
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # so the labs stop on kill
    with contextlib.ExitStack() as stack:
        builds = [Build("this checkout")]
        if args.compare:
            builds.append(Build(args.compare, stack.enter_context(worktree(args.compare))))
        run_all(
            args, builds, services=services, nodes=nodes, quiet=quiet, probe=probe, base_n=base_n
        )


def run_all(
    args: argparse.Namespace,
    builds: Sequence[Build],
    *,
    services: int,
    nodes: int,
    quiet: float,
    probe: int,
    base_n: int,
) -> None:
    def say(msg: str) -> None:
        print(f"  .. {msg}", flush=True)

    t0 = time.monotonic()
    managed: dict[str, ManagedRun] = {}
    shared: dict[str, ScaleRun] = {}
    nlbs: dict[str, ScaleRun] = {}
    if not args.skip_a:
        for build in builds:
            print(
                f"A [{build.label}]: per-ELB groups (default), {base_n} Services x {nodes} nodes"
                + (f", then {probe} Services" if probe > base_n else ""),
                flush=True,
            )
            managed[build.label] = managed_run(
                nodes, base_n, probe=probe, window=quiet, workers=args.workers,
                timeout=args.timeout, say=say, build=build,
            )  # fmt: skip
    for nlb, out in ((False, shared), (True, nlbs)):
        if (nlb and not args.nlb) or (not nlb and args.skip_b):
            continue
        for build in builds:
            print(
                f"{'NLB' if nlb else 'B'} [{build.label}]: "
                f"{'NLB Services' if nlb else 'shared ElbSecurityGroup'}, {services} Services x "
                f"{nodes} nodes (baseline batch {base_n}; --concurrent-service-syncs "
                f"{args.workers})",
                flush=True,
            )
            out[build.label] = scale_run(
                nodes, services, base_n, quiet=quiet, workers=args.workers,
                timeout=args.timeout, say=say, build=build, nlb=nlb,
            )  # fmt: skip
    here = builds[0].label
    if here in managed and here in shared:
        report(managed[here], shared[here], nodes)
    other = builds[1].label if len(builds) > 1 else None
    per_lb = sum(n for _, n in UPSTREAM_JOIN_PER_LB)
    rows: list[tuple[str, str]] = []
    if here in shared:
        rows += compare_rows(
            "B. shared ElbSecurityGroup", shared[here], shared.get(other or ""), per_lb
        )
    if nlbs:
        rows += compare_rows(
            "NLB Services", nlbs[here], nlbs.get(other or ""), UPSTREAM_NLB_JOIN_PER_LB
        )
    if other and here in managed and other in managed:
        a, b = managed[here], managed[other]
        rows += [
            (f"A. per-ELB groups [{here} vs {other}]", ""),
            (
                f"  calls per Service on create, {a.base_n}",
                f"{a.base.total / a.base_n:.2f} vs {b.base.total / b.base_n:.2f} "
                f"({ratio(a.base.total, b.base.total)})",
            ),
            (
                f"  node join at {a.base_n}, calls",
                f"{a.base_join.total} vs {b.base_join.total} "
                f"({ratio(a.base_join.total, b.base_join.total)})",
            ),
        ]
    print_rows(rows)
    print(f"wall time {time.monotonic() - t0:.0f} s")


if __name__ == "__main__":
    main()
