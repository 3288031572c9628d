"""Request validation: AWS's answers to malformed EC2 / ELB / ELBv2 calls, before moto sees them.

Role: moto accepts most malformed calls (and then keeps the damage: an ELB named ``None``, a rule
with protocol ``frob``) or crashes on them (500). AWS rejects them with a 4xx and changes
nothing. This module answers such calls the way AWS does, in two layers:

* **the service model** (:class:`ModelValidator`): botocore's EC2, ELB and ELBv2 models say which
  actions exist, which members are required, their types (integer, boolean, timestamp, ...),
  enums, length and value ranges and patterns. The flat query parameters are read back into the
  model's structure (EC2 lists are ``Name.N``, ELB lists ``Name.member.N``; wire names from the
  model's ``locationName``/``queryName``) and every present member is checked. EC2 answers with
  its own codes (``MissingParameter``, ``InvalidParameterValue``, first problem only); ELB and
  ELBv2 with ``ValidationError`` and the message of AWS's validation framework (``N validation
  errors detected: Value 'x' at 'listeners.1.member.instancePort' failed to satisfy constraint:
  ...``), all problems at once.
* **semantic rules** (:class:`SemanticRules`) AWS applies to the calls a cloud controller makes:
  security-group permissions (protocol names and numbers, port ranges, ICMP type/code, a source
  for every permission: kubernetes#57568), CIDR syntax, security-group names and descriptions,
  load balancer names, listener ports, the existence of the VPC / subnets / groups a call
  names, ``Filter.N.Name`` against the filters the model documents for the action, and
  pagination tokens the endpoint never issued.

Every rule is a switch of :class:`lab.aws.fidelity.FidelityConfig` (``validate_*``; the
``validation`` switch turns all of them off). Errors carry ``source="validation:<rule>"`` for
the trail. Messages follow AWS's wording where a public source shows it; see
``lab/aws/README.md`` for the list and the cases where the wording is ours.

Neighbours: called by :mod:`lab.aws.app` under its request lock (existence checks read moto's
backends through :class:`lab.aws.fidelity.MotoView`); errors are :class:`lab.aws.exceptions.
AwsError` serialized by :mod:`lab.aws.protocol`.
"""

from __future__ import annotations

import functools
import ipaddress
import re
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Union

from lab.aws.exceptions import AwsError
from lab.aws.protocol import AwsRequest

if TYPE_CHECKING:
    from lab.aws.fidelity import FidelityConfig, MotoView

#: Services whose requests are validated (query protocol, botocore model names).
MODEL_SERVICES = ("ec2", "elb", "elbv2")

Tree = dict[str, Union[str, "Tree"]]
"""Flat query parameters split on ``.``: ``{"IpPermissions": {"1": {"IpProtocol": "tcp"}}}``.
A key that is both a value and a prefix keeps its value under ``""``."""


def param_tree(params: Mapping[str, str]) -> Tree:
    """The flat ``params`` as a tree (see :data:`Tree`)."""
    root: Tree = {}
    for key, value in params.items():
        node = root
        parts = key.split(".")
        for part in parts[:-1]:
            child = node.get(part)
            if not isinstance(child, dict):
                child = {} if child is None else {"": child}
                node[part] = child
            node = child
        last = parts[-1]
        existing = node.get(last)
        if isinstance(existing, dict):
            existing[""] = value
        else:
            node[last] = value
    return root


def _scalar(value: str | Tree | None) -> str | None:
    if isinstance(value, dict):
        inner = value.get("")
        return inner if isinstance(inner, str) else None
    return value


def _items(value: str | Tree | None, *, member: str | None) -> list[tuple[int, str | Tree]]:
    """The indexed elements of a list node (``member`` is ELB's ``member`` level, or None)."""
    if not isinstance(value, dict):
        return []
    if member is not None:
        inner = value.get(member)
        if not isinstance(inner, dict):
            return []
        value = inner
    found = [(int(k), v) for k, v in value.items() if k.isdigit()]
    found.sort(key=lambda kv: kv[0])
    return found


# --- problems ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Problem:
    """One constraint a request breaks, in both naming styles (EC2 wire name, ELB path)."""

    kind: str
    """``missing``, ``type``, ``enum``, ``length``, ``range``, ``pattern``, ``count``."""
    wire: str
    """The parameter as on the wire: ``IpPermissions.1.FromPort``."""
    path: str
    """AWS's validation path: ``listeners.1.member.instancePort``."""
    value: str | None
    constraint: str
    """What the member must be, in AWS's validation wording (``Member must not be null``)."""


