"""The AWS query (and JSON) protocol as the lab's middleware sees it: parse requests, write errors.

Role: EC2, Classic ELB, ELBv2 and STS all speak the AWS *query* protocol: a form-encoded POST
body ``Action=...&Version=...&Param.1=...`` signed with SigV4, answered with XML. The middleware
in :mod:`lab.aws.app` needs the service, action, region and flat parameters of every call before
moto sees it (faults, fidelity checks, trail), and must be able to answer with an AWS error in
the exact wire shape botocore parses into ``ClientError``:

* EC2: ``<Response><Errors><Error><Code/><Message/></Error></Errors><RequestID/></Response>``
* ELB, ELBv2, STS: ``<ErrorResponse><Error><Type>Sender|Receiver</Type><Code/><Message/>
  </Error><RequestId/></ErrorResponse>``

Services on the AWS *JSON* protocol (KMS, and most newer APIs) name the operation in the
``X-Amz-Target`` header (``TrentService.Encrypt``) and send a JSON body; the recording proxy
forwards them, so they are parsed too (the body's members flattened to ``Key.Sub`` /
``List.1`` for the trail) and answered in their error shape, ``{"__type": code, "message":
...}``.

This module is the one place errors become bytes; what XML cannot carry (control characters
a caller sent, quoted back in a message) becomes U+FFFD there (:func:`xml_text`, and
:func:`xml_safe` for the error answers of moto the endpoint passes on). It also reads the
error code back out of moto's (or an upstream's) error responses for the trail.

Neighbours: used by :mod:`lab.aws.pipeline` (which alone calls :func:`error_response`) and
the stages; errors come from :mod:`lab.aws.exceptions`.
"""

from __future__ import annotations

import io
import json
import re
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Any
from urllib.parse import parse_qsl
from xml.sax.saxutils import escape

from lab.aws.exceptions import AwsError
from lab.aws.redact import redact_params

#: API version strings that tell the two load balancer services apart (both sign as
#: ``elasticloadbalancing``).
ELB_VERSION = "2012-06-01"
ELBV2_VERSION = "2015-12-01"

_XMLNS = {
    "elb": "http://elasticloadbalancing.amazonaws.com/doc/2012-06-01/",
    "elbv2": "http://elasticloadbalancing.amazonaws.com/doc/2015-12-01/",
    "sts": "https://sts.amazonaws.com/doc/2011-06-15/",
}

_CODE_RE = re.compile(rb"<Code>([^<]*)</Code>")
#: what XML 1.0 forbids in a document (its ``Char`` production), in text and in UTF-8 bytes
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")
_NOT_XML_UTF8 = re.compile(rb"[\x00-\x08\x0b\x0c\x0e-\x1f]|\xef\xbf[\xbe\xbf]")
REPLACEMENT = "\ufffd"
"""What stands for a character XML cannot carry (U+FFFD, the Unicode replacement character)."""
_MESSAGE_RE = re.compile(rb"<Message>([^<]*)</Message>", re.DOTALL)


@dataclass(frozen=True)
class AwsRequest:
    """One parsed AWS API request (query protocol)."""

    service: str
    """``ec2``, ``elb``, ``elbv2``, ``sts``, or the signing name of anything else."""
    action: str
    """The ``Action`` parameter; empty when the request is not a query-protocol call."""
    region: str
    params: Mapping[str, str] = field(default_factory=dict)
    """Every parameter except ``Action`` and ``Version``, flat as on the wire; credentials,
    signatures and tokens redacted (:mod:`lab.aws.redact`)."""
    version: str = ""
    user_agent: str = ""
    source: str = ""
    """Caller address ``host:port``."""
    signed: bool = False
    """Whether the service is known (from a SigV4 scope, header or query, or the Version)."""

    signature_problem: str = ""
    """What is wrong with a SigV4 ``Authorization`` header (empty when it is well formed or
    absent): AWS answers such a call ``IncompleteSignature``."""
    protocol: str = "query"
    """``query`` (form parameters, XML answers) or ``json`` (``X-Amz-Target``, JSON both ways)."""
    malformed: str = ""
    """What makes the query string or form body unreadable (not UTF-8, raw or
    percent-encoded), empty when it reads; its parameters are then read with U+FFFD."""


