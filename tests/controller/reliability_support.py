"""Evidence helpers for the controller reliability tests (``test_reliability.py``).

Plain snapshots of the AWS side (which ELBs and ``k8s-elb-*`` groups exist, what the node
group allows), scraping the controller's ``/metrics``, and waits on the lab's call trail, so
the tests read as outcomes: converged, nothing duplicated, nothing leaked.
"""

from __future__ import annotations

import re
import urllib.request
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from e2e.support import Rule, ingress_rules
from lab.compose import Lab

#: SIGKILL'd or faulted runs leave groups AWS still holds: retry deleting them quickly.
SG_RETRY = ("--sg-delete-retry", "0.2s,60s")
#: Generous bound for anything the controller does in a few seconds on a quiet machine.
CONVERGE_TIMEOUT = 90.0


@dataclass(frozen=True)
class AwsWorld:
    """What the controller created in AWS, read back with plain boto3 calls."""

    elbs: dict[str, tuple[str, ...]]  # ELB name -> its security groups
    registered: dict[str, frozenset[str]]  # ELB name -> registered instance ids
    elb_groups: dict[str, str]  # k8s-elb-* group name -> group id
    node_rules: frozenset[Rule]

    @property
    def orphaned_groups(self) -> set[str]:
        """``k8s-elb-<name>`` groups whose ELB does not exist (or does not use them)."""
        return {
            name
            for name, gid in self.elb_groups.items()
            if gid not in self.elbs.get(name.removeprefix("k8s-elb-"), ())
        }


def aws_world(lab: Lab, ec2: Any, elb: Any) -> AwsWorld:
    assert lab.topology is not None
    descs = elb.describe_load_balancers()["LoadBalancerDescriptions"]
    groups = ec2.describe_security_groups(
        Filters=[{"Name": "vpc-id", "Values": [lab.topology.vpc_id]}]
    )["SecurityGroups"]
    return AwsWorld(
        elbs={d["LoadBalancerName"]: tuple(d.get("SecurityGroups", [])) for d in descs},
        registered={
            d["LoadBalancerName"]: frozenset(i["InstanceId"] for i in d.get("Instances", []))
            for d in descs
        },
        elb_groups={
            g["GroupName"]: g["GroupId"] for g in groups if g["GroupName"].startswith("k8s-elb-")
        },
        node_rules=ingress_rules(ec2, lab.topology.node_security_group.group_id),
    )


def assert_one_per_service(world: AwsWorld, names: Iterable[str], workers: set[str]) -> None:
    """Exactly one ELB and one ``k8s-elb-*`` group per Service, nothing else, nothing orphaned."""
    wanted = set(names)
    assert set(world.elbs) == wanted, f"ELBs {sorted(world.elbs)} != Services' {sorted(wanted)}"
    assert set(world.elb_groups) == {f"k8s-elb-{n}" for n in wanted}, world.elb_groups
    assert world.orphaned_groups == set(), "every k8s-elb-* group is its ELB's"
    for name in wanted:
        assert world.elbs[name] == (world.elb_groups[f"k8s-elb-{name}"],), world.elbs[name]
        assert world.registered[name] == workers, f"{name} registers the workers only"


def assert_nothing_left(world: AwsWorld, node_rules_before: frozenset[Rule]) -> None:
    assert world.elbs == {}, f"ELBs leaked: {sorted(world.elbs)}"
    assert world.elb_groups == {}, f"k8s-elb-* groups leaked: {world.elb_groups}"
    assert world.node_rules == node_rules_before, "node group rules exactly as before"


def group_tags(ec2: Any, group_id: str) -> dict[str, str]:
    group = ec2.describe_security_groups(GroupIds=[group_id])["SecurityGroups"][0]
    return {t["Key"]: t["Value"] for t in group.get("Tags", [])}


def elb_tags(elb: Any, name: str) -> dict[str, str]:
    descs = elb.describe_tags(LoadBalancerNames=[name])["TagDescriptions"]
    return {t["Key"]: t["Value"] for d in descs for t in d.get("Tags", [])}


def ownership_tags(cluster_id: str, service_key: str) -> dict[str, str]:
    """What lets a restarted controller find its resources: cluster ownership + Service."""
    return {
        f"kubernetes.io/cluster/{cluster_id}": "owned",
        "kubernetes.io/service-name": service_key,
    }


# --- metrics ------------------------------------------------------------------------------


def scrape(base_url: str | None) -> str:
    assert base_url, "the controller serves no metrics address"
    with urllib.request.urlopen(f"{base_url}/metrics", timeout=10) as resp:
        return bytes(resp.read()).decode()


_SAMPLE = re.compile(r"^(\w+)(?:\{([^}]*)\})?\s+(\S+)$", re.M)


def metric(text: str, name: str, **labels: str) -> float:
    """Sum of the samples of ``name`` whose labels include ``labels`` (0 when none)."""
    total = 0.0
    for sample, raw_labels, value in _SAMPLE.findall(text):
        if sample != name:
            continue
        have = dict(re.findall(r'(\w+)="([^"]*)"', raw_labels or ""))
        if all(have.get(k) == v for k, v in labels.items()):
            total += float(value)
    return total
