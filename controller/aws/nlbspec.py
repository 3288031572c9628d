"""A ``type: LoadBalancer`` Service annotated ``aws-load-balancer-type: nlb`` to one frozen
:class:`NLBSpec`, validated before any AWS call. Pure: no boto3, no I/O.

Neighbours: :mod:`controller.aws.nlb` consumes the spec; :mod:`controller.aws.annotations`
holds the annotation names and the parsers shared with the Classic ELB path.

Design: upstream v1.33.0 builds its ``nlbPortMapping`` list and ``healthCheckConfig`` inside
``EnsureLoadBalancer`` (``aws.go``: ``buildNLBHealthCheckConfiguration``, the NLB branch of the
port loop) and parses the attribute annotations in ``reconcileLBAttributes`` after the load
balancer exists, so a bad ``cross-zone`` value there fails with the NLB half made. Here all of
it is parsed first and a bad value raises :class:`InvalidServiceConfig` naming the annotation
and value. Upstream hands integers and protocols to AWS for it to refuse; we check AWS's
documented ranges instead so the error reaches the Service's events. The validation rules of
current upstream (``aws_validations.go``: extra security groups refused on an NLB, the
target-group-attributes annotation) apply too. Target group names follow upstream's
``buildTargetGroupName`` exactly (:func:`target_group_name`).

Managed security-group mode (current upstream, kubernetes/cloud-provider-aws 63ec440c, PRs
#1158 and #1379; ``NLBSecurityGroupMode = Managed``): :func:`managed_security_group_name` is
``GetSecurityGroupNameForNLB`` and :func:`managed_security_group_rules` the ingress
``ensureNLBSecurityGroupRules`` puts on that group; the BYO ``security-groups`` annotation is
parsed only in that mode (upstream ignores it otherwise).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass

from controller.aws.annotations import (
    A_ACCESS_LOG_BUCKET,
    A_ACCESS_LOG_ENABLED,
    A_ACCESS_LOG_PREFIX,
    A_BACKEND_PROTOCOL,
    A_CROSS_ZONE,
    A_EXTRA_SECURITY_GROUPS,
    A_HC_HEALTHY,
    A_HC_INTERVAL,
    A_HC_PATH,
    A_HC_PORT,
    A_HC_PROTOCOL,
    A_HC_TIMEOUT,
    A_HC_UNHEALTHY,
    A_INTERNAL,
    A_SECURITY_GROUPS,
    A_SSL_CERT,
    A_SSL_NEGOTIATION_POLICY,
    A_SSL_PORTS,
    A_TARGET_GROUP_ATTRIBUTES,
    A_TARGET_NODE_LABELS,
    PREFIX,
    TRAFFIC_PORT,
    additional_tags,
    check_load_balancer_ip,
    check_session_affinity,
    id_list,
    key_value_list,
    parse_bool,
    parse_int,
    source_ranges,
    subnets_annotation,
    type_guard,
)
from controller.aws.sgrules import Rule, cidr_kind
from controller.cloud import ImplementedElsewhere, InvalidServiceConfig, Service

A_EIP_ALLOCATIONS = PREFIX + "eip-allocations"

#: upstream defaults (``aws_loadbalancer.go``)
NLB_HC_INTERVAL = 30
NLB_HC_TIMEOUT = 10
NLB_HC_THRESHOLD = 3
KUBE_PROXY_HEALTH_PORT = 10256
KUBE_PROXY_HEALTH_PATH = "/healthz"

TG_PRESERVE_CLIENT_IP = "preserve_client_ip.enabled"
TG_PROXY_PROTOCOL_V2 = "proxy_protocol_v2.enabled"
_TG_ATTRIBUTES = (TG_PRESERVE_CLIENT_IP, TG_PROXY_PROTOCOL_V2)
_TG_ATTR_ERR = "error validating target group attributes"
_EIP_ID = re.compile(r"^eipalloc-[0-9A-Za-z]+$")
_NOT_ALNUM = re.compile(r"[^A-Za-z0-9]")  # Go's [^[:alnum:]] is ASCII-only
_SG_ID = re.compile(r"^sg-[0-9A-Za-z]+$")

#: upstream ``ensureNLBSecurityGroup`` (``aws.go``, 63ec440c)
MANAGED_SG_DESCRIPTION = "[k8s] Managed SecurityGroup for LoadBalancer"


@dataclass(frozen=True)
class NLBHealthCheck:
    """Upstream ``healthCheckConfig``; ``port`` is ``traffic-port`` or a number as text."""

    protocol: str = "TCP"
    port: str = TRAFFIC_PORT
    path: str = ""
    interval: int = NLB_HC_INTERVAL
    timeout: int = NLB_HC_TIMEOUT
    healthy_threshold: int = NLB_HC_THRESHOLD
    unhealthy_threshold: int = NLB_HC_THRESHOLD


@dataclass(frozen=True)
class PortMapping:
    """Upstream ``nlbPortMapping``: one listener and its target group."""

    frontend_port: int
    frontend_protocol: str  # TCP, UDP or TLS
    traffic_port: int  # the node port
    traffic_protocol: str  # TCP, UDP or TLS
    health_check: NLBHealthCheck
    ssl_certificate_arn: str = ""
    ssl_policy: str = ""


@dataclass(frozen=True)
class NLBSpec:
    internal: bool
    mappings: tuple[PortMapping, ...]
    source_ranges: tuple[str, ...]
    additional_tags: tuple[tuple[str, str], ...] = ()
    subnets: tuple[str, ...] = ()
    eip_allocations: tuple[str, ...] = ()
    cross_zone: bool = False
    access_log_enabled: bool = False
    access_log_bucket: str = ""
    access_log_prefix: str = ""
    target_node_labels: tuple[tuple[str, str], ...] = ()
    target_group_attributes: tuple[tuple[str, str], ...] = ()
    #: the BYO ``security-groups`` annotation; parsed only in managed security-group mode
    security_groups: tuple[str, ...] = ()


def target_group_name(
    cluster_id: str, namespace: str, name: str, mapping: PortMapping, target_type: str = "instance"
) -> str:
    """Upstream ``buildTargetGroupName``: ``k8s-<ns:8>-<name:8>-<sha1:10>``, the hash over the
    cluster id, namespace, name, service port, node port, target protocol, target type,
    health-check protocol and interval (what cannot change on an existing target group)."""
    h = hashlib.sha1(usedforsecurity=False)
    for part in (
        cluster_id,
        namespace,
        name,
        str(mapping.frontend_port),
        str(mapping.traffic_port),
        mapping.traffic_protocol,
        target_type,
        mapping.health_check.protocol,
        str(mapping.health_check.interval),
    ):
        h.update(part.encode())
    ns = _NOT_ALNUM.sub("", namespace)[:8]
    svc = _NOT_ALNUM.sub("", name)[:8]
    return f"k8s-{ns}-{svc}-{h.hexdigest()[:10]}"


def managed_security_group_name(cluster_name: str, service: Service) -> str:
    """Upstream ``GetSecurityGroupNameForNLB`` (``aws.go``, 63ec440c):
    ``k8s-<ns:8>-<name:8>-<sha256:10>``, the hash over the cluster name (the controller's
    ``--cluster-name``, not the cluster id), the Service's name, namespace and UID, in that
    order; namespace and name keep only ASCII letters and digits."""
    h = hashlib.sha256()
    for part in (cluster_name, service.name, service.namespace, service.uid):
        h.update(part.encode())
    ns = _NOT_ALNUM.sub("", service.namespace)[:8]
    svc = _NOT_ALNUM.sub("", service.name)[:8]
    return f"k8s-{ns}-{svc}-{h.hexdigest()[:10]}"


def managed_security_group_rules(spec: NLBSpec) -> frozenset[Rule]:
    """Upstream ``ensureNLBSecurityGroupRules`` + ``createSecurityGroupRules``: each listener's
    frontend port and protocol from each source range, plus ICMP type 3 code 4 (path MTU
    discovery) from each range.

    Ours differs where upstream's request is one EC2 refuses (``DEVIATIONS.md``): a TLS
    listener's rule is ``tcp`` (upstream lower-cases the listener protocol and sends ``tls``),
    an IPv6 range goes into ``Ipv6Ranges`` and gets no ICMP rule (upstream puts every range in
    ``IpRanges``).
    """
    rules: set[Rule] = set()
    for cidr in spec.source_ranges:
        kind = cidr_kind(cidr)
        for m in spec.mappings:
            proto = "udp" if m.frontend_protocol == "UDP" else "tcp"
            rules.add(Rule(proto, m.frontend_port, m.frontend_port, kind, cidr))
        if kind == "cidr":
            rules.add(Rule("icmp", 3, 4, kind, cidr))
    return frozenset(rules)


def build_health_check(
    service: Service, *, shared_probe: tuple[int, str] | None = None
) -> NLBHealthCheck:
    """Upstream ``buildNLBHealthCheckConfiguration``: TCP on the traffic port (30 s, 3/3);
    eTP=Local: HTTP ``/healthz`` on the healthCheckNodePort (10 s, 2/2); the healthcheck-*
    annotations override; ``shared_probe`` (port, path) is the Shared probe mode, which wins
    over the annotations for a non-Local Service, as upstream's order makes it."""
    ann = service.annotations
    local = service.external_traffic_policy == "Local"
    if local:
        if not service.health_check_node_port:
            raise InvalidServiceConfig(
                "spec.healthCheckNodePort", "0", "externalTrafficPolicy Local needs one"
            )
        protocol, port, path = "HTTP", str(service.health_check_node_port), "/healthz"
        interval, timeout, healthy, unhealthy = 10, 10, 2, 2
    else:
        protocol, port, path = "TCP", TRAFFIC_PORT, "/"
        interval, timeout = NLB_HC_INTERVAL, NLB_HC_TIMEOUT
        healthy = unhealthy = NLB_HC_THRESHOLD
    if A_HC_PROTOCOL in ann:
        protocol = ann[A_HC_PROTOCOL].upper()
    if protocol in ("HTTP", "HTTPS"):
        if A_HC_PATH in ann:
            path = ann[A_HC_PATH]
            if not path.startswith("/") or any(c.isspace() for c in path) or len(path) > 1024:
                raise InvalidServiceConfig(
                    A_HC_PATH, ann[A_HC_PATH], "must be an absolute path without spaces"
                )
    elif protocol == "TCP":
        path = ""
    else:
        raise InvalidServiceConfig(
            A_HC_PROTOCOL,
            ann.get(A_HC_PROTOCOL, protocol),
            f"Unsupported health check protocol {protocol} (TCP, HTTP or HTTPS)",
        )
    if A_HC_PORT in ann:
        port = ann[A_HC_PORT]
    if shared_probe is not None and not local:
        protocol, port, path = "HTTP", str(shared_probe[0]), shared_probe[1]
    if port != TRAFFIC_PORT:
        port = str(parse_int(A_HC_PORT, port, low=1, high=65535))

    def num(name: str, default: int, low: int, high: int) -> int:
        return parse_int(name, ann[name], low=low, high=high) if name in ann else default

    return NLBHealthCheck(
        protocol=protocol,
        port=port,
        path=path,
        interval=num(A_HC_INTERVAL, interval, 5, 300),
        timeout=num(A_HC_TIMEOUT, timeout, 2, 120),
        healthy_threshold=num(A_HC_HEALTHY, healthy, 2, 10),
        unhealthy_threshold=num(A_HC_UNHEALTHY, unhealthy, 2, 10),
    )