#: API version → service, for calls without a SigV4 signing scope (SigV2 or unsigned).
VERSION_SERVICES = {
    "2016-11-15": "ec2",
    ELB_VERSION: "elb",
    ELBV2_VERSION: "elbv2",
    "2011-06-15": "sts",
}
_SIGV4_PARTS = ("Credential", "SignedHeaders", "Signature")


def _scope(credential: str) -> tuple[str, str, str]:
    """(region, service, problem) of a SigV4 credential ``key/date/region/service/aws4_request``."""
    parts = credential.split("/")
    if len(parts) != 5 or parts[4] != "aws4_request" or not all(parts[:4]):
        return "", "", "Credential should be scoped to <key>/<date>/<region>/<service>/aws4_request"
    return parts[2], parts[3].lower(), ""


def _header_scope(auth: str) -> tuple[str, str, str]:
    """(region, service, problem) from a SigV4 ``Authorization`` header."""
    if not auth.startswith("AWS4-"):
        return "", "", ""
    fields: dict[str, str] = {}
    for item in auth.split(" ", 1)[1].split(",") if " " in auth else []:
        key, _, value = item.strip().partition("=")
        if key:
            fields[key] = value
    missing = [name for name in _SIGV4_PARTS if not fields.get(name)]
    if missing:
        needs = " ".join(f"Authorization header requires '{name}' parameter." for name in missing)
        return "", "", needs
    return _scope(fields["Credential"])


def parse_request(environ: Mapping[str, Any], body: bytes, *, default_region: str) -> AwsRequest:
    """Parse the WSGI ``environ`` plus the already-read ``body`` of an AWS call.

    The service comes from the SigV4 scope of the ``Authorization`` header, else from a
    presigned (query-string) ``X-Amz-Credential``, else from the ``Version`` (SigV2 or
    unsigned calls); ELB and ELBv2 share a signing name and differ by ``Version``.
    """
    query = str(environ.get("QUERY_STRING", ""))
    pairs, malformed = _read_query(query)
    content_type = str(environ.get("CONTENT_TYPE", ""))
    target = str(environ.get("HTTP_X_AMZ_TARGET", ""))
    protocol = "query"
    if target and content_type.startswith("application/x-amz-json"):
        protocol = "json"
        pairs += [("Action", target.rpartition(".")[2])]
        pairs += flatten_json(body)
    elif content_type.startswith(FORM_TYPE):
        form, problem = _read_form(body)
        pairs += form
        malformed = malformed or problem
    params = dict(pairs)
    action = params.pop("Action", "")
    version = params.pop("Version", "")
    region, service, problem = _header_scope(str(environ.get("HTTP_AUTHORIZATION", "")))
    if not service and not problem and "X-Amz-Credential" in params:
        region, service, problem = _scope(params["X-Amz-Credential"])
    params = redact_params(params)  # nothing after this point sees a secret
    if not service and action:
        service = VERSION_SERVICES.get(version, "")
    if service == "elasticloadbalancing":
        service = "elbv2" if version == ELBV2_VERSION else "elb"
    source = f"{environ.get('REMOTE_ADDR', '')}:{environ.get('REMOTE_PORT', '')}"
    return AwsRequest(
        service=service or VERSION_SERVICES.get(version, ""),
        action=action,
        region=region or default_region,
        params=params,
        version=version,
        user_agent=str(environ.get("HTTP_USER_AGENT", "")),
        source=source,
        signed=bool(service),
        signature_problem=problem,
        protocol=protocol,
        malformed=malformed,
    )


