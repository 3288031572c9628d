"""Credentials, signatures and tokens kept out of everything the endpoint records or logs.

Role: a presigned (query-string SigV4) call carries ``X-Amz-Credential``,
``X-Amz-Signature`` and ``X-Amz-Security-Token`` as parameters; a SigV2 call
``AWSAccessKeyId`` and ``Signature``; some actions take secrets as members. The trail
(``/_lab/trail.jsonl``, ``--trail``) keeps a call's raw parameters and the request log its
request line, so both pass through here first. A credential keeps its scope
(``<redacted>/20260101/us-east-1/ec2/aws4_request``), which says where a call was signed for
without the key; every other secret becomes ``<redacted>``.

Neighbours: :mod:`lab.aws.protocol` redacts a request's parameters as it parses them (so no
layer after it sees a secret); :mod:`lab.aws.server` redacts the request line it logs.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from urllib.parse import unquote

REDACTED = "<redacted>"

#: Parameter names (lower case) whose value is a secret, wherever they appear.
SECRET_PARAMS = frozenset(
    {
        "x-amz-credential",
        "x-amz-signature",
        "x-amz-security-token",
        "awsaccesskeyid",
        "signature",
        "securitytoken",
        "sessiontoken",
        "secretaccesskey",
        "accesskeyid",
        "password",
        "authorization",
    }
)
_SECRET_SUFFIXES = ("secretaccesskey", "sessiontoken", "password", "securitytoken")
_QUERY_PAIR = re.compile(r"(?P<key>[^&?=\s]+)=(?P<value>[^&\s]*)")


@functools.lru_cache(maxsize=4096)  # a few hundred distinct names in practice
def is_secret(name: str) -> bool:
    """Whether parameter ``name`` (a flat query key such as ``Foo.1.Password``) holds a secret."""
    last = name.rsplit(".", 1)[-1].lower()
    return last in SECRET_PARAMS or last.endswith(_SECRET_SUFFIXES)


def redact_value(name: str, value: str) -> str:
    if name.lower() == "x-amz-credential" and "/" in value:
        return REDACTED + "/" + value.split("/", 1)[1]
    return REDACTED


def redact_params(params: Mapping[str, str]) -> dict[str, str]:
    """``params`` with every secret value replaced (see module docstring)."""
    return {k: (redact_value(k, v) if is_secret(k) else v) for k, v in params.items()}


def redact_query(text: str) -> str:
    """A request line or URL with the secret query parameters' values replaced."""

    def replace(match: re.Match[str]) -> str:
        key = match.group("key")
        if not is_secret(unquote(key)):
            return match.group(0)
        return f"{key}={redact_value(unquote(key), unquote(match.group('value')))}"

    return _QUERY_PAIR.sub(replace, text)


__all__ = ["REDACTED", "SECRET_PARAMS", "is_secret", "redact_params", "redact_query"]
