"""State and operations of the instance metadata service, without HTTP.

Role: the values the service serves and the rules it enforces.

* ``InstanceView`` / ``InterfaceView``: a frozen snapshot of one EC2 instance as the metadata
  service needs it, built by ``ec2.Ec2Reader`` from DescribeInstances & co.
* ``build_metadata_tree`` / ``identity_document``: the ``meta-data`` tree and the dynamic
  identity document, both derived from the *same* view so they can never disagree (AEMM's
  static documents do, see ``shared/docs/reference/peers.md`` §4.1).
* ``TokenStore``: IMDSv2 session tokens, bound to the instance they were minted for, expiring
  on an injected clock so tests never sleep.
* ``Injections``: spot interruption notices, scheduled events and rebalance recommendations set
  at run time through the ``/_lab/`` control plane.
* ``Settings``: the mutable knobs (default instance, source-address map, IMDSv2 floor, client
  hop count, instance-tag exposure).

Neighbours: ``handlers`` calls into this module; ``exceptions`` holds the errors raised here.
Design reason: everything here is plain data and pure functions plus two small lock-guarded
stores, so the wire layer stays thin and the rules are testable without a socket.
"""

from __future__ import annotations

import base64
import json
import math
import os
import re
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Literal, NewType, TypedDict

from lab.imds.exceptions import BadRequest, InvalidControlRequest

InstanceID = NewType("InstanceID", str)
Clock = Callable[[], float]

HttpTokens = Literal["optional", "required"]
TagExposure = Literal["from-instance", "enabled", "disabled"]
SpotActionName = Literal["terminate", "stop", "hibernate"]
EventCode = Literal[
    "instance-reboot", "system-reboot", "system-maintenance", "instance-retirement", "instance-stop"
]
EventState = Literal["active", "completed", "canceled"]

TOKEN_TTL_MIN = 1
TOKEN_TTL_MAX = 21600
SERVING_STATES = frozenset({"pending", "running", "stopping", "shutting-down"})
_VALID_TAG_KEY = re.compile(r"^[A-Za-z0-9+\-=.,_:@]+\Z")
_IMDS_TIME = "%Y-%m-%dT%H:%M:%SZ"
_EVENT_TIME = "%d %b %Y %H:%M:%S GMT"

# A directory is a mapping of entry name -> subtree; a leaf is the served text.
MetadataTree = dict[str, "MetadataNode"]
MetadataNode = str | MetadataTree


@dataclass(frozen=True)
class InterfaceView:
    """One attached network interface (``network/interfaces/macs/<mac>/``)."""

    mac: str
    interface_id: str
    device_number: int
    private_ips: tuple[str, ...]
    private_dns_name: str
    subnet_id: str
    subnet_cidr: str
    vpc_id: str
    vpc_cidrs: tuple[str, ...]
    security_group_ids: tuple[str, ...]
    security_group_names: tuple[str, ...]
    owner_id: str
    public_ips: tuple[str, ...] = ()
    ipv6s: tuple[str, ...] = ()


@dataclass(frozen=True)
class InstanceView:
    """What the metadata service knows about one instance, read from EC2."""

    instance_id: InstanceID
    state: str
    image_id: str
    instance_type: str
    launch_index: int
    reservation_id: str
    account_id: str
    region: str
    availability_zone: str
    availability_zone_id: str
    private_ip: str
    private_dns_name: str
    architecture: str
    launch_time: datetime
    security_group_names: tuple[str, ...]
    interfaces: tuple[InterfaceView, ...]
    tags: Mapping[str, str]
    http_tokens: HttpTokens
    hop_limit: int
    metadata_tags_enabled: bool
    lifecycle: str = "on-demand"
    public_ip: str | None = None
    public_dns_name: str | None = None
    placement_group: str | None = None
    iam_role: str | None = None
    iam_instance_profile_arn: str | None = None

    @property
    def primary_interface(self) -> InterfaceView | None:
        ordered = sorted(self.interfaces, key=lambda i: i.device_number)
        return ordered[0] if ordered else None


@dataclass(frozen=True)
class SpotAction:
    """A spot interruption notice (``spot/instance-action`` and ``spot/termination-time``)."""

    action: SpotActionName
    time: datetime


@dataclass(frozen=True)
class ScheduledEvent:
    """One entry of ``events/maintenance/scheduled``."""

    code: EventCode
    not_before: datetime
    not_after: datetime | None = None
    description: str = "scheduled maintenance"
    event_id: str = ""
    state: EventState = "active"
    not_before_deadline: datetime | None = None


