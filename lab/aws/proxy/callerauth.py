"""Checking who calls the recording proxy: a SigV4 signature made with the lab's caller key.

Role: in front of a real account the proxy signs every call it forwards with the user's own
credentials (:mod:`lab.aws.proxy.upstream`). Without a check of its own, any local process that
reaches its loopback port could act in the account. :class:`CallerAuth` holds the one key pair
the proxy accepts (the lab's, made per lab: ``lab.compose``) and checks each AWS call's
``Authorization`` header the way AWS does, before fault rules, the run guard or forwarding; a
call that fails is answered with AWS's error and goes no further.

How a signature is checked: the request is rebuilt with exactly the headers its
``SignedHeaders`` lists, the path and raw query string as sent, and the body; botocore's own
signer (``botocore.auth.SigV4Auth``: ``canonical_request``, ``string_to_sign``, ``signature``)
computes the signature for the caller's ``X-Amz-Date`` and credential scope (region, service),
and it is compared with ``hmac.compare_digest``. An ``X-Amz-Content-SHA256`` header must be the
body's SHA-256 (botocore puts that header into the canonical request in place of the body's
hash, so a mismatching one would let a changed body through).

What is refused, and how (AWS's codes and statuses, from the services' "Common Errors" pages,
e.g. https://docs.aws.amazon.com/AWSEC2/latest/APIReference/CommonErrors.html and the ELB and
STS API references; the expired text is what STS answers a stale ``GetCallerIdentity``,
aws/aws-cli#6676):

============================  ==================================  ==============================
case                          EC2                                 query services (ELB, ELBv2,
                                                                  STS, others)
============================  ==================================  ==============================
no signature at all           ``MissingAuthenticationToken`` 401  ``MissingAuthenticationToken``
                                                                  403
malformed header, no date     ``IncompleteSignature`` 400         ``IncompleteSignature`` 400
unknown access key id         ``AuthFailure`` 401                 ``InvalidClientTokenId`` 403
session token sent            ``AuthFailure`` 401                 ``InvalidClientTokenId`` 403
wrong signature               ``AuthFailure`` 401                 ``SignatureDoesNotMatch`` 403
``X-Amz-Date`` > 15 min off   ``RequestExpired`` 400              ``SignatureDoesNotMatch`` 403
                                                                  ("Signature expired: ...")
============================  ==================================  ==============================

Deliberately narrower than AWS (``lab/aws/README.md`` lists it): only the ``Authorization``
header form is accepted. A presigned query (``X-Amz-Credential`` ...) or a SigV2 call
(``AWSAccessKeyId``/``Signature``) is refused as an unknown key would be, with a message
saying so; boto3, the aws CLI and the controller sign EC2, ELB and STS calls in the header.
JSON-protocol services (KMS, ...) get the query services' codes, not their own
``UnrecognizedClientException``/``InvalidSignatureException``.

Neighbours: used by :mod:`lab.aws.proxy.app`; the key pair comes from ``lab.compose``.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import string
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from urllib.parse import parse_qsl

from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from lab.aws.exceptions import (
    AuthFailure,
    AwsError,
    IncompleteSignature,
    InvalidClientTokenId,
    MissingAuthenticationToken,
    RequestExpired,
    SignatureDoesNotMatch,
)

#: How far ``X-Amz-Date`` may be from the proxy's clock, either way (AWS: 15 minutes).
MAX_SKEW_S = 15 * 60
#: ``X-Amz-Date``'s format (botocore's ``SIGV4_TIMESTAMP``).
AMZ_DATE = "%Y%m%dT%H%M%SZ"
#: Environment variables the proxy's CLI reads the caller key pair from (both or neither).
CALLER_ENV = ("CCM_LAB_CALLER_ACCESS_KEY_ID", "CCM_LAB_CALLER_SECRET_ACCESS_KEY")
#: Where the trail says a refused call was answered.
ANSWERED_BY = "proxy:caller-auth"
_ALGORITHM = "AWS4-HMAC-SHA256"


@dataclass(frozen=True)
class SignedCall:
    """What the proxy knows of one call when it checks it."""

    method: str
    target: str
    """Path and raw query string as the caller sent them."""
    headers: Mapping[str, str]
    """Header names lower-cased."""
    body: bytes
    service: str
    """The lab's service name (``ec2``, ``elb``, ``elbv2``, ``sts``, ...): picks the error."""