FORM_TYPE = "application/x-www-form-urlencoded"
#: each HTTP status's reason phrase (the standard library's)
_PHRASES = {status.value: status.phrase for status in HTTPStatus}


def _read_query(query: str) -> tuple[list[tuple[str, str]], str]:
    """A query string's pairs (WSGI: its bytes as latin-1, percent-decoded as UTF-8 with
    U+FFFD for what is not), and why it is not UTF-8 text, raw or percent-decoded (empty when
    it is)."""
    if not query:
        return [], ""
    pairs = parse_qsl(query, keep_blank_values=True)
    if query.isascii() and "%" not in query:
        return pairs, ""  # nothing in it can be anything but UTF-8
    return pairs, "The query string is not valid UTF-8" if _not_utf8(
        query.encode("latin-1", "replace")
    ) else ""


def _read_form(body: bytes) -> tuple[list[tuple[str, str]], str]:
    """A form body's pairs (U+FFFD for what is not UTF-8, raw or percent-decoded), and why
    it is not UTF-8 text (empty when it is); one parse when it is."""
    if not body:
        return [], ""
    try:
        return parse_qsl(body.decode("utf-8"), keep_blank_values=True, errors="strict"), ""
    except UnicodeDecodeError:
        pairs = parse_qsl(body.decode("utf-8", errors="replace"), keep_blank_values=True)
        return pairs, "The body is not valid UTF-8"


def _not_utf8(raw: bytes) -> bool:
    """Whether ``raw`` is not UTF-8 text, raw or once percent-decoded."""
    try:
        parse_qsl(raw.decode("utf-8"), keep_blank_values=True, errors="strict")
    except UnicodeDecodeError:
        return True
    return False


def flatten_json(body: bytes) -> list[tuple[str, str]]:
    """A JSON-protocol body's members as flat ``(key, value)`` pairs: ``KeyId``,
    ``Tags.1.TagKey``, ``EncryptionContext.team``; a body that is not a JSON object gives none."""
    try:
        data = json.loads(body or b"{}")
    except ValueError:
        return []
    out: list[tuple[str, str]] = []

    def walk(prefix: str, value: Any) -> None:
        if isinstance(value, dict):
            for key, item in value.items():
                walk(f"{prefix}.{key}" if prefix else str(key), item)
        elif isinstance(value, list):
            for index, item in enumerate(value, 1):
                walk(f"{prefix}.{index}", item)
        elif isinstance(value, bool):
            out.append((prefix, "true" if value else "false"))
        else:
            out.append((prefix, "" if value is None else str(value)))

    if isinstance(data, dict):
        walk("", data)
    return out


def read_body(environ: dict[str, Any]) -> bytes:
    """A WSGI request's body, read once and put back for whoever reads it next."""
    try:
        length = int(environ.get("CONTENT_LENGTH") or 0)
    except ValueError:
        length = 0
    body = environ["wsgi.input"].read(length) if length > 0 else b""
    environ["wsgi.input"] = io.BytesIO(body)
    return bytes(body)


def new_request_id() -> str:
    """A request id in the style AWS uses (a UUID)."""
    return str(uuid.uuid4())


@dataclass(frozen=True)
class WireResponse:
    """An HTTP response on its way back to the caller."""

    status: int
    headers: list[tuple[str, str]]
    body: bytes

    @property
    def ok(self) -> bool:
        return self.status < 400

    @property
    def status_line(self) -> str:
        return f"{self.status} {_PHRASES.get(self.status, 'Unknown')}"

    def header(self, name: str) -> str | None:
        lowered = name.lower()
        for key, value in self.headers:
            if key.lower() == lowered:
                return value
        return None

    def with_body(self, body: bytes) -> WireResponse:
        """The same response with ``body`` replaced and Content-Length fixed."""
        headers = [(k, v) for k, v in self.headers if k.lower() != "content-length"]
        headers.append(("Content-Length", str(len(body))))
        return WireResponse(self.status, headers, body)


