"""``DescribeInstanceTopology``, which moto 5.2.5 does not implement, answered by the lab.

Role: upstream's controller labels nodes ``topology.k8s.aws/network-node-layer-N`` from this
call (``controller.aws.topology``); stock moto answers it with a 500 "not implemented", so the
lab answers it from moto's own instances.

Behaviour (AWS EC2 API reference ``DescribeInstanceTopology`` and the user guide's "Prerequisites
for Amazon EC2 topology"; shapes from botocore's ``ec2`` model):

* only ``running`` instances of the documented types are listed (three network nodes; four for
  ``p6-b200`` / ``p6-b300``); others are left out, so a call naming only unsupported instances
  answers an empty ``instanceSet``;
* ``InstanceId.N`` (at most 100), ``GroupName.N`` (the placement group, at most 100) and the
  filters ``availability-zone``, ``instance-type`` (``*`` and ``?`` wildcards) and ``zone-id``
  select; unknown instance ids are simply not listed;
* ``MaxResults`` (default 20) with ``NextToken`` pages; ``MaxResults`` together with instance
  ids is ``InvalidParameterCombination``;
* network nodes are stable per account: the top layer is shared by the zone, the second by the
  placement group (or the zone when none), the last is the instance's own; ids look like AWS's
  (``nn-`` and 17 hex digits).

Neighbours: called by the fidelity layer (:mod:`lab.aws.fidelity`) before moto when the
fidelity switch ``instance_topology`` is on.
"""

from __future__ import annotations

import fnmatch
import hashlib
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any
from xml.sax.saxutils import escape

from lab.aws.exceptions import AwsError, InvalidParameterCombination, InvalidParameterValue

#: The documented supported types (user guide, "Instance types").
_THREE_LAYERS = re.compile(
    r"^(g6e\.(x|2x|4x|8x|12x|16x|24x|48x)large|g7e\.(2x|4x|8x|12x|24x|48x)large"
    r"|hpc6a\.48xlarge|hpc6id\.32xlarge|hpc7g\.(4x|8x|16x)large|hpc7a\.(12x|24x|48x|96x)large"
    r"|hpc8a\.96xlarge"
    r"|p3dn\.24xlarge|p4d\.24xlarge|p4de\.24xlarge|p5\.48xlarge|p5e\.48xlarge|p5en\.48xlarge"
    r"|p6e-gb200\.36xlarge"
    r"|trn1\.2xlarge|trn1\.32xlarge|trn1n\.32xlarge|trn2\.48xlarge|trn2u\.48xlarge)$"
)
_FOUR_LAYERS = re.compile(r"^(p6-b200|p6-b300)\.48xlarge\Z")
MAX_IDS = 100
DEFAULT_MAX_RESULTS = 20
_TOKEN_PREFIX = "topology-"


def layers_for(instance_type: str) -> int:
    """How many network nodes AWS lists for the type (0: not supported)."""
    if _FOUR_LAYERS.match(instance_type):
        return 4
    if _THREE_LAYERS.match(instance_type):
        return 3
    return 0


def _node_id(account: str, *parts: str) -> str:
    digest = hashlib.sha256("/".join((account, *parts)).encode()).hexdigest()
    return "nn-" + digest[:17]


def network_nodes(account: str, zone: str, group: str, instance_id: str, layers: int) -> list[str]:
    """Top layer first: the zone's, the placement group's, then one per instance below."""
    nodes = [_node_id(account, zone, "spine"), _node_id(account, zone, "group", group or "-")]
    while len(nodes) < layers - 1:
        nodes.append(_node_id(account, zone, group or "-", f"layer{len(nodes) + 1}"))
    nodes.append(_node_id(account, instance_id))
    return nodes[:layers]


def _indexed(params: Mapping[str, str], prefix: str) -> list[str]:
    found = [(k, v) for k, v in params.items() if re.fullmatch(re.escape(prefix) + r"\.\d+", k)]
    return [v for _, v in sorted(found, key=lambda kv: int(kv[0].rsplit(".", 1)[1]))]


