"""The AWS cloud config file (``--cloud-config``): gcfg/INI text to a frozen :class:`CloudConfig`.

Neighbours: :mod:`controller.aws.clients` turns ``service_overrides`` into boto3 endpoints,
:mod:`controller.aws.metadata` resolves the self identity the config leaves open, and the CLI
(outside this package) reads the file and calls :func:`load_cloud_config`.

Design: upstream parses this file with gcfg (``readAWSCloudConfig``): section and key names are
case-insensitive, a repeated key appends to a list field, booleans take gcfg's spellings and
unknown keys are ignored. We keep those semantics but report unknown keys as warnings (a typo
such as ``ElbSecurityGroups`` silently doing nothing is the most common config bug) and reject
invalid values with :class:`CloudConfigError` naming the key and value. configparser cannot
express repeated keys or ``[Section "name"]`` subsections, so a small line parser lives here.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "CloudConfig",
    "CloudConfigError",
    "ServiceOverride",
    "load_cloud_config",
]

_TRUE = {"true", "yes", "on", "1", ""}
_FALSE = {"false", "no", "off", "0"}
_ZONE_TO_REGION = re.compile(r"^([a-zA-Z]+-)+\d+")
_SECTION = re.compile(r'^\[\s*([A-Za-z][-A-Za-z0-9.]*)\s*(?:"((?:[^"\\]|\\.)*)")?\s*\]$')
_KEY = re.compile(r"^([A-Za-z][-A-Za-z0-9]*)\s*(?:=(.*))?$")
_IP_FAMILIES = ("ipv4", "ipv6")
_HEALTH_PROBE_MODES = ("", "ServiceNodePort", "Shared")
NLB_SECURITY_GROUP_MODE_MANAGED = "Managed"
"""Current upstream's ``config.NLBSecurityGroupModeManaged`` (kubernetes/cloud-provider-aws
63ec440c ``pkg/providers/v1/config/config.go``, PR #1158): the only accepted non-empty value."""


class CloudConfigError(ValueError):
    """An invalid cloud config value; ``key`` and ``value`` name the offender."""

    def __init__(
        self, key: str, value: str, reason: str, *, source: str = "<cloud-config>"
    ) -> None:
        super().__init__(f"{source}: {key} = {value!r}: {reason}")
        self.key = key
        self.value = value
        self.reason = reason
        self.source = source


@dataclass(frozen=True)
class ServiceOverride:
    """One ``[ServiceOverride "<name>"]`` section: a custom endpoint for one AWS service.

    ``service`` is matched case-insensitively against both the SDK endpoint id (``ec2``,
    ``elasticloadbalancing``) and the SDK v2 service id (``EC2``, ``Elastic Load Balancing``).
    """

    name: str
    service: str
    region: str
    url: str
    signing_region: str
    signing_method: str = ""
    signing_name: str = ""


