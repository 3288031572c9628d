"""The failure catalog as data: one entry per scenario of ``shared/docs/failure-catalog.md``.

``invoke lab.repro --list`` prints it, the README's catalog table mirrors it, and
``tests/test_catalog.py`` checks that every entry has its module ``e2e/test_<id>.py`` (dashes
become underscores) and every module an entry.

Conformance mode (``pytest e2e --controller-cmd ... --expect fixed|reproduce``): a case that
judges any controller build from AWS, Kubernetes and traffic evidence alone is declared with
:func:`conformance` (which failure, which expectation); a scenario with no such case says why
in :data:`NOT_CONTROLLER_AGNOSTIC`. ``tests/test_catalog.py`` checks that every scenario does
one or the other.

Each scenario also says which of the lab's AWS features it needs (:data:`AWS_NEEDS`: an AWS
API such as ``elb``, or the lab's ``fidelity`` layer or ``elb-model``, see
``lab.aws.proxied.FEATURES``); ``e2e/conftest.py`` marks its cases ``aws_needs``, and on an
endpoint that lacks one (``--aws localstack``) they are skipped with that reason.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Generic, Literal, Protocol, TypeVar

import pytest

if TYPE_CHECKING:
    from lab.compose import Lab
    from lab.traffic.report import TrafficReport


@dataclass(frozen=True)
class Scenario:
    id: str
    title: str
    source: str
    symptom: str
    fix: str
    legacy_switch: str | None = None

    @property
    def module(self) -> str:
        return f"e2e/test_{self.id.replace('-', '_')}.py"


class ReleaseEvidence(Protocol):
    """What a release scenario's steps collect: at least where its requests went."""

    @property
    def traffic(self) -> TrafficReport: ...


E = TypeVar("E", bound=ReleaseEvidence)


class Narrator(Protocol):
    """What a scenario's steps tell ``invoke lab.repro`` (tests pass ``e2e.support.quiet``):
    ``say(text)`` before each step, ``say.result(text)`` with what the step showed. Every step
    says its result (``tests/test_front_door.py`` checks the replays' output)."""

    def __call__(self, text: str) -> None: ...

    def result(self, text: str) -> None: ...


@dataclass(frozen=True)
class ReleaseReplay(Generic[E]):
    """How ``invoke lab.repro`` replays a scenario whose module runs the same steps on a buggy
    and a fixed release of the data plane (seed 004): the module's ``REPLAY``, named by its
    module in ``e2e.repro.RELEASE_SCENARIOS``, so the replay finds the steps by type, not by
    guessing attribute names."""

    buggy: str
    fixed: str
    #: the module's ``run_scenario(lab, say)``: the steps, narrated through ``say``
    run_scenario: Callable[[Lab, Narrator], E]
    assert_reproduced: Callable[[E], None]
    assert_fixed: Callable[[E], None]
    #: the data plane's ``--feature-gates`` for the replay ("" for none)
    gate: str = ""