def _filters(params: Mapping[str, str]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for key, name in params.items():
        m = re.fullmatch(r"Filter\.(\d+)\.Name", key)
        if m:
            out.setdefault(name, []).extend(_indexed(params, f"Filter.{m.group(1)}.Value"))
    return out


def _invalid(message: str, error: type[AwsError] = InvalidParameterValue) -> AwsError:
    return error(message, source="fidelity:instance_topology")


def describe(
    ec2_backend: Any, account: str, params: Mapping[str, str], zone_ids: Mapping[str, str]
) -> str | AwsError:
    """The XML ``DescribeInstanceTopologyResponse`` body (without the request id), or the
    error AWS answers with."""
    query = _query(params)
    if isinstance(query, AwsError):
        return query
    listed = sorted(_listed(ec2_backend, query, zone_ids))
    start, max_results = query.start, query.max_results
    page = listed[start:] if query.ids else listed[start : start + max_results]
    more = not query.ids and start + max_results < len(listed)
    items = "".join(_item_xml(account, *row) for row in page)
    next_xml = f"<nextToken>{_TOKEN_PREFIX}{start + max_results}</nextToken>" if more else ""
    return f"<instanceSet>{items}</instanceSet>{next_xml}"


@dataclass(frozen=True)
class _Query:
    """What a ``DescribeInstanceTopology`` call asks for, checked."""

    ids: list[str]
    groups: list[str]
    filters: dict[str, list[str]]
    start: int
    max_results: int


def _query(params: Mapping[str, str]) -> _Query | AwsError:
    """The call's ids, groups, filters and page, or the error AWS refuses it with."""
    ids = _indexed(params, "InstanceId")
    groups = _indexed(params, "GroupName")
    if len(ids) > MAX_IDS:
        return _invalid(f"The maximum number of instance IDs is {MAX_IDS}.")
    if len(groups) > MAX_IDS:
        return _invalid(f"The maximum number of placement group names is {MAX_IDS}.")
    raw_max = params.get("MaxResults")
    if raw_max is not None and ids:
        return _invalid(
            "The parameter instancesSet cannot be used with the parameter maxResults",
            InvalidParameterCombination,
        )
    max_results = int(raw_max) if raw_max is not None else DEFAULT_MAX_RESULTS
    start = 0
    token = params.get("NextToken")
    if token:
        if not token.startswith(_TOKEN_PREFIX) or not token[len(_TOKEN_PREFIX) :].isdigit():
            return _invalid(f"Invalid value '{token}' for NextToken")
        start = int(token[len(_TOKEN_PREFIX) :])
    filters = _filters(params)
    for name in filters:
        if name not in ("availability-zone", "instance-type", "zone-id"):
            return _invalid(f"The filter '{name}' is invalid")
    return _Query(ids, groups, filters, start, max_results)


def _listed(
    ec2_backend: Any, query: _Query, zone_ids: Mapping[str, str]
) -> Iterator[tuple[str, str, str, str, str]]:
    """(instance id, type, placement group, zone, zone id) of each instance the call lists:
    running, of a documented type, selected by the call's ids, groups and filters."""
    filters = query.filters
    for reservation in ec2_backend.all_reservations():
        for inst in reservation.instances:
            if inst.state != "running" or (query.ids and inst.id not in query.ids):
                continue
            placement = inst._placement
            group = str(placement.group_name or "")
            if query.groups and group not in query.groups:
                continue
            zone = str(placement.zone or "")
            zone_id = zone_ids.get(zone, "")
            if "availability-zone" in filters and zone not in filters["availability-zone"]:
                continue
            if "zone-id" in filters and zone_id not in filters["zone-id"]:
                continue
            if "instance-type" in filters and not any(
                fnmatch.fnmatchcase(inst.instance_type, p) for p in filters["instance-type"]
            ):
                continue
            if not layers_for(inst.instance_type):
                continue
            yield (inst.id, inst.instance_type, group, zone, zone_id)


def _item_xml(
    account: str, instance_id: str, instance_type: str, group: str, zone: str, zone_id: str
) -> str:
    nodes = network_nodes(account, zone, group, instance_id, layers_for(instance_type))
    node_xml = "".join(f"<item>{n}</item>" for n in nodes)
    group_xml = f"<groupName>{escape(group)}</groupName>" if group else ""
    return (
        f"<item><instanceId>{instance_id}</instanceId>"
        f"<instanceType>{escape(instance_type)}</instanceType>{group_xml}"
        f"<networkNodeSet>{node_xml}</networkNodeSet>"
        f"<availabilityZone>{zone}</availabilityZone><zoneId>{zone_id}</zoneId></item>"
    )