@dataclass(frozen=True)
class CloudConfig:
    """The ``[Global]`` section plus service overrides, validated."""

    region: str = ""
    zone: str = ""
    vpc: str = ""
    subnet_id: str = ""
    route_table_id: str = ""
    role_arn: str = ""
    source_arn: str = ""
    kubernetes_cluster_tag: str = ""
    kubernetes_cluster_id: str = ""
    disable_security_group_ingress: bool = False
    elb_security_group: str = ""
    node_ip_families: tuple[str, ...] = ("ipv4",)
    cluster_service_load_balancer_health_probe_mode: str = ""
    cluster_service_shared_load_balancer_health_probe_port: int = 10256
    cluster_service_shared_load_balancer_health_probe_path: str = "/healthz"
    supported_topology_instance_type_pattern: str = ""
    nlb_security_group_mode: str = ""
    service_overrides: tuple[ServiceOverride, ...] = field(default=())

    @property
    def shared_probe(self) -> tuple[int, str] | None:
        """``(port, path)`` of kube-proxy's health endpoint when
        ``ClusterServiceLoadBalancerHealthProbeMode = Shared`` (load balancers of
        ``externalTrafficPolicy: Cluster`` Services check it instead of the traffic port)."""
        if self.cluster_service_load_balancer_health_probe_mode != "Shared":
            return None
        return (
            self.cluster_service_shared_load_balancer_health_probe_port,
            self.cluster_service_shared_load_balancer_health_probe_path,
        )

    @property
    def nlb_security_group_managed(self) -> bool:
        """Upstream ``IsNLBSecurityGroupModeManaged``: ``NLBSecurityGroupMode = Managed``
        (each NLB gets a security group the controller creates, fills and deletes). Any other
        non-empty value was refused by :func:`load_cloud_config`."""
        return self.nlb_security_group_mode == NLB_SECURITY_GROUP_MODE_MANAGED

    @property
    def derived_region(self) -> str:
        """The region as upstream's ``newAWSCloud`` takes it from the config
        (``getRegionFromMetadata``, v1.33.0 and 63ec440c): the region of ``Zone`` when
        ``Zone`` is set ("for backwards compatibility", before ``Region``), else ``Region``
        (``CloudConfig.GetRegion``); empty means "ask instance metadata". ``Zone`` was
        checked when the config was read, so it names a zone."""
        if self.zone:
            return zone_to_region(self.zone)
        return self.region

    def imds_override(self) -> ServiceOverride | None:
        """Upstream ``GetIMDSEndpointOpts``: an ``ec2imds`` override applies whatever its
        ``Region`` (the region may not be known before metadata answers); when several are
        given the last one wins, as each of upstream's options overwrites the endpoint."""
        names = _SERVICE_ALIASES["ec2imds"]
        found = [ov for ov in self.service_overrides if ov.service.lower() in names]
        return found[-1] if found else None

    @property
    def uses_dummy_self_instance(self) -> bool:
        """Upstream's off-cluster mode: VPC and (SubnetID or RoleARN) and a cluster id set."""
        return bool(
            self.vpc
            and (self.subnet_id or self.role_arn)
            and (self.kubernetes_cluster_tag or self.kubernetes_cluster_id)
        )

    def override_for(self, service: str, region: str) -> ServiceOverride | None:
        """The override for ``service`` (any of its names) in ``region``, if configured."""
        names = _SERVICE_ALIASES.get(service.lower(), {service.lower()})
        for ov in self.service_overrides:
            if ov.service.lower() in names and ov.region == region:
                return ov
        return None


# SDK v1 endpoint ids and SDK v2 service ids name the same service.
_SERVICE_ALIASES: dict[str, set[str]] = {
    "ec2": {"ec2"},
    "elb": {"elasticloadbalancing", "elastic load balancing", "elb"},
    # SDK v1's ELBv2 endpoint id is "elasticloadbalancing", the same as Classic ELB's: one
    # override serves both (as upstream resolves it)
    "elbv2": {
        "elasticloadbalancing",
        "elasticloadbalancingv2",
        "elastic load balancing v2",
        "elbv2",
    },
    "sts": {"sts"},
    "kms": {"kms"},
    "ec2imds": {"ec2imds", "ec2metadata"},
}


def zone_to_region(zone: str) -> str:
    """Upstream ``azToRegion``: the leading ``name-name-<n>`` part of a zone name."""
    m = _ZONE_TO_REGION.match(zone)
    if not m:
        raise CloudConfigError("Zone", zone, "not an availability zone name like us-east-1a")
    return m.group(0)


def _parse_bool(key: str, value: str, source: str) -> bool:
    v = value.strip().lower()
    if v in _TRUE:
        return True
    if v in _FALSE:
        return False
    raise CloudConfigError(
        key, value, "not a boolean (true/false, yes/no, on/off, 1/0)", source=source
    )


def _unquote(raw: str, key: str, source: str) -> str:
    """gcfg values: strip an unquoted trailing comment, honour double quotes and escapes.

    Whitespace around the value is dropped unless quoted (gcfg follows git config: ``key = " a
    "`` is ``" a "``)."""
    out: list[str] = []
    quoted = False
    kept = 0  # len(out) when the last quoted part closed: whitespace before it is kept
    i = 0
    raw = raw.strip()
    while i < len(raw):
        ch = raw[i]
        if ch == '"':
            quoted = not quoted
            if not quoted:
                kept = len(out)
        elif ch == "\\" and i + 1 < len(raw):
            i += 1
            out.append({"n": "\n", "t": "\t"}.get(raw[i], raw[i]))
        elif ch in ";#" and not quoted:
            break
        else:
            out.append(ch)
        i += 1
    if quoted:
        raise CloudConfigError(key, raw, "unterminated double quote", source=source)
    return "".join(out[:kept]) + "".join(out[kept:]).rstrip()


_Sections = list[tuple[str, str, dict[str, list[str]], int]]