def _coral_message(problems: list[Problem]) -> str:
    shown = problems[:10]
    noun = "error" if len(problems) == 1 else "errors"
    parts = []
    for p in shown:
        value = "null" if p.value is None else f"'{p.value}'"
        parts.append(f"Value {value} at '{p.path}' failed to satisfy constraint: {p.constraint}")
    return f"{len(problems)} validation {noun} detected: " + "; ".join(parts)


def _ec2_error(problem: Problem) -> AwsError:
    if problem.kind == "missing":
        return AwsError(
            f"The request must contain the parameter {problem.wire}",
            code="MissingParameter",
            status=400,
            source="validation:model",
        )
    return AwsError(
        f"Value ({problem.value}) for parameter {problem.wire} is invalid. {problem.constraint}",
        code="InvalidParameterValue",
        status=400,
        source="validation:model",
    )


def validation_error(message: str, rule: str) -> AwsError:
    """ELB/ELBv2's ``ValidationError`` (400)."""
    return AwsError(message, code="ValidationError", status=400, source=f"validation:{rule}")


def invalid_value(message: str, rule: str) -> AwsError:
    """EC2's ``InvalidParameterValue`` (400)."""
    return AwsError(message, code="InvalidParameterValue", status=400, source=f"validation:{rule}")


# --- the service models ------------------------------------------------------------------------

_INT_RE = re.compile(r"^[+-]?\d+$")
_BOOLEANS = frozenset({"true", "false"})
_INT_TYPES = frozenset({"integer", "long"})
_FLOAT_TYPES = frozenset({"float", "double"})
# \p{..} classes (Java regex in the models) in Python terms: letters+digits, separators
_UNICODE_CLASS = re.compile(r"\[((?:\\p\{[LZN]\})+)([^\]]*)\]")


def _python_pattern(pattern: str) -> re.Pattern[str]:
    """A model pattern compiled for Python (``[\\p{L}\\p{Z}\\p{N}_.]`` has no direct form)."""

    def replace(match: re.Match[str]) -> str:
        classes = match.group(1)
        rest = match.group(2)
        options = []
        if "\\p{L}" in classes or "\\p{N}" in classes:
            options.append(r"[^\W_]")
        extra = rest
        if "\\p{Z}" in classes:
            extra = " \u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000" + extra
        if extra:
            options.append(f"[{extra}]")
        return "(?:" + "|".join(options) + ")"

    return re.compile(_UNICODE_CLASS.sub(replace, pattern))


@dataclass(frozen=True)
class _Member:
    name: str
    wire: str
    shape: Any
    required: bool