def _ssl_ports(raw: str | None) -> tuple[frozenset[int], frozenset[str]] | None:
    """Upstream ``getPortSets``: ``None`` (every port) when absent; ``*`` is every port too."""
    if raw is None:
        return None
    numbers: set[int] = set()
    names: set[str] = set()
    for item in (x.strip() for x in raw.split(",")):
        if item == "*":
            return None
        if re.fullmatch(r"[0-9]{1,5}", item):
            numbers.add(int(item))
        elif item:
            names.add(item)
    return frozenset(numbers), frozenset(names)


def build_mappings(service: Service, health: NLBHealthCheck) -> tuple[PortMapping, ...]:
    """The NLB branch of upstream's port loop: TCP/UDP only, one protocol, TLS frontends for
    the ssl-cert ports (TLS to the target too with ``backend-protocol: ssl``)."""
    ann = service.annotations
    if not service.ports:
        raise InvalidServiceConfig("spec.ports", "", "requested load balancer with no ports")
    protocols = {p.protocol for p in service.ports}
    if len(protocols) > 1:
        raise InvalidServiceConfig(
            "spec.ports",
            ",".join(sorted(protocols)),
            "mixed protocol is not supported for LoadBalancer",
        )
    cert = ann.get(A_SSL_CERT, "")
    ssl_ports = _ssl_ports(ann.get(A_SSL_PORTS))
    policy = ann.get(A_SSL_NEGOTIATION_POLICY, "")
    backend_ssl = ann.get(A_BACKEND_PROTOCOL, "") == "ssl"
    out: list[PortMapping] = []
    for port in service.ports:
        if port.protocol not in ("TCP", "UDP"):
            raise InvalidServiceConfig(
                "spec.ports.protocol",
                port.protocol,
                f"Protocol {port.protocol} not supported by LoadBalancer",
            )
        if not 1 <= port.port <= 65535:
            raise InvalidServiceConfig("spec.ports.port", str(port.port), "not a port number")
        if port.node_port == 0:
            continue  # upstream skips (and logs) a port without a node port
        front, traffic, arn, ssl_policy = port.protocol, port.protocol, "", ""
        tls = (
            port.protocol != "UDP"
            and cert != ""
            and (ssl_ports is None or port.port in ssl_ports[0] or port.name in ssl_ports[1])
        )
        if tls:
            front, arn, ssl_policy = "TLS", cert, policy
            if backend_ssl:
                traffic = "TLS"
        out.append(
            PortMapping(
                frontend_port=port.port,
                frontend_protocol=front,
                traffic_port=port.node_port,
                traffic_protocol=traffic,
                health_check=health,
                ssl_certificate_arn=arn,
                ssl_policy=ssl_policy,
            )
        )
    if not out:
        raise InvalidServiceConfig("spec.ports.nodePort", "0", "no port has a node port yet")
    return tuple(out)