def _split_sections(text: str, source: str) -> _Sections:
    """Lines to (section, subsection, {lower key: [values]}, line) in file order."""
    sections: _Sections = []
    current: dict[str, list[str]] | None = None
    for lineno, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if not stripped or stripped[0] in ";#":
            continue
        if stripped.startswith("["):
            m = _SECTION.match(stripped)
            if not m:
                raise CloudConfigError(
                    f"line {lineno}", stripped, "malformed section header", source=source
                )
            current = {}
            sections.append((m.group(1).lower(), m.group(2) or "", current, lineno))
            continue
        m = _KEY.match(stripped)
        if not m:
            raise CloudConfigError(
                f"line {lineno}", stripped, "expected 'Key = value'", source=source
            )
        if current is None:
            raise CloudConfigError(m.group(1), stripped, "key outside any [section]", source=source)
        value = "" if m.group(2) is None else _unquote(m.group(2), m.group(1), source)
        current.setdefault(m.group(1).lower(), []).append(value)
    return sections


_GLOBAL_STR = {
    "region": "region",
    "zone": "zone",
    "vpc": "vpc",
    "subnetid": "subnet_id",
    "routetableid": "route_table_id",
    "rolearn": "role_arn",
    "sourcearn": "source_arn",
    "kubernetesclustertag": "kubernetes_cluster_tag",
    "kubernetesclusterid": "kubernetes_cluster_id",
    "elbsecuritygroup": "elb_security_group",
    "clusterserviceloadbalancerhealthprobemode": "cluster_service_load_balancer_health_probe_mode",
    "clusterservicesharedloadbalancerhealthprobepath": (
        "cluster_service_shared_load_balancer_health_probe_path"
    ),
    "nlbsecuritygroupmode": "nlb_security_group_mode",
}
_GLOBAL_KNOWN_IGNORED = {
    "disablestrictzonecheck",
}
_OVERRIDE_KEYS = {"service", "region", "url", "signingregion", "signingmethod", "signingname"}


def load_cloud_config(
    text: str, *, source: str = "<cloud-config>"
) -> tuple[CloudConfig, list[str]]:
    """Parse cloud config text. Returns the config and warnings (unknown keys or sections).

    Raises :class:`CloudConfigError` for malformed lines and invalid values.
    """
    warnings: list[str] = []
    values: dict[str, Any] = {}
    overrides: list[ServiceOverride] = []
    for section, sub, keys, lineno in _split_sections(text, source):
        if section == "global":
            _read_global(keys, values, warnings, source)
        elif section == "serviceoverride":
            overrides.append(_read_override(sub, keys, warnings, source))
        else:
            warnings.append(f"{source}:{lineno}: unknown section [{section}] ignored")
    seen: set[tuple[str, str]] = set()
    for ov in overrides:
        ident = (ov.service.lower(), ov.region)
        if ident in seen:
            raise CloudConfigError(
                f'ServiceOverride "{ov.name}"',
                f"{ov.service}/{ov.region}",
                "duplicate Service and Region pair",
                source=source,
            )
        seen.add(ident)
    cfg = CloudConfig(service_overrides=tuple(overrides), **values)
    if cfg.zone:
        zone_to_region(cfg.zone)
    if (
        cfg.kubernetes_cluster_tag
        and cfg.kubernetes_cluster_id
        and cfg.kubernetes_cluster_tag != cfg.kubernetes_cluster_id
    ):
        raise CloudConfigError(
            "KubernetesClusterID",
            cfg.kubernetes_cluster_id,
            f"clusterID tags did not match: KubernetesClusterTag is {cfg.kubernetes_cluster_tag!r}",
            source=source,
        )
    return cfg, warnings


def _last(key: str, vals: list[str], warnings: list[str], source: str) -> str:
    if len(vals) > 1:
        warnings.append(f"{source}: [Global] {key} given {len(vals)} times; the last one wins")
    return vals[-1]


def _read_global(
    keys: dict[str, list[str]], values: dict[str, Any], warnings: list[str], source: str
) -> None:
    """The [Global] section into ``values`` (CloudConfig field names), key by key in the
    file's order; then the checks that span keys."""
    for key, vals in keys.items():
        if key in _GLOBAL_STR:
            values[_GLOBAL_STR[key]] = _last(key, vals, warnings, source)
        elif key == "disablesecuritygroupingress":
            values["disable_security_group_ingress"] = _parse_bool(
                "DisableSecurityGroupIngress", _last(key, vals, warnings, source), source
            )
        elif key == "nodeipfamilies":
            values["node_ip_families"] = _node_ip_families(vals, source)
        elif key == "clusterservicesharedloadbalancerhealthprobeport":
            raw = _last(key, vals, warnings, source)
            port = _shared_health_probe_port(raw, source)
            values["cluster_service_shared_load_balancer_health_probe_port"] = port
        elif key == "supportedtopologyinstancetypepattern":
            raw = _last(key, vals, warnings, source)
            values["supported_topology_instance_type_pattern"] = _instance_type_pattern(raw, source)
        elif key in _GLOBAL_KNOWN_IGNORED:
            warnings.append(
                f"{source}: [Global] {key} is not supported by this controller; ignored"
            )
        else:
            warnings.append(f"{source}: unknown key [Global] {key} ignored")
    _check_global(values, source)