class ModelValidator:
    """Checks query parameters against one botocore service model (thread-safe, cached)."""

    def __init__(self, service: str) -> None:
        import botocore.session

        self.service = service
        self.model: Any = botocore.session.get_session().get_service_model(service)
        self.ec2 = self.model.protocol == "ec2"
        self.operations = frozenset(self.model.operation_names)
        self._members: dict[str, list[_Member]] = {}
        self._patterns: dict[str, re.Pattern[str]] = {}
        self._lock = threading.Lock()
        self._filters: dict[str, frozenset[str] | None] = {}

    def input_shape(self, action: str) -> Any:
        return self.model.operation_model(action).input_shape

    def members(self, shape: Any) -> list[_Member]:
        cached = self._members.get(shape.name)
        if cached is not None:
            return cached
        required = set(shape.required_members)
        out = []
        for name, member in shape.members.items():
            out.append(_Member(name, self._wire_name(name, member), member, name in required))
        with self._lock:
            self._members[shape.name] = out
        return out

    def _wire_name(self, name: str, member: Any) -> str:
        serialization = member.serialization
        if self.ec2:
            if "queryName" in serialization:
                return str(serialization["queryName"])
            if "name" in serialization:
                text = str(serialization["name"])
                return text[0].upper() + text[1:]
            return name
        return str(serialization.get("name", name))

    def problems(self, action: str, tree: Tree) -> list[Problem]:
        """Every constraint ``tree`` (the call's parameters) breaks, in model order."""
        shape = self.input_shape(action)
        out: list[Problem] = []
        if shape is not None:
            self._structure(shape, tree, "", "", out)
        return out

    # walkers: wire = EC2-style parameter name, path = AWS validation path

    def _structure(
        self, shape: Any, node: str | Tree, wire: str, path: str, out: list[Problem]
    ) -> None:
        if not isinstance(node, dict):
            node = {}
        for member in self.members(shape):
            child = node.get(member.wire)
            m_wire = f"{wire}.{member.wire}" if wire else member.wire
            m_path = f"{path}.{_camel(member.name)}" if path else _camel(member.name)
            if child is None:
                if member.required:
                    out.append(Problem("missing", m_wire, m_path, None, "Member must not be null"))
                continue
            self._value(member.shape, child, m_wire, m_path, out)

    def _value(
        self, shape: Any, node: str | Tree, wire: str, path: str, out: list[Problem]
    ) -> None:
        kind = shape.type_name
        if kind == "structure":
            self._structure(shape, node, wire, path, out)
            return
        if kind == "list":
            self._list(shape, node, wire, path, out)
            return
        if kind == "map":
            return  # no map parameter in the calls a controller makes; not checked
        value = _scalar(node)
        if value is None:
            return
        self._scalar_value(shape, value, wire, path, out)

    def _list(self, shape: Any, node: str | Tree, wire: str, path: str, out: list[Problem]) -> None:
        if self.ec2 or shape.serialization.get("flattened"):
            items = _items(node, member=None)
            member_level = ""
        else:
            member_name = str(shape.member.serialization.get("name", "member"))
            items = _items(node, member=member_name)
            member_level = f".{member_name}"
        meta = shape.metadata
        if "min" in meta and len(items) < meta["min"] and items:
            count = Problem(
                "count",
                wire,
                path,
                str(len(items)),
                f"Member must have length greater than or equal to {meta['min']}",
            )
            out.append(count)
        if "max" in meta and len(items) > meta["max"]:
            count = Problem(
                "count",
                wire,
                path,
                str(len(items)),
                f"Member must have length less than or equal to {meta['max']}",
            )
            out.append(count)
        for position, (index, item) in enumerate(items, 1):
            self._value(
                shape.member,
                item,
                f"{wire}.{index}" if self.ec2 else f"{wire}{member_level}.{index}",
                f"{path}.{position}.member",
                out,
            )

    def _scalar_value(
        self, shape: Any, value: str, wire: str, path: str, out: list[Problem]
    ) -> None:
        kind = shape.type_name
        meta = shape.metadata
        if kind in _INT_TYPES:
            if not _INT_RE.match(value):
                out.append(Problem("type", wire, path, value, "Member must be an integer"))
                return
            number = int(value)
            if "min" in meta and number < meta["min"]:
                limit = f"Member must have value greater than or equal to {meta['min']}"
                out.append(Problem("range", wire, path, value, limit))
            if "max" in meta and number > meta["max"]:
                limit = f"Member must have value less than or equal to {meta['max']}"
                out.append(Problem("range", wire, path, value, limit))
            return
        if kind in _FLOAT_TYPES:
            try:
                float(value)
            except ValueError:
                out.append(Problem("type", wire, path, value, "Member must be a number"))
            return
        if kind == "boolean":
            if value.lower() not in _BOOLEANS:
                out.append(Problem("type", wire, path, value, "Member must be true or false"))
            return
        if kind == "timestamp":
            if not _is_timestamp(value):
                constraint = "Member must be a timestamp (ISO 8601 or epoch seconds)"
                out.append(Problem("type", wire, path, value, constraint))
            return
        if kind != "string":
            return
        enum = meta.get("enum")
        if enum and value not in enum:
            shown = ", ".join(enum[:20]) + (", ..." if len(enum) > 20 else "")
            constraint = f"Member must satisfy enum value set: [{shown}]"
            out.append(Problem("enum", wire, path, value, constraint))
            return
        if "min" in meta and len(value) < meta["min"]:
            limit = f"Member must have length greater than or equal to {meta['min']}"
            out.append(Problem("length", wire, path, value, limit))
        if "max" in meta and len(value) > meta["max"]:
            limit = f"Member must have length less than or equal to {meta['max']}"
            out.append(Problem("length", wire, path, value, limit))
        pattern = meta.get("pattern")
        if pattern and not self._pattern(pattern).search(value):
            constraint = f"Member must satisfy regular expression pattern: {pattern}"
            out.append(Problem("pattern", wire, path, value, constraint))

    def _pattern(self, pattern: str) -> re.Pattern[str]:
        compiled = self._patterns.get(pattern)
        if compiled is None:
            compiled = self._patterns[pattern] = _python_pattern(pattern)
        return compiled

    def error(self, problems: list[Problem]) -> AwsError:
        """The AWS error for ``problems`` in this service's style."""
        if self.ec2:
            return _ec2_error(problems[0])
        return validation_error(_coral_message(problems), "model")

    def filter_names(self, action: str) -> frozenset[str] | None:
        """The ``Filter.N.Name`` values the model documents for ``action`` (None: not listed)."""
        if action in self._filters:
            return self._filters[action]
        shape = self.input_shape(action)
        names: frozenset[str] | None = None
        member = shape.members.get("Filters") if shape is not None else None
        if member is not None:
            found = re.findall(r"<li>\s*<p>\s*<code>([^<]+)</code>", member.documentation or "")
            names = frozenset(name.strip() for name in found if name.strip()) or None
        with self._lock:
            self._filters[action] = names
        return names


