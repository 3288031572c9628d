"""Upstream's own table tests of the AWS provider's small parsers, as data.

Source: kubernetes/cloud-provider-aws ``pkg/providers/v1/aws_test.go`` at commit
63ec440c3275321b55afa45480e2fdfd2b0e93c4 (2026-07-07): ``TestGetKeyValuePropertiesFromAnnotation``
(the additional-tags annotation), ``TestAzToRegion`` and ``TestBuildListener``;
``instances_test.go`` ``TestMapToAWSInstanceIDs``.
"""

from __future__ import annotations

#: (annotation value, expected tags); None: the annotation is absent
KEY_VALUE_PROPERTIES: list[tuple[str | None, dict[str, str]]] = [
    ("Key=Val", {"Key": "Val"}),
    ("Key1=Val1, Key2=Val2", {"Key1": "Val1", "Key2": "Val2"}),
    ("Key1=, Key2=Val2", {"Key1": "", "Key2": "Val2"}),
    (None, {}),
    (
        "K=V K1=V2,Key1========, =====, ======Val, =Val, , 234,",
        {"K": "V K1", "Key1": "", "234": ""},
    ),
]

#: (availability zone, region)
AZ_TO_REGION: list[tuple[str, str]] = [
    ("us-west-2a", "us-west-2"),
    ("us-west-2-lax-1a", "us-west-2"),
    ("ap-northeast-2a", "ap-northeast-2"),
    ("us-gov-east-1a", "us-gov-east-1"),
    ("us-iso-east-1a", "us-iso-east-1"),
    ("us-isob-east-1a", "us-isob-east-1"),
]

#: ``pkg/providers/v1/instances_test.go`` ``TestMapToAWSInstanceIDs``: (providerID, instance id
#: or None for an error)
MAP_TO_AWS_INSTANCE_IDS: list[tuple[str, str | None]] = [
    ("aws:///us-east-1a/i-12345678", "i-12345678"),
    ("aws:////i-12345678", "i-12345678"),
    ("i-12345678", "i-12345678"),
    ("aws:///us-east-1a/i-12345678abcdef01", "i-12345678abcdef01"),
    ("aws:////i-12345678abcdef01", "i-12345678abcdef01"),
    ("i-12345678abcdef01", "i-12345678abcdef01"),
    ("vol-123456789", None),
    ("aws:///us-east-1a/vol-12345678abcdef01", None),
    ("aws://accountid/us-east-1a/vol-12345678abcdef01", None),
    ("aws:///us-east-1a/vol-12345678abcdef01/suffix", None),
    ("", None),
    ("aws:///us-west-2c/1abc-2def/fargate-ip-192-168-164-88.internal",
     "fargate-ip-192-168-164-88.internal"),
    ("aws:///us-west-2c/1abc-2def/fargate-192.168.164.88", "fargate-192.168.164.88"),
]  # fmt: skip

#: ``pkg/providers/v1/aws_test.go`` ``TestBuildListener``: (case name, load-balancer port, port
#: name, node port, backend-protocol annotation, certificate annotation, ssl-ports annotation,
#: expect an error, listener protocol, instance protocol, certificate id); "" is an absent
#: annotation, as upstream's table writes it
BUILD_LISTENER: list[tuple[str, int, str, int, str, str, str, bool, str, str, str]] = [
    ("No cert or BE protocol annotation, passthrough",
     80, "", 7999, "", "", "", False, "tcp", "tcp", ""),
    ("Cert annotation without BE protocol specified, SSL->TCP",
     80, "", 8000, "", "cert", "", False, "ssl", "tcp", "cert"),
    ("BE protocol without cert annotation, passthrough",
     443, "", 8001, "https", "", "", False, "tcp", "tcp", ""),
    ("Invalid cert annotation, bogus backend protocol",
     443, "", 8002, "bacon", "foo", "", True, "tcp", "tcp", ""),
    ("Invalid cert annotation, protocol followed by equal sign",
     443, "", 8003, "http=", "=", "", True, "tcp", "tcp", ""),
    ("HTTPS->HTTPS",
     443, "", 8004, "https", "cert", "", False, "https", "https", "cert"),
    ("HTTPS->HTTP",
     443, "", 8005, "http", "cert", "", False, "https", "http", "cert"),
    ("SSL->SSL",
     443, "", 8006, "ssl", "cert", "", False, "ssl", "ssl", "cert"),
    ("SSL->TCP",
     443, "", 8007, "tcp", "cert", "", False, "ssl", "tcp", "cert"),
    ("Port in whitelist",
     1234, "", 8008, "tcp", "cert", "1234,5678", False, "ssl", "tcp", "cert"),
    ("Port not in whitelist, passthrough",
     443, "", 8009, "tcp", "cert", "1234,5678", False, "tcp", "tcp", ""),
    ("Named port in whitelist",
     1234, "bar", 8010, "tcp", "cert", "foo,bar", False, "ssl", "tcp", "cert"),
    ("Named port not in whitelist, passthrough",
     443, "", 8011, "tcp", "cert", "foo,bar", False, "tcp", "tcp", ""),
    ("HTTP->HTTP",
     80, "", 8012, "http", "", "", False, "http", "http", ""),
]  # fmt: skip

