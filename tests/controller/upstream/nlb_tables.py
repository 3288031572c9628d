"""Upstream's own table tests of the NLB path, as data.

Source: kubernetes/cloud-provider-aws at commit 63ec440c3275321b55afa45480e2fdfd2b0e93c4
(2026-07-07), the same as ``aws_tables``: ``aws_loadbalancer_test.go``
``TestBuildTargetGroupName`` (identical at v1.33.0, 40f1f7ac), ``aws_test.go``
``TestCloud_buildNLBHealthCheckConfiguration`` and ``aws_validations_test.go``
``TestValidateServiceAnnotationTargetGroupAttributes``. Inputs and expected outputs only; the
adapters that run them against ours are in ``test_upstream_nlb``.
"""

from __future__ import annotations

_HC = "service.beta.kubernetes.io/aws-load-balancer-healthcheck-"
_TGA = "service.beta.kubernetes.io/aws-load-balancer-target-group-attributes"

#: ``TestBuildTargetGroupName``: (case, cluster id, namespace, name, service port, node port,
#: target protocol, target type, health-check protocol, health-check interval, expected name);
#: the empty ``nlbPortMapping{}`` has protocol "" and interval 0
BUILD_TARGET_GROUP_NAME: list[tuple[str, str, str, str, int, int, str, str, str, int, str]] = [
    ("base case", "cluster-a", "default", "service-a", 80, 8080, "TCP", "instance", "", 0,
     "k8s-default-servicea-7fa2e07508"),
    ("base case & clusterID changed", "cluster-b", "default", "service-a", 80, 8080, "TCP",
     "instance", "", 0, "k8s-default-servicea-719ee635da"),
    ("base case & serviceNamespace changed", "cluster-a", "another", "service-a", 80, 8080,
     "TCP", "instance", "", 0, "k8s-another-servicea-f66e09847d"),
    ("base case & serviceName changed", "cluster-a", "default", "service-b", 80, 8080, "TCP",
     "instance", "", 0, "k8s-default-serviceb-196c19c881"),
    ("base case & servicePort changed", "cluster-a", "default", "service-a", 9090, 8080, "TCP",
     "instance", "", 0, "k8s-default-servicea-06876706cb"),
    ("base case & nodePort changed", "cluster-a", "default", "service-a", 80, 9090, "TCP",
     "instance", "", 0, "k8s-default-servicea-119f844ec0"),
    ("base case & targetProtocol changed", "cluster-a", "default", "service-a", 80, 8080, "UDP",
     "instance", "", 0, "k8s-default-servicea-3868761686"),
    ("base case & targetType changed", "cluster-a", "default", "service-a", 80, 8080, "TCP",
     "ip", "", 0, "k8s-default-servicea-0fa31f4b0f"),
    ("custom healthcheck config", "cluster-a", "default", "service-a", 80, 8080, "TCP", "ip",
     "HTTP", 10, "k8s-default-servicea-4028e49618"),
]  # fmt: skip

#: ``TestCloud_buildNLBHealthCheckConfiguration``: (case, annotations, externalTrafficPolicy
#: Local, healthCheckNodePort, shared probe mode as (port, path) from the cloud config or
#: None, expected (protocol, port, path, interval, timeout, healthy, unhealthy) or None for an
#: error). The Service has one TCP port 8080 with node port 32205.
NLB_HEALTH_CHECK: list[
    tuple[
        str,
        dict[str, str],
        bool,
        int,
        tuple[int, str] | None,
        tuple[str, str, str, int, int, int, int] | None,
    ]
] = [
    ("default cluster", {}, False, 0, None, ("TCP", "traffic-port", "", 30, 10, 3, 3)),
    ("default cluster with shared health check", {}, False, 0, (10256, "/healthz"),
     ("HTTP", "10256", "/healthz", 30, 10, 3, 3)),
    ("default cluster with shared health check and custom port", {}, False, 0,
     (8080, "/healthz"), ("HTTP", "8080", "/healthz", 30, 10, 3, 3)),
    ("default cluster with shared health check and custom path", {}, False, 0,
     (10256, "/custom-healthz"), ("HTTP", "10256", "/custom-healthz", 30, 10, 3, 3)),
    ("default local", {}, True, 32213, None, ("HTTP", "32213", "/healthz", 10, 10, 2, 2)),
    ("with TCP healthcheck",
     {_HC + "protocol": "TCP", _HC + "port": "8001", _HC + "path": "/healthz",
      _HC + "healthy-threshold": "4", _HC + "unhealthy-threshold": "4",
      _HC + "interval": "10", _HC + "timeout": "5"},
     True, 32213, None, ("TCP", "8001", "", 10, 5, 4, 4)),
    ("with HTTP healthcheck",
     {_HC + "protocol": "HTTP", _HC + "port": "41233", _HC + "path": "/healthz",
      _HC + "healthy-threshold": "5", _HC + "unhealthy-threshold": "5",
      _HC + "interval": "30", _HC + "timeout": "6"},
     False, 0, None, ("HTTP", "41233", "/healthz", 30, 6, 5, 5)),
    ("HTTP healthcheck default path", {_HC + "protocol": "Http"}, False, 0, None,
     ("HTTP", "traffic-port", "/", 30, 10, 3, 3)),
    ("interval not 10 or 30", {_HC + "interval": "23"}, False, 0, None,
     ("TCP", "traffic-port", "", 23, 10, 3, 3)),
    ("invalid timeout", {_HC + "timeout": "non-numeric"}, False, 0, None, None),
    ("mismatch healthy and unhealthy targets",
     {_HC + "healthy-threshold": "7", _HC + "unhealthy-threshold": "5"}, False, 0, None,
     ("TCP", "traffic-port", "", 30, 10, 7, 5)),
]  # fmt: skip

