"""node-lifecycle: nodes whose instances stop or disappear (and k8s-81636).

Source: upstream behaviour (``shared/docs/reference/upstream-ccm.md`` §5.3): the cloud node
lifecycle controller checks every NotReady node every ``--node-monitor-period`` (5 s):

* instance terminated or gone → the Node is deleted (Normal event ``DeletingNode``);
* instance stopped → taint ``node.cloudprovider.kubernetes.io/shutdown:NoSchedule``, removed
  when the node is Ready again;
* the lookup fails → nothing happens (logged): an error is not proof of absence.

``k8s-81636`` (kubernetes#81636, #58334, #63226): EC2 lookups are eventually consistent, and a
node whose instance cannot be found seconds after it registered was deleted at once. Fixed: a
lookup miss within a grace period after node creation (``--node-deletion-grace-period``) is
not a deletion.

Stand-ins on sim: the kubelet stand-in stops heartbeating a node whose instance stops (Ready
goes Unknown after its grace period, as kube-controller-manager's node lifecycle would set
it); it reports NotReady for a freshly registered node (as a kubelet does before its network
is up). On kind the real kubelet and kube-controller-manager do both.
"""

from __future__ import annotations

from typing import Any

import pytest

from e2e.support import (
    create_service,
    events_for,
    get_service,
    lb_service,
    node_taint_keys,
    wait_for,
    wait_hostname,
)
from e2e.workloads import assert_pod_answers, create_pod, wait_pods_answer, wait_running
from lab.cluster.kubelet import NodeRegistration
from lab.compose import Lab

pytestmark = pytest.mark.standin(
    "stops a kubelet's heartbeats and registers a node for a missing instance"
)


SHUTDOWN = "node.cloudprovider.kubernetes.io/shutdown"
FAST = ("--node-monitor-period", "0.3s", "--node-deletion-grace-period", "1s")
NEW_NODE = "ccm-lab-worker-new"
MISSING_INSTANCE = "aws:///us-east-1a/i-0feedfacecafe0001"


def _node_or_none(core: Any, name: str) -> Any:
    try:
        return core.read_node(name)
    except Exception as exc:  # kubernetes.client.ApiException
        if getattr(exc, "status", None) == 404:
            return None
        raise


def _not_ready(core: Any, name: str) -> bool:
    node = _node_or_none(core, name)
    return node is not None and any(
        c.type == "Ready" and c.status != "True" for c in node.status.conditions
    )


def _kubelet(lab: Lab) -> Any:
    assert lab.sim.kubelet is not None
    return lab.sim.kubelet


def serve_on_every_worker(lab: Lab, core: Any) -> None:
    """A LoadBalancer Service ``web`` with one pod on each worker, answering through its ELB."""
    create_service(core, lb_service("web"))
    for i, worker in enumerate(lab.workers):
        create_pod(core, f"web-{i}", namespace="default", app="web", node=worker.name)
        wait_running(lab, core, f"web-{i}", "default")
    wait_hostname(core, "web", timeout=30)
    wait_pods_answer(lab, "web", len(lab.workers))


def assert_no_traffic_reaches(lab: Lab, worker_index: int, why: str) -> None:
    """The ELB sends nothing through that worker's instance (the lab's only worker: every
    request is dropped at the ELB, ``why`` naming the cause)."""
    gone = lab.workers[worker_index]

    def settled() -> Any:
        report = lab.traffic.send("web", requests=100, seed=3)
        ok = gone.instance_id not in report.instances and any(
            why in reason for _, reason in report.dropped
        )
        return report if ok or len(lab.workers) > 1 else None

    report = wait_for(settled, timeout=30, what=f"the ELB keeping traffic off {gone.name}")
    assert f"default/web-{worker_index}" not in report.answered, report.to_json()
    if len(lab.workers) == 1:
        assert report.answered_total == 0, report.to_json()
        ((hop, reason),) = report.dropped
        assert hop == "elb", report.to_json()
        assert why in reason, report.to_json()