def _camel(name: str) -> str:
    return name[:1].lower() + name[1:]


def _is_timestamp(value: str) -> bool:
    try:
        float(value)
        return True
    except ValueError:
        pass
    try:
        datetime.fromisoformat(value.replace("Z", "+00:00"))
        return True
    except ValueError:
        return False


@functools.cache
def model_validator(service: str) -> ModelValidator:
    """The (process-wide, cached) validator of one service's model."""
    return ModelValidator(service)


# --- semantic rules ----------------------------------------------------------------------------

PROTOCOL_NAMES = {"tcp": 6, "udp": 17, "icmp": 1, "icmpv6": 58, "-1": -1, "all": -1}
#: Ports a Classic ELB listener may use (its developer guide: "Listeners for your Classic Load
#: Balancer").
ELB_PORTS_TEXT = "25, 80, 443, 465, 587, 1024-65535"
_SOURCES_MESSAGE = (
    "missing mandatory parameter: exactly one of remote-security-group, remote-ip-range, "
    "remote-ipv6-range, or prefix-list-id must be present"
)
#: A permission's source lists, as EC2 names them on the wire.
_SOURCE_LISTS = ("IpRanges", "Ipv6Ranges", "PrefixListIds", "Groups")
_SG_PERMISSION_ACTIONS = frozenset(
    {
        "AuthorizeSecurityGroupIngress",
        "AuthorizeSecurityGroupEgress",
        "RevokeSecurityGroupIngress",
        "RevokeSecurityGroupEgress",
    }
)
_GROUP_TEXT = re.compile(r"^[a-zA-Z0-9 ._\-:/()#,@\[\]+=&;{}!$*]*$")
_ELB_NAME = re.compile(r"^[a-zA-Z0-9-]*$")

Rule = Callable[["Check"], AwsError | None]


@dataclass
class Check:
    """One request under validation: what the rules read."""

    request: AwsRequest
    tree: Tree
    view: Callable[[], MotoView]
    issued_tokens: set[str]

    @property
    def params(self) -> Mapping[str, str]:
        return self.request.params


def _permissions(check: Check) -> Iterator[tuple[str, Tree]]:
    """(wire prefix, node) of each permission of an Authorize/Revoke call (legacy form too)."""
    node = check.tree.get("IpPermissions")
    items = _items(node, member=None)
    for index, item in items:
        if isinstance(item, dict):
            yield f"IpPermissions.{index}", item
    if not items:
        legacy: Tree = {}
        for key in ("IpProtocol", "FromPort", "ToPort"):
            value = check.params.get(key)
            if value is not None:
                legacy[key] = value
        if "CidrIp" in check.params:
            legacy["IpRanges"] = {"1": {"CidrIp": check.params["CidrIp"]}}
        if (
            "SourceSecurityGroupName" in check.params
            or "SourceSecurityGroupOwnerId" in check.params
        ):
            legacy["Groups"] = {"1": {"GroupName": check.params.get("SourceSecurityGroupName", "")}}
        yield "", legacy


def _sub(node: Tree, key: str, field: str) -> list[str]:
    """Values of ``field`` in the list ``key`` of a permission node."""
    out = []
    for _, item in _items(node.get(key), member=None):
        if isinstance(item, dict):
            value = _scalar(item.get(field))
            if value is not None:
                out.append(value)
    return out


