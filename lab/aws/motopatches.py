"""The lab's patches to moto 5.2.5, applied once per process before moto serves a call.

Role: four places where stock moto answers differently from AWS in a way the fidelity layer
cannot fix around the call, because the difference sits inside moto's models:

* :func:`allow_portless_rules` (``moto.ec2.models.security_groups.SecurityGroupRule.__init__``):
  a rule for a protocol AWS takes without ports (``all``, a protocol number other than
  tcp/udp/icmp/icmpv6, icmpv6 without a range) is built as AWS stores it instead of raising a
  ``TypeError`` (a 500);
* :func:`eni_attachment_status_filter` (``moto.ec2.models.elastic_network_interfaces.
  NetworkInterface.get_filter_value``): ``DescribeNetworkInterfaces`` answers the documented
  filter ``attachment.status`` instead of moto's 500 ("not implemented");
* :func:`share_default_amis` (``moto.ec2.models.amis.AmiBackend._load_amis``): an EC2 region
  backend gets moto's ~1,300 default AMIs as a copy of the first backend's instead of building
  them again (~0.3 s of every lab reset); :func:`catalogue_of` and :func:`twin` let a
  checkpoint (:mod:`lab.aws.motostate`) copy that catalogue the same cheap way;
* :func:`filter_wildcards` (``moto.core.utils.aws_api_matches``, ``moto.ec2.utils``'s
  ``tag_filter_matches`` and ``fnmatch``, ``moto.ec2.models.tags``' ``re``): EC2 filter values
  are matched as AWS matches them (``*``, ``?``, the rest literal; :mod:`lab.aws.wildcard`),
  not as regular expressions or ``fnmatch`` patterns.

Design: each patch marks the function it installs, so :func:`apply` (called by
:func:`lab.aws.motostate.moto_dispatcher` under its lock, once per process) is idempotent; the
README's "moto's default AMIs" and "DescribeNetworkInterfaces filter" sections say how a client
notices each. They live apart from the WSGI app so that the request path reads as a pipeline
and the patches as what they are: edits to a dependency.

Neighbours: :mod:`lab.aws.motostate` (applies them, copies the catalogue for checkpoints),
:mod:`lab.aws.wildcard` (the filter matcher).
"""

from __future__ import annotations

import contextvars
import fnmatch
from typing import Any

from lab.aws import wildcard


def apply() -> None:
    """Install every patch (a second call changes nothing)."""
    rules_quota()
    allow_portless_rules()
    eni_attachment_status_filter()
    share_default_amis()
    filter_wildcards()


#: EC2's quota "Inbound or outbound rules per security group" (VPC groups) for the call moto is
#: running: the endpoint sets it from its fidelity setting ``sg_rules_quota`` around each call
#: (moto's own is a fixed 60, AWS's default; AWS raises it on request, up to 1,000)
RULES_QUOTA: contextvars.ContextVar[int] = contextvars.ContextVar("rules_quota", default=60)


def rules_quota() -> None:
    """moto's check of a security group's rule count reads :data:`RULES_QUOTA` for VPC groups
    (the count as moto's: the group's rules in that direction, plus each CIDR range and each
    group the call adds; an EC2-Classic group keeps moto's 100)."""
    from moto.ec2.exceptions import RulesPerSecurityGroupLimitExceededError
    from moto.ec2.models.security_groups import SecurityGroupBackend

    def verify(
        self: Any,
        group: Any,
        current: int,
        ip_ranges: list[str] | None,
        source_groups: list[dict[str, str]] | None = None,
        egress: bool = False,
    ) -> None:
        limit = RULES_QUOTA.get() if group.vpc_id else 100
        if current + len(ip_ranges or ()) + len(source_groups or ()) > limit:
            raise RulesPerSecurityGroupLimitExceededError

    SecurityGroupBackend._verify_group_will_respect_rule_count_limit = verify  # type: ignore[method-assign,assignment]


#: protocols whose rules AWS requires ports for (names and numbers, as moto normalizes them)
_PORTED_PROTOCOLS = frozenset({"tcp", "6", "udp", "17", "icmp", "1"})
_ICMPV6 = frozenset({"icmpv6", "58"})