def target_group_attributes(service: Service) -> tuple[tuple[str, str], ...]:
    """Current upstream ``validateServiceAnnotationTargetGroupAttributes``: only
    ``preserve_client_ip.enabled`` and ``proxy_protocol_v2.enabled``, each exactly ``true`` or
    ``false``; client IP preservation cannot be disabled for UDP (or TCP_UDP) ports. Items are
    read as upstream's ``getKeyValuePropertiesFromAnnotation`` reads them (a repeated key: the
    last wins; values are not trimmed)."""
    ann = service.annotations
    if A_TARGET_GROUP_ATTRIBUTES not in ann:
        return ()
    raw = ann[A_TARGET_GROUP_ATTRIBUTES]
    items: dict[str, str] = {}
    for item in raw.strip().split(","):
        parts = item.strip().split("=")
        if parts[0]:
            items[parts[0]] = parts[1] if len(parts) > 1 else ""
    udp = any(p.protocol in ("UDP", "TCP_UDP") for p in service.ports)
    for key, value in items.items():
        if not value:
            raise InvalidServiceConfig(
                A_TARGET_GROUP_ATTRIBUTES,
                raw,
                f'{_TG_ATTR_ERR}: attribute value is empty for "{key}"',
            )
        if key not in _TG_ATTRIBUTES:
            raise InvalidServiceConfig(
                A_TARGET_GROUP_ATTRIBUTES,
                raw,
                f'{_TG_ATTR_ERR}: the attribute "{key}" is not supported by the controller '
                "or is invalid",
            )
        if value not in ("true", "false"):
            raise InvalidServiceConfig(
                A_TARGET_GROUP_ATTRIBUTES,
                raw,
                f'{_TG_ATTR_ERR}: invalid attribute value for "{key}": {value}',
            )
        if key == TG_PRESERVE_CLIENT_IP and value == "false" and udp:
            raise InvalidServiceConfig(
                A_TARGET_GROUP_ATTRIBUTES,
                raw,
                f"{_TG_ATTR_ERR}: client IP preservation can't be disabled for UDP ports",
            )
    return tuple(items.items())