_HC = "service.beta.kubernetes.io/aws-load-balancer-healthcheck-"

#: ``pkg/providers/v1/aws_test.go`` ``TestEnsureLoadBalancerHealthCheck``: (case name,
#: annotations, (healthy, unhealthy, timeout, interval, target)), for a TCP listener whose
#: instance port is 8080 (upstream's ``protocol, path, port := "TCP", "", 8080``)
ENSURE_HEALTH_CHECK: list[tuple[str, dict[str, str], tuple[int, int, int, int, str]]] = [
    ("falls back to HC defaults", {}, (2, 6, 5, 10, "TCP:8080")),
    ("healthy threshold override", {_HC + "healthy-threshold": "7"}, (7, 6, 5, 10, "TCP:8080")),
    ("unhealthy threshold override", {_HC + "unhealthy-threshold": "7"},
     (2, 7, 5, 10, "TCP:8080")),
    ("timeout override", {_HC + "timeout": "7"}, (2, 6, 7, 10, "TCP:8080")),
    ("interval override", {_HC + "interval": "7"}, (2, 6, 5, 7, "TCP:8080")),
    ("healthcheck port override", {_HC + "port": "2122"}, (2, 6, 5, 10, "TCP:2122")),
    ("healthcheck protocol override", {_HC + "protocol": "HTTP"}, (2, 6, 5, 10, "HTTP:8080/")),
    ("healthcheck protocol, port, path override",
     {_HC + "protocol": "HTTPS", _HC + "path": "/healthz", _HC + "port": "31224"},
     (2, 6, 5, 10, "HTTPS:31224/healthz")),
    ("healthcheck protocol SSL",
     {_HC + "protocol": "SSL", _HC + "path": "/healthz", _HC + "port": "3124"},
     (2, 6, 5, 10, "SSL:3124")),
    ("healthcheck port annotation traffic-port",
     {_HC + "protocol": "TCP", _HC + "port": "traffic-port"},
     (2, 6, 5, 10, "TCP:8080")),
]  # fmt: skip

#: ``TestLBExtraSecurityGroupsAnnotation`` and ``TestLBSecurityGroupsAnnotation``: (case name,
#: annotation name, value, the groups it names); upstream's ``buildELBSecurityGroupList`` puts
#: them after its own group (extra) or instead of it (security-groups)
SECURITY_GROUP_ANNOTATIONS: list[tuple[str, str, str | None, list[str]]] = [
    ("No extra SG annotation", "extra-security-groups", None, []),
    ("Empty extra SGs specified", "extra-security-groups", ", ,,", []),
    ("SG specified", "extra-security-groups", "sg-000001", ["sg-000001"]),
    ("Multiple SGs specified", "extra-security-groups", "sg-000001, sg-000002",
     ["sg-000001", "sg-000002"]),
    ("SG specified (security-groups)", "security-groups", "sg-000001", ["sg-000001"]),
    ("Multiple SGs specified (security-groups)", "security-groups", "sg-000001, sg-000002",
     ["sg-000001", "sg-000002"]),
]  # fmt: skip