CATALOG: tuple[Scenario, ...] = (
    Scenario(
        "k8s-84926",
        "extra security group mistaken for the ELB's own group",
        "seed 000; kubernetes#84926, PR #92224, #84265; cloud-provider-aws #752",
        "node group's self rule revoked; ELB group never let in; DependencyViolation, SG leak",
        "ELB group chosen by kind, not position; only its rules touched",
        "k8s-84926",
    ),
    Scenario(
        "k8s-84256",
        "groups named in annotations deleted with the Service",
        "kubernetes#84256, cloud-provider-aws#67; PR #84265",
        "a user's cluster-tagged group is deleted",
        "annotated, untagged and ElbSecurityGroup groups never deleted",
        "k8s-84256",
    ),
    Scenario(
        "provided-node-ip",
        "kubelet's node IP is not a cloud address",
        "seed 000",
        "node stays tainted; 'failed to get node address ... matches ip', retried for ever",
        "instance carries the node IP, or `invoke lab.nodes.fix-ip`",
    ),
    Scenario(
        "legacy-node-role",
        "the only node is excluded from the load balancer",
        "seed 000; LegacyNodeRoleBehavior, kubeadm exclusion label",
        "ELB with zero instances; Warning UnAvailableLoadBalancer",
        "`invoke lab.nodes.include`, or the gate off",
        "legacy-node-role",
    ),
    Scenario(
        "imds-required",
        "the controller needs instance metadata to start",
        "seed 000",
        "exits at start-up",
        "the lab's metadata service, or [Global] Region/VPC/SubnetID/KubernetesClusterID",
    ),
    Scenario(
        "node-name-private-dns",
        "node names must equal the EC2 private DNS name",
        "seed 003; cloud-provider-aws #63, #335, #384, #1471",
        "a node named otherwise stays uninitialized",
        "providerID first, i-... names parsed, name lookup last; lookup errors never delete",
        "node-name-private-dns",
    ),
    Scenario(
        "lb-walkthrough",
        "the Service-to-ELB path and its configuration switches (and shared-elb-sg)",
        "seed 001; kops#4197",
        "(walkthrough) and: deleting one Service revokes a shared ElbSecurityGroup's node rule",
        "upstream call sequence asserted; shared rule kept while another ELB uses it",
        "shared-elb-sg",
    ),
    Scenario(
        "node-lifecycle",
        "nodes whose instances stop or disappear (and k8s-81636)",
        "upstream-ccm §5.3; kubernetes#81636",
        "a new node deleted on an eventually consistent lookup miss",
        "shutdown taint / deletion as upstream; no deletion inside a grace period",
        "k8s-81636",
    ),
    Scenario(
        "transient-node-predicates",
        "nodes cut from the ELB without draining",
        "seed 004; kubernetes#110195, KEP-3458",
        "a NotReady node is deregistered at once",
        "stable node set: readiness left to the ELB health check",
        "transient-node-predicates",
    ),
    Scenario(
        "k8s-109414",
        "a Failed pod stays a ready endpoint; its reused IP answers for another Service",
        "seed 004; kubernetes#109414, #108594; fixes #110255, #110256 (1.22.11)",
        "Service A's requests answered by namespace B's pod",
        "terminal pods marked not ready and never published",
    ),
    Scenario(
        "k8s-109718",
        "a pod on a gracefully shut-down node stays a ready endpoint",
        "seed 004; kubernetes#109718, #108594, #109998; fixes #110255, #110256 (1.22.11)",
        "a share of the ELB's requests sent to the dead pod and lost",
        "the killed pod marked not ready and never published",
    ),
    Scenario(
        "k8s-110309",
        "readiness probes stop during termination; a pod that stopped listening stays serving",
        "seed 004; kubernetes#110309; fix #110191 (1.22.11, 1.23.8, 1.24.2); KEP-1669",
        "with the Local fallback on, the rolling node's connections refused by the quitter",
        "probes run while terminating; the quitter turns not serving, the drainer gets them",
    ),
    Scenario(
        "k8s-110195",
        "the ELB keeps sending traffic to a node the cluster autoscaler is removing",
        "seed 004; kubernetes#110195; KEP-3836 (1.30 beta, 1.31 GA), KEP-3458",
        "the tainted, drained node InService with its share of requests until it goes",
        "kube-proxy /healthz 503 on the tainted node + Shared probe mode: OutOfService first",
    ),
    Scenario(
        "k8s-57568",
        "an NLB Service's node rules stay open after it is deleted",
        "kubernetes#57568; PR #57569 (#81610: same symptom, mechanism unconfirmed)",
        "the revoke refused (empty Ipv6Ranges) after the NLB is gone; the retry returns early; "
        "the deleted Service's node port still open to the world",
        "node rules revoked first, one CIDR per rule, also when the NLB is already gone",
        "k8s-57568",
    ),
    Scenario(
        "k8s-70421",
        "an NLB Service's port change leaves the old port open (and a node change closes it)",
        "kubernetes#70421, #60825, #64148; PR #68422, #74692",
        "old node port still open from the client CIDR; an unchanged sync revokes the NLB's "
        "rules, cutting its clients until the next sync",
        "the node rules become exactly the wanted ports, whatever the group lists",
        "k8s-70421",
    ),
    Scenario(
        "k8s-98278",
        "a node joining revokes a user's all-traffic self rule with an NLB rule",
        "kubernetes#98278, #64148; upstream to v1.33.0",
        "the node group's self rule revoked with the described rule EC2 lists beside it; "
        "node to API server traffic denied",
        "only the described CIDR rule is revoked; group and prefix-list sources never",
        "k8s-98278",
    ),
    Scenario(
        "debug-attach",
        "stopping inside the controller",
        "seed 002",
        "(capability) a debugger must stop the controller in its Service sync",
        "`invoke lab.debug` + a DAP client: breakpoint, evaluate, continue",
    ),
)