def _bool(ann: Mapping[str, str], name: str) -> bool:
    """Upstream ``reconcileLBAttributes``: empty means false, else ``strconv.ParseBool``."""
    raw = ann.get(name, "")
    return False if raw == "" else parse_bool(name, raw)


def _eip_allocations(ann: Mapping[str, str]) -> tuple[str, ...]:
    """The eip-allocations annotation: comma-separated ``eipalloc-...`` ids, or none."""
    eips: tuple[str, ...] = ()
    if A_EIP_ALLOCATIONS in ann:
        raw = ann[A_EIP_ALLOCATIONS]
        eips = tuple(x.strip() for x in raw.split(","))
        bad = [x for x in eips if not _EIP_ID.match(x)]
        if bad:
            raise InvalidServiceConfig(
                A_EIP_ALLOCATIONS, raw, f"{bad[0]!r} is not an allocation id (eipalloc-...)"
            )
    return eips


def _access_log(ann: Mapping[str, str]) -> tuple[bool, str]:
    """Access logs on or off, and the bucket they go to (which on needs)."""
    access = _bool(ann, A_ACCESS_LOG_ENABLED)
    bucket = ann.get(A_ACCESS_LOG_BUCKET, "")
    if access and not bucket.strip():
        raise InvalidServiceConfig(
            A_ACCESS_LOG_ENABLED, ann[A_ACCESS_LOG_ENABLED], f"needs {A_ACCESS_LOG_BUCKET}"
        )
    return access, bucket