def _unaccepted_scheme(call: SignedCall, authorization: str) -> AwsError | None:
    """The refusal of a call not signed with SigV4 in the ``Authorization`` header (a
    presigned query, SigV2, or no signature at all); None when it is."""
    service = call.service
    params = dict(parse_qsl(call.target.partition("?")[2], keep_blank_values=True))
    if (
        "X-Amz-Credential" in params
        or "AWSAccessKeyId" in params
        or (not authorization and b"AWSAccessKeyId=" in call.body)
    ):
        return _refuse(
            service,
            ec2=(AuthFailure, 401),
            other=(InvalidClientTokenId, 403),
            message="ccm-lab proxy: only SigV4 in the Authorization header is accepted "
            "here (no presigned query, no SigV2); sign with the lab's key",
        )
    if not authorization:
        return _refuse(
            service,
            ec2=(MissingAuthenticationToken, 401),
            other=(MissingAuthenticationToken, 403),
            message="Request is missing Authentication Token",
        )
    return None


def _stale_date(service: str, amz_date: str, now: float | None) -> AwsError | None:
    """The refusal of an unreadable ``X-Amz-Date`` or one too far from ``now``; else None."""
    try:
        stamp = datetime.strptime(amz_date, AMZ_DATE).replace(tzinfo=UTC).timestamp()
    except ValueError:
        return IncompleteSignature(
            f"ccm-lab proxy: X-Amz-Date {amz_date!r} is not {AMZ_DATE}", source=ANSWERED_BY
        )
    current = time.time() if now is None else now
    if abs(current - stamp) > MAX_SKEW_S:
        return _expired(service, amz_date, stamp, current)
    return None


def _refuse(
    service: str,
    *,
    ec2: tuple[type[AwsError], int],
    other: tuple[type[AwsError], int],
    message: str,
) -> AwsError:
    error, status = ec2 if service == "ec2" else other
    return error(message, status=status, source=ANSWERED_BY)


class CallerAuth:
    """The one key pair the proxy accepts from its callers (see the module docstring)."""

    def __init__(self, access_key: str, secret_key: str) -> None:
        for name, value in (("access_key", access_key), ("secret_key", secret_key)):
            if not isinstance(value, str) or not value or value != value.strip():
                raise ValueError(f"caller_credentials: {name} {value!r} is not a usable key")
        self.access_key = access_key
        self._secret = secret_key

    def __repr__(self) -> str:  # never the secret
        return f"CallerAuth(access_key={self.access_key!r})"

    def check(self, call: SignedCall, *, now: float | None = None) -> AwsError | None:
        """None when ``call`` carries a valid signature made with this key pair; else the
        AWS error that answers it."""
        service = call.service
        headers = call.headers
        authorization = headers.get("authorization", "")
        refused = _unaccepted_scheme(call, authorization)
        if refused is not None:
            return refused
        parsed = _parse_authorization(authorization)
        amz_date = headers.get("x-amz-date", "")
        if isinstance(parsed, str) or not amz_date:
            problem = parsed if isinstance(parsed, str) else "no X-Amz-Date header"
            return IncompleteSignature(f"ccm-lab proxy: {problem}", source=ANSWERED_BY)
        key_id, scope_date, region, scope_service, signed, signature = parsed
        refused = self._foreign_key(service, key_id, headers)
        if refused is None:
            refused = _stale_date(service, amz_date, now)
        if refused is None and "host" not in signed:
            refused = IncompleteSignature(
                "ccm-lab proxy: SignedHeaders must include host", source=ANSWERED_BY
            )
        if refused is not None:
            return refused
        content_hash = headers.get("x-amz-content-sha256")
        if content_hash is not None and content_hash != hashlib.sha256(call.body).hexdigest():
            return self._mismatch(service, "X-Amz-Content-SHA256 is not the body's SHA-256")
        expected = _signature(
            Credentials(self.access_key, self._secret),
            call,
            signed=signed,
            amz_date=amz_date,
            region=region,
            service=scope_service,
        )
        if scope_date != amz_date[:8] or not hmac.compare_digest(expected, signature):
            return self._mismatch(
                service,
                "The request signature we calculated does not match the signature you "
                "provided. Check your AWS Secret Access Key and signing method.",
            )
        return None

    def _foreign_key(
        self, service: str, key_id: str, headers: Mapping[str, str]
    ) -> AwsError | None:
        """The refusal of a call signed with another key than the lab's, or with a session
        token (the lab's key is long-term); None for the lab's own key."""
        if key_id != self.access_key:
            return _refuse(
                service,
                ec2=(AuthFailure, 401),
                other=(InvalidClientTokenId, 403),
                message="The security token included in the request is invalid."
                if service != "ec2"
                else "AWS was not able to validate the provided access credentials",
            )
        if "x-amz-security-token" in headers:
            return _refuse(
                service,
                ec2=(AuthFailure, 401),
                other=(InvalidClientTokenId, 403),
                message="The security token included in the request is invalid. (the lab's "
                "key is a long-term key: send no session token)",
            )
        return None

    @staticmethod
    def _mismatch(service: str, message: str) -> AwsError:
        if service == "ec2":
            message = "AWS was not able to validate the provided access credentials"
        return _refuse(
            service,
            ec2=(AuthFailure, 401),
            other=(SignatureDoesNotMatch, 403),
            message=message,
        )


