"""The run's guard in the recording proxy: a controller's calls to a real account, guarded.

Role: ``lab.up --aws real`` points the controller at the recording proxy
(:mod:`lab.aws.proxy`) in front of the account, so the trail and fault injection work as with
moto. :class:`ProxyRunGuard` is what the proxy asks before it forwards a call: it turns the
wire request (query-protocol form parameters: ``TagSpecification.1.Tag.1.Key``,
``Tags.member.1.Key``...) into the parameters boto3 would have been given, hands them to the
same :class:`lab.aws.realaccount.RunGuard` the lab's own boto3 clients carry, and

* forwards a read unchanged;
* forwards a create with the run tag added (EC2 ``TagSpecifications``, ELB and ELBv2
  ``Tags``): only the tag parameters are rewritten, with botocore's own serializer, the rest of
  the body is forwarded as the caller sent it;
* answers anything else the guard refuses itself, as AWS answers a call the caller's policy
  denies: ``UnauthorizedOperation`` (EC2) or ``AccessDenied`` (ELB, ELBv2; ``Type`` Sender),
  HTTP 403, the message starting ``ccm-lab run guard:`` and naming the call, the resource and
  the tag. The trail records it with ``answered_by: "proxy:run-guard"``. (AWS's own answers
  of that shape, as users have reported them: kz8s/tack issue 194, an EC2
  ``UnauthorizedOperation`` 403 to a controller; ministryofjustice/bootstrap-cfn pull 216, an
  ELB ``<Type>Sender</Type><Code>AccessDenied</Code>`` 403.)

The wire-to-parameter reading follows botocore's query and EC2 serializers (boto/botocore
1.44.5, ``botocore/serialize.py``, ``QuerySerializer`` and ``EC2Serializer``: member names from
``queryName``/``locationName``, lists as ``Name.member.N`` or, for EC2, ``Name.N``; maps as
``Name.entry.N.key``), read from the service model botocore ships. Flattened query lists (none
in the EC2, ELB and ELBv2 inputs) are not read.

Neighbours: :mod:`lab.aws.realaccount` (the guard), :mod:`lab.aws.proxy.app` (asks it),
:mod:`lab.compose` (wires it for ``aws="real"``).
"""

from __future__ import annotations

import base64
import copy
import functools
import logging
from collections.abc import Mapping
from typing import Any
from urllib.parse import parse_qsl, urlencode

import botocore.session
from botocore.exceptions import UnknownServiceError
from botocore.model import (
    ListShape,
    MapShape,
    OperationModel,
    OperationNotFoundError,
    Shape,
    StructureShape,
)
from botocore.serialize import create_serializer

from lab.aws.exceptions import AccessDenied, AwsError, UnauthorizedOperation
from lab.aws.protocol import AwsRequest
from lab.aws.realaccount import GuardRefused, RunGuard

log = logging.getLogger(__name__)

#: how the trail names an answer of the guard
ANSWERED_BY = "proxy:run-guard"


class GuardRefusal(AwsError):
    """A call the run's guard refused, in AWS's shape: 403, ``UnauthorizedOperation`` for EC2
    (:class:`GuardUnauthorized`), ``AccessDenied`` for every other service
    (:class:`GuardAccessDenied`)."""

    @classmethod
    def of(cls, service: str, message: str) -> GuardRefusal:
        """The refusal of a call to ``service``, ``message`` after the guard's prefix."""
        kind = GuardUnauthorized if service == "ec2" else GuardAccessDenied
        return kind(f"ccm-lab run guard: {message}", source=ANSWERED_BY)


class GuardUnauthorized(GuardRefusal, UnauthorizedOperation):
    """The guard's refusal of an EC2 call."""


class GuardAccessDenied(GuardRefusal, AccessDenied):
    """The guard's refusal of a call to any other service."""


@functools.lru_cache(maxsize=8)
def _service_model(service: str) -> Any:
    return botocore.session.get_session().get_service_model(service)


def operation_model(service: str, action: str) -> OperationModel | None:
    """botocore's model of ``action`` of ``service`` (boto3 names), None when unknown."""
    try:
        return _service_model(service).operation_model(action)  # type: ignore[no-any-return]
    except (UnknownServiceError, OperationNotFoundError):
        return None


def _member_key(name: str, shape: Shape, protocol: str) -> str:
    """A structure member's name on the wire (botocore's ``_get_serialized_name``)."""
    if protocol == "ec2":
        if "queryName" in shape.serialization:
            return str(shape.serialization["queryName"])
        if "name" in shape.serialization:
            given = str(shape.serialization["name"])
            return given[0].upper() + given[1:]
        return name
    return str(shape.serialization.get("name", name))


def _has(flat: Mapping[str, str], prefix: str) -> bool:
    dotted = prefix + "."
    return prefix in flat or any(k.startswith(dotted) for k in flat)


def read_params(flat: Mapping[str, str], shape: Shape | None, protocol: str) -> dict[str, Any]:
    """The parameters boto3 would have been given for the wire parameters ``flat`` of an
    operation whose input is ``shape`` (members not in the model are left out)."""
    if not isinstance(shape, StructureShape):
        return {}
    value = _read(flat, shape, "", protocol)
    return value if isinstance(value, dict) else {}