#: ``TestValidateServiceAnnotationTargetGroupAttributes``: (case, annotation value or None
#: when absent, port protocols, expected error text or "")
TARGET_GROUP_ATTRIBUTES: list[tuple[str, str | None, tuple[str, ...], str]] = [
    ("no target group attributes annotation", None, ("TCP",), ""),
    ("empty target group attributes annotation", "", ("TCP",), ""),
    ("valid preserve_client_ip.enabled=true", "preserve_client_ip.enabled=true", ("TCP",), ""),
    ("valid preserve_client_ip.enabled=false", "preserve_client_ip.enabled=false", ("TCP",), ""),
    ("valid proxy_protocol_v2.enabled=true", "proxy_protocol_v2.enabled=true", ("TCP",), ""),
    ("valid proxy_protocol_v2.enabled=false", "proxy_protocol_v2.enabled=false", ("TCP",), ""),
    ("valid multiple attributes",
     "preserve_client_ip.enabled=true,proxy_protocol_v2.enabled=false", ("TCP",), ""),
    ("duplicate attribute in annotation (last one wins - no error expected)",
     "preserve_client_ip.enabled=true,preserve_client_ip.enabled=false", ("TCP",), ""),
    ("empty attribute value", "preserve_client_ip.enabled=", ("TCP",),
     'attribute value is empty for "preserve_client_ip.enabled"'),
    ("invalid preserve_client_ip.enabled value", "preserve_client_ip.enabled=invalid", ("TCP",),
     'invalid attribute value for "preserve_client_ip.enabled": invalid'),
    ("invalid proxy_protocol_v2.enabled value", "proxy_protocol_v2.enabled=yes", ("TCP",),
     'invalid attribute value for "proxy_protocol_v2.enabled": yes'),
    ("unsupported attribute", "unsupported_attribute=value", ("TCP",),
     'the attribute "unsupported_attribute" is not supported by the controller or is invalid'),
    ("preserve_client_ip.enabled=false with UDP port should fail",
     "preserve_client_ip.enabled=false", ("UDP",),
     "client IP preservation can't be disabled for UDP ports"),
    ("preserve_client_ip.enabled=false with TCP_UDP port should fail",
     "preserve_client_ip.enabled=false", ("TCP_UDP",),
     "client IP preservation can't be disabled for UDP ports"),
    ("preserve_client_ip.enabled=true with UDP port should succeed",
     "preserve_client_ip.enabled=true", ("UDP",), ""),
    ("preserve_client_ip.enabled=false with mixed TCP and UDP ports should fail",
     "preserve_client_ip.enabled=false", ("TCP", "UDP"),
     "client IP preservation can't be disabled for UDP ports"),
    ("multiple attributes with preserve_client_ip.enabled=false and UDP port should fail",
     "preserve_client_ip.enabled=false,proxy_protocol_v2.enabled=true", ("UDP",),
     "client IP preservation can't be disabled for UDP ports"),
    ("case sensitivity - preserve_client_ip.enabled with True should fail",
     "preserve_client_ip.enabled=True", ("TCP",),
     'invalid attribute value for "preserve_client_ip.enabled": True'),
    ("case sensitivity - proxy_protocol_v2.enabled with FALSE should fail",
     "proxy_protocol_v2.enabled=FALSE", ("TCP",),
     'invalid attribute value for "proxy_protocol_v2.enabled": FALSE'),
    ("whitespace in attribute values should fail", "preserve_client_ip.enabled= true ", ("TCP",),
     'invalid attribute value for "preserve_client_ip.enabled":'),
]  # fmt: skip
