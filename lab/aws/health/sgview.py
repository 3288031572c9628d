"""The endpoint's security groups as a :class:`~lab.aws.sgeval.SecurityGroupModel`.

Role: :mod:`lab.aws.sgeval` is a pure model; this module fills it from moto's in-process EC2
backend (groups, their inbound and outbound rules, managed prefix lists) under the endpoint's
request lock, the way :mod:`lab.aws.health.view` reads load balancers: never through the API,
so the reads stay out of the trail and are not hit by injected faults.

Design: building the model walks every group, so it is cached per the endpoint's generation
(bumped by every AWS call that may change state, and by resets), and so are the verdicts
(health checks ask the same questions every interval). A test that changes moto's
backends directly, bypassing the API, calls :meth:`SecurityGroupView.invalidate`.

Neighbours: :mod:`lab.aws.health.probe` (the default prober asks it whether the load balancer's
groups reach an instance), :mod:`lab.aws.health.seam` (the endpoint's lock and generation),
:mod:`lab.aws.gates` (the traffic probe's verdicts).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

from lab.aws.fidelity import MotoView
from lab.aws.health.seam import HealthLab, moto_view
from lab.aws.sgeval import (
    Flow,
    IpNetwork,
    Rule,
    SecurityGroup,
    SecurityGroupError,
    SecurityGroupModel,
    Verdict,
    normalize_protocol,
    parse_cidr,
)

log = logging.getLogger(__name__)

_MAX_VERDICTS = 100_000


def _port(value: Any) -> int | None:
    if value is None or value == "":
        return None
    return int(value)


def _rules(group_id: str, moto_rules: Sequence[Any], by_name: dict[str, str]) -> tuple[Rule, ...]:
    rules: list[Rule] = []
    for raw in moto_rules:
        try:
            protocol = normalize_protocol(raw.ip_protocol or "-1")
        except SecurityGroupError:
            log.warning("security group %s: skipping rule with protocol %r", group_id, raw)
            continue
        ports = protocol != "-1"
        from_port = _port(raw.from_port) if ports else None
        to_port = _port(raw.to_port) if ports else None
        source = dict(raw.source_group or {})
        ip_range = dict(raw.ip_range or {})
        description = str(ip_range.get("Description") or source.get("Description") or "")
        peer_group: str | None = None
        prefix_list: str | None = None
        cidr: IpNetwork | None = None
        if source.get("GroupId") or source.get("GroupName"):
            peer_group = str(source.get("GroupId") or by_name.get(str(source.get("GroupName")), ""))
        elif raw.prefix_list_id:
            prefix_list = str(raw.prefix_list_id)
        elif ip_range.get("CidrIp") or ip_range.get("CidrIpv6"):
            cidr = parse_cidr(str(ip_range.get("CidrIp") or ip_range.get("CidrIpv6")))
        else:
            continue
        rules.append(
            Rule(
                group_id=group_id,
                protocol=protocol,
                from_port=from_port,
                to_port=to_port,
                cidr=cidr,
                peer_group=peer_group,
                prefix_list=prefix_list,
                description=description,
            )
        )
    return tuple(rules)


def read_model(view: MotoView) -> SecurityGroupModel:
    """Every security group and managed prefix list of ``view``'s region, frozen."""
    ec2 = view.ec2
    groups: dict[str, SecurityGroup] = {}
    for vpc_groups in list(ec2.groups.values()):
        members = list(vpc_groups.values())
        by_name = {str(g.name): str(g.id) for g in members}
        for grp in members:
            gid = str(grp.id)
            groups[gid] = SecurityGroup(
                group_id=gid,
                name=str(grp.name or ""),
                vpc_id=str(grp.vpc_id or ""),
                ingress=_rules(gid, list(grp.ingress_rules), by_name),
                egress=_rules(gid, list(grp.egress_rules), by_name),
            )
    prefix_lists: dict[str, tuple[IpNetwork, ...]] = {}
    for pl_id, plist in list(getattr(ec2, "managed_prefix_lists", {}).items()):
        entries = (plist.entries or {}).get(plist.version) or []
        nets = []
        for entry in entries:
            try:
                nets.append(parse_cidr(str(entry.get("Cidr", ""))))
            except SecurityGroupError:
                log.warning("prefix list %s: skipping entry %r", pl_id, entry)
        prefix_lists[str(pl_id)] = tuple(nets)
    return SecurityGroupModel(groups=groups, prefix_lists=prefix_lists)


class SecurityGroupView:
    """The endpoint's current :class:`SecurityGroupModel`, rebuilt only after changes."""

    def __init__(self, aws: HealthLab) -> None:
        self.aws = aws
        self._cached: tuple[int, SecurityGroupModel] | None = None
        self._verdicts: dict[tuple[object, ...], Verdict] = {}

    def invalidate(self) -> None:
        """Forget the cached model (after changing moto's backends without the API)."""
        self._cached = None
        self._verdicts.clear()

    def model(self) -> SecurityGroupModel:
        aws = self.aws
        with aws.lock:
            cached = self._cached
            if cached is not None and cached[0] == aws.generation:
                return cached[1]
            model = read_model(moto_view(aws))
            self._cached = (aws.generation, model)
            self._verdicts.clear()
            return model

    def _memo(self, key: tuple[object, ...], answer: Callable[[], Verdict]) -> Verdict:
        """A verdict remembered for the current model (health checks ask the same questions
        every interval)."""
        with self.aws.lock:
            self.model()  # drops the remembered verdicts when the model changed
            found = self._verdicts.get(key)
            if found is None:
                if len(self._verdicts) >= _MAX_VERDICTS:
                    self._verdicts.clear()
                found = self._verdicts[key] = answer()
            return found

    def ingress(
        self,
        *,
        dest_groups: Sequence[str],
        protocol: str,
        port: int | None,
        source_groups: Sequence[str] = (),
        source_ip: str | None = None,
    ) -> Verdict:
        """Whether an interface with ``dest_groups`` admits the connection (inbound rules)."""
        key = ("in", tuple(dest_groups), protocol, port, tuple(source_groups), source_ip)

        def answer() -> Verdict:
            flow = Flow.of(protocol, port, source_groups=source_groups, source_ip=source_ip)
            return self.model().ingress(dest_groups, flow)

        return self._memo(key, answer)

    def connect(
        self,
        *,
        dest_groups: Sequence[str],
        protocol: str,
        port: int | None,
        source_groups: Sequence[str] = (),
        source_ip: str | None = None,
        dest_ip: str | None = None,
    ) -> Verdict:
        """The source's outbound rules (if it has groups) and the destination's inbound rules."""
        key = ("conn", tuple(dest_groups), protocol, port, tuple(source_groups), source_ip, dest_ip)

        def answer() -> Verdict:
            flow = Flow.of(protocol, port, source_groups=source_groups, source_ip=source_ip)
            return self.model().connect(flow, dest_groups=dest_groups, dest_ip=dest_ip)

        return self._memo(key, answer)


__all__ = ["SecurityGroupView", "read_model"]
