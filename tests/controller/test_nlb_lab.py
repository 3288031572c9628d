"""An NLB Service on a sim lab, end to end through the controller process: the Service is
created with the official client, the controller builds the NLB (its calls read from the lab's
trail), the status gets the NLB's hostname, and deleting the Service leaves nothing the
controller made (NLB, target groups, node rules) while a user's rule on the node group stays.

Traffic through the NLB is judged in ``tests/traffic/test_nlb_traffic.py``."""

from __future__ import annotations

import re
from typing import Any

from controller.aws.annotations import A_TYPE
from e2e.support import (
    controller_calls,
    create_service,
    ingress_rules,
    lb_service,
    wait_for,
    wait_gone,
    wait_hostname,
)
from lab.compose import Lab

NLB_HOST = re.compile(r"^a[0-9a-f]{31}-[0-9a-f]{16}\.elb\.us-east-1\.amazonaws\.com$")
ELBV2_OR_RULES = (
    "CreateLoadBalancer",
    "CreateTargetGroup",
    "RegisterTargets",
    "CreateListener",
    "ModifyLoadBalancerAttributes",
    "AuthorizeSecurityGroupIngress",
    "RevokeSecurityGroupIngress",
    "DeleteLoadBalancer",
    "DeleteTargetGroup",
    "DeregisterTargets",
    "ModifyListener",
    "ModifyTargetGroup",
)


def changes(calls: list[Any]) -> list[str]:
    return [e.action for e in calls if e.action in ELBV2_OR_RULES and not e.error_code]


def test_nlb_service_lifecycle_on_sim(lab: Lab, core_v1: Any, ec2: Any) -> None:
    aws = lab.aws
    assert aws is not None
    assert lab.topology is not None
    elbv2 = aws.client("elbv2")
    node_group = lab.topology.node_security_group.group_id
    user_rule = {
        "IpProtocol": "tcp",
        "FromPort": 22,
        "ToPort": 22,
        "IpRanges": [{"CidrIp": "198.51.100.0/24", "Description": "ssh from the office"}],
    }
    ec2.authorize_security_group_ingress(GroupId=node_group, IpPermissions=[user_rule])
    rules_before = ingress_rules(ec2, node_group)
    mark = aws.trail.last_seq
    lab.start_controller()

    create_service(core_v1, lb_service("web", annotations={A_TYPE: "nlb"}))
    hostname = wait_hostname(core_v1, "web", timeout=60)

    [nlb] = elbv2.describe_load_balancers()["LoadBalancers"]
    assert nlb["Type"] == "network"
    assert hostname == nlb["DNSName"]
    assert NLB_HOST.match(hostname), hostname
    [tg] = elbv2.describe_target_groups()["TargetGroups"]
    assert tg["TargetGroupName"].startswith("k8s-default-web-")
    targets = elbv2.describe_target_health(TargetGroupArn=tg["TargetGroupArn"])
    registered = {d["Target"]["Id"] for d in targets["TargetHealthDescriptions"]}
    assert registered == {w.instance_id for w in lab.workers}, "workers only"
    created = controller_calls(aws.trail, since_seq=mark)
    assert changes(created) == [
        "CreateLoadBalancer",
        "CreateTargetGroup",
        "RegisterTargets",
        "CreateListener",
        "AuthorizeSecurityGroupIngress",
    ]
    descriptions = {
        r.get("Description", "")
        for p in ec2.describe_security_groups(GroupIds=[node_group])["SecurityGroups"][0][
            "IpPermissions"
        ]
        for r in p.get("IpRanges", [])
    }
    assert f"kubernetes.io/rule/nlb/client={nlb['LoadBalancerName']}" in descriptions
    assert "kubernetes.io/rule/nlb/mtu" in descriptions

    mark = aws.trail.last_seq
    core_v1.delete_namespaced_service("web", "default")
    wait_gone(core_v1, "web", timeout=60)
    wait_for(
        lambda: changes(controller_calls(aws.trail, since_seq=mark))[-1:] == ["DeleteTargetGroup"],
        timeout=30,
        what="the target group deleted",
    )
    assert changes(controller_calls(aws.trail, since_seq=mark)) == [
        "RevokeSecurityGroupIngress",
        "DeleteLoadBalancer",
        "DeleteTargetGroup",
    ]
    assert elbv2.describe_load_balancers()["LoadBalancers"] == []
    assert elbv2.describe_target_groups()["TargetGroups"] == []
    assert ingress_rules(ec2, node_group) == rules_before, "the user's rule stays, ours are gone"
