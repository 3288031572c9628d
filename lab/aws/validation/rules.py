"""The semantic rules of request validation: what AWS refuses beyond the service models.

Role: the checks AWS applies to the calls a cloud controller makes, each behind its
``validate_*`` switch (:data:`lab.aws.validation.validator.RULES` runs them in order):
security-group permissions (protocol, port range or ICMP type/code, a source for every
permission: kubernetes#57568), CIDR syntax, security-group names and descriptions, load
balancer names, Classic ELB listener ports, EC2 filter names, pagination tokens. The existence
checks, which read moto's backends, are in :mod:`.existence`.

Design: a rule is a function of one :class:`Check` (the request, its parameter tree, a lazy
view of moto's backends, the tokens handed out) returning the AWS error or None, so a rule is
read and tested alone.

Neighbours: :mod:`.model` (error builders, filter lists), :mod:`.tree`, :mod:`.validator`.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from lab.aws.exceptions import AwsError, MissingParameter, NoSuchVersion
from lab.aws.protocol import AwsRequest
from lab.aws.validation.model import invalid_value, model_validator, validation_error
from lab.aws.validation.tree import INT_RE, Tree, list_items, scalar

if TYPE_CHECKING:
    from lab.aws.fidelity import MotoView

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
SG_PERMISSION_ACTIONS = frozenset(
    {
        "AuthorizeSecurityGroupIngress",
        "AuthorizeSecurityGroupEgress",
        "RevokeSecurityGroupIngress",
        "RevokeSecurityGroupEgress",
    }
)
_GROUP_TEXT = re.compile(r"^[a-zA-Z0-9 ._\-:/()#,@\[\]+=&;{}!$*]*\Z")
_ELB_NAME = re.compile(r"^[a-zA-Z0-9-]*\Z")

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


def permissions(check: Check) -> Iterator[tuple[str, Tree]]:
    """(wire prefix, node) of each permission of an Authorize/Revoke call (legacy form too)."""
    node = check.tree.get("IpPermissions")
    items = list_items(node, member=None)
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


def sub(node: Tree, key: str, field: str) -> list[str]:
    """Values of ``field`` in the list ``key`` of a permission node."""
    out = []
    for _, item in list_items(node.get(key), member=None):
        if isinstance(item, dict):
            value = scalar(item.get(field))
            if value is not None:
                out.append(value)
    return out


def rule_ip_permissions(check: Check) -> AwsError | None:
    """Protocol, port range / ICMP type-code, and a source for every permission."""
    if check.request.action not in SG_PERMISSION_ACTIONS:
        return None
    for prefix, node in permissions(check):
        name = f"{prefix}.IpProtocol" if prefix else "IpProtocol"
        raw = scalar(node.get("IpProtocol"))
        if raw is None:
            return MissingParameter(
                f"The request must contain the parameter {name}",
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
                sub(node, "IpRanges", "CidrIp"),
                sub(node, "Ipv6Ranges", "CidrIpv6"),
                sub(node, "PrefixListIds", "PrefixListId"),
                sub(node, "Groups", "GroupId") or sub(node, "Groups", "GroupName"),
            )
        )
        if not has_source:
            return invalid_value(_SOURCES_MESSAGE, "ip_permissions")
        if not all(
            _valid_description(d) for key in _SOURCE_LISTS for d in sub(node, key, "Description")
        ):
            return invalid_value(_DESCRIPTION_MESSAGE, "ip_permissions")
    return None


#: EC2's answer to a rule description it refuses (its ``IpRange.Description`` reference: "Up to
#: 255 characters in length. Allowed characters are a-z, A-Z, 0-9, spaces, and
#: ._-:/()#,@[]+=&;{}!$*"), worded as EC2 answers it
_DESCRIPTION_MESSAGE = (
    "Invalid rule description. Valid descriptions are strings less than 256 characters from "
    "the following set:  a-zA-Z0-9. _-:/()#,@[]+=&;{}!$*"
)


def _valid_description(text: str) -> bool:
    return len(text) <= 255 and bool(_GROUP_TEXT.match(text))


def _protocol_number(raw: str) -> int | None:
    lowered = raw.strip().lower()
    if lowered in PROTOCOL_NAMES:
        return PROTOCOL_NAMES[lowered]
    if INT_RE.match(lowered):
        number = int(lowered)
        if number == -1 or 0 <= number <= 255:
            return number
    return None


def _port_range(node: Tree, protocol: int, prefix: str) -> AwsError | None:
    dot = f"{prefix}." if prefix else ""
    from_raw = scalar(node.get("FromPort"))
    to_raw = scalar(node.get("ToPort"))
    if protocol not in (6, 17, 1, 58):
        return None  # all traffic, or a protocol without ports: any range given is ignored
    for field, raw in (("FromPort", from_raw), ("ToPort", to_raw)):
        if raw is not None and not INT_RE.match(raw):
            return invalid_value(
                f"Value ({raw}) for parameter {dot}{field} is invalid. Expected an integer.",
                "ip_permissions",
            )
    if from_raw is None or to_raw is None:
        if protocol == 58:
            return None  # ICMPv6: the range is optional
        missing = "FromPort" if from_raw is None else "ToPort"
        return MissingParameter(
            f"The request must contain the parameter {dot}{missing}",
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
    if check.request.action not in SG_PERMISSION_ACTIONS:
        return None
    for _, node in permissions(check):
        for cidr in sub(node, "IpRanges", "CidrIp"):
            if not _is_cidr(cidr, 4):
                return invalid_value(
                    f"Value ({cidr}) for parameter cidrIp is invalid. "
                    "This is not a valid CIDR block.",
                    "cidr",
                )
        for cidr in sub(node, "Ipv6Ranges", "CidrIpv6"):
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
        if not value:  # EC2 reads an empty query value as the parameter not sent
            return MissingParameter(
                f"The request must contain the parameter {wire}", source="validation:group_names"
            )
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
    for _, listener in list_items(check.tree.get("Listeners"), member="member"):
        if not isinstance(listener, dict):
            continue
        raw = scalar(listener.get("LoadBalancerPort"))
        if raw is None or not INT_RE.match(raw):
            continue  # the model check answers these
        port = int(raw)
        if port not in (25, 80, 443, 465, 587) and not 1024 <= port <= 65535:
            return validation_error(
                f"LoadBalancerPort {port} is invalid: a listener's load balancer port must be "
                f"one of {ELB_PORTS_TEXT}",
                "listener_ports",
            )
    return None


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
    for _, item in list_items(node, member=None):
        if not isinstance(item, dict):
            continue
        name = scalar(item.get("Name"))
        if name is None or name.startswith("tag:") or name in known:
            continue
        return invalid_value(f"The filter '{name}' is invalid", "filters")
    return None


#: EC2's tag limits ("Tag restrictions", Amazon EC2 User Guide: keys 1-128 characters, values
#: at most 256, the ``aws:`` prefix reserved); botocore's EC2 model carries none of them
TAG_KEY_MAX = 128
TAG_VALUE_MAX = 256


def _ec2_tags(tree: Tree) -> Iterator[tuple[str, Tree]]:
    """(wire prefix, tag) of every tag an EC2 call sets: ``Tag.N`` and
    ``TagSpecification.N.Tag.M``."""
    for index, tag in list_items(tree.get("Tag"), member=None):
        if isinstance(tag, dict):
            yield f"Tag.{index}", tag
    for spec_index, spec in list_items(tree.get("TagSpecification"), member=None):
        if isinstance(spec, dict):
            for index, tag in list_items(spec.get("Tag"), member=None):
                if isinstance(tag, dict):
                    yield f"TagSpecification.{spec_index}.Tag.{index}", tag


def rule_tags(check: Check) -> AwsError | None:
    """EC2 tags a call sets: a key of 1-128 characters not starting with ``aws:``, a value of
    at most 256 (the EC2 User Guide's "Tag restrictions"; the messages are the lab's wording
    but for the reserved prefix, which is EC2's)."""
    request = check.request
    if request.service != "ec2" or request.action == "DeleteTags":
        return None
    for prefix, tag in _ec2_tags(check.tree):
        key = scalar(tag.get("Key"))
        value = scalar(tag.get("Value"))
        problem = ""
        if key is not None and not key:
            problem = f"Value () for parameter {prefix}.Key is invalid. Tag keys must not be empty."
        elif key is not None and len(key) > TAG_KEY_MAX:
            problem = (
                f"Value ({key[:40]}...) for parameter {prefix}.Key is invalid. "
                f"Length exceeds maximum of {TAG_KEY_MAX}."
            )
        elif key is not None and key.lower().startswith("aws:"):
            problem = (
                f"Value ({key}) for parameter {prefix}.Key is invalid. "
                "Tag keys starting with 'aws:' are reserved for internal use"
            )
        elif value is not None and len(value) > TAG_VALUE_MAX:
            problem = (
                f"Value ({value[:40]}...) for parameter {prefix}.Value is invalid. "
                f"Length exceeds maximum of {TAG_VALUE_MAX}."
            )
        if problem:
            return invalid_value(problem, "tags")
    return None


_VERSION = re.compile(r"^\d{4}-\d{2}-\d{2}\Z")


def rule_version(check: Check) -> AwsError | None:
    """An EC2 ``Version`` must name an API version: a date no later than the model's
    (``2016-11-15``; EC2 still serves the older ones). EC2 lists ``NoSuchVersion`` among its
    common client errors ("Error codes for the Amazon EC2 API"); the message is the lab's."""
    request = check.request
    version = request.version
    if request.service != "ec2" or not version:
        return None
    latest = str(model_validator("ec2").model.api_version)
    if _VERSION.match(version) and version <= latest:
        return None
    return NoSuchVersion(
        f"The requested version ({version}) of service AmazonEC2 does not exist",
        source="validation:version",
    )


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
