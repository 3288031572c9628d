"""Upstream's own table tests of the AWS provider's small parsers, as data.

Source: kubernetes/cloud-provider-aws ``pkg/providers/v1/aws_test.go`` at commit
63ec440c3275321b55afa45480e2fdfd2b0e93c4 (2026-07-07): ``TestGetKeyValuePropertiesFromAnnotation``
(the additional-tags annotation), ``TestAzToRegion`` and ``TestBuildListener``;
``instances_test.go`` ``TestMapToAWSInstanceIDs``; ``aws_validations_test.go``
``TestValidateServiceAnnotations``; ``aws_loadbalancer_test.go`` ``TestIsNLB`` and
``TestIsLBExternal``; ``aws_test.go`` ``Test_parseStringSliceAnnotation`` and the first two
cases of ``Test_getLoadBalancerSubnets`` (the others resolve names through EC2). And
kubernetes/cloud-provider ``service/helpers/helper_test.go`` ``TestGetLoadBalancerSourceRanges``
at commit 46666112f47d004d76fb91406104f94e6a504b2f.
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

_TYPE = "service.beta.kubernetes.io/aws-load-balancer-type"
_SG = "service.beta.kubernetes.io/aws-load-balancer-security-groups"
_EXTRA_SG = "service.beta.kubernetes.io/aws-load-balancer-extra-security-groups"
_TGA = "service.beta.kubernetes.io/aws-load-balancer-target-group-attributes"
_CLB_HOST = "my-classic-lb-1234567890.us-east-1.elb.amazonaws.com"
_NLB_HOST = "my-nlb-1234567890.elb.us-east-1.amazonaws.com"
_EXTRA_NLB = (
    'BYO extra security group annotation "service.beta.kubernetes.io/'
    'aws-load-balancer-extra-security-groups" is not supported by NLB'
)

#: ``aws_validations_test.go`` ``TestValidateServiceAnnotations``: (case name, annotations,
#: the first ingress hostname or None for no ingress, expected error text or "" for none).
#: Upstream's service has no ports unless a case names them; the one that does names TCP 80.
VALIDATE_SERVICE_ANNOTATIONS: list[tuple[str, dict[str, str], str | None, str]] = [
    ("CLB with BYO SG annotation - success", {_SG: "sg-123456789"}, None, ""),
    ("CLB with BYO extra SG annotation - success", {_EXTRA_SG: "sg-123456789"}, None, ""),
    ("CLB with both BYO SG annotations - success",
     {_SG: "sg-123456789", _EXTRA_SG: "sg-extra123"}, None, ""),
    ("NLB with BYO SG annotation - should pass validations",
     {_TYPE: "nlb", _SG: "sg-123456789"}, None, ""),
    ("NLB with BYO extra SG annotation - error (not supported)",
     {_TYPE: "nlb", _EXTRA_SG: "sg-123456789"}, None, _EXTRA_NLB),
    ("NLB with both BYO SG annotations - extra SG error still applies",
     {_TYPE: "nlb", _SG: "sg-123456789", _EXTRA_SG: "sg-extra123"}, None, _EXTRA_NLB),
    ("NLB with BYO extra SG with empty value - error (not supported)",
     {_TYPE: "nlb", _EXTRA_SG: _EXTRA_NLB}, None, _EXTRA_NLB),
    ("NLB with BYO extra SG with multiple values - error (not supported)",
     {_TYPE: "nlb", _EXTRA_SG: "sg-123,sg-456"}, None, _EXTRA_NLB),
    ("NLB with BYO SG with multiple values - should pass validations",
     {_TYPE: "nlb", _SG: "sg-123,sg-456"}, None, ""),
    ("NLB with target group attributes - success",
     {_TYPE: "nlb", _TGA: "preserve_client_ip.enabled=true"}, None, ""),
    ("CLB with target group attributes - error (only supported for NLB)",
     {_TGA: "preserve_client_ip.enabled=true"}, None,
     "target group attributes annotation is only supported for NLB"),
    ("no annotations - success", {}, None, ""),
    ("NLB in new service with no ingress should be allowed", {_TYPE: "nlb"}, None, ""),
    ("CLB in new service with no ingress should be allowed", {}, None, ""),
    ("NLB in new service with empty ingress list should be allowed", {_TYPE: "nlb"}, None, ""),
    ("CLB in existing service with no type annotation should be allowed", {}, _CLB_HOST, ""),
    ("CLB in existing service with type annotation should be allowed",
     {_TYPE: "clb"}, _CLB_HOST, ""),
    ("NLB in existing service with type annotation should be allowed",
     {_TYPE: "nlb"}, _NLB_HOST, ""),
    ("CLB in existing service with type annotation should not be allowed to change to NLB",
     {_TYPE: "nlb"}, _CLB_HOST, "cannot update Load Balancer Type annotation"),
    ("NLB in existing service with type annotation should not be allowed to change to CLB",
     {}, _NLB_HOST, "cannot update Load Balancer Type annotation"),
    ("NLB in existing service with type annotation should not be allowed to change to CLB",
     {_TYPE: "clb"}, _NLB_HOST, "cannot update Load Balancer Type annotation"),
    ("CLB in existing service with regional hostname should be allowed",
     {}, "internal-my-lb-123.eu-west-1.elb.amazonaws.com", ""),
    ("NLB in existing service with different region hostname should be allowed",
     {_TYPE: "nlb"}, "my-nlb-abc123.elb.ap-southeast-1.amazonaws.com", ""),
    ("NLB in existing service with regional hostname should not be allowed to change to CLB",
     {}, "my-nlb-abc123.elb.eu-central-1.amazonaws.com",
     "cannot update Load Balancer Type annotation"),
]  # fmt: skip

#: ``TestIsNLB`` and ``TestIsLBExternal``: (case name, type annotation or None, upstream's
#: kind: "nlb", "external" or "classic")
LOAD_BALANCER_TYPE: list[tuple[str, str | None, str]] = [
    ("NLB annotation provided", "nlb", "nlb"),
    ("NLB annotation has invalid value", "elb", "classic"),
    ("NLB annotation absent", None, "classic"),
    ("No annotation", None, "classic"),
    ("Type NLB", "nlb", "nlb"),
    ("Type NLB-IP", "nlb-ip", "external"),
    ("Type External", "external", "external"),
]

#: ``Test_parseStringSliceAnnotation`` (read as the subnets annotation) and
#: ``Test_getLoadBalancerSubnets``' "no annotation" / "annotation with no subnets": (case name,
#: value or None for absent, the items, or None for upstream's error
#: "unable to resolve empty subnet slice")
SUBNETS_ANNOTATION: list[tuple[str, str | None, list[str] | None]] = [
    ("empty annotation", None, []),
    ("empty value", "\t, ,,", None),
    ("single value", "   value 1 ", ["value 1"]),
    ("multiple values", "subnet-1, subnet-2, My Subnet ", ["subnet-1", "subnet-2", "My Subnet"]),
    ("no annotation", None, []),
    ("annotation with no subnets", "\t", None),
]

#: kubernetes/cloud-provider ``TestGetLoadBalancerSourceRanges``: values that must fail and
#: values that must parse (with the number of distinct CIDRs), each tried as the annotation and
#: as ``spec.loadBalancerSourceRanges`` (the value split on commas, untrimmed)
SOURCE_RANGES_ERROR: list[str] = [
    "10.0.0.1/33",
    "foo.bar",
    "10.0.0.1/32,*",
    "10.0.0.1/32,",
    "10.0.0.1/32, ",
    "10.0.0.1",
]
SOURCE_RANGES_OK: list[tuple[str, int]] = [
    ("192.168.0.1/32", 1),
    ("192.168.0.1/32,192.168.0.1/32", 1),
    ("192.168.0.1/32,192.168.0.2/32", 2),
    ("  192.168.0.1/32 , 192.168.0.2/32   ", 2),
]