def allow_portless_rules() -> None:
    """Rules for protocols AWS takes without ports answer as on AWS, not with a 500.

    AWS allows every port for ``-1`` (``all``) and for any protocol number other than tcp,
    udp, icmp and icmpv6, whatever range is given, and makes icmpv6's range optional (all
    types and codes); ``DescribeSecurityGroups`` then shows such a rule without
    ``FromPort``/``ToPort``. moto builds a rule's ports with ``int()`` for every protocol but
    ``-1``, so such a rule (``IpProtocol=50`` with no ports, ``all`` without ports) raised a
    TypeError. Here: ``all`` is ``-1``; any other protocol but tcp/udp/icmp/icmpv6 is built as
    moto builds a ``-1`` rule (ports dropped, as AWS ignores them) keeping its own protocol;
    icmpv6 (``58`` too) keeps its range when both ends are given and is portless otherwise.
    Applied once per process, before moto serves a call.
    """
    from moto.ec2.models.security_groups import SecurityGroupRule

    original = SecurityGroupRule.__init__
    if getattr(original, "ccm_lab_portless", False):
        return

    def init(
        self: Any,
        ec2_backend: Any,
        ip_protocol: str,
        group_id: str,
        from_port: str | None,
        to_port: str | None,
        *args: Any,
        **kwargs: Any,
    ) -> None:
        protocol = str(ip_protocol).lower() if ip_protocol else ""
        if protocol in ("-1", "all"):
            original(self, ec2_backend, "-1", group_id, None, None, *args, **kwargs)
            return
        if protocol in _ICMPV6 and from_port is not None and to_port is not None:
            original(self, ec2_backend, "icmpv6", group_id, from_port, to_port, *args, **kwargs)
            return
        if not protocol or protocol in _PORTED_PROTOCOLS:
            original(self, ec2_backend, ip_protocol, group_id, from_port, to_port, *args, **kwargs)
            return
        original(self, ec2_backend, "-1", group_id, None, None, *args, **kwargs)
        self.ip_protocol = "icmpv6" if protocol in _ICMPV6 else protocol

    init.ccm_lab_portless = True  # type: ignore[attr-defined]
    SecurityGroupRule.__init__ = init  # type: ignore[method-assign]


def eni_attachment_status_filter() -> None:
    """``DescribeNetworkInterfaces`` with the documented filter ``attachment.status`` answers
    as on AWS instead of moto's 500 ("The filter 'attachment.status' ... has not been
    implemented"): an attached ENI is ``attached``, an unattached one has no attachment and
    matches no value. moto attaches and detaches at once, so ``attaching``/``detaching`` never
    occur. Upstream's Fargate variant looks a ``fargate-`` node's ENI up by this filter.
    Applied once per process, before moto serves a call.
    """
    from moto.ec2.models.elastic_network_interfaces import NetworkInterface

    original = NetworkInterface.get_filter_value
    if getattr(original, "ccm_lab_attachment_status", False):
        return

    def get_filter_value(self: Any, filter_name: str, method_name: str | None = None) -> Any:
        if filter_name == "attachment.status":
            return "attached" if self.attachment_id and self.instance is not None else None
        return original(self, filter_name, method_name)

    get_filter_value.ccm_lab_attachment_status = True  # type: ignore[attr-defined]
    get_filter_value.moto_original = original  # type: ignore[attr-defined]
    NetworkInterface.get_filter_value = get_filter_value  # type: ignore[method-assign]


class _GlobPattern:
    """What moto's ``DescribeTags`` wants of a compiled filter (``match``: a hit or None),
    as a wildcard."""

    def __init__(self, pattern: str) -> None:
        self.pattern = pattern

    def match(self, text: str) -> str | None:
        return text if wildcard.matches(self.pattern, text) else None


def filter_wildcards() -> None:
    """EC2 filter values match as on AWS: ``*`` any run, ``?`` one character, the rest literal.

    moto 5.2.5 matches most describe filters (security groups: ``aws_api_matches``) as a
    regular expression built from the value (``nodes.ccm-la.`` matched ``nodes.ccm-lab``,
    ``(unclosed`` was a 500, ``(a+)+b`` backtracked for seconds with the GIL held), tag filters
    and ``DescribeTags`` through ``fnmatch``'s translation (``[ab]`` a character class), and
    the generic ``get_filter_value`` filters with ``fnmatch.fnmatch``. Each is replaced where
    moto looks it up (module globals, including the modules that imported it by name) with
    :func:`lab.aws.wildcard.matches`, linear in the value. Applied once per process, before
    moto serves a call.
    """
    import types

    import moto.core.utils as core_utils
    import moto.ec2.utils as ec2_utils
    from moto.ec2.models import security_groups, tags

    if getattr(core_utils.aws_api_matches, "ccm_lab_wildcard", False):
        return

    def aws_api_matches(pattern: str, string: Any) -> bool:
        return wildcard.matches(str(pattern), str(string))

    def tag_filter_matches(obj: Any, filter_name: str, filter_values: list[str]) -> bool:
        if filter_name == "tag-key":
            values: Any = ec2_utils.get_obj_tag_names(obj)
        elif filter_name == "tag-value":
            values = ec2_utils.get_obj_tag_values(obj)
        elif filter_name.startswith("tag:"):
            values = ec2_utils.get_obj_tag_values(obj, key=filter_name[4:])
        else:
            values = [ec2_utils.get_obj_tag(obj, filter_name) or ""]
        return any(wildcard.matches_any(filter_values, value) for value in values)

    aws_api_matches.ccm_lab_wildcard = True  # type: ignore[attr-defined]
    core_utils.aws_api_matches = aws_api_matches
    security_groups.aws_api_matches = aws_api_matches  # type: ignore[attr-defined]
    ec2_utils.tag_filter_matches = tag_filter_matches
    security_groups.tag_filter_matches = tag_filter_matches  # type: ignore[attr-defined]
    ec2_utils.fnmatch = types.SimpleNamespace(  # type: ignore[assignment,attr-defined]
        fnmatch=lambda name, pattern: wildcard.matches(str(pattern), str(name)),
        translate=fnmatch.translate,
    )
    tags_module: Any = tags  # moto's ``DescribeTags``: re.compile(simple_aws_filter_to_re(v))
    tags_module.simple_aws_filter_to_re = str
    tags_module.re = types.SimpleNamespace(compile=_GlobPattern)