def rule_ip_permissions(check: Check) -> AwsError | None:
    """Protocol, port range / ICMP type-code, and a source for every permission."""
    if check.request.action not in _SG_PERMISSION_ACTIONS:
        return None
    for prefix, node in _permissions(check):
        name = f"{prefix}.IpProtocol" if prefix else "IpProtocol"
        raw = _scalar(node.get("IpProtocol"))
        if raw is None:
            return AwsError(
                f"The request must contain the parameter {name}",
                code="MissingParameter",
                status=400,
                source="validation:ip_permissions",
            )
        protocol = _protocol_number(raw)
        if protocol is None:
            return invalid_value(
                f"Invalid value '{raw}' for IP protocol. Unknown protocol.", "ip_permissions"
            )
        error = _port_range(node, protocol, prefix)
        if error is not None:
            return error
        # An empty source list on the wire (``IpPermissions.1.Ipv6Ranges=``, what aws-sdk-go v1
        # sends for an empty slice) is read as a source without its address: EC2 refuses the
        # whole call, the permission's other sources included (kubernetes#57568).
        if any(isinstance(node.get(key), str) for key in _SOURCE_LISTS):
            return invalid_value(_SOURCES_MESSAGE, "ip_permissions")
        has_source = any(
            (
                _sub(node, "IpRanges", "CidrIp"),
                _sub(node, "Ipv6Ranges", "CidrIpv6"),
                _sub(node, "PrefixListIds", "PrefixListId"),
                _sub(node, "Groups", "GroupId") or _sub(node, "Groups", "GroupName"),
            )
        )
        if not has_source:
            return invalid_value(_SOURCES_MESSAGE, "ip_permissions")
    return None


def _protocol_number(raw: str) -> int | None:
    lowered = raw.strip().lower()
    if lowered in PROTOCOL_NAMES:
        return PROTOCOL_NAMES[lowered]
    if _INT_RE.match(lowered):
        number = int(lowered)
        if number == -1 or 0 <= number <= 255:
            return number
    return None


def _port_range(node: Tree, protocol: int, prefix: str) -> AwsError | None:
    dot = f"{prefix}." if prefix else ""
    from_raw = _scalar(node.get("FromPort"))
    to_raw = _scalar(node.get("ToPort"))
    if protocol not in (6, 17, 1, 58):
        return None  # all traffic, or a protocol without ports: any range given is ignored
    for field, raw in (("FromPort", from_raw), ("ToPort", to_raw)):
        if raw is not None and not _INT_RE.match(raw):
            return invalid_value(
                f"Value ({raw}) for parameter {dot}{field} is invalid. Expected an integer.",
                "ip_permissions",
            )
    if from_raw is None or to_raw is None:
        if protocol == 58:
            return None  # ICMPv6: the range is optional
        missing = "FromPort" if from_raw is None else "ToPort"
        return AwsError(
            f"The request must contain the parameter {dot}{missing}",
            code="MissingParameter",
            status=400,
            source="validation:ip_permissions",
        )
    low, high = int(from_raw), int(to_raw)
    if protocol in (6, 17):
        name = "TCP" if protocol == 6 else "UDP"
        if not (0 <= low <= 65535 and 0 <= high <= 65535):
            return invalid_value(
                f"Invalid {name} port range {low}-{high}: ports must be in 0..65535",
                "ip_permissions",
            )
        if low > high:
            return invalid_value(
                f"Invalid {name} port range {low}-{high}: FromPort must not exceed ToPort",
                "ip_permissions",
            )
        return None
    # ICMP / ICMPv6: FromPort is the type, ToPort the code; -1 = any
    if not (-1 <= low <= 255 and -1 <= high <= 255):
        return invalid_value(
            f"Invalid ICMP type/code {low}/{high}: each must be -1 (any) or 0..255",
            "ip_permissions",
        )
    if low == -1 and high != -1:
        return invalid_value(
            f"Invalid ICMP type/code {low}/{high}: all ICMP types (-1) needs all codes (-1)",
            "ip_permissions",
        )
    return None


def rule_cidr(check: Check) -> AwsError | None:
    """IPv4/IPv6 CIDR syntax of security-group permission ranges."""
    if check.request.action not in _SG_PERMISSION_ACTIONS:
        return None
    for _, node in _permissions(check):
        for cidr in _sub(node, "IpRanges", "CidrIp"):
            if not _is_cidr(cidr, 4):
                return invalid_value(
                    f"Value ({cidr}) for parameter cidrIp is invalid. "
                    "This is not a valid CIDR block.",
                    "cidr",
                )
        for cidr in _sub(node, "Ipv6Ranges", "CidrIpv6"):
            if not _is_cidr(cidr, 6):
                return invalid_value(
                    f"Value ({cidr}) for parameter cidrIpv6 is invalid. "
                    "This is not a valid IPv6 CIDR block.",
                    "cidr",
                )
    return None


def _is_cidr(text: str, version: int) -> bool:
    if "/" not in text:
        return False
    try:
        network = ipaddress.ip_network(text, strict=False)
    except ValueError:
        return False
    return network.version == version