def _node_ip_families(vals: list[str], source: str) -> tuple[str, ...]:
    """Every NodeIPFamilies line, comma-separated, in order without repeats."""
    fams: list[str] = []
    for v in vals:
        for item in v.split(","):
            fam = item.strip().lower()
            if fam not in _IP_FAMILIES:
                raise CloudConfigError(
                    "NodeIPFamilies", v, "each value must be ipv4 or ipv6", source=source
                )
            if fam not in fams:
                fams.append(fam)
    return tuple(fams)


def _shared_health_probe_port(raw: str, source: str) -> int:
    try:
        port = int(raw, 10)
    except ValueError:
        port = 0
    if not 1 <= port <= 65535:
        raise CloudConfigError(
            "ClusterServiceSharedLoadBalancerHealthProbePort",
            raw,
            "must be a port number 1-65535",
            source=source,
        )
    return port


def _instance_type_pattern(raw: str, source: str) -> str:
    """SupportedTopologyInstanceTypePattern, kept as text once it compiles."""
    try:
        re.compile(raw)
    except re.error as exc:
        raise CloudConfigError(
            "SupportedTopologyInstanceTypePattern",
            raw,
            f"not a regular expression: {exc}",
            source=source,
        ) from None
    return raw


def _check_global(values: dict[str, Any], source: str) -> None:
    """What [Global] must hold once read: a known probe mode, a known NLB security-group
    mode, and ids of the right kind."""
    mode = values.get("cluster_service_load_balancer_health_probe_mode", "")
    if mode not in _HEALTH_PROBE_MODES:
        raise CloudConfigError(
            "ClusterServiceLoadBalancerHealthProbeMode",
            str(mode),
            "must be ServiceNodePort or Shared",
            source=source,
        )
    nlb_mode = str(values.get("nlb_security_group_mode", ""))
    if nlb_mode not in ("", NLB_SECURITY_GROUP_MODE_MANAGED):
        # Upstream refuses the value only when an NLB is ensured, with this text; refusing it
        # at start-up is ours (DEVIATIONS.md).
        raise CloudConfigError(
            "NLBSecurityGroupMode",
            nlb_mode,
            # upstream's text (Go's %q: a double-quoted string with Go's escapes)
            f"invalid NLB security group mode: {json.dumps(nlb_mode, ensure_ascii=False)}. "
            f"Expected: {json.dumps(NLB_SECURITY_GROUP_MODE_MANAGED)}",
            source=source,
        )
    for key in ("vpc", "subnet_id", "elb_security_group"):
        v = str(values.get(key, ""))
        prefix = {"vpc": "vpc-", "subnet_id": "subnet-", "elb_security_group": "sg-"}[key]
        if v and not v.startswith(prefix):
            name = {"vpc": "VPC", "subnet_id": "SubnetID", "elb_security_group": "ElbSecurityGroup"}
            raise CloudConfigError(
                name[key], v, f"must be an id starting with {prefix}", source=source
            )


def _read_override(
    name: str, keys: dict[str, list[str]], warnings: list[str], source: str
) -> ServiceOverride:
    section = f'ServiceOverride "{name}"'
    got: dict[str, str] = {}
    for key, vals in keys.items():
        if key in _OVERRIDE_KEYS:
            got[key] = _last(key, vals, warnings, source)
            if key in ("service", "region", "url", "signingregion"):
                # upstream ValidateOverrides trims these ("gcfg does not space trim"): a
                # quoted value keeps its whitespace until here
                got[key] = got[key].strip()
        else:
            warnings.append(f"{source}: unknown key [{section}] {key} ignored")
    for required, label in (
        ("service", "Service"),
        ("region", "Region"),
        ("url", "URL"),
        ("signingregion", "SigningRegion"),
    ):
        if not got.get(required):
            raise CloudConfigError(
                f"[{section}] {label}", got.get(required, ""), "is required", source=source
            )
    url = got["url"]
    if not re.match(r"^https?://[^/\s]+", url):
        raise CloudConfigError(f"[{section}] URL", url, "must be an http(s):// URL", source=source)
    return ServiceOverride(
        name=name,
        service=got["service"],
        region=got["region"],
        url=url,
        signing_region=got["signingregion"],
        signing_method=got.get("signingmethod", ""),
        signing_name=got.get("signingname", ""),
    )