#: The lab's AWS features (``lab.aws.proxied.FEATURES``) each scenario's cases need; a case
#: needing one the endpoint lacks is skipped with the reason (``aws_needs`` marker).
#: ``elb-model``: the scenario reads ELB instance health or sends requests (``lab.traffic``).
_LB = ("elb", "elb-model")
AWS_NEEDS: dict[str, tuple[str, ...]] = {
    "k8s-84926": (*_LB, "fidelity"),  # DependencyViolation, the ELB group order
    "k8s-84256": _LB,
    "provided-node-ip": _LB,  # the traffic consequence (no node to answer)
    "legacy-node-role": _LB,
    "imds-required": (),
    "node-name-private-dns": _LB,  # the traffic consequence
    "lb-walkthrough": _LB,
    "node-lifecycle": _LB,
    "transient-node-predicates": _LB,
    "k8s-109414": _LB,
    "k8s-109718": _LB,
    "k8s-110309": _LB,
    "k8s-110195": _LB,
    "debug-attach": ("elb",),  # the breakpoint is in the Service sync
    "k8s-57568": ("elbv2", "fidelity", "elb-model"),  # the refused revoke; sgeval verdicts
    "k8s-70421": ("elbv2", "elb-model"),
    "k8s-98278": ("elbv2", "elb-model"),
}


def scenario_of(module_file: str) -> Scenario | None:
    """The scenario whose module is ``module_file`` (``e2e/test_<id>.py``, relative or an
    absolute path ending so), if any."""
    path = module_file.replace("\\", "/")
    for scenario in CATALOG:
        if path == scenario.module or path.endswith("/" + scenario.module):
            return scenario
    return None


def by_id(scenario_id: str) -> Scenario:
    for scenario in CATALOG:
        if scenario.id == scenario_id:
            return scenario
    known = ", ".join(s.id for s in CATALOG)
    raise KeyError(f"no scenario {scenario_id!r}; the catalog has: {known}")


def failure_ids() -> frozenset[str]:
    """The documented failures: each scenario's id and the failure its legacy switch stands
    for (``lb-walkthrough`` documents ``shared-elb-sg``, ``node-lifecycle`` ``k8s-81636``)."""
    ids = {s.id for s in CATALOG}
    ids |= {s.legacy_switch for s in CATALOG if s.legacy_switch}
    return frozenset(ids)


def conformance(*, failure: str, expect: Literal["fixed", "reproduce"]) -> pytest.MarkDecorator:
    """Declare a case controller-agnostic: it checks the documented ``failure`` and passing
    shows the build ``fixed`` or that it shows the failure (``reproduce``). Any flags of our
    controller the case passes are dropped when another build runs in conformance mode, so
    the case must judge from evidence any build leaves, never from our log lines, and its
    verdict must not hang on our timing flags (they only make it faster)."""
    if failure not in failure_ids():
        raise ValueError(
            f"conformance(failure={failure!r}): not a documented failure; the catalog has "
            + ", ".join(sorted(failure_ids()))
        )
    if expect not in ("fixed", "reproduce"):
        raise ValueError(f"conformance(expect={expect!r}): 'fixed' or 'reproduce'")
    return pytest.mark.conformance(failure=failure, expect=expect)


#: Scenarios without a controller-agnostic case, and why (conformance mode runs none of them).
NOT_CONTROLLER_AGNOSTIC: dict[str, str] = {
    "provided-node-ip": "the symptom is judged from our controller's log line (the node "
    "address mismatch), retried; the Node's state alone does not tell it from a slow start",
    "imds-required": "judged from our controller's exit and its start-up log lines",
    "node-name-private-dns": "judged from SyncNodeFailed events for the lookup error; "
    "upstream's cloud-node controller emits that reason on address patch errors, and whether "
    "it does for a failed instance lookup is not yet checked; the lookup-error case reads our "
    "log",
    "node-lifecycle": "the k8s-81636 cases count our log lines and need our node-monitor "
    "period to finish in seconds",
    "k8s-109414": "a kubelet/endpoints bug of a Kubernetes release; no controller build changes it",
    "k8s-109718": "a kubelet/endpoints bug of a Kubernetes release; no controller build changes it",
    "k8s-110309": "a kubelet/kube-proxy bug of a Kubernetes release; no controller build "
    "changes it",
    "k8s-110195": "decided by kube-proxy's health check and the release's gates; the case "
    "needs our fast node-lifecycle flags",
    "debug-attach": "a capability of our controller (a Python debugger), not a failure",
}
