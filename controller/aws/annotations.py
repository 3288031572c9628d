"""Service annotations and spec to one frozen :class:`LoadBalancerSpec`, before any AWS call.

Neighbours: :mod:`controller.aws.loadbalancer` consumes the spec; :mod:`controller.aws.sgrules`
turns its source ranges into security-group rules. Pure module: no boto3, no I/O.

Design: upstream parses each ``service.beta.kubernetes.io/aws-load-balancer-*`` annotation where
it is used, so a malformed value found halfway through ``EnsureLoadBalancer`` leaves AWS half
changed. Here every annotation and spec field is parsed and validated up front; a bad value
raises :class:`InvalidServiceConfig` naming the annotation and value, and nothing in AWS has
been touched. Where upstream passes a value through verbatim for AWS to reject (health-check
protocol, integer ranges) we validate against the documented AWS limits instead, so the error
reaches the Service's events rather than a log line.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Mapping
from dataclasses import dataclass

from controller.cloud import ImplementedElsewhere, InvalidServiceConfig, Service

PREFIX = "service.beta.kubernetes.io/aws-load-balancer-"
A_TYPE = PREFIX + "type"
A_INTERNAL = PREFIX + "internal"
A_ADDITIONAL_TAGS = PREFIX + "additional-resource-tags"
A_SECURITY_GROUPS = PREFIX + "security-groups"
A_EXTRA_SECURITY_GROUPS = PREFIX + "extra-security-groups"
A_BACKEND_PROTOCOL = PREFIX + "backend-protocol"
A_SSL_CERT = PREFIX + "ssl-cert"
A_SSL_PORTS = PREFIX + "ssl-ports"
A_SSL_NEGOTIATION_POLICY = PREFIX + "ssl-negotiation-policy"
A_PROXY_PROTOCOL = PREFIX + "proxy-protocol"
A_ACCESS_LOG_ENABLED = PREFIX + "access-log-enabled"
A_ACCESS_LOG_EMIT_INTERVAL = PREFIX + "access-log-emit-interval"
A_ACCESS_LOG_BUCKET = PREFIX + "access-log-s3-bucket-name"
A_ACCESS_LOG_PREFIX = PREFIX + "access-log-s3-bucket-prefix"
A_DRAINING_ENABLED = PREFIX + "connection-draining-enabled"
A_DRAINING_TIMEOUT = PREFIX + "connection-draining-timeout"
A_IDLE_TIMEOUT = PREFIX + "connection-idle-timeout"
A_CROSS_ZONE = PREFIX + "cross-zone-load-balancing-enabled"
A_HC_PROTOCOL = PREFIX + "healthcheck-protocol"
A_HC_PORT = PREFIX + "healthcheck-port"
A_HC_PATH = PREFIX + "healthcheck-path"
A_HC_HEALTHY = PREFIX + "healthcheck-healthy-threshold"
A_HC_UNHEALTHY = PREFIX + "healthcheck-unhealthy-threshold"
A_HC_TIMEOUT = PREFIX + "healthcheck-timeout"
A_HC_INTERVAL = PREFIX + "healthcheck-interval"
A_SUBNETS = PREFIX + "subnets"
A_TARGET_NODE_LABELS = PREFIX + "target-node-labels"
A_TARGET_GROUP_ATTRIBUTES = PREFIX + "target-group-attributes"
A_SOURCE_RANGES = "service.beta.kubernetes.io/load-balancer-source-ranges"
SPEC_SOURCE_RANGES = "spec.loadBalancerSourceRanges"
SPEC_SESSION_AFFINITY = "spec.sessionAffinity"
SPEC_LOAD_BALANCER_IP = "spec.loadBalancerIP"

TRAFFIC_PORT = "traffic-port"
_BACKEND_TO_FRONTEND = {"http": "https", "https": "https", "ssl": "ssl", "tcp": "ssl"}
_HC_PROTOCOLS = ("TCP", "HTTP", "HTTPS", "SSL")
_SG_ID = re.compile(r"^sg-[0-9A-Za-z]+$")
_SUBNET_ID = re.compile(r"^subnet-[0-9A-Za-z]+$")
_CLASSIC_HOST = (".elb.amazonaws.com", ".elb.amazonaws.com.cn")
_NLB_HOST = re.compile(r"\.elb\.[a-z0-9-]+\.amazonaws\.com(\.cn)?$")
_BOOL_TRUE = {"1", "t", "T", "TRUE", "true", "True"}
_BOOL_FALSE = {"0", "f", "F", "FALSE", "false", "False"}


@dataclass(frozen=True)
class Listener:
    """One Classic ELB listener (protocols upper case, as DescribeLoadBalancers reports them)."""

    protocol: str
    load_balancer_port: int
    instance_protocol: str
    instance_port: int
    ssl_certificate_id: str = ""


@dataclass(frozen=True)
class HealthCheck:
    target: str  # "<PROTO>:<port><path>"
    healthy_threshold: int = 2
    unhealthy_threshold: int = 6
    timeout: int = 5
    interval: int = 10


@dataclass(frozen=True)
class AccessLog:
    enabled: bool = False
    emit_interval: int | None = None
    s3_bucket_name: str = ""
    s3_bucket_prefix: str = ""


@dataclass(frozen=True)
class LoadBalancerSpec:
    """Everything the Classic ELB code needs from one Service, validated."""

    internal: bool
    listeners: tuple[Listener, ...]
    health_check: HealthCheck
    source_ranges: tuple[str, ...]
    additional_tags: tuple[tuple[str, str], ...] = ()
    security_groups: tuple[str, ...] = ()
    extra_security_groups: tuple[str, ...] = ()
    #: ``None`` without the annotation; an empty one is sent to ELB, as upstream does
    ssl_negotiation_policy: str | None = None
    proxy_protocol: bool = False
    access_log: AccessLog = AccessLog()
    connection_draining_enabled: bool = False
    connection_draining_timeout: int | None = None
    idle_timeout: int = 60
    cross_zone: bool = False
    subnets: tuple[str, ...] = ()
    target_node_labels: tuple[tuple[str, str], ...] = ()

    @property
    def annotated_security_groups(self) -> frozenset[str]:
        """Groups the user named; the controller never edits or deletes them."""
        return frozenset(self.security_groups) | frozenset(self.extra_security_groups)


def key_value_list(name: str, raw: str) -> tuple[tuple[str, str], ...]:
    """Upstream ``getKeyValuePropertiesFromAnnotation``: ``k=v,k2=,k3`` -> ordered pairs.

    Whitespace is trimmed; ``k3`` and ``k2=`` get an empty value; text after a second ``=`` is
    dropped. An empty key is an error (AWS and Kubernetes both reject it).
    """
    out: dict[str, str] = {}
    for raw_item in raw.split(","):
        item = raw_item.strip()
        if not item:
            continue
        parts = item.split("=")
        key = parts[0].strip()
        value = parts[1].strip() if len(parts) > 1 else ""
        if not key:
            raise InvalidServiceConfig(name, raw, f"item {item!r} has an empty key")
        out[key] = value
    return tuple(out.items())


def id_list(name: str, raw: str, pattern: re.Pattern[str] | None = None) -> tuple[str, ...]:
    """Upstream ``getSGListFromAnnotation``: comma split, trim, drop empty, keep order, dedupe."""
    out: list[str] = []
    for raw_item in raw.split(","):
        item = raw_item.strip()
        if not item:
            continue
        if pattern is not None and not pattern.match(item):
            raise InvalidServiceConfig(name, raw, f"{item!r} is not a valid id")
        if item not in out:
            out.append(item)
    return tuple(out)


def parse_bool(name: str, raw: str) -> bool:
    """Go ``strconv.ParseBool`` spellings."""
    v = raw.strip()
    if v in _BOOL_TRUE:
        return True
    if v in _BOOL_FALSE:
        return False
    raise InvalidServiceConfig(name, raw, "must be true or false")


def parse_int(name: str, raw: str, *, low: int, high: int) -> int:
    v = raw.strip()
    if not re.fullmatch(r"[+-]?[0-9]{1,10}", v):
        raise InvalidServiceConfig(name, raw, "must be a base-10 integer")
    n = int(v, 10)
    if not low <= n <= high:
        raise InvalidServiceConfig(name, raw, f"must be between {low} and {high}")
    return n


def source_ranges(service: Service) -> tuple[str, ...]:
    """``spec.loadBalancerSourceRanges``, else the source-ranges annotation, else 0.0.0.0/0."""
    if service.load_balancer_source_ranges:
        field, items = SPEC_SOURCE_RANGES, service.load_balancer_source_ranges
        raw = ",".join(items)
    elif service.annotations.get(A_SOURCE_RANGES, "").strip():
        field, raw = A_SOURCE_RANGES, service.annotations[A_SOURCE_RANGES]
        items = tuple(raw.split(","))
    else:
        return ("0.0.0.0/0",)
    out: list[str] = []
    for raw_item in items:
        item = raw_item.strip()
        if not item:
            # upstream GetLoadBalancerSourceRanges: an empty item (a trailing comma) fails
            raise InvalidServiceConfig(field, raw, "an empty item is not a CIDR")
        try:
            net = ipaddress.ip_network(item, strict=False)
        except ValueError:
            raise InvalidServiceConfig(field, raw, f"{item!r} is not a CIDR") from None
        if "/" not in item:
            raise InvalidServiceConfig(field, raw, f"{item!r} is not a CIDR (no prefix length)")
        if str(net) not in out:
            out.append(str(net))
    if not out:
        raise InvalidServiceConfig(field, raw, "no CIDR given")
    return tuple(out)


def _ssl_port_matcher(raw: str | None) -> tuple[frozenset[int], frozenset[str]] | None:
    """``None`` means every port; otherwise (numbers, lower-cased names)."""
    if raw is None or raw.strip() in ("", "*"):
        return None
    numbers: set[int] = set()
    names: set[str] = set()
    for raw_item in raw.split(","):
        item = raw_item.strip()
        if not item:
            continue
        if re.fullmatch(r"[0-9]{1,5}", item):
            numbers.add(int(item))
        else:
            names.add(item.lower())
    return frozenset(numbers), frozenset(names)


def build_listeners(service: Service) -> tuple[Listener, ...]:
    """Upstream ``buildListener`` for each port with a node port, validated."""
    ann = service.annotations
    if not service.ports:
        raise InvalidServiceConfig("spec.ports", "", "a LoadBalancer Service needs ports")
    protocols = {p.protocol.upper() for p in service.ports}
    if len(protocols) > 1:
        raise InvalidServiceConfig(
            "spec.ports", ",".join(sorted(protocols)), "mixed protocols are not supported"
        )
    cert = ann.get(A_SSL_CERT, "").strip()
    backend = ann.get(A_BACKEND_PROTOCOL, "").strip().lower()
    if backend and backend not in _BACKEND_TO_FRONTEND:
        raise InvalidServiceConfig(
            A_BACKEND_PROTOCOL, ann[A_BACKEND_PROTOCOL], "must be one of http, https, ssl, tcp"
        )
    ssl_ports = _ssl_port_matcher(ann.get(A_SSL_PORTS))
    listeners: list[Listener] = []
    for port in service.ports:
        if port.protocol.upper() != "TCP":
            raise InvalidServiceConfig(
                "spec.ports.protocol", port.protocol, "Classic ELB supports TCP ports only"
            )
        if not 1 <= port.port <= 65535:
            raise InvalidServiceConfig("spec.ports.port", str(port.port), "not a port number")
        if port.node_port == 0:
            continue  # upstream skips ports without a node port (logged by the caller)
        uses_cert = bool(cert) and (
            ssl_ports is None or port.port in ssl_ports[0] or port.name.lower() in ssl_ports[1]
        )
        if uses_cert:
            if backend:
                proto, inst = _BACKEND_TO_FRONTEND[backend], backend
            else:
                proto, inst = "ssl", "tcp"
            listeners.append(Listener(proto.upper(), port.port, inst.upper(), port.node_port, cert))
        elif backend == "http":
            listeners.append(Listener("HTTP", port.port, "HTTP", port.node_port))
        else:
            listeners.append(Listener("TCP", port.port, "TCP", port.node_port))
    if not listeners:
        raise InvalidServiceConfig("spec.ports.nodePort", "0", "no port has a node port yet")
    return tuple(listeners)


def build_health_check(
    service: Service,
    listeners: tuple[Listener, ...],
    *,
    shared_probe: tuple[int, str] | None = None,
) -> HealthCheck:
    """Upstream CLB health check: eTP=Local probe, TCP/SSL default, annotation overrides.

    ``shared_probe`` is (port, path) when ClusterServiceLoadBalancerHealthProbeMode=Shared.
    """
    ann = service.annotations
    first_node_port = listeners[0].instance_port
    backend = ann.get(A_BACKEND_PROTOCOL, "").strip().lower()
    path = ""
    if service.external_traffic_policy == "Local" and service.health_check_node_port:
        proto, port, path = "HTTP", service.health_check_node_port, "/healthz"
        if ann.get(A_HC_PORT, "").strip() == TRAFFIC_PORT:
            port = first_node_port
    elif shared_probe is not None:
        proto, port, path = "HTTP", shared_probe[0], shared_probe[1]
    else:
        proto, port = ("SSL" if backend in ("https", "ssl") else "TCP"), first_node_port
    if A_HC_PROTOCOL in ann:
        proto = ann[A_HC_PROTOCOL].strip().upper()
        if proto not in _HC_PROTOCOLS:
            raise InvalidServiceConfig(
                A_HC_PROTOCOL, ann[A_HC_PROTOCOL], "must be one of TCP, HTTP, HTTPS, SSL"
            )
    raw_port = ann.get(A_HC_PORT, "").strip()
    if raw_port and raw_port != TRAFFIC_PORT:
        port = parse_int(A_HC_PORT, ann[A_HC_PORT], low=1, high=65535)
    if proto in ("HTTP", "HTTPS"):
        if A_HC_PATH in ann:
            path = ann[A_HC_PATH].strip()
            if not path.startswith("/") or any(c.isspace() for c in path) or len(path) > 1024:
                raise InvalidServiceConfig(
                    A_HC_PATH, ann[A_HC_PATH], "must be an absolute path without spaces"
                )
        path = path or "/"
    else:
        path = ""

    def num(name: str, default: int, low: int, high: int) -> int:
        return parse_int(name, ann[name], low=low, high=high) if name in ann else default

    timeout = num(A_HC_TIMEOUT, 5, 2, 60)
    interval = num(A_HC_INTERVAL, 10, 5, 300)
    if timeout >= interval:
        raise InvalidServiceConfig(
            A_HC_TIMEOUT, str(timeout), f"must be less than the interval ({interval})"
        )
    return HealthCheck(
        target=f"{proto}:{port}{path}",
        healthy_threshold=num(A_HC_HEALTHY, 2, 2, 10),
        unhealthy_threshold=num(A_HC_UNHEALTHY, 6, 2, 10),
        timeout=timeout,
        interval=interval,
    )


def _stripped(value: str | None) -> str | None:
    return None if value is None else value.strip()


def _first_hostname(service: Service) -> str | None:
    """Upstream looks at the first ingress only; ``None`` when the status has none."""
    if not service.status_ingress:
        return None
    return str(service.status_ingress[0].get("hostname") or "")


def status_kind(service: Service) -> str | None:
    """``classic`` or ``nlb`` when the Service's status names a load balancer of that form
    (``*.elb.amazonaws.com`` / ``*.elb.<region>.amazonaws.com``), else ``None``."""
    host = _first_hostname(service)
    if not host:
        return None
    if host.endswith(_CLASSIC_HOST):
        return "classic"
    if _NLB_HOST.search(host):
        return "nlb"
    return None


def load_balancer_kind(annotations: Mapping[str, str]) -> str:
    """``classic``, ``nlb`` or ``external`` (another controller's) from the type annotation.

    Upstream ``isNLB`` / ``isLBExternal``: exactly ``nlb``; exactly ``nlb-ip`` or
    ``external``; anything else is Classic. Ours: absent, blank, ``clb`` or ``elb`` (any case)
    are Classic and any other value is refused (DEVIATIONS.md).
    """
    value = annotations.get(A_TYPE, "")
    if value == "nlb":
        return "nlb"
    if value in ("nlb-ip", "external"):
        return "external"
    if value.strip().lower() in ("", "clb", "elb"):
        return "classic"
    raise InvalidServiceConfig(
        A_TYPE, value, "must be nlb, nlb-ip or external (absent, clb or elb: Classic ELB)"
    )


def type_guard(service: Service) -> str:
    """``aws-load-balancer-type`` as upstream reads it, and upstream's type-switch guard;
    returns the kind (``classic``, ``nlb`` or ``external``).

    Upstream ``isNLB`` / ``isLBExternal`` compare the exact value: ``nlb`` is an NLB,
    ``nlb-ip`` and ``external`` belong to another controller, and every other value builds a
    Classic ELB. We build a Classic ELB for an absent or blank value and for ``clb`` / ``elb``
    (any case); other values are refused (DEVIATIONS.md).

    The guard (upstream ``validateServiceAnnotations``): a Service whose status names a Classic
    ELB cannot become an NLB (or another controller's), and one whose status names an NLB
    cannot become a Classic ELB; both refused with upstream's text.
    """
    value = service.annotations.get(A_TYPE, "")
    kind = load_balancer_kind(service.annotations)
    classic = kind == "classic"
    host = _first_hostname(service)
    if host is not None:
        host_classic = host.endswith(_CLASSIC_HOST)
        if not classic and host_classic:
            raise InvalidServiceConfig(
                A_TYPE,
                value,
                f'cannot update Load Balancer Type annotation "{A_TYPE}" after creation for NLB',
            )
        if classic and _NLB_HOST.search(host):
            raise InvalidServiceConfig(
                A_TYPE,
                value,
                f'cannot update Load Balancer Type annotation "{A_TYPE}" after creation '
                "for Classic Load Balancer",
            )
    return kind


def check_type(service: Service) -> None:
    """The Classic ELB path's view of :func:`type_guard`: anything but a Classic ELB is
    :class:`ImplementedElsewhere` (the NLB path, :mod:`controller.aws.nlbspec`, or another
    controller)."""
    if type_guard(service) != "classic":
        value = service.annotations.get(A_TYPE, "")
        raise ImplementedElsewhere(f"{service.key}: {A_TYPE}={value} is not a Classic ELB")


def additional_tags(annotations: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    """``additional-resource-tags``, validated: AWS's key and value limits, no reserved keys."""
    raw = annotations.get(A_ADDITIONAL_TAGS, "")
    tags = key_value_list(A_ADDITIONAL_TAGS, raw)
    for key, value in tags:
        if key.lower().startswith("aws:") or len(key) > 128 or len(value) > 256:
            raise InvalidServiceConfig(
                A_ADDITIONAL_TAGS,
                raw,
                f"tag {key!r}: keys must not start with aws: and fit 128/256 characters",
            )
        if key.startswith("kubernetes.io/cluster/") or key == "kubernetes.io/service-name":
            raise InvalidServiceConfig(A_ADDITIONAL_TAGS, raw, f"tag {key!r} is reserved")
    return tags


def subnets_annotation(annotations: Mapping[str, str]) -> tuple[str, ...]:
    """``aws-load-balancer-subnets``: ids or names; present but blank is an error."""
    subnets = id_list(A_SUBNETS, annotations.get(A_SUBNETS, ""))
    if A_SUBNETS in annotations and not subnets:
        # upstream resolveSubnetNameOrIDs: a present but blank annotation is an error
        raise InvalidServiceConfig(
            A_SUBNETS, annotations[A_SUBNETS], "unable to resolve empty subnet slice"
        )
    return subnets


def check_session_affinity(service: Service) -> None:
    """Upstream ``EnsureLoadBalancer``: only ``None`` (ELB stickiness is HTTP-only)."""
    if service.session_affinity not in ("", "None"):
        raise InvalidServiceConfig(
            SPEC_SESSION_AFFINITY,
            service.session_affinity,
            f"unsupported load balancer affinity: {service.session_affinity}",
        )


def check_load_balancer_ip(service: Service) -> None:
    """Upstream ``EnsureLoadBalancer``: an ELB's address cannot be chosen."""
    if service.load_balancer_ip:
        raise InvalidServiceConfig(
            SPEC_LOAD_BALANCER_IP,
            service.load_balancer_ip,
            "LoadBalancerIP cannot be specified for AWS ELB",
        )


def _proxy_protocol(ann: Mapping[str, str]) -> bool:
    """The proxy-protocol annotation: ``*`` (every backend) or absent/empty (off)."""
    proxy = ann.get(A_PROXY_PROTOCOL)
    if proxy is not None and proxy.strip() not in ("", "*"):
        raise InvalidServiceConfig(A_PROXY_PROTOCOL, proxy, "the only supported value is '*'")
    return proxy is not None and proxy.strip() == "*"


def _access_log(ann: Mapping[str, str]) -> AccessLog:
    """The access-log annotations; enabled needs a bucket, the interval is 5 or 60 minutes."""
    emit: int | None = None
    if A_ACCESS_LOG_EMIT_INTERVAL in ann:
        emit = parse_int(
            A_ACCESS_LOG_EMIT_INTERVAL, ann[A_ACCESS_LOG_EMIT_INTERVAL], low=5, high=60
        )
        if emit not in (5, 60):
            raise InvalidServiceConfig(
                A_ACCESS_LOG_EMIT_INTERVAL, ann[A_ACCESS_LOG_EMIT_INTERVAL], "must be 5 or 60"
            )
    access = AccessLog(
        enabled=parse_bool(A_ACCESS_LOG_ENABLED, ann[A_ACCESS_LOG_ENABLED])
        if A_ACCESS_LOG_ENABLED in ann
        else False,
        emit_interval=emit,
        s3_bucket_name=ann.get(A_ACCESS_LOG_BUCKET, "").strip(),
        s3_bucket_prefix=ann.get(A_ACCESS_LOG_PREFIX, "").strip(),
    )
    if access.enabled and not access.s3_bucket_name:
        raise InvalidServiceConfig(
            A_ACCESS_LOG_ENABLED, ann[A_ACCESS_LOG_ENABLED], f"needs {A_ACCESS_LOG_BUCKET}"
        )
    return access


def parse_service(
    service: Service, *, shared_probe: tuple[int, str] | None = None, ensuring: bool = False
) -> LoadBalancerSpec:
    """Validate the Service and build its :class:`LoadBalancerSpec`.

    ``ensuring``: also what upstream checks in ``EnsureLoadBalancer`` only, in its order
    (session affinity before the ports, ``loadBalancerIP`` after them); a node sync
    (``UpdateLoadBalancer``) keeps registering nodes for such a Service, as upstream's does.

    Raises :class:`InvalidServiceConfig` (field, value, reason) or :class:`ImplementedElsewhere`.
    """
    check_type(service)
    ann: Mapping[str, str] = service.annotations
    if A_TARGET_GROUP_ATTRIBUTES in ann:
        raise InvalidServiceConfig(
            A_TARGET_GROUP_ATTRIBUTES,
            ann[A_TARGET_GROUP_ATTRIBUTES],
            "target group attributes annotation is only supported for NLB",
        )
    if ensuring:
        check_session_affinity(service)
    listeners = build_listeners(service)
    if ensuring:
        check_load_balancer_ip(service)
    subnets = subnets_annotation(ann)
    health = build_health_check(service, listeners, shared_probe=shared_probe)
    internal_raw = ann.get(A_INTERNAL, "")
    internal = internal_raw.strip() not in ("", "false")
    proxy_protocol = _proxy_protocol(ann)
    tags = additional_tags(ann)
    access = _access_log(ann)
    return LoadBalancerSpec(
        internal=internal,
        listeners=listeners,
        health_check=health,
        source_ranges=source_ranges(service),
        additional_tags=tags,
        security_groups=id_list(A_SECURITY_GROUPS, ann.get(A_SECURITY_GROUPS, ""), _SG_ID),
        extra_security_groups=id_list(
            A_EXTRA_SECURITY_GROUPS, ann.get(A_EXTRA_SECURITY_GROUPS, ""), _SG_ID
        ),
        ssl_negotiation_policy=_stripped(ann.get(A_SSL_NEGOTIATION_POLICY)),
        proxy_protocol=proxy_protocol,
        access_log=access,
        connection_draining_enabled=parse_bool(A_DRAINING_ENABLED, ann[A_DRAINING_ENABLED])
        if A_DRAINING_ENABLED in ann
        else False,
        connection_draining_timeout=parse_int(
            A_DRAINING_TIMEOUT, ann[A_DRAINING_TIMEOUT], low=1, high=3600
        )
        if A_DRAINING_TIMEOUT in ann
        else None,
        idle_timeout=parse_int(A_IDLE_TIMEOUT, ann[A_IDLE_TIMEOUT], low=1, high=4000)
        if A_IDLE_TIMEOUT in ann
        else 60,
        cross_zone=parse_bool(A_CROSS_ZONE, ann[A_CROSS_ZONE]) if A_CROSS_ZONE in ann else False,
        subnets=subnets,
        target_node_labels=key_value_list(A_TARGET_NODE_LABELS, ann.get(A_TARGET_NODE_LABELS, "")),
    )


def is_subnet_id(ref: str) -> bool:
    return bool(_SUBNET_ID.match(ref))