class IdentityDocument(TypedDict):
    """``/latest/dynamic/instance-identity/document`` (field names as AWS serves them)."""

    accountId: str
    architecture: str
    availabilityZone: str
    billingProducts: None
    devpayProductCodes: None
    marketplaceProductCodes: None
    imageId: str
    instanceId: str
    instanceType: str
    kernelId: None
    pendingTime: str
    privateIp: str
    ramdiskId: None
    region: str
    version: str


@dataclass(frozen=True)
class Settings:
    """Run-time knobs. ``imdsv2_floor='required'`` forces IMDSv2 even on instances whose
    MetadataOptions say optional (strictest wins); ``'optional'`` defers to the instance.
    ``client_hops`` is how many IP hops the caller sits behind: 1 on the host, 2 inside a
    container; a token response is withheld when it exceeds the instance's hop limit."""

    default_instance_id: InstanceID | None = None
    source_addresses: Mapping[str, InstanceID] = field(default_factory=dict)
    imdsv2_floor: HttpTokens = "optional"
    client_hops: int = 1
    metadata_tags: TagExposure = "from-instance"
    trust_instance_header: bool = True
    iam_role: str | None = "ccm-lab-node"


def effective_http_tokens(view: InstanceView, settings: Settings) -> HttpTokens:
    """Strictest of the instance's ``HttpTokens`` and the server floor."""
    if "required" in (view.http_tokens, settings.imdsv2_floor):
        return "required"
    return "optional"


def parse_token_ttl(raw: str | None) -> int:
    """Validate ``X-aws-ec2-metadata-token-ttl-seconds`` (1..21600) or raise 400."""
    if raw is None:
        raise BadRequest("missing header X-aws-ec2-metadata-token-ttl-seconds")
    try:
        ttl = int(raw.strip())
    except ValueError:
        raise BadRequest(
            f"X-aws-ec2-metadata-token-ttl-seconds={raw!r} is not an integer"
        ) from None
    if not TOKEN_TTL_MIN <= ttl <= TOKEN_TTL_MAX:
        raise BadRequest(
            f"X-aws-ec2-metadata-token-ttl-seconds={ttl} is outside "
            f"{TOKEN_TTL_MIN}..{TOKEN_TTL_MAX}"
        )
    return ttl


@dataclass(frozen=True)
class _Token:
    instance_id: InstanceID
    expires_at: float


class TokenStore:
    """IMDSv2 tokens: random, bound to one instance, expiring on ``clock`` (monotonic secs)."""

    def __init__(self, clock: Clock = time.monotonic, *, max_tokens: int = 10_000) -> None:
        self._clock = clock
        self._max = max_tokens
        self._tokens: dict[str, _Token] = {}
        self._lock = threading.Lock()

    def mint(self, instance_id: InstanceID, ttl: int) -> str:
        token = base64.b64encode(os.urandom(42)).decode("ascii")
        now = self._clock()
        with self._lock:
            if len(self._tokens) >= self._max:
                self._tokens = {k: v for k, v in self._tokens.items() if v.expires_at > now}
                if len(self._tokens) >= self._max:  # all alive: drop the oldest-expiring
                    oldest = min(self._tokens, key=lambda k: self._tokens[k].expires_at)
                    del self._tokens[oldest]
            self._tokens[token] = _Token(instance_id, now + ttl)
        return token

    def remaining(self, token: str, instance_id: InstanceID) -> int | None:
        """Seconds left on ``token`` for ``instance_id``; None if unknown, expired or foreign."""
        now = self._clock()
        with self._lock:
            entry = self._tokens.get(token)
            if entry is None:
                return None
            if entry.expires_at <= now:
                del self._tokens[token]
                return None
        if entry.instance_id != instance_id:
            return None
        return max(1, math.ceil(entry.expires_at - now))

    def clear(self) -> None:
        with self._lock:
            self._tokens.clear()

    def __len__(self) -> int:
        with self._lock:
            return len(self._tokens)


@dataclass(frozen=True)
class InstanceInjections:
    spot: SpotAction | None = None
    events: tuple[ScheduledEvent, ...] = ()
    rebalance: datetime | None = None


class Injections:
    """Per-instance injected notices, replaced wholesale by the control plane."""

    def __init__(self) -> None:
        self._by_instance: dict[InstanceID, InstanceInjections] = {}
        self._lock = threading.Lock()

    def get(self, instance_id: InstanceID) -> InstanceInjections:
        with self._lock:
            return self._by_instance.get(instance_id, InstanceInjections())

    def update(
        self,
        instance_id: InstanceID,
        change: Callable[[InstanceInjections], InstanceInjections],
    ) -> InstanceInjections:
        """Apply ``change`` atomically, e.g. ``lambda cur: replace(cur, spot=None)``."""
        with self._lock:
            new = change(self._by_instance.get(instance_id, InstanceInjections()))
            self._by_instance[instance_id] = new
            return new

    def clear(self) -> None:
        with self._lock:
            self._by_instance.clear()

    def snapshot(self) -> dict[InstanceID, InstanceInjections]:
        with self._lock:
            return dict(self._by_instance)