def parse_nlb_service(
    service: Service,
    *,
    shared_probe: tuple[int, str] | None = None,
    ensuring: bool = False,
    managed_security_groups: bool = False,
) -> NLBSpec:
    """Validate an NLB Service and build its :class:`NLBSpec`.

    ``managed_security_groups`` (``NLBSecurityGroupMode = Managed``): the BYO
    ``security-groups`` annotation is read (ids ``sg-...``); otherwise it is ignored, as
    upstream ignores it.

    Raises :class:`InvalidServiceConfig` (field, value, reason), or
    :class:`ImplementedElsewhere` when the Service is not an NLB of ours.
    """
    kind = type_guard(service)
    if kind != "nlb":
        raise ImplementedElsewhere(f"{service.key} is not a Network Load Balancer")
    ann = service.annotations
    if A_EXTRA_SECURITY_GROUPS in ann:
        raise InvalidServiceConfig(
            A_EXTRA_SECURITY_GROUPS,
            ann[A_EXTRA_SECURITY_GROUPS],
            f'BYO extra security group annotation "{A_EXTRA_SECURITY_GROUPS}" is not '
            "supported by NLB",
        )
    tg_attributes = target_group_attributes(service)
    if ensuring:
        check_session_affinity(service)
    health = build_health_check(service, shared_probe=shared_probe)
    mappings = build_mappings(service, health)
    if ensuring:
        check_load_balancer_ip(service)
    eips = _eip_allocations(ann)
    internal_raw = ann.get(A_INTERNAL, "")
    access, bucket = _access_log(ann)
    return NLBSpec(
        internal=internal_raw not in ("", "false"),
        mappings=mappings,
        source_ranges=source_ranges(service),
        additional_tags=additional_tags(ann),
        subnets=subnets_annotation(ann),
        eip_allocations=eips,
        cross_zone=_bool(ann, A_CROSS_ZONE),
        access_log_enabled=access,
        access_log_bucket=bucket,
        access_log_prefix=ann.get(A_ACCESS_LOG_PREFIX, ""),
        target_node_labels=key_value_list(A_TARGET_NODE_LABELS, ann.get(A_TARGET_NODE_LABELS, "")),
        target_group_attributes=tg_attributes,
        security_groups=(
            id_list(A_SECURITY_GROUPS, ann.get(A_SECURITY_GROUPS, ""), _SG_ID)
            if managed_security_groups
            else ()
        ),
    )