def _expired(service: str, amz_date: str, stamp: float, now: float) -> AwsError:
    """AWS's answer to a timestamp more than :data:`MAX_SKEW_S` from its clock."""
    if service == "ec2":
        return RequestExpired("Request has expired.", source=ANSWERED_BY)

    def fmt(t: float) -> str:
        return datetime.fromtimestamp(t, UTC).strftime(AMZ_DATE)

    if stamp < now:
        text = (
            f"Signature expired: {amz_date} is now earlier than {fmt(now - MAX_SKEW_S)} "
            f"({fmt(now)} - 15 min.)"
        )
    else:
        text = (
            f"Signature not yet current: {amz_date} is still later than "
            f"{fmt(now + MAX_SKEW_S)} ({fmt(now)} + 15 min.)"
        )
    return SignatureDoesNotMatch(text, source=ANSWERED_BY)


def _parse_authorization(
    value: str,
) -> tuple[str, str, str, str, tuple[str, ...], str] | str:
    """(key id, scope date, region, service, signed header names, signature) of a SigV4
    ``Authorization`` header, or what is wrong with it."""
    algorithm, _, rest = value.strip().partition(" ")
    if algorithm != _ALGORITHM:
        return f"Authorization: expected {_ALGORITHM}, got {algorithm!r}"
    fields: dict[str, str] = {}
    for part in rest.split(","):
        name, sep, content = part.strip().partition("=")
        if sep:
            fields[name] = content.strip()
    missing = [n for n in ("Credential", "SignedHeaders", "Signature") if not fields.get(n)]
    if missing:
        return f"Authorization header lacks {', '.join(missing)}"
    scope = fields["Credential"].split("/")
    if len(scope) != 5 or scope[4] != "aws4_request" or not all(scope):
        return f"Credential {fields['Credential']!r} is not key/date/region/service/aws4_request"
    signed = tuple(fields["SignedHeaders"].split(";"))
    return scope[0], scope[1], scope[2], scope[3], signed, fields["Signature"]


def _signature(
    key: Credentials,
    call: SignedCall,
    *,
    signed: tuple[str, ...],
    amz_date: str,
    region: str,
    service: str,
) -> str:
    """The signature botocore's signer computes for ``call`` with ``key``: the request
    rebuilt with only the ``signed`` headers and the caller's timestamp."""
    kept = {name: call.headers.get(name, "") for name in signed}
    request = AWSRequest(
        method=call.method,
        url=f"http://{call.headers.get('host', '')}{call.target}",
        data=call.body,
        headers=kept,
    )
    request.context["timestamp"] = amz_date
    signer = SigV4Auth(key, service, region)
    canonical = signer.canonical_request(request)
    return str(signer.signature(signer.string_to_sign(request, canonical), request))


def new_caller_credentials() -> tuple[str, str]:
    """A fresh random key pair for one lab's callers: an access key id in AWS's shape
    (``AKIA`` and 16 upper-case letters and digits; the prefix is what a long-term key has)
    and a 40-character secret, from :mod:`secrets`."""
    alphabet = string.ascii_uppercase + string.digits
    key_id = "AKIA" + "".join(secrets.choice(alphabet) for _ in range(16))
    return key_id, secrets.token_urlsafe(30)