def rule_group_names(check: Check) -> AwsError | None:
    """``CreateSecurityGroup`` name and description: length, characters, no ``sg-`` prefix."""
    if check.request.service != "ec2" or check.request.action != "CreateSecurityGroup":
        return None
    for wire in ("GroupName", "GroupDescription"):
        value = check.params.get(wire)
        if value is None:
            continue
        if wire == "GroupName" and value.lower().startswith("sg-"):
            return invalid_value("Group names may not be in the format sg-*.", "group_names")
        if len(value) > 255:
            return invalid_value(
                f"Value ({value[:40]}...) for parameter {wire} is invalid. "
                "Length exceeds maximum of 255.",
                "group_names",
            )
        if not value.isascii():
            return invalid_value(
                f"Value ({value}) for parameter {wire} is invalid. "
                "Character sets beyond ASCII are not supported.",
                "group_names",
            )
        if not _GROUP_TEXT.match(value):
            return invalid_value(
                f"Value ({value}) for parameter {wire} is invalid. Valid characters are "
                "a-z, A-Z, 0-9, spaces, and ._-:/()#,@[]+=&;{}!$*",
                "group_names",
            )
    return None


def rule_elb_names(check: Check) -> AwsError | None:
    """A new load balancer's name: at most 32 letters, digits and hyphens, no edge hyphen."""
    request = check.request
    if request.action != "CreateLoadBalancer":
        return None
    if request.service == "elb":
        name = request.params.get("LoadBalancerName")
        if name is None:
            return None
        if len(name) > 32:
            return validation_error(
                "LoadBalancer name cannot be longer than 32 characters", "elb_names"
            )
        if not _ELB_NAME.match(name) or not name.isascii():
            return validation_error(
                "LoadBalancer name cannot contain characters that are not letters, or digits "
                "or the dash.",
                "elb_names",
            )
        if name.startswith("-") or name.endswith("-"):
            return validation_error(
                "LoadBalancer name cannot begin or end with a hyphen", "elb_names"
            )
        if not name:
            return validation_error("LoadBalancer name cannot be empty", "elb_names")
        return None
    if request.service == "elbv2":
        name = request.params.get("Name")
        if name is None:
            return None
        if len(name) > 32:
            return validation_error(
                f"The load balancer name '{name}' cannot be longer than '32' characters",
                "elb_names",
            )
        if not name or not _ELB_NAME.match(name) or not name.isascii():
            return validation_error(
                f"The load balancer name '{name}' can only contain characters that are "
                "alphanumeric characters or hyphens(-)",
                "elb_names",
            )
        if name.startswith("-") or name.endswith("-"):
            return validation_error(
                f"The load balancer name '{name}' cannot begin or end with a hyphen(-)",
                "elb_names",
            )
        if name.startswith("internal-"):
            return validation_error(
                f"The load balancer name '{name}' cannot begin with 'internal-'", "elb_names"
            )
    return None


def rule_listener_ports(check: Check) -> AwsError | None:
    """Classic ELB listener ports: the load balancer side is 25, 80, 443, 465, 587, 1024-65535."""
    request = check.request
    if request.service != "elb" or request.action not in (
        "CreateLoadBalancer",
        "CreateLoadBalancerListeners",
    ):
        return None
    for _, listener in _items(check.tree.get("Listeners"), member="member"):
        if not isinstance(listener, dict):
            continue
        raw = _scalar(listener.get("LoadBalancerPort"))
        if raw is None or not _INT_RE.match(raw):
            continue  # the model check answers these
        port = int(raw)
        if port not in (25, 80, 443, 465, 587) and not 1024 <= port <= 65535:
            return validation_error(
                f"LoadBalancerPort {port} is invalid: a listener's load balancer port must be "
                f"one of {ELB_PORTS_TEXT}",
                "listener_ports",
            )
    return None


def _missing(message: str, code: str) -> AwsError:
    """An existence check's refusal: AWS's ``...NotFound``-style error for a named id."""
    return AwsError(message, code=code, status=400, source="validation:existence")


