"""Reliability of the controller process against the lab (issue 4, "Done when").

Every test runs the real thing: ``python -m controller`` as a child process, the Kubernetes
API simulator, the lab's AWS endpoint (moto + fidelity layer + trail + faults). Each asserts
outcomes (converged, nothing duplicated, nothing leaked, who called AWS) and waits on
conditions with generous timeouts; none asserts how long something took.

* AWS faults: ``Throttling`` (400) and ``InternalError`` (500) on a seeded ~30 % of calls while
  five Services are created and deleted with three service workers.
* Crash consistency: SIGKILL with the ELB's group made and ``CreateLoadBalancer`` either in
  flight (AWS completes it unseen) or refused, and after ``DeleteLoadBalancer`` while the
  group cannot be deleted yet; the restarted controller finds what it made by name and
  ownership tags and finishes: one group, one ELB, or nothing left and the finalizer gone.
* Watches: streams closed and history compacted (410 on the re-watch) while Services are
  created; the informer relists and no Service is missed.
* Leader election: two replicas, told apart on the trail by the standard
  ``AWS_SDK_UA_APP_ID`` (User-Agent ``app/<id>``); only the leader touches AWS; SIGKILL the
  leader and the standby takes over and serves new Services.

No kubelet stand-in hooks are used (no ``standin`` marker); the watch test needs the API
simulator's control plane and skips without it.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from typing import Any

import pytest
from botocore.exceptions import ClientError
from kubernetes import client

from e2e.support import (
    FINALIZER,
    create_service,
    elb_name,
    finalizers,
    get_service,
    group_exists,
    is_mutating,
    lb_service,
    wait_for,
    wait_gone,
    wait_hostname,
)
from lab.compose import Lab
from lab.controllerproc import ControllerProcess
from tests.controller.reliability_support import (
    CONVERGE_TIMEOUT,
    SG_RETRY,
    assert_nothing_left,
    assert_one_per_service,
    aws_world,
    elb_tags,
    group_tags,
    metric,
    ownership_tags,
    scrape,
)

log = logging.getLogger(__name__)


def _aws(lab: Lab) -> Any:
    assert lab.aws is not None
    return lab.aws


@pytest.fixture(autouse=True)
def _no_leftover_faults(lab: Lab) -> Any:
    """Faults never outlive a test (the next reset clears them too)."""
    yield
    _aws(lab).control.clear_faults()


def _workers(lab: Lab) -> set[str]:
    return {n.instance_id for n in lab.workers}


def _converged(core: Any, elb: Any, names: dict[str, str], workers: set[str]) -> None:
    """Every Service has its hostname and its ELB registers exactly the workers."""
    for svc in names:
        wait_hostname(core, svc, timeout=CONVERGE_TIMEOUT)

    def registered() -> bool:
        try:  # the test's own reads meet the injected faults too
            descs = elb.describe_load_balancers()["LoadBalancerDescriptions"]
        except ClientError:
            return False
        have = {d["LoadBalancerName"]: {i["InstanceId"] for i in d["Instances"]} for d in descs}
        return all(have.get(lb) == workers for lb in names.values())

    wait_for(registered, timeout=CONVERGE_TIMEOUT, what="every ELB to register the workers")


# --- a. AWS throttling and 5xx ------------------------------------------------------------------


def test_converges_under_aws_faults_without_duplicates_or_leaks(
    lab: Lab, core_v1: Any, ec2: Any, elb: Any, trail: Any
) -> None:
    aws = _aws(lab)
    node_rules_before = aws_world(lab, ec2, elb).node_rules
    lab.start_controller(args=[*SG_RETRY, "--concurrent-service-syncs", "3"])
    # After start-up (so the controller's own identity lookup is not the one that fails).
    aws.control.add_fault(action="*", code="Throttling", probability=0.15, seed=4)
    aws.control.add_fault(action="*", code="InternalError", probability=0.15, seed=5)
    mark = trail.last_seq

    names = {
        f"svc{i}": elb_name(create_service(core_v1, lb_service(f"svc{i}", ports=(80, 443))))
        for i in range(5)
    }
    _converged(core_v1, elb, names, _workers(lab))
    aws.control.clear_faults()  # read the outcome without faults
    world = aws_world(lab, ec2, elb)
    assert_one_per_service(world, names.values(), _workers(lab))
    for svc in names:
        assert FINALIZER in finalizers(core_v1, svc)

    aws.control.add_fault(action="*", code="Throttling", probability=0.15, seed=6)
    aws.control.add_fault(action="*", code="InternalError", probability=0.15, seed=7)
    for svc in names:
        core_v1.delete_namespaced_service(svc, "default")
    for svc in names:
        wait_gone(core_v1, svc, timeout=CONVERGE_TIMEOUT)
    aws.control.clear_faults()
    assert_nothing_left(aws_world(lab, ec2, elb), node_rules_before)

    # The faults really hit the controller's calls, mutating ones included, and each kind
    # of resource was created exactly once per Service despite the retries.
    injected = trail.calls(injected=True, since_seq=mark)
    log.info("%d of %d AWS calls were faulted", len(injected), len(trail.calls(since_seq=mark)))
    assert {e.error_code for e in injected} == {"Throttling", "InternalError"}
    assert any(is_mutating(e.action) for e in injected), [e.action for e in injected]
    assert trail.count("CreateLoadBalancer", ok=True, since_seq=mark) == 5
    assert trail.count("CreateSecurityGroup", ok=True, since_seq=mark) == 5
    assert trail.count("DeleteLoadBalancer", ok=True, since_seq=mark) == 5
    assert trail.count("DeleteSecurityGroup", ok=True, since_seq=mark) == 5


# --- b. SIGKILL mid-create and mid-delete -------------------------------------------------------


@pytest.mark.parametrize("crash", ["create-in-flight", "create-refused"])
def test_sigkill_while_creating_then_restart_converges_to_one_of_each(
    crash: str, lab: Lab, core_v1: Any, ec2: Any, elb: Any, trail: Any
) -> None:
    """Killed with its group made and the ELB either being created (AWS completes the call
    the dead controller never saw answered) or refused (no ELB at all)."""
    aws = _aws(lab)
    ctl = lab.start_controller(args=SG_RETRY)
    mark = trail.last_seq
    if crash == "create-in-flight":
        rule = aws.control.add_latency(action="CreateLoadBalancer", latency_ms=3000, count=1)
    else:
        rule = aws.control.add_fault(action="CreateLoadBalancer", code="InternalError")
    name = elb_name(create_service(core_v1, lb_service("crash")))

    def reached_aws() -> bool:
        found = next((r for r in aws.control.faults() if r.id == rule.id), None)
        return found is not None and found.fired >= 1

    wait_for(reached_aws, timeout=CONVERGE_TIMEOUT, what="CreateLoadBalancer to reach AWS")
    assert trail.count("CreateSecurityGroup", ok=True, since_seq=mark) == 1
    assert trail.count("CreateLoadBalancer", ok=True, since_seq=mark) == 0
    ctl.kill()
    aws.control.clear_faults()
    if crash == "create-in-flight":
        wait_for(
            lambda: trail.count("CreateLoadBalancer", ok=True, since_seq=mark) == 1,
            timeout=CONVERGE_TIMEOUT,
            what="the orphaned CreateLoadBalancer to complete",
        )
        assert set(aws_world(lab, ec2, elb).elbs) == {name}
    else:
        assert aws_world(lab, ec2, elb).elbs == {}
    assert set(aws_world(lab, ec2, elb).elb_groups) == {f"k8s-elb-{name}"}
    assert get_service(core_v1, "crash").status.load_balancer.ingress is None

    lab.start_controller(args=SG_RETRY)
    _converged(core_v1, elb, {"crash": name}, _workers(lab))
    world = aws_world(lab, ec2, elb)
    assert_one_per_service(world, [name], _workers(lab))
    assert trail.count("CreateSecurityGroup", since_seq=mark) == 1, "group found, not remade"
    assert trail.count("CreateLoadBalancer", ok=True, since_seq=mark) == 1, "one ELB made"
    owned = ownership_tags(lab.config.cluster_id, "default/crash")
    assert owned.items() <= group_tags(ec2, world.elb_groups[f"k8s-elb-{name}"]).items()
    assert owned.items() <= elb_tags(elb, name).items()


def test_sigkill_while_deleting_then_restart_removes_group_and_finalizer(
    lab: Lab, core_v1: Any, ec2: Any, elb: Any, trail: Any
) -> None:
    aws = _aws(lab)
    node_rules_before = aws_world(lab, ec2, elb).node_rules
    ctl = lab.start_controller(args=SG_RETRY)
    name = elb_name(create_service(core_v1, lb_service("doomed")))
    _converged(core_v1, elb, {"doomed": name}, _workers(lab))
    group = aws_world(lab, ec2, elb).elb_groups[f"k8s-elb-{name}"]
    owned = ownership_tags(lab.config.cluster_id, "default/doomed")
    assert owned.items() <= group_tags(ec2, group).items(), "how a restart finds it again"

    # AWS keeps the group "in use" after the ELB is gone (ENI detach lag), for as long as
    # this rule stands: the controller is stuck retrying DeleteSecurityGroup when killed.
    aws.control.add_fault(action="DeleteSecurityGroup", code="DependencyViolation", status=400)
    mark = trail.last_seq
    core_v1.delete_namespaced_service("doomed", "default")
    wait_for(
        lambda: trail.count("DeleteSecurityGroup", injected=True, since_seq=mark) >= 1,
        timeout=CONVERGE_TIMEOUT,
        what="DeleteSecurityGroup refused after DeleteLoadBalancer",
    )
    ctl.kill()
    assert trail.count("DeleteLoadBalancer", ok=True, since_seq=mark) == 1
    assert aws_world(lab, ec2, elb).elbs == {}
    assert group_exists(ec2, group), "the group outlived the controller"
    assert FINALIZER in finalizers(core_v1, "doomed"), "so the finalizer still holds"

    aws.control.clear_faults()
    lab.start_controller(args=SG_RETRY)
    wait_gone(core_v1, "doomed", timeout=CONVERGE_TIMEOUT)
    assert not group_exists(ec2, group), "found by name and cluster tag, and deleted"
    assert_nothing_left(aws_world(lab, ec2, elb), node_rules_before)
    assert trail.count("DeleteSecurityGroup", ok=True, since_seq=mark) == 1


# --- c. dropped watches and 410 Gone ------------------------------------------------------------


def test_dropped_and_expired_watches_relist_and_miss_nothing(
    lab: Lab, core_v1: Any, ec2: Any, elb: Any
) -> None:
    if lab.cluster.kind != "sim":
        pytest.skip("needs the API simulator's control plane (close_watches, compact)")
    kube = lab.sim.kube.control
    ctl = lab.start_controller()
    names = {"w0": elb_name(create_service(core_v1, lb_service("w0")))}
    wait_hostname(core_v1, "w0", timeout=CONVERGE_TIMEOUT)
    relists_before = metric(scrape(ctl.url), "ccm_informer_relists_total", kind="services")
    assert relists_before >= 1, "the first list counts"

    # History compacted and streams cut: the re-watch from the old resourceVersion gets 410,
    # and the relist is held back while two more Services are created, so only a correct
    # relist (not the watch) can deliver them. A write elsewhere first moves the store's
    # revision past the informer's (a watch from exactly the compacted revision is valid).
    core_v1.create_namespaced_config_map("default", {"metadata": {"name": "bump"}})
    kube.compact()
    kube.add_latency(verb="list", resource="services", latency_ms=1500, count=1)
    assert kube.close_watches("services") >= 1, "the controller was watching Services"
    for svc in ("w1", "w2"):
        names[svc] = elb_name(create_service(core_v1, lb_service(svc)))
    wait_for(
        lambda: (
            metric(scrape(ctl.url), "ccm_informer_relists_total", kind="services") > relists_before
        ),
        timeout=CONVERGE_TIMEOUT,
        what="the services informer to relist after 410",
    )
    # Every stream dropped again, without compaction: the informer resumes where it was.
    assert kube.close_watches() >= 1
    names["w3"] = elb_name(create_service(core_v1, lb_service("w3")))

    _converged(core_v1, elb, names, _workers(lab))
    assert_one_per_service(aws_world(lab, ec2, elb), names.values(), _workers(lab))
    log = ctl.log_text()
    assert "expired" in log, "the controller logged the 410"
    assert "relisting" in log


# --- d. leader election ---------------------------------------------------------------------------

#: Short, but with room for a loaded machine: a leader that misses its renew deadline exits.
LEASE_SECONDS = 5.0
LEADER_ARGS = (
    "--leader-elect",
    "--leader-elect-lease-duration",
    f"{LEASE_SECONDS:g}s",
    "--leader-elect-renew-deadline",
    "4s",
    "--leader-elect-retry-period",
    "0.5s",
)


def _replica(lab: Lab, ident: str) -> ControllerProcess:
    spec = lab.controller_spec(args=[*LEADER_ARGS, "--leader-elect-identity", ident])
    # botocore's standard app id: the replica's User-Agent carries ``app/<ident>``.
    return ControllerProcess(dataclasses.replace(spec, env={"AWS_SDK_UA_APP_ID": ident}))


def _holder(lab: Lab) -> str:
    api = client.CoordinationV1Api(lab.api_client())
    try:
        lease = api.read_namespaced_lease("cloud-controller-manager", "kube-system")
    except client.ApiException as exc:
        if exc.status == 404:
            return ""
        raise
    return str((lease.spec and lease.spec.holder_identity) or "")


def _callers(trail: Any, since: int, *, mutating: bool) -> set[str]:
    """The replicas (``app/<id>`` in the User-Agent) that made calls since ``since``."""
    out = set()
    for e in trail.calls(since_seq=since):
        if mutating and not is_mutating(e.action):
            continue
        for ident in ("replica-a", "replica-b"):
            if f"app/{ident}" in (e.user_agent or ""):
                out.add(ident)
    return out


def test_only_the_leader_mutates_and_the_standby_takes_over(
    lab: Lab, core_v1: Any, elb: Any, trail: Any
) -> None:
    a, b = _replica(lab, "replica-a"), _replica(lab, "replica-b")
    try:
        start = trail.last_seq
        a.start()
        wait_for(lambda: _holder(lab) == "replica-a", timeout=CONVERGE_TIMEOUT, what="A leads")
        b.start()  # ready as a standby
        mark = trail.last_seq
        first = elb_name(create_service(core_v1, lb_service("le1")))
        _converged(core_v1, elb, {"le1": first}, _workers(lab))
        assert _callers(trail, mark, mutating=True) == {"replica-a"}
        assert _callers(trail, start, mutating=False) == {"replica-a", "replica-b"}, (
            "both replicas are visible on the trail (B's start-up lookups), so B's absence "
            "from the mutations above means something"
        )
        assert _holder(lab) == "replica-a"
        assert "controllers running" in a.log_text()
        assert "controllers running" not in b.log_text(), "the standby never started syncing"
        assert "replica-a became leader" in a.log_text()
        assert metric(scrape(a.url), "ccm_leader") == 1.0
        assert metric(scrape(b.url), "ccm_leader") == 0.0

        a.kill()
        killed = time.monotonic()
        wait_for(
            lambda: _holder(lab) == "replica-b",
            timeout=LEASE_SECONDS + 30,  # lease expiry plus generous slack on a loaded machine
            what="B to take the lease over",
        )
        log.info("takeover %.2fs after SIGKILL of the leader", time.monotonic() - killed)
        mark = trail.last_seq
        second = elb_name(create_service(core_v1, lb_service("le2")))
        _converged(core_v1, elb, {"le2": second}, _workers(lab))
        assert _callers(trail, mark, mutating=True) == {"replica-b"}
        assert "replica-b became leader" in b.log_text()
        assert "controllers running" in b.log_text()
        assert b.running
        assert metric(scrape(b.url), "ccm_leader") == 1.0
    finally:
        for replica in (a, b):
            replica.kill()
            replica.stop()