def _read(flat: Mapping[str, str], shape: Shape, prefix: str, protocol: str) -> Any:
    if isinstance(shape, StructureShape):
        out: dict[str, Any] = {}
        for name, member in shape.members.items():
            key = _member_key(name, member, protocol)
            where = f"{prefix}.{key}" if prefix else key
            if _has(flat, where):
                out[name] = _read(flat, member, where, protocol)
        return out
    if isinstance(shape, ListShape):
        base = (
            prefix
            if protocol == "ec2"
            else f"{prefix}.{shape.member.serialization.get('name', 'member')}"
        )
        return _read_items(flat, shape.member, base, protocol)
    if isinstance(shape, MapShape):
        entries: dict[str, Any] = {}
        key_name = shape.key.serialization.get("name", "key")
        value_name = shape.value.serialization.get("name", "value")
        index = 1
        while _has(flat, f"{prefix}.entry.{index}"):
            entry = f"{prefix}.entry.{index}"
            entries[flat.get(f"{entry}.{key_name}", "")] = _read(
                flat, shape.value, f"{entry}.{value_name}", protocol
            )
            index += 1
        return entries
    return _scalar(flat.get(prefix, ""), shape)


def _read_items(flat: Mapping[str, str], member: Shape, base: str, protocol: str) -> list[Any]:
    items: list[Any] = []
    index = 1
    while _has(flat, f"{base}.{index}"):
        items.append(_read(flat, member, f"{base}.{index}", protocol))
        index += 1
    return items


def _scalar(text: str, shape: Shape) -> Any:
    kind = shape.type_name
    if kind == "boolean":
        return text.lower() == "true"
    if kind in ("integer", "long"):
        try:
            return int(text)
        except ValueError:
            return text
    if kind in ("float", "double"):
        try:
            return float(text)
        except ValueError:
            return text
    if kind == "blob":
        try:
            return base64.b64decode(text, validate=True)
        except ValueError:
            return text.encode()
    return text


class ProxyRunGuard:
    """What the recording proxy asks before forwarding a call (module docstring)."""

    def __init__(self, guard: RunGuard, *, region: str | None = None) -> None:
        self.guard = guard
        #: the run's region: calls for any other are refused (None: not checked)
        self.region = region

    @property
    def run_id(self) -> str:
        return self.guard.run_id

    def __call__(self, request: AwsRequest, query: str, body: bytes) -> bytes:
        """The body to forward for ``request`` (``query``: its query string; ``body``: as the
        caller sent it): unchanged, or with the run tag added; raises :class:`GuardRefusal`."""
        service = request.service
        op = request.action
        model = operation_model(service, op) if service else None
        form = bool(body) and request.protocol != "json"
        pairs = parse_qsl(query, keep_blank_values=True)
        body_pairs = (
            parse_qsl(body.decode("utf-8", "replace"), keep_blank_values=True) if form else []
        )
        given = [k for k, _ in [*pairs, *body_pairs] if k not in ("Action", "Version")]
        twice = sorted({k for k in given if given.count(k) > 1})
        if twice:  # the guard would read one value and the upstream might act on the other
            raise GuardRefusal.of(
                service,
                f"{op}: parameters given twice ({', '.join(twice[:5])}), "
                "in the query and the body or repeated; send each once",
            )
        if self.region is not None and request.region != self.region:
            raise GuardRefusal.of(
                service,
                f"{op} in {request.region}: the run lives in {self.region}, "
                "where lab.down looks for what it made; the guard refuses other regions",
            )
        flat = {k: v for k, v in [*pairs, *body_pairs] if k not in ("Action", "Version")}
        protocol = model.metadata.get("protocol", "query") if model is not None else "query"
        params = read_params(flat, model.input_shape if model is not None else None, protocol)
        before = copy.deepcopy(params)
        try:
            self.guard.check(service or "unknown", op, params)
        except GuardRefused as exc:
            log.warning("run guard refused %s %s: %s", service, op, exc)
            raise GuardRefusal.of(service, str(exc)) from None
        changed = {name: value for name, value in params.items() if before.get(name) != value}
        if not changed or model is None:
            return body
        if not form:  # botocore sends these calls as form bodies; anything else is not rewritten
            raise GuardRefusal.of(
                service,
                f"{op}: the run tag can only be added to a form body",
            )
        assert isinstance(model.input_shape, StructureShape)
        members = model.input_shape.members
        keys = [_member_key(name, members[name], protocol) for name in changed]
        kept = [
            (k, v)
            for k, v in body_pairs
            if not any(k == key or k.startswith(key + ".") for key in keys)
        ]
        serializer = create_serializer(protocol, include_validation=False)
        serialized = serializer.serialize_to_request(changed, model)["body"]
        added = [(k, str(v)) for k, v in serialized.items() if k not in ("Action", "Version")]
        return urlencode([*kept, *added]).encode()