def rule_existence(check: Check) -> AwsError | None:
    """The VPC, subnets and security groups a create/attach call names must exist."""
    request = check.request
    action = request.action
    if request.service == "ec2":
        if action == "CreateSecurityGroup":
            vpc_id = request.params.get("VpcId")
            if vpc_id is not None and vpc_id not in check.view().ec2.vpcs:
                return _missing(f"The vpc ID '{vpc_id}' does not exist", "InvalidVpcID.NotFound")
        if action in ("CreateTags", "DeleteTags"):
            return _tagged_instances(check)
        if action in _SG_PERMISSION_ACTIONS:
            known = _group_ids(check.view())
            group_id = request.params.get("GroupId")
            wanted = [group_id] if group_id else []
            for _, node in _permissions(check):
                wanted += _sub(node, "Groups", "GroupId")
            for gid in wanted:
                if gid not in known:
                    return _missing(
                        f"The security group '{gid}' does not exist", "InvalidGroup.NotFound"
                    )
        return None
    if request.service not in ("elb", "elbv2"):
        return None
    if request.service == "elb" and action in _elb_not_found_actions():
        name = request.params.get("LoadBalancerName")
        if name is not None and name not in check.view().elb.load_balancers:
            return _missing(
                f"The specified load balancer does not exist: {name}", "LoadBalancerNotFound"
            )
    subnets: list[str] = []
    groups: list[str] = []
    if action in ("CreateLoadBalancer", "AttachLoadBalancerToSubnets", "SetSubnets"):
        subnets = [
            v for _, v in _items(check.tree.get("Subnets"), member="member") if isinstance(v, str)
        ]
    if action in ("CreateLoadBalancer", "ApplySecurityGroupsToLoadBalancer", "SetSecurityGroups"):
        groups = [
            v
            for _, v in _items(check.tree.get("SecurityGroups"), member="member")
            if isinstance(v, str)
        ]
    if subnets:
        known_subnets = {
            sid for zone in list(check.view().ec2.subnets.values()) for sid in list(zone)
        }
        found = _first_missing(
            request, subnets, known_subnets, "subnet ID", "subnets", "SubnetNotFound"
        )
        if found is not None:
            return found
    if groups:
        known = _group_ids(check.view())
        return _first_missing(
            request, groups, known, "security group", "security groups", "InvalidSecurityGroup"
        )
    return None


#: an EC2 instance id as EC2 issues them (8 hex digits before 2016, 17 since)
_INSTANCE_ID = re.compile(r"i-(?:[0-9a-f]{8}|[0-9a-f]{17})")


def _tagged_instances(check: Check) -> AwsError | None:
    """The instances ``CreateTags``/``DeleteTags`` name must be well-formed ids (``InvalidID``,
    "The ID '...' is not valid": kubernetes/cloud-provider-aws#1387 quotes it for a KWOK
    node's id) of instances that exist (``InvalidInstanceID.NotFound``, "The instance ID '...'
    does not exist", as EC2 answers a tag call on an instance it does not know). Ids of other
    resource types are not checked."""
    ids = [
        v
        for _, v in _items(check.tree.get("ResourceId"), member=None)
        if isinstance(v, str) and v.startswith("i-")
    ]
    for resource in ids:
        if not _INSTANCE_ID.fullmatch(resource):
            return _missing(f"The ID '{resource}' is not valid", "InvalidID")
    if ids:
        known = {str(i.id) for i in check.view().ec2.all_instances()}
        for resource in ids:
            if resource not in known:
                return _missing(
                    f"The instance ID '{resource}' does not exist", "InvalidInstanceID.NotFound"
                )
    return None


def _first_missing(
    request: AwsRequest, ids: list[str], known: set[str], one: str, many: str, code: str
) -> AwsError | None:
    """ELBv2 names the first unknown id; Classic ELB says "One or more ... do not exist"."""
    missing = [i for i in ids if i not in known]
    if not missing:
        return None
    return _missing(
        f"The {one} '{missing[0]}' does not exist"
        if request.service == "elbv2"
        else f"One or more of the specified {many} do not exist.",
        code,
    )


@functools.cache
def _elb_not_found_actions() -> frozenset[str]:
    """Classic ELB actions on one named load balancer whose model lists ``LoadBalancerNotFound``."""
    model = model_validator("elb").model
    found = set()
    for name in model.operation_names:
        op = model.operation_model(name)
        codes = {e.metadata.get("error", {}).get("code") for e in op.error_shapes}
        if "LoadBalancerNotFound" in codes and "LoadBalancerName" in op.input_shape.members:
            found.add(name)
    return frozenset(found)


def _group_ids(view: MotoView) -> set[str]:
    return {str(g.id) for groups in list(view.ec2.groups.values()) for g in list(groups.values())}