def twin(ami: Any, snapshot: Any) -> tuple[Any, Any]:
    """A copy of a catalogue image and of its snapshot (the copy's ``ebs_snapshot``) that
    shares nothing a call can change with them: launch permissions, product codes and the
    snapshot's volume permissions are copied; ``ec2_backend`` is still theirs."""
    import copy

    snap = _shallow_copy(snapshot)
    snap.create_volume_permission_groups = set(snapshot.create_volume_permission_groups)
    snap.create_volume_permission_userids = set(snapshot.create_volume_permission_userids)
    twin = _shallow_copy(ami)
    twin.ebs_snapshot = snap
    twin.launch_permissions = [dict(p) for p in ami.launch_permissions]
    twin.product_codes = copy.copy(ami.product_codes)
    return twin, snap


def _shallow_copy(obj: Any) -> Any:
    """``copy.copy`` for a moto model, without its ``__reduce_ex__`` round trip (3x faster;
    ``__new__`` still registers the copy with moto's instance tracker, as a constructor would)."""
    cls: Any = type(obj)
    twin = cls.__new__(cls)
    twin.__dict__.update(obj.__dict__)
    return twin


#: the default AMI catalogue of each (account, region, catalogue settings), as first loaded
_AMI_CATALOGUES: dict[tuple[str, str, str | None, bool], list[tuple[Any, Any]]] = {}


def share_default_amis() -> None:
    """An EC2 region backend gets moto's default AMI catalogue as a copy of the first one.

    moto builds its ~1,300 default AMIs afresh for every EC2 region backend, each with an
    auto-created snapshot and two random ids: ~0.25-0.4 s, paid again on every lab reset (the
    backends are dropped and rebuilt lazily). Here the first backend of an account and region
    loads them as moto does; later ones get copies of those pristine AMIs and snapshots (their
    mutable parts, launch and volume permissions and product codes, copied too; tags live in
    the backend, and the catalogue has none), so a reset still undoes whatever a test did to
    them. What a client sees is moto's catalogue, except that an AMI's snapshot id is the same
    after a reset (as a public AMI's snapshot on AWS is), not a new random one.
    Applied once per process, before moto serves a call.
    """
    import os

    from moto import settings
    from moto.ec2.models.amis import AmiBackend

    original = AmiBackend._load_amis
    if getattr(original, "ccm_lab_shared", False):
        return

    def load(self: Any) -> None:
        key = (
            self.account_id,
            self.region_name,
            os.environ.get("MOTO_AMIS_PATH"),
            settings.ec2_load_default_amis(),
        )
        template = _AMI_CATALOGUES.get(key)
        if template is None:
            original(self)
            if any(ami.id in self.tags for ami in self.amis.values()):
                return  # a catalogue with tags: not shared (tags live in the backend)
            # the template shares nothing mutable with this first backend's images, which
            # its calls may change (launch permissions, product codes, snapshot permissions)
            _AMI_CATALOGUES[key] = [twin(ami, ami.ebs_snapshot) for ami in self.amis.values()]
            return
        for pristine_ami, pristine_snapshot in template:
            ami, snapshot = twin(pristine_ami, pristine_snapshot)
            ami.ec2_backend = snapshot.ec2_backend = self
            self.snapshots[snapshot.id] = snapshot
            self.amis[ami.id] = ami

    load.ccm_lab_shared = True  # type: ignore[attr-defined]
    load.__wrapped__ = original  # type: ignore[attr-defined]
    AmiBackend._load_amis = load  # type: ignore[method-assign]


def catalogue_of(backend: Any) -> list[tuple[Any, Any]]:
    """The default-catalogue AMIs of an EC2 backend still in it, with their snapshots."""
    from moto import settings
    from moto.ec2.models.amis import AmiBackend

    if not isinstance(backend, AmiBackend):
        return []
    ec2: Any = backend
    import os

    key = (
        ec2.account_id,
        ec2.region_name,
        os.environ.get("MOTO_AMIS_PATH"),
        settings.ec2_load_default_amis(),
    )
    ids = {pristine.id for pristine, _ in _AMI_CATALOGUES.get(key, ())}
    return [
        (ami, ami.ebs_snapshot)
        for ami in ec2.amis.values()
        if ami.id in ids and ec2.snapshots.get(ami.ebs_snapshot.id) is ami.ebs_snapshot
    ]