def error_response(
    service: str, error: AwsError, *, request_id: str, protocol: str = "query"
) -> WireResponse:
    """Serialize ``error`` in the wire shape of ``service`` (the only place errors are written).

    ``protocol="json"``: the JSON protocol's shape, ``{"__type": code, "message": ...}``.
    """
    if protocol == "json":
        body = json.dumps({"__type": error.code, "message": error.message}).encode()
        headers = [
            ("Content-Type", "application/x-amz-json-1.1"),
            ("Content-Length", str(len(body))),
            ("x-amzn-RequestId", request_id),
            ("x-amzn-ErrorType", error.code),
        ]
        return WireResponse(error.status, headers, body)
    code = escape(xml_text(error.code))
    message = escape(xml_text(error.message))
    if service == "ec2":
        text = (
            '<?xml version="1.0" encoding="UTF-8"?>\n'
            f"<Response><Errors><Error><Code>{code}</Code><Message>{message}</Message>"
            f"</Error></Errors><RequestID>{request_id}</RequestID></Response>"
        )
    else:
        kind = "Sender" if error.sender_fault else "Receiver"
        xmlns = _XMLNS.get(service, _XMLNS["elb"])
        text = (
            f'<ErrorResponse xmlns="{xmlns}"><Error><Type>{kind}</Type><Code>{code}</Code>'
            f"<Message>{message}</Message></Error><RequestId>{request_id}</RequestId>"
            "</ErrorResponse>"
        )
    body = text.encode("utf-8")
    headers = [
        ("Content-Type", "text/xml"),
        ("Content-Length", str(len(body))),
        ("x-amzn-RequestId", request_id),
    ]
    return WireResponse(error.status, headers, body)


def xml_text(text: str) -> str:
    """``text`` with every character XML 1.0 forbids (control characters but tab, newline and
    carriage return; U+FFFE, U+FFFF; lone surrogates) replaced by U+FFFD, so that an error
    quoting what a caller sent stays a document botocore can parse."""
    return _NOT_XML.sub(REPLACEMENT, text)


def xml_safe(body: bytes) -> bytes:
    """A UTF-8 XML body with what XML 1.0 forbids replaced by U+FFFD (the body itself when it
    has none, the case of every answer but a few errors quoting hostile input)."""
    return _NOT_XML_UTF8.sub(REPLACEMENT.encode(), body)


def read_error(body: bytes) -> tuple[str | None, str | None]:
    """(code, message) of an AWS XML or JSON error body, or (None, None) when there is none."""
    if body.lstrip().startswith(b"{"):
        return _read_json_error(body)
    code = _CODE_RE.search(body)
    if code is None:
        return None, None
    message = _MESSAGE_RE.search(body)
    text = message.group(1).decode("utf-8", errors="replace") if message else None
    return code.group(1).decode("utf-8", errors="replace"), text


def _read_json_error(body: bytes) -> tuple[str | None, str | None]:
    """A JSON-protocol error: ``__type`` (without a ``namespace#`` prefix) and ``message``."""
    try:
        data = json.loads(body)
    except ValueError:
        return None, None
    if not isinstance(data, dict):
        return None, None
    kind = data.get("__type") or data.get("code")
    if not isinstance(kind, str) or not kind:
        return None, None
    message = data.get("message", data.get("Message"))
    return kind.rpartition("#")[2], None if message is None else str(message)


def indexed(params: Mapping[str, str], prefix: str) -> list[str]:
    """Values of a query-protocol list ``prefix.1``, ``prefix.2``... in index order."""
    found: list[tuple[int, str]] = []
    start = prefix + "."
    for key, value in params.items():
        if key.startswith(start):
            rest = key[len(start) :]
            if rest.isdigit():
                found.append((int(rest), value))
    return [value for _, value in sorted(found)]