def rule_filters(check: Check) -> AwsError | None:
    """EC2 ``Filter.N.Name`` must be one the action documents (or ``tag:<key>``)."""
    request = check.request
    if request.service != "ec2":
        return None
    node = check.tree.get("Filter")
    if node is None:
        return None
    known = model_validator("ec2").filter_names(request.action)
    if known is None:
        return None
    for _, item in _items(node, member=None):
        if not isinstance(item, dict):
            continue
        name = _scalar(item.get("Name"))
        if name is None or name.startswith("tag:") or name in known:
            continue
        return invalid_value(f"The filter '{name}' is invalid", "filters")
    return None


def rule_next_token(check: Check) -> AwsError | None:
    """A pagination token (EC2 ``NextToken``, ELB ``Marker``) must be one the endpoint issued."""
    request = check.request
    if request.service == "ec2":
        token = request.params.get("NextToken")
        if token is not None and token not in check.issued_tokens:
            return invalid_value(f"Invalid value '{token}' for NextToken", "next_token")
    elif request.service in ("elb", "elbv2"):
        token = request.params.get("Marker")
        if token is not None and token not in check.issued_tokens:
            return validation_error(f"Invalid Marker '{token}'", "next_token")
    return None


#: (switch, rule) in the order they run; the first error answers.
RULES: tuple[tuple[str, Rule], ...] = (
    ("validate_ip_permissions", rule_ip_permissions),
    ("validate_cidr", rule_cidr),
    ("validate_group_names", rule_group_names),
    ("validate_elb_names", rule_elb_names),
    ("validate_listener_ports", rule_listener_ports),
    ("validate_filters", rule_filters),
    ("validate_next_token", rule_next_token),
    ("validate_existence", rule_existence),
)

_TOKEN_TAGS = (
    re.compile(rb"<nextToken>([^<]+)</nextToken>"),
    re.compile(rb"<NextMarker>([^<]+)</NextMarker>"),
)


class RequestValidator:
    """Validates calls for one endpoint and remembers the pagination tokens it handed out."""

    MAX_TOKENS = 10_000

    def __init__(self) -> None:
        self.issued_tokens: set[str] = set()

    def reset(self) -> None:
        self.issued_tokens.clear()

    def check(
        self, request: AwsRequest, config: FidelityConfig, view: Callable[[], MotoView]
    ) -> AwsError | None:
        """An AWS error for a malformed ``request`` (None when it may go on to moto)."""
        if not (config.enabled and config.validation) or request.service not in MODEL_SERVICES:
            return None
        validator = model_validator(request.service)
        if request.action not in validator.operations:
            if not config.validate_action:
                return None
            return invalid_action(request)
        tree = param_tree(request.params)
        if config.validate_model:
            problems = validator.problems(request.action, tree)
            if problems:
                return validator.error(problems)
        context = Check(request, tree, view, self.issued_tokens)
        for switch, rule in RULES:
            if getattr(config, switch):
                error = rule(context)
                if error is not None:
                    return error
        return None

    def observe(self, body: bytes) -> None:
        """Remember the pagination tokens of a response (later calls may send them back)."""
        if b"extToken>" not in body and b"NextMarker>" not in body:
            return
        for pattern in _TOKEN_TAGS:
            for match in pattern.finditer(body):
                if len(self.issued_tokens) >= self.MAX_TOKENS:
                    self.issued_tokens.clear()
                self.issued_tokens.add(match.group(1).decode("utf-8", errors="replace"))


def services_with_action(action: str) -> list[str]:
    """The validated services whose model has ``action`` (for calls that name no service)."""
    return [s for s in MODEL_SERVICES if action in model_validator(s).operations]


def unroutable(request: AwsRequest) -> AwsError:
    """The answer to a call whose service neither its signature nor its Version names, and
    whose Action does not name one service alone."""
    if services_with_action(request.action):
        return AwsError(
            "The request must contain the parameter Version",
            code="MissingParameter",
            status=400,
            source="validation:action",
        )
    return AwsError(
        f"The action {request.action} is not valid for this web service.",
        code="InvalidAction",
        status=400,
        source="validation:action",
    )


def invalid_action(request: AwsRequest) -> AwsError:
    """AWS's answer to an ``Action`` the service does not have."""
    if request.service == "ec2":
        message = f"The action {request.action} is not valid for this web service."
    elif request.action:
        message = f"Could not find operation {request.action} for version {request.version}"
    else:
        message = "The request must contain the parameter Action"
    code = "InvalidAction" if request.action else "MissingAction"
    return AwsError(message, code=code, status=400, source="validation:action")


__all__ = [
    "MODEL_SERVICES",
    "RULES",
    "ModelValidator",
    "Problem",
    "RequestValidator",
    "invalid_action",
    "model_validator",
    "param_tree",
    "services_with_action",
    "unroutable",
]