def format_imds_time(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime(_IMDS_TIME)


def parse_time(raw: object, field_name: str) -> datetime:
    """RFC 3339 timestamp from a control request; naive values are taken as UTC."""
    if not isinstance(raw, str):
        raise InvalidControlRequest(f"{field_name}={raw!r}: expected an RFC 3339 timestamp")
    try:
        parsed = datetime.fromisoformat(raw.replace("Z", "+00:00"))
    except ValueError:
        raise InvalidControlRequest(
            f"{field_name}={raw!r}: expected an RFC 3339 timestamp"
        ) from None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def _partition(region: str) -> tuple[str, str]:
    if region.startswith("cn-"):
        return "aws-cn", "amazonaws.com.cn"
    if region.startswith("us-gov-"):
        return "aws-us-gov", "amazonaws.com"
    return "aws", "amazonaws.com"


def _interface_tree(iface: InterfaceView) -> MetadataTree:
    tree: MetadataTree = {
        "device-number": str(iface.device_number),
        "interface-id": iface.interface_id,
        "local-hostname": iface.private_dns_name,
        "local-ipv4s": "\n".join(iface.private_ips),
        "mac": iface.mac,
        "owner-id": iface.owner_id,
        "security-group-ids": "\n".join(iface.security_group_ids),
        "security-groups": "\n".join(iface.security_group_names),
        "subnet-id": iface.subnet_id,
        "subnet-ipv4-cidr-block": iface.subnet_cidr,
        "vpc-id": iface.vpc_id,
    }
    if iface.vpc_cidrs:
        tree["vpc-ipv4-cidr-block"] = iface.vpc_cidrs[0]
        tree["vpc-ipv4-cidr-blocks"] = "\n".join(iface.vpc_cidrs)
    if iface.public_ips:
        tree["public-ipv4s"] = "\n".join(iface.public_ips)
    if iface.ipv6s:
        tree["ipv6s"] = "\n".join(iface.ipv6s)
    return tree


def _exposed_tags(view: InstanceView, exposure: TagExposure) -> dict[str, str] | None:
    """Tags under ``tags/instance/``; AWS only exposes keys without ``/`` or spaces."""
    enabled = view.metadata_tags_enabled if exposure == "from-instance" else exposure == "enabled"
    if not enabled:
        return None
    return {k: v for k, v in sorted(view.tags.items()) if _VALID_TAG_KEY.match(k)}


def build_metadata_tree(
    view: InstanceView,
    injections: InstanceInjections,
    settings: Settings,
    *,
    now: datetime,
) -> MetadataTree:
    """The ``/latest/meta-data/`` tree of one instance."""
    partition, domain = _partition(view.region)
    tree: MetadataTree = {
        "ami-id": view.image_id,
        "ami-launch-index": str(view.launch_index),
        "ami-manifest-path": "(unknown)",
        "block-device-mapping": {"ami": "/dev/xvda", "root": "/dev/xvda"},
        "hostname": view.private_dns_name,
        "instance-action": "none",
        "instance-id": view.instance_id,
        "instance-life-cycle": view.lifecycle,
        "instance-type": view.instance_type,
        "local-hostname": view.private_dns_name,
        "local-ipv4": view.private_ip,
        "placement": _placement_tree(view),
        "profile": "default-hvm",
        "reservation-id": view.reservation_id,
        "security-groups": "\n".join(view.security_group_names),
        "services": {"domain": domain, "partition": partition},
        "events": _events_tree(injections),
    }
    tree |= _network_entries(view)
    if injections.spot is not None:
        tree["spot"] = {
            "instance-action": json.dumps(
                {"action": injections.spot.action, "time": format_imds_time(injections.spot.time)}
            ),
            "termination-time": format_imds_time(injections.spot.time),
        }
    tags = _exposed_tags(view, settings.metadata_tags)
    if tags is not None:
        tree["tags"] = {"instance": dict(tags)}
    role = view.iam_role or settings.iam_role
    if role:
        tree["iam"] = {
            "info": json.dumps(_iam_info(view, role, now), indent=2),
            "security-credentials": {role: json.dumps(_iam_credentials(now), indent=2)},
        }
    return _prune(tree)


def _placement_tree(view: InstanceView) -> MetadataTree:
    placement: MetadataTree = {
        "availability-zone": view.availability_zone,
        "availability-zone-id": view.availability_zone_id,
        "region": view.region,
    }
    if view.placement_group:
        placement["group-name"] = view.placement_group
    return placement


def _events_tree(injections: InstanceInjections) -> MetadataTree:
    """``events/``: scheduled maintenance, and a rebalance recommendation when injected."""
    events: MetadataTree = {
        "maintenance": {
            "history": "[]",
            "scheduled": json.dumps([_event_json(e) for e in injections.events], indent=2),
        }
    }
    if injections.rebalance is not None:
        events["recommendations"] = {
            "rebalance": json.dumps({"noticeTime": format_imds_time(injections.rebalance)})
        }
    return events


def _network_entries(view: InstanceView) -> MetadataTree:
    """``mac``, ``network/`` (per interface) and the public address and name, where present."""
    entries: MetadataTree = {}
    primary = view.primary_interface
    if primary is not None:
        entries["mac"] = primary.mac
        entries["network"] = {
            "interfaces": {"macs": {i.mac: _interface_tree(i) for i in view.interfaces}}
        }
    if view.public_ip:
        entries["public-ipv4"] = view.public_ip
    if view.public_dns_name:
        entries["public-hostname"] = view.public_dns_name
    return entries


def _prune(tree: MetadataTree) -> MetadataTree:
    """Drop empty leaves and directories: the real service has no empty entries (and botocore
    retries an empty body as a failure)."""
    out: MetadataTree = {}
    for key, node in tree.items():
        kept = _prune(node) if isinstance(node, dict) else node
        if kept:
            out[key] = kept
    return out


def _event_json(event: ScheduledEvent) -> dict[str, str]:
    out = {
        "NotBefore": event.not_before.astimezone(UTC).strftime(_EVENT_TIME),
        "Code": event.code,
        "Description": event.description,
        "EventId": event.event_id,
        "State": event.state,
    }
    if event.not_after is not None:
        out["NotAfter"] = event.not_after.astimezone(UTC).strftime(_EVENT_TIME)
    if event.not_before_deadline is not None:
        out["NotBeforeDeadline"] = event.not_before_deadline.astimezone(UTC).strftime(_EVENT_TIME)
    return out


def _iam_info(view: InstanceView, role: str, now: datetime) -> dict[str, str]:
    arn = view.iam_instance_profile_arn or f"arn:aws:iam::{view.account_id}:instance-profile/{role}"
    return {
        "Code": "Success",
        "LastUpdated": format_imds_time(now),
        "InstanceProfileArn": arn,
        "InstanceProfileId": "AIPACCMLAB" + view.instance_id[2:12].upper(),
    }


def _iam_credentials(now: datetime) -> dict[str, str]:
    """Fixed lab credentials (moto accepts any); they expire six hours ahead like real ones."""
    return {
        "Code": "Success",
        "LastUpdated": format_imds_time(now),
        "Type": "AWS-HMAC",
        "AccessKeyId": "ASIACCMLABIMDS000000",
        "SecretAccessKey": "ccm-lab-imds-fake-secret-access-key-000000",
        "Token": "ccm-lab-imds-fake-session-token",
        "Expiration": format_imds_time(datetime.fromtimestamp(now.timestamp() + 6 * 3600, UTC)),
    }


def identity_document(view: InstanceView) -> IdentityDocument:
    """The identity document, from the same view as ``build_metadata_tree``."""
    return IdentityDocument(
        accountId=view.account_id,
        architecture=view.architecture,
        availabilityZone=view.availability_zone,
        billingProducts=None,
        devpayProductCodes=None,
        marketplaceProductCodes=None,
        imageId=view.image_id,
        instanceId=view.instance_id,
        instanceType=view.instance_type,
        kernelId=None,
        pendingTime=format_imds_time(view.launch_time),
        privateIp=view.private_ip,
        ramdiskId=None,
        region=view.region,
        version="2017-09-30",
    )


def dynamic_tree(view: InstanceView) -> MetadataTree:
    """``/latest/dynamic/``: the document plus placeholder signatures (not verifiable)."""
    document = json.dumps(identity_document(view), indent=2)
    fake_sig = base64.b64encode(b"ccm-lab unsigned identity document").decode("ascii")
    return {
        "instance-identity": {
            "document": document,
            "pkcs7": fake_sig,
            "signature": fake_sig,
            "rsa2048": fake_sig,
        }
    }


def lookup(tree: MetadataTree, parts: list[str]) -> MetadataNode | None:
    """Walk ``parts`` down ``tree``; None when a segment is missing or a leaf is descended."""
    node: MetadataNode = tree
    for part in parts:
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node


def render_listing(tree: MetadataTree) -> str:
    """Directory listing: one entry a line, sub-directories with a trailing slash."""
    return "\n".join(f"{k}/" if isinstance(v, dict) else k for k, v in tree.items())
