"""Service strategy: defaulting, validation, ClusterIP and NodePort allocation.

Follows ``SetDefaults_Service``, the service REST storage's allocation (``alloc.go``) and the
validation messages a cloud controller's tests meet (``apiserver-spec.md`` §9). Allocators map
each claimed IP or port to the owning service key, so an update can tell its own ports from
another service's and a dry run can check without claiming. One pool serves nodePorts and
healthCheckNodePorts. The store calls these hooks under its global lock.
"""

from __future__ import annotations

import ipaddress
import random
from typing import Any

from lab.kube.exceptions import (
    ApiError,
    FieldError,
    duplicate,
    forbidden,
    internal,
    invalid,
    invalid_value,
    not_supported,
    required,
)
from lab.kube.objects import Obj
from lab.kube.resources import ResourceType
from lab.kube.strategies import Strategy
from lab.kube.validation import port_name_problems

TYPES = ["ClusterIP", "ExternalName", "LoadBalancer", "NodePort"]
PROTOCOLS = ["SCTP", "TCP", "UDP"]


def _key(obj: Obj) -> str:
    meta = obj.get("metadata") or {}
    return f"{meta.get('namespace', '')}/{meta.get('name', '')}"


class ServiceStrategy(Strategy):
    name_rule = "dns1035"
    create_on_update = True
    return_deleted_object = True
    field_labels = ("metadata.name", "metadata.namespace", "spec.clusterIP", "spec.type")
    custom_field_labels = True

    def __init__(self, rt: ResourceType, *, cidr: str, node_ports: tuple[int, int]) -> None:
        super().__init__(rt)
        self.network = ipaddress.ip_network(cidr)
        self.port_range = node_ports
        self.ips: dict[str, str] = {}  # ip -> service key
        self.ports: dict[int, str] = {}  # node port -> service key
        self._rand = random.Random()
        size = self.network.num_addresses
        self._static_ips = min(max(16, size // 16), 256)
        span = node_ports[1] - node_ports[0] + 1
        self._static_ports = min(max(16, span // 32), 128)

    def reset(self) -> None:
        self.ips.clear()
        self.ports.clear()

    # -- create/update preparation ----------------------------------------------------------
    def prepare_for_create(self, obj: Obj) -> None:
        obj["status"] = {"loadBalancer": {}}

    def prepare_for_update(self, new: Obj, old: Obj, subresource: str) -> None:
        super().prepare_for_update(new, old, subresource)
        if subresource == "status":
            return
        spec, ospec = new.setdefault("spec", {}), old.get("spec") or {}
        # patchAllocatedValues: keep what we allocated when the client left it out
        if (
            not spec.get("clusterIP")
            and ospec.get("clusterIP")
            and spec.get("type") != "ExternalName"
        ):
            spec["clusterIP"] = ospec["clusterIP"]
        if (
            not spec.get("clusterIPs")
            and ospec.get("clusterIPs")
            and spec.get("type") != "ExternalName"
        ):
            spec["clusterIPs"] = list(ospec["clusterIPs"])
        if spec.get("type") in ("NodePort", "LoadBalancer"):
            old_by_name = {p.get("name", ""): p.get("nodePort") for p in ospec.get("ports") or []}
            for p in spec.get("ports") or []:
                if not p.get("nodePort") and old_by_name.get(p.get("name", "")):
                    p["nodePort"] = old_by_name[p.get("name", "")]
            if not spec.get("healthCheckNodePort") and ospec.get("healthCheckNodePort"):
                spec["healthCheckNodePort"] = ospec["healthCheckNodePort"]
        # dropTypeDependentFields
        if spec.get("type") != ospec.get("type"):
            new_type = spec.get("type", "ClusterIP")
            if new_type not in ("NodePort", "LoadBalancer"):
                olds = {p.get("name", ""): p.get("nodePort") for p in ospec.get("ports") or []}
                for p in spec.get("ports") or []:
                    if p.get("nodePort") and p.get("nodePort") == olds.get(p.get("name", "")):
                        del p["nodePort"]
            if new_type != "LoadBalancer":
                for f in ("allocateLoadBalancerNodePorts", "loadBalancerClass"):
                    if f in spec and spec.get(f) == ospec.get(f):
                        del spec[f]
                new["status"] = {"loadBalancer": {}}
            if not _externally_accessible(spec) and spec.get("externalTrafficPolicy") == ospec.get(
                "externalTrafficPolicy"
            ):
                spec.pop("externalTrafficPolicy", None)
            if new_type == "ExternalName":
                for f in ("clusterIP", "clusterIPs", "ipFamilies", "ipFamilyPolicy"):
                    if spec.get(f) == ospec.get(f):
                        spec.pop(f, None)
        local_lb = (
            spec.get("type") == "LoadBalancer" and spec.get("externalTrafficPolicy") == "Local"
        )
        if not local_lb and spec.get("healthCheckNodePort") == ospec.get("healthCheckNodePort"):
            spec.pop("healthCheckNodePort", None)

    def default(self, obj: Obj, old: Obj | None) -> None:
        spec = obj.setdefault("spec", {})
        stype = spec.setdefault("type", "ClusterIP")
        affinity = spec.setdefault("sessionAffinity", "None")
        if affinity == "None":
            spec.pop("sessionAffinityConfig", None)
        elif affinity == "ClientIP":
            cfg = spec.setdefault("sessionAffinityConfig", {}).setdefault("clientIP", {})
            cfg.setdefault("timeoutSeconds", 10800)
        for p in spec.get("ports") or []:
            p.setdefault("protocol", "TCP")
            if p.get("targetPort") in (None, 0, ""):
                p["targetPort"] = p.get("port")
        if _externally_accessible(spec):
            spec.setdefault("externalTrafficPolicy", "Cluster")
        if stype != "ExternalName":
            spec.setdefault("internalTrafficPolicy", "Cluster")
            if "ipFamilyPolicy" not in spec:
                ospec = (old or {}).get("spec") or {}
                if ospec.get("ipFamilyPolicy"):
                    spec["ipFamilyPolicy"] = ospec["ipFamilyPolicy"]
                elif spec.get("clusterIP") == "None" and not spec.get("selector"):
                    spec["ipFamilyPolicy"] = "RequireDualStack"
                else:
                    spec["ipFamilyPolicy"] = "SingleStack"
            spec.setdefault("ipFamilies", ["IPv4"])
        if stype == "LoadBalancer":
            spec.setdefault("allocateLoadBalancerNodePorts", True)
        status = obj.setdefault("status", {})
        lb = status.setdefault("loadBalancer", {})
        if stype == "LoadBalancer":
            for ing in lb.get("ingress") or []:
                if ing.get("ip") and not ing.get("ipMode"):
                    ing["ipMode"] = "VIP"

    # -- validation -----------------------------------------------------------------------
    def validate(self, obj: Obj, old: Obj | None) -> list[FieldError]:
        spec = obj.get("spec") or {}
        stype = spec.get("type", "ClusterIP")
        errs: list[FieldError] = []
        if stype not in TYPES:
            errs.append(not_supported("spec.type", stype, TYPES))
        ports = spec.get("ports") or []
        if stype == "ExternalName":
            if not spec.get("externalName"):
                errs.append(required("spec.externalName"))
        elif not ports and spec.get("clusterIP") != "None":
            errs.append(required("spec.ports"))
        errs += _port_errors(ports, stype)
        errs += _traffic_errors(spec, stype)
        if old is not None:
            errs += _immutable_errors(spec, old.get("spec") or {}, stype)
        errs += _ingress_errors(obj)
        return errs

    # -- allocation -----------------------------------------------------------------------
    def allocate(self, obj: Obj, old: Obj | None, *, dry_run: bool) -> None:
        key = _key(obj)
        spec = obj.setdefault("spec", {})
        name = (obj.get("metadata") or {}).get("name", "")
        stype = spec.get("type", "ClusterIP")
        errs: list[FieldError] = []
        want_ips = self._cluster_ips(spec, key, errs) if stype != "ExternalName" else []
        want_ports: list[int] = []
        if stype in ("NodePort", "LoadBalancer"):
            self._node_ports(spec, stype, key, want_ports, errs)
        if errs:
            raise invalid(self.rt, name, errs)
        if stype == "LoadBalancer" and spec.get("externalTrafficPolicy") == "Local":
            self._health_check_port(spec, key, want_ports)
        if dry_run:
            return
        self._claim(self.ips, key, want_ips)
        self._claim(self.ports, key, want_ports)

    def _cluster_ips(self, spec: Obj, key: str, errs: list[FieldError]) -> list[str]:
        """Set ``clusterIP(s)``, the requested one (checked) or a free one; the IPs to claim."""
        ip = spec.get("clusterIP") or ""
        if ip == "None":
            spec["clusterIPs"] = ["None"]
            return []
        if ip:
            problem = self._ip_problem(ip, key)
            if problem:
                errs.append(
                    invalid_value(
                        "spec.clusterIPs",
                        spec.get("clusterIPs") or [ip],
                        f"failed to allocate IP {ip}: {problem}",
                    )
                )
            spec["clusterIPs"] = [ip]
            return [ip]
        ip = self._random_ip()
        spec["clusterIP"] = ip
        spec["clusterIPs"] = [ip]
        return [ip]

    def _node_ports(
        self, spec: Obj, stype: str, key: str, want_ports: list[int], errs: list[FieldError]
    ) -> None:
        """Check the requested node ports, then fill in the rest (ports sharing a number share
        a node port) unless a LoadBalancer opts out; adds them to ``want_ports``."""
        ports = spec.get("ports") or []
        auto = stype == "NodePort" or spec.get("allocateLoadBalancerNodePorts", True) is not False
        by_port: dict[Any, int] = {}
        for i, p in enumerate(ports):
            np = p.get("nodePort")
            if np:
                problem = self._port_problem(np, key, want_ports)
                if problem and np not in by_port.values():
                    errs.append(invalid_value(f"spec.ports[{i}].nodePort", np, problem))
                want_ports.append(np)
                by_port.setdefault(p.get("port"), np)
        for p in ports:
            if not p.get("nodePort") and auto:
                np = by_port.get(p.get("port")) or self._random_port(want_ports)
                p["nodePort"] = np
                want_ports.append(np)
                by_port[p.get("port")] = np

    def _health_check_port(self, spec: Obj, key: str, want_ports: list[int]) -> None:
        """The requested ``healthCheckNodePort`` (500 when taken) or a free one."""
        hc = spec.get("healthCheckNodePort")
        if hc:
            if self._port_problem(hc, key, want_ports):
                raise internal(
                    f"failed to allocate requested HealthCheck NodePort {hc}: provided port "
                    "is already allocated"
                )
        else:
            hc = self._random_port(want_ports)
            spec["healthCheckNodePort"] = hc
        want_ports.append(hc)

    def release(self, obj: Obj) -> None:
        key = _key(obj)
        self._claim(self.ips, key, [])
        self._claim(self.ports, key, [])

    @staticmethod
    def _claim(table: dict[Any, str], key: str, wanted: list[Any]) -> None:
        for item in [k for k, v in table.items() if v == key and k not in wanted]:
            del table[item]
        for item in wanted:
            table[item] = key

    def _ip_problem(self, ip: str, key: str) -> str | None:
        try:
            addr = ipaddress.ip_address(ip)
        except ValueError:
            return "must be a valid IP address"
        if addr not in self.network or addr in (
            self.network.network_address,
            self.network.broadcast_address,
        ):
            return (
                f"the provided IP ({ip}) is not in the valid range. The range of valid IPs is "
                f"{self.network}"
            )
        owner = self.ips.get(ip)
        if owner is not None and owner != key:
            return "provided IP is already allocated"
        return None

    def _port_problem(self, port: int, key: str, pending: list[int]) -> str | None:
        lo, hi = self.port_range
        if not isinstance(port, int) or not lo <= port <= hi:
            return f"provided port is not in the valid range. The range of valid ports is {lo}-{hi}"
        owner = self.ports.get(port)
        if (owner is not None and owner != key) or port in pending:
            return "provided port is already allocated"
        return None

    def _random_ip(self) -> str:
        size = self.network.num_addresses
        base = int(self.network.network_address)
        for lo, hi in ((self._static_ips + 1, size - 2), (1, size - 2)):
            for _ in range(64):
                cand = str(ipaddress.ip_address(base + self._rand.randint(lo, hi)))
                if cand not in self.ips:
                    return cand
            for off in range(lo, hi + 1):
                cand = str(ipaddress.ip_address(base + off))
                if cand not in self.ips:
                    return cand
        raise internal("failed to allocate a serviceIP: range is full")

    def _random_port(self, pending: list[int]) -> int:
        lo, hi = self.port_range
        for a, b in ((lo + self._static_ports, hi), (lo, hi)):
            for _ in range(64):
                cand = self._rand.randint(a, b)
                if cand not in self.ports and cand not in pending:
                    return cand
            for cand in range(a, b + 1):
                if cand not in self.ports and cand not in pending:
                    return cand
        raise ApiError(
            500,
            "InternalError",
            "Internal error occurred: failed to allocate a nodePort: range is full",
        )


def _externally_accessible(spec: dict[str, Any]) -> bool:
    stype = spec.get("type", "ClusterIP")
    return stype in ("NodePort", "LoadBalancer") or (
        stype == "ClusterIP" and bool(spec.get("externalIPs"))
    )


def _port_errors(ports: list[Any], stype: str) -> list[FieldError]:
    """Each port: names (required when several, unique), numbers, protocols, unique
    port/protocol pairs, target ports, node ports (not on ClusterIP, unique)."""
    errs: list[FieldError] = []
    seen_names: set[str] = set()
    seen_pp: set[tuple[Any, Any]] = set()
    seen_np: set[tuple[Any, Any]] = set()
    for i, p in enumerate(ports):
        f = f"spec.ports[{i}]"
        name = p.get("name") or ""
        if len(ports) > 1 and not name:
            errs.append(required(f"{f}.name"))
        elif name in seen_names:
            errs.append(duplicate(f"{f}.name", name))
        seen_names.add(name)
        port = p.get("port")
        if not isinstance(port, int) or not 1 <= port <= 65535:
            errs.append(invalid_value(f"{f}.port", port, "must be between 1 and 65535, inclusive"))
        proto = p.get("protocol", "TCP")
        if proto not in PROTOCOLS:
            errs.append(not_supported(f"{f}.protocol", proto, PROTOCOLS))
        if (port, proto) in seen_pp:
            errs.append(duplicate(f, f'core.ServicePort{{Port:{port}, Protocol:"{proto}"}}'))
        seen_pp.add((port, proto))
        tp = p.get("targetPort")
        if isinstance(tp, int) and not 1 <= tp <= 65535:
            errs.append(
                invalid_value(f"{f}.targetPort", tp, "must be between 1 and 65535, inclusive")
            )
        elif isinstance(tp, str):  # ValidatePortNumOrName: a named port is an IANA_SVC_NAME
            errs.extend(invalid_value(f"{f}.targetPort", tp, m) for m in port_name_problems(tp))
        np = p.get("nodePort")
        if np:
            if stype == "ClusterIP":
                errs.append(
                    forbidden(f"{f}.nodePort", "may not be used when `type` is 'ClusterIP'")
                )
            elif (np, proto) in seen_np:
                errs.append(duplicate(f"{f}.nodePort", np))
            seen_np.add((np, proto))
    return errs


def _traffic_errors(spec: dict[str, Any], stype: str) -> list[FieldError]:
    """healthCheckNodePort, externalTrafficPolicy and loadBalancerSourceRanges: only where
    the type allows them."""
    errs: list[FieldError] = []
    hc = spec.get("healthCheckNodePort")
    if hc and not (stype == "LoadBalancer" and spec.get("externalTrafficPolicy") == "Local"):
        errs.append(
            invalid_value(
                "spec.healthCheckNodePort",
                hc,
                "may only be set when `type` is 'LoadBalancer' and `externalTrafficPolicy` "
                "is 'Local'",
            )
        )
    etp = spec.get("externalTrafficPolicy")
    if etp and not _externally_accessible(spec):
        errs.append(
            invalid_value(
                "spec.externalTrafficPolicy",
                etp,
                "may only be set for externally-accessible services",
            )
        )
    elif etp and etp not in ("Cluster", "Local"):
        errs.append(not_supported("spec.externalTrafficPolicy", etp, ["Cluster", "Local"]))
    if spec.get("loadBalancerSourceRanges") and stype != "LoadBalancer":
        errs.append(
            forbidden(
                "spec.loadBalancerSourceRanges",
                "may only be used when `type` is 'LoadBalancer'",
            )
        )
    return errs


def _immutable_errors(spec: dict[str, Any], ospec: dict[str, Any], stype: str) -> list[FieldError]:
    """On update: the cluster IP and (for the same type) the load-balancer class stay."""
    errs: list[FieldError] = []
    oip, nip = ospec.get("clusterIP"), spec.get("clusterIP")
    if (
        oip
        and nip
        and oip != nip
        and stype != "ExternalName"
        and ospec.get("type") != "ExternalName"
    ):
        errs.append(
            invalid_value(
                "spec.clusterIPs[0]",
                spec.get("clusterIPs") or [nip],
                "may not change once set",
            )
        )
    olbc = ospec.get("loadBalancerClass")
    if olbc and spec.get("type") == ospec.get("type") and spec.get("loadBalancerClass") != olbc:
        errs.append(
            invalid_value(
                "spec.loadBalancerClass",
                spec.get("loadBalancerClass") or "",
                "may not change once set",
            )
        )
    return errs


def _ingress_errors(obj: Obj) -> list[FieldError]:
    """``status.loadBalancer.ingress``: valid IPs, and an ``ipMode`` only with an IP."""
    errs: list[FieldError] = []
    for i, ing in enumerate(
        ((obj.get("status") or {}).get("loadBalancer") or {}).get("ingress") or []
    ):
        ip = ing.get("ip")
        if ip:
            try:
                ipaddress.ip_address(ip)
            except ValueError:
                errs.append(
                    invalid_value(
                        f"status.loadBalancer.ingress[{i}].ip", ip, "must be a valid IP address"
                    )
                )
        if ing.get("ipMode") and not ip:
            errs.append(
                required(
                    f"status.loadBalancer.ingress[{i}].ip",
                    "must be specified when `ipMode` is set",
                )
            )
        elif ing.get("ipMode") not in (None, "VIP", "Proxy"):
            errs.append(
                not_supported(
                    f"status.loadBalancer.ingress[{i}].ipMode", ing["ipMode"], ["Proxy", "VIP"]
                )
            )
    return errs