def test_stopped_instance_gets_the_shutdown_taint_until_ready(
    lab: Lab, core_v1: Any, ec2: Any
) -> None:
    worker = lab.workers[0]
    lab.start_controller(args=FAST)
    serve_on_every_worker(lab, core_v1)
    ec2.stop_instances(InstanceIds=[worker.instance_id])
    _kubelet(lab).stop_heartbeat(worker.name)
    wait_for(lambda: _not_ready(core_v1, worker.name), timeout=20, what="NotReady")
    wait_for(
        lambda: SHUTDOWN in node_taint_keys(core_v1.read_node(worker.name)),
        timeout=20,
        what="the shutdown taint",
    )
    assert _node_or_none(core_v1, worker.name) is not None, "a stopped instance is not deleted"
    taint = next(t for t in core_v1.read_node(worker.name).spec.taints if t.key == SHUTDOWN)
    assert taint.effect == "NoSchedule"
    assert_no_traffic_reaches(lab, 0, "no InService instance")
    # Started again and Ready: the taint goes.
    ec2.start_instances(InstanceIds=[worker.instance_id])
    _kubelet(lab).resume_heartbeat(worker.name)
    wait_for(
        lambda: SHUTDOWN not in node_taint_keys(core_v1.read_node(worker.name)),
        timeout=20,
        what="the shutdown taint removed",
    )
    assert_pod_answers(lab)  # the pod on the restarted node answers again


def test_terminated_instance_deletes_the_node(lab: Lab, core_v1: Any, ec2: Any) -> None:
    worker = lab.workers[0]
    lab.start_controller(args=FAST)
    serve_on_every_worker(lab, core_v1)
    ec2.terminate_instances(InstanceIds=[worker.instance_id])
    _kubelet(lab).stop_heartbeat(worker.name)
    wait_for(lambda: _node_or_none(core_v1, worker.name) is None, timeout=30, what="node deleted")
    events = events_for(core_v1, "Node", worker.name)
    deleting = [e for e in events if e.reason == "DeletingNode"]
    assert deleting
    assert deleting[0].type == "Normal"
    assert "does not exist in the cloud provider" in deleting[0].message
    assert_no_traffic_reaches(lab, 0, "has no registered instance")


def test_lookup_error_deletes_nothing(lab: Lab, core_v1: Any) -> None:
    worker = lab.workers[0]
    aws = lab.aws
    assert aws is not None
    lab.start_controller(args=FAST)
    aws.control.add_fault(
        action="DescribeInstances",
        code="InternalError",
        status=500,
        count=1000,
        caller="ccm-lab-controller",  # the controller's lookups only, not the metadata service
    )
    _kubelet(lab).stop_heartbeat(worker.name)
    wait_for(lambda: _not_ready(core_v1, worker.name), timeout=20, what="NotReady")
    ctl = lab.controller
    assert ctl is not None
    wait_for(
        lambda: ctl.log_text().count(f"error checking if node {worker.name} exists") >= 3,
        timeout=20,
        what="three failed lifecycle checks",
    )
    node = core_v1.read_node(worker.name)
    assert node.metadata.deletion_timestamp is None
    assert SHUTDOWN not in node_taint_keys(node)
    assert "DeletingNode" not in [e.reason for e in events_for(core_v1, "Node", worker.name)]
    assert aws.trail.count("DescribeInstances", error_code="InternalError") >= 3


def _register_new_node(lab: Lab) -> None:
    """A node that just registered; EC2 does not show its instance yet."""
    kubelet = _kubelet(lab)
    kubelet.register(
        NodeRegistration(
            name=NEW_NODE, ip="10.0.0.99", version=lab.version, provider_id=MISSING_INSTANCE
        )
    )
    kubelet.report_not_ready(NEW_NODE)


def test_reproduce_k8s_81636_new_node_deleted_on_first_miss(lab: Lab, core_v1: Any) -> None:
    lab.start_controller(legacy=["k8s-81636"], args=("--node-monitor-period", "0.3s"))
    _register_new_node(lab)
    wait_for(lambda: _node_or_none(core_v1, NEW_NODE) is None, timeout=20, what="deletion")
    assert "DeletingNode" in [e.reason for e in events_for(core_v1, "Node", NEW_NODE)]


def test_fixed_k8s_81636_miss_within_grace_period_is_not_deletion(lab: Lab, core_v1: Any) -> None:
    lab.start_controller(args=("--node-monitor-period", "0.3s"))
    _register_new_node(lab)
    ctl = lab.controller
    assert ctl is not None
    wait_for(
        lambda: ctl.log_text().count(f"node {NEW_NODE} not found in the cloud") >= 3,
        timeout=20,
        what="three lifecycle checks inside the grace period",
    )
    assert _node_or_none(core_v1, NEW_NODE) is not None
    assert "DeletingNode" not in [e.reason for e in events_for(core_v1, "Node", NEW_NODE)]
    with pytest.raises(AssertionError):
        assert get_service(core_v1, "none") is not None  # sanity: helper sees absence
