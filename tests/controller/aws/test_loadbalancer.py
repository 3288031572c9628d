"""Classic ELB ensure/update/delete against the lab's AWS endpoint, checked via the call trail.

Sequences are compared with ``shared/docs/reference/upstream-ccm.md`` §3.4 (new Service),
§3.5 (node set changed) and §3.7 (deletion).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

import controller.aws.annotations as A
from controller.cloud import InvalidServiceConfig, Node, Service, ServicePort
from lab.aws import AwsServer
from tests.controller.aws.conftest import MakeCloud
from tests.controller.aws.topology import CLUSTER, Topology, ingress

UID = "1f2e3d4c-5b6a-7988-a7b6-c5d4e3f2a1b0"
LB_NAME = "a1f2e3d4c5b6a7988a7b6c5d4e3f2a1b"
MUTATING_PREFIXES = (
    "Create",
    "Delete",
    "Authorize",
    "Revoke",
    "Modify",
    "Register",
    "Deregister",
    "Apply",
    "Attach",
    "Detach",
    "Configure",
    "Set",
    "Add",
    "Remove",
)


def service(annotations: dict[str, str] | None = None, **kw: Any) -> Service:
    base = Service(
        namespace="shop",
        name="web",
        uid=UID,
        ports=(ServicePort(port=80, node_port=30080, name="http"),),
        annotations=annotations or {},
    )
    return replace(base, **kw)


def nodes(topo: Topology, *names: str) -> list[Node]:
    return [Node(name=n, provider_id=topo.provider_id(n)) for n in (names or topo.instances)]


def actions(aws: AwsServer, since: int = 0) -> list[str]:
    return [e.action for e in aws.trail.events() if e.seq > since]


def mutating(aws: AwsServer, since: int = 0) -> list[str]:
    return [a for a in actions(aws, since) if a.startswith(MUTATING_PREFIXES)]


def elb_groups(aws: AwsServer) -> list[str]:
    desc = aws.client("elb").describe_load_balancers(LoadBalancerNames=[LB_NAME])
    return list(desc["LoadBalancerDescriptions"][0]["SecurityGroups"])


def group_id(aws: AwsServer, name: str) -> str | None:
    found = aws.client("ec2").describe_security_groups(
        Filters=[{"Name": "group-name", "Values": [name]}]
    )["SecurityGroups"]
    return found[0]["GroupId"] if found else None


def test_new_service_follows_upstream_sequence_and_end_state(
    aws: AwsServer, topo: Topology, make_cloud: MakeCloud
) -> None:
    lb = make_cloud().load_balancer()
    status = lb.ensure_load_balancer("kubernetes", service(), nodes(topo))

    assert actions(aws) == [
        "DescribeInstances",  # findInstancesForELB (all instances, cached)
        "DescribeSubnets",
        "DescribeRouteTables",
        "DescribeAvailabilityZones",
        "DescribeSecurityGroups",  # group-name + vpc-id
        "CreateSecurityGroup",
        "DescribeSecurityGroups",  # by id, for the ingress sync
        "AuthorizeSecurityGroupIngress",
        "DescribeLoadBalancers",
        "CreateLoadBalancer",
        "DescribeLoadBalancerAttributes",
        "DescribeLoadBalancers",
        "ConfigureHealthCheck",
        "DescribeSecurityGroups",  # all groups: which are cluster-tagged
        "DescribeSecurityGroups",  # ip-permission.group-id = the ELB's group
        "DescribeSecurityGroups",  # the node group, before authorizing
        "AuthorizeSecurityGroupIngress",
        "RegisterInstancesWithLoadBalancer",
    ]
    elb_sg = group_id(aws, f"k8s-elb-{LB_NAME}")
    assert elb_sg is not None
    create_sg = aws.trail.calls("CreateSecurityGroup")[0]
    assert create_sg.params["GroupName"] == f"k8s-elb-{LB_NAME}"
    assert aws.trail.calls("DescribeSecurityGroups")[3].params["Filters"] == [
        f"ip-permission.group-id={elb_sg}"
    ]
    node_auth = aws.trail.calls("AuthorizeSecurityGroupIngress")[1]
    assert node_auth.params["GroupId"] == topo.nodes_group
    assert node_auth.params["IpPermissions"] == [f"all from {elb_sg}"]

    assert status.ingress[0].hostname.endswith(".elb.amazonaws.com")
    assert elb_groups(aws) == [elb_sg]
    assert ingress(aws.client("ec2"), topo.nodes_group) == {
        ("-1", topo.nodes_group),
        ("-1", elb_sg),
    }
    assert ingress(aws.client("ec2"), elb_sg) == {
        ("tcp:80-80", "0.0.0.0/0"),
        ("icmp:3-4", "0.0.0.0/0"),
    }
    desc = aws.client("elb").describe_load_balancers(LoadBalancerNames=[LB_NAME])
    lbd = desc["LoadBalancerDescriptions"][0]
    assert sorted(i["InstanceId"] for i in lbd["Instances"]) == sorted(topo.instances.values())
    assert sorted(lbd["Subnets"]) == sorted(topo.public_subnets)
    assert lbd["HealthCheck"]["Target"] == "TCP:30080"
    tags = aws.client("elb").describe_tags(LoadBalancerNames=[LB_NAME])["TagDescriptions"][0]
    tag_map = {t["Key"]: t["Value"] for t in tags["Tags"]}
    assert tag_map[f"kubernetes.io/cluster/{CLUSTER}"] == "owned"
    assert tag_map["kubernetes.io/service-name"] == "shop/web"
    sg = aws.client("ec2").describe_security_groups(GroupIds=[elb_sg])["SecurityGroups"][0]
    sg_tags = {t["Key"]: t["Value"] for t in sg.get("Tags", [])}
    assert sg_tags[f"kubernetes.io/cluster/{CLUSTER}"] == "owned"
    assert sg_tags["kubernetes.io/service-name"] == "shop/web"


def test_restarted_controller_finds_its_resources_and_changes_nothing(
    aws: AwsServer, topo: Topology, make_cloud: MakeCloud
) -> None:
    make_cloud().load_balancer().ensure_load_balancer("kubernetes", service(), nodes(topo))
    mark = aws.trail.last_seq
    restarted = make_cloud().load_balancer()  # no state shared with the first instance
    restarted.ensure_load_balancer("kubernetes", service(), nodes(topo))
    assert mutating(aws, mark) == []
    assert aws.trail.count("CreateSecurityGroup") == 1


def test_update_follows_upstream_sequence(
    aws: AwsServer, topo: Topology, make_cloud: MakeCloud
) -> None:
    lb = make_cloud().load_balancer()
    lb.ensure_load_balancer("kubernetes", service(), nodes(topo))
    mark = aws.trail.last_seq
    lb.update_load_balancer("kubernetes", service(), nodes(topo, "node-0"))
    assert actions(aws, mark) == [
        "DescribeLoadBalancers",
        "DeregisterInstancesFromLoadBalancer",
        "DescribeSecurityGroups",  # all groups
        "DescribeSecurityGroups",  # ip-permission.group-id
    ]
    dereg = aws.trail.calls("DeregisterInstancesFromLoadBalancer")[0]
    assert dereg.params["Instances"] == [topo.instances["node-1"]]


def test_delete_follows_upstream_sequence_and_keeps_node_self_rule(
    aws: AwsServer, topo: Topology, make_cloud: MakeCloud
) -> None:
    lb = make_cloud().load_balancer()
    lb.ensure_load_balancer("kubernetes", service(), nodes(topo))
    elb_sg = group_id(aws, f"k8s-elb-{LB_NAME}")
    mark = aws.trail.last_seq
    lb.ensure_load_balancer_deleted("kubernetes", service())
    assert actions(aws, mark) == [
        "DescribeLoadBalancers",
        "DescribeSecurityGroups",  # group-id filter: the delete set
        "DescribeSecurityGroups",  # all groups
        "DescribeSecurityGroups",  # ip-permission.group-id
        "DescribeSecurityGroups",  # the node group, before revoking
        "RevokeSecurityGroupIngress",
        "DeleteLoadBalancer",
        "DeleteSecurityGroup",
    ]
    revoke = aws.trail.calls("RevokeSecurityGroupIngress")[0]
    assert revoke.params["GroupId"] == topo.nodes_group
    assert revoke.params["IpPermissions"] == [f"all from {elb_sg}"]
    assert group_id(aws, f"k8s-elb-{LB_NAME}") is None
    assert ingress(aws.client("ec2"), topo.nodes_group) == {("-1", topo.nodes_group)}
    # idempotent: absent is success, and nothing is mutated
    mark = aws.trail.last_seq
    lb.ensure_load_balancer_deleted("kubernetes", service())
    assert actions(aws, mark) == ["DescribeLoadBalancers", "DescribeSecurityGroups"]
    assert mutating(aws, mark) == []


@pytest.mark.parametrize(
    ("key", "value"),
    [
        (A.A_IDLE_TIMEOUT, "forever"),
        (A.A_EXTRA_SECURITY_GROUPS, "nodes"),
    ],
)
def test_malformed_annotation_makes_zero_aws_calls(
    aws: AwsServer, topo: Topology, make_cloud: MakeCloud, key: str, value: str
) -> None:
    lb = make_cloud().load_balancer()
    mark = aws.trail.last_seq
    with pytest.raises(InvalidServiceConfig) as err:
        lb.ensure_load_balancer("kubernetes", service({key: value}), nodes(topo))
    assert (err.value.field, err.value.value) == (key, value)
    assert actions(aws, mark) == []


@pytest.mark.parametrize(
    ("change", "field", "value", "text"),
    [
        ({"session_affinity": "ClientIP"}, "spec.sessionAffinity", "ClientIP",
         "unsupported load balancer affinity: ClientIP"),
        ({"load_balancer_ip": "203.0.113.7"}, "spec.loadBalancerIP", "203.0.113.7",
         "LoadBalancerIP cannot be specified for AWS ELB"),
        ({"annotations": {A.A_SUBNETS: " , "}}, A.A_SUBNETS, " , ",
         "unable to resolve empty subnet slice"),
        ({"load_balancer_source_ranges": ("10.0.0.0/8", "")}, "spec.loadBalancerSourceRanges",
         "10.0.0.0/8,", "an empty item"),
        ({"annotations": {A.A_SOURCE_RANGES: "10.0.0.0/8,"}}, A.A_SOURCE_RANGES, "10.0.0.0/8,",
         "an empty item"),
        ({"annotations": {A.A_TYPE: "clb"},
          "status_ingress": ({"hostname": "a-1.elb.us-east-1.amazonaws.com"},)},
         A.A_TYPE, "clb", "after creation for Classic Load Balancer"),
        ({"status_ingress": ({"hostname": "a-1.elb.us-east-1.amazonaws.com"},)},
         A.A_TYPE, "", "after creation for Classic Load Balancer"),
    ],
)  # fmt: skip
def test_refused_as_upstream_refuses_with_zero_aws_calls(
    aws: AwsServer,
    topo: Topology,
    make_cloud: MakeCloud,
    change: dict[str, Any],
    field: str,
    value: str,
    text: str,
) -> None:
    """Upstream ``EnsureLoadBalancer`` refuses a session affinity other than None and a
    ``loadBalancerIP``; ``GetLoadBalancerSourceRanges`` an empty item (trailing comma);
    ``resolveSubnetNameOrIDs`` a blank subnets annotation; ``validateServiceAnnotations`` a
    Service whose status names an NLB becoming a Classic ELB. Before, ours accepted each.
    Refused before any AWS call, naming the field and value (the Warning event's text)."""
    lb = make_cloud().load_balancer()
    mark = aws.trail.last_seq
    with pytest.raises(InvalidServiceConfig) as err:
        lb.ensure_load_balancer("kubernetes", replace(service(), **change), nodes(topo))
    assert (err.value.field, err.value.value) == (field, value)
    assert text in str(err.value)
    assert actions(aws, mark) == []


def test_node_sync_still_registers_nodes_of_a_service_ensure_refuses(
    aws: AwsServer, topo: Topology, make_cloud: MakeCloud
) -> None:
    """As upstream: only ``EnsureLoadBalancer`` checks session affinity and
    ``loadBalancerIP``; ``UpdateLoadBalancer`` (a node sync) keeps the targets right."""
    lb = make_cloud().load_balancer()
    lb.ensure_load_balancer("kubernetes", service(), nodes(topo, "node-0"))
    sticky = service(session_affinity="ClientIP", load_balancer_ip="203.0.113.7")
    lb.update_load_balancer("kubernetes", sticky, nodes(topo))
    desc = aws.client("elb").describe_load_balancers(LoadBalancerNames=[LB_NAME])
    registered = {i["InstanceId"] for i in desc["LoadBalancerDescriptions"][0]["Instances"]}
    assert registered == set(topo.instances.values())


def test_service_reads_session_affinity_and_load_balancer_ip() -> None:
    obj = {
        "metadata": {"name": "web", "namespace": "shop"},
        "spec": {
            "type": "LoadBalancer",
            "sessionAffinity": "ClientIP",
            "loadBalancerIP": "1.2.3.4",
        },
    }
    svc = Service.from_api(obj)
    assert (svc.session_affinity, svc.load_balancer_ip) == ("ClientIP", "1.2.3.4")
    plain = Service.from_api({"metadata": {"name": "web"}, "spec": {"type": "LoadBalancer"}})
    assert (plain.session_affinity, plain.load_balancer_ip) == ("None", "")


def test_classic_type_spellings_build_a_classic_elb(
    aws: AwsServer, topo: Topology, make_cloud: MakeCloud
) -> None:
    """``clb`` / ``elb`` are a Classic ELB, as upstream (which takes any value but ``nlb``,
    ``nlb-ip`` and ``external`` as Classic); before, ours refused them."""
    lb = make_cloud().load_balancer()
    for value in ("elb", "CLB"):
        status = lb.ensure_load_balancer("kubernetes", service({A.A_TYPE: value}), nodes(topo))
        assert status.ingress[0].hostname.endswith(".elb.amazonaws.com")
    assert len(aws.trail.calls("CreateLoadBalancer", ok=True)) == 1


def test_annotations_reach_aws(aws: AwsServer, topo: Topology, make_cloud: MakeCloud) -> None:
    lb = make_cloud().load_balancer()
    svc = service(
        {
            A.A_IDLE_TIMEOUT: "120",
            A.A_DRAINING_ENABLED: "true",
            A.A_DRAINING_TIMEOUT: "30",
            A.A_CROSS_ZONE: "true",
            A.A_HC_PROTOCOL: "HTTP",
            A.A_HC_PATH: "/ready",
            A.A_ADDITIONAL_TAGS: "team=web",
            A.A_INTERNAL: "true",
        },
        load_balancer_source_ranges=("10.0.0.0/8",),
    )
    lb.ensure_load_balancer("kubernetes", svc, nodes(topo))
    elb = aws.client("elb")
    attrs = elb.describe_load_balancer_attributes(LoadBalancerName=LB_NAME)[
        "LoadBalancerAttributes"
    ]
    assert attrs["ConnectionSettings"]["IdleTimeout"] == 120
    assert attrs["ConnectionDraining"] == {"Enabled": True, "Timeout": 30}
    assert attrs["CrossZoneLoadBalancing"]["Enabled"] is True
    lbd = elb.describe_load_balancers(LoadBalancerNames=[LB_NAME])["LoadBalancerDescriptions"][0]
    assert lbd["HealthCheck"]["Target"] == "HTTP:30080/ready"
    assert lbd["Scheme"] == "internal"
    elb_sg = group_id(aws, f"k8s-elb-{LB_NAME}")
    assert elb_sg is not None
    assert ingress(aws.client("ec2"), elb_sg) == {
        ("tcp:80-80", "10.0.0.0/8"),
        ("icmp:3-4", "10.0.0.0/8"),
    }
    # changing the source ranges re-syncs the group exactly
    mark = aws.trail.last_seq
    lb.ensure_load_balancer(
        "kubernetes", service(load_balancer_source_ranges=("192.168.0.0/16",)), nodes(topo)
    )
    assert ingress(aws.client("ec2"), elb_sg) == {
        ("tcp:80-80", "192.168.0.0/16"),
        ("icmp:3-4", "192.168.0.0/16"),
    }
    assert "ModifyLoadBalancerAttributes" in mutating(aws, mark)


def test_disable_security_group_ingress_touches_no_node_group(
    aws: AwsServer, topo: Topology, make_cloud: MakeCloud
) -> None:
    lb = make_cloud(extra="DisableSecurityGroupIngress = true").load_balancer()
    lb.ensure_load_balancer("kubernetes", service(), nodes(topo))
    lb.ensure_load_balancer_deleted("kubernetes", service())
    for call in aws.trail.calls("AuthorizeSecurityGroupIngress") + aws.trail.calls(
        "RevokeSecurityGroupIngress"
    ):
        assert call.params["GroupId"] != topo.nodes_group
    assert ingress(aws.client("ec2"), topo.nodes_group) == {("-1", topo.nodes_group)}


def test_elb_security_group_is_used_never_created_or_deleted(
    aws: AwsServer, topo: Topology, make_cloud: MakeCloud
) -> None:
    ec2 = aws.client("ec2")
    shared = ec2.create_security_group(GroupName="shared-elb", Description="x", VpcId=topo.vpc)[
        "GroupId"
    ]
    aws.control.clear_trail()
    lb = make_cloud(extra=f"ElbSecurityGroup = {shared}").load_balancer()
    lb.ensure_load_balancer("kubernetes", service(), nodes(topo))
    assert elb_groups(aws) == [shared]
    assert ("-1", shared) in ingress(ec2, topo.nodes_group)
    lb.ensure_load_balancer_deleted("kubernetes", service())
    assert aws.trail.calls("CreateSecurityGroup") == []
    assert aws.trail.calls("DeleteSecurityGroup") == []
    assert group_id(aws, "shared-elb") == shared


def test_adding_security_groups_annotation_replaces_and_removes_owned_group(
    aws: AwsServer, topo: Topology, make_cloud: MakeCloud
) -> None:
    ec2 = aws.client("ec2")
    user = ec2.create_security_group(GroupName="user-sg", Description="u", VpcId=topo.vpc)[
        "GroupId"
    ]
    lb = make_cloud().load_balancer()
    lb.ensure_load_balancer("kubernetes", service(), nodes(topo))
    owned = group_id(aws, f"k8s-elb-{LB_NAME}")
    lb.ensure_load_balancer("kubernetes", service({A.A_SECURITY_GROUPS: user}), nodes(topo))
    assert elb_groups(aws) == [user]
    assert group_id(aws, f"k8s-elb-{LB_NAME}") is None  # no leak (cloud-provider-aws #1208)
    assert ingress(ec2, topo.nodes_group) == {("-1", topo.nodes_group), ("-1", user)}
    assert owned not in {g for _, g in ingress(ec2, topo.nodes_group)}
    # the user's group's own rules are never edited
    for action in ("AuthorizeSecurityGroupIngress", "RevokeSecurityGroupIngress"):
        assert user not in {e.params["GroupId"] for e in aws.trail.calls(action)}


def test_subnets_annotation(aws: AwsServer, topo: Topology, make_cloud: MakeCloud) -> None:
    lb = make_cloud().load_balancer()
    svc = service({A.A_SUBNETS: topo.private_subnet, A.A_INTERNAL: "true"})
    lb.ensure_load_balancer("kubernetes", svc, nodes(topo))
    desc = aws.client("elb").describe_load_balancers(LoadBalancerNames=[LB_NAME])
    assert desc["LoadBalancerDescriptions"][0]["Subnets"] == [topo.private_subnet]
    lb.ensure_load_balancer_deleted("kubernetes", svc)
    mark = aws.trail.last_seq
    bad = service({A.A_SUBNETS: "subnet-0000000000000dead"})
    with pytest.raises(InvalidServiceConfig) as err:
        lb.ensure_load_balancer("kubernetes", bad, nodes(topo))
    assert err.value.field == A.A_SUBNETS
    assert mutating(aws, mark) == []


def test_proxy_protocol_policy_follows_the_annotation(
    aws: AwsServer, topo: Topology, make_cloud: MakeCloud
) -> None:
    lb = make_cloud().load_balancer()
    lb.ensure_load_balancer("kubernetes", service({A.A_PROXY_PROTOCOL: "*"}), nodes(topo))
    elb = aws.client("elb")

    def backend_policies() -> dict[int, list[str]]:
        lbd = elb.describe_load_balancers(LoadBalancerNames=[LB_NAME])
        return {
            b["InstancePort"]: list(b.get("PolicyNames", []))
            for b in lbd["LoadBalancerDescriptions"][0].get("BackendServerDescriptions", [])
        }

    assert backend_policies() == {30080: ["k8s-proxyprotocol-enabled"]}
    created = aws.trail.calls("CreateLoadBalancerPolicy")
    assert [c.raw_params.get("PolicyTypeName") for c in created] == ["ProxyProtocolPolicyType"]
    mark = aws.trail.last_seq
    lb.ensure_load_balancer("kubernetes", service(), nodes(topo))
    assert "SetLoadBalancerPoliciesForBackendServer" in mutating(aws, mark)
    assert all(not p for p in backend_policies().values())


def _user_group(aws: AwsServer, topo: Topology, name: str) -> str:
    ec2 = aws.client("ec2")
    return ec2.create_security_group(GroupName=name, Description="u", VpcId=topo.vpc)["GroupId"]


def test_dropped_user_group_loses_the_node_rule_the_controller_added(
    aws: AwsServer, topo: Topology, make_cloud: MakeCloud
) -> None:
    """Upstream ``removeOwnedSecurityGroups`` (cloud-provider-aws @ 63ec440c): a group
    dropped from the ELB has the node rules that let it in revoked; before, ours left the
    node group open to a group the user no longer attaches (a stale open rule)."""
    ec2 = aws.client("ec2")
    first, second = _user_group(aws, topo, "user-a"), _user_group(aws, topo, "user-b")
    lb = make_cloud().load_balancer()
    lb.ensure_load_balancer("kubernetes", service({A.A_SECURITY_GROUPS: first}), nodes(topo))
    assert ("-1", first) in ingress(ec2, topo.nodes_group)
    # a port-specific rule the user wrote themselves on the node group: never ours to revoke
    ec2.authorize_security_group_ingress(
        GroupId=topo.nodes_group,
        IpPermissions=[
            {"IpProtocol": "tcp", "FromPort": 22, "ToPort": 22,
             "UserIdGroupPairs": [{"GroupId": first}]}
        ],
    )  # fmt: skip
    lb.ensure_load_balancer("kubernetes", service({A.A_SECURITY_GROUPS: second}), nodes(topo))
    assert elb_groups(aws) == [second]
    rules = ingress(ec2, topo.nodes_group)
    assert ("-1", first) not in rules  # the stale open rule is gone
    assert ("-1", second) in rules
    assert ("tcp", first) in rules  # the user's own rule stays
    assert ("-1", topo.nodes_group) in rules  # node-to-node traffic untouched
    # the user's groups themselves are never edited or deleted
    for action in ("AuthorizeSecurityGroupIngress", "RevokeSecurityGroupIngress"):
        assert {first, second}.isdisjoint(e.params["GroupId"] for e in aws.trail.calls(action))
    assert aws.trail.calls("DeleteSecurityGroup") == []


def test_dropped_user_group_keeps_rules_on_untagged_groups_and_while_shared(
    aws: AwsServer, topo: Topology, make_cloud: MakeCloud
) -> None:
    """Ownership as upstream decides it (only cluster-tagged groups are edited) plus ours:
    a group another ELB still lists keeps its node rule."""
    ec2 = aws.client("ec2")
    user, other = _user_group(aws, topo, "user-a"), _user_group(aws, topo, "user-b")
    untagged = _user_group(aws, topo, "bastion")
    ec2.authorize_security_group_ingress(
        GroupId=untagged,
        IpPermissions=[{"IpProtocol": "-1", "UserIdGroupPairs": [{"GroupId": user}]}],
    )
    cloud = make_cloud()
    lb = cloud.load_balancer()
    lb.ensure_load_balancer("kubernetes", service({A.A_SECURITY_GROUPS: user}), nodes(topo))
    peer = service(
        {A.A_SECURITY_GROUPS: user}, name="api", uid="0" * 8 + "-1111-2222-3333-" + "4" * 12
    )
    lb.ensure_load_balancer("kubernetes", peer, nodes(topo))
    lb.ensure_load_balancer("kubernetes", service({A.A_SECURITY_GROUPS: other}), nodes(topo))
    assert ("-1", user) in ingress(ec2, topo.nodes_group)  # the peer ELB still needs it
    assert ("-1", user) in ingress(ec2, untagged)
    lb.ensure_load_balancer(
        "kubernetes", replace(peer, annotations={A.A_SECURITY_GROUPS: other}), nodes(topo)
    )
    assert ("-1", user) not in ingress(ec2, topo.nodes_group)  # last user gone: revoked
    assert ("-1", user) in ingress(ec2, untagged)  # not the cluster's: never edited
    assert untagged not in {
        e.params["GroupId"] for e in aws.trail.calls("RevokeSecurityGroupIngress")
    }


def test_listener_sync_keeps_equal_listeners_and_replaces_a_changed_certificate(
    aws: AwsServer, topo: Topology, make_cloud: MakeCloud
) -> None:
    """Upstream ``syncElbListeners`` on the ELB AWS reports: an SSL listener described with
    its certificate is kept by a second ensure; a new certificate deletes that port's
    listener and creates it again, and the TCP listener is left alone."""
    acm = aws.client("acm")
    cert, new_cert = (
        acm.request_certificate(DomainName=d)["CertificateArn"] for d in ("a.example", "b.example")
    )
    ports = (
        ServicePort(port=443, node_port=30443, name="tls"),
        ServicePort(port=80, node_port=30080, name="web"),
    )

    def tls(arn: str) -> dict[str, str]:
        # SSL to TCP backends: stock moto describes that listener as SSL to SSL, so this
        # second ensure replaced it (the lab keeps the InstanceProtocol sent)
        return {A.A_SSL_CERT: arn, A.A_SSL_PORTS: "443", A.A_BACKEND_PROTOCOL: "tcp"}

    lb = make_cloud().load_balancer()
    lb.ensure_load_balancer("kubernetes", service(tls(cert), ports=ports), nodes(topo))
    mark = aws.trail.last_seq
    lb.ensure_load_balancer("kubernetes", service(tls(cert), ports=ports), nodes(topo))
    assert mutating(aws, mark) == []
    mark = aws.trail.last_seq
    lb.ensure_load_balancer(
        "kubernetes",
        service(tls(new_cert), ports=ports),
        nodes(topo),
    )
    assert mutating(aws, mark)[:2] == ["DeleteLoadBalancerListeners", "CreateLoadBalancerListeners"]
    described = aws.client("elb").describe_load_balancers()["LoadBalancerDescriptions"][0]
    got = {
        (d["Listener"]["LoadBalancerPort"], d["Listener"].get("SSLCertificateId"))
        for d in described["ListenerDescriptions"]
    }
    assert got == {(443, new_cert), (80, None)}
