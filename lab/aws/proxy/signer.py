"""SigV4 for the recording proxy's forwarded calls, on plain header lists.

Role: the recording proxy signs every forwarded call again (:mod:`lab.aws.proxy.upstream`).
botocore's :class:`~botocore.auth.SigV4Auth` is made for its own ``AWSRequest``: it keeps
headers in ``email`` messages, builds the set of headers to sign twice per call, hashes the
body through a prepared copy of the request and derives the signing key (four HMACs) on every
call. Those steps were most of what a forwarded call cost the proxy (``benchmarks/aws.py``,
issue 28). :class:`ProxySigner` computes the same signature, header for header, from the
request as the proxy holds it (a list of name and value pairs):

* the date: ``X-Amz-Date`` (or, when the request has a ``Date`` header, that header rewritten
  to the signing instant), the session token as ``X-Amz-Security-Token``, each replacing any
  value of that name and added at the end, then ``Authorization`` last;
* the canonical request: the method, the path with dot segments and repeated slashes removed
  and percent-encoded (``botocore.utils.normalize_url_path``, then everything but ``/`` and
  ``~`` and unreserved characters), the query's ``name=value`` pairs sorted as sent, each
  header name lower-cased except botocore's unsigned ones (``SIGNED_HEADERS_BLACKLIST``) with
  every value's whitespace runs collapsed and the values of a repeated name joined by ``,`` in
  the order sent, the signed names, and the body's SHA-256 (or ``X-Amz-Content-SHA256`` when
  the request carries one);
* the signing key derived once per day, region, service and secret key; each digest and
  HMAC a copy of one made ahead (making one costs OpenSSL 3 a digest lookup each time).

``tests/aws/test_proxy_signer.py`` compares the headers with what ``SigV4Auth.add_auth`` on an
``AWSRequest`` gives, on fixed cases and on seeded random ones.

Neighbours: used by :mod:`lab.aws.proxy.upstream`; the caller-side check
(:mod:`lab.aws.proxy.callerauth`) keeps botocore's signer as it is.
"""

from __future__ import annotations

import calendar
import functools
import hmac
import time
from email.utils import formatdate
from hashlib import sha256
from typing import Any
from urllib.parse import quote

import botocore.auth
from botocore.auth import SIGNED_HEADERS_BLACKLIST
from botocore.utils import normalize_url_path

_UNSIGNED = frozenset(SIGNED_HEADERS_BLACKLIST)
_TIMESTAMP = "%Y%m%dT%H%M%SZ"  # SigV4's (botocore.auth.SIGV4_TIMESTAMP)


class ProxySigner:
    """SigV4 for one signing name and region with one set of botocore ``Credentials``
    (refreshable ones are read once per call, frozen)."""

    def __init__(self, credentials: Any, service_name: str, region_name: str) -> None:
        self.credentials = credentials
        self.service = service_name
        self.region = region_name
        #: the last signing key derived: (secret key, date stamp, an HMAC keyed with it)
        self._signing_key: tuple[str, str, Any] = ("", "", None)

    def sign(
        self,
        method: str,
        path: str,
        query: str,
        host: str,
        headers: list[tuple[str, str]],
        lowered: list[str],
        body: bytes,
    ) -> list[tuple[str, str]]:
        """``headers`` (``lowered``: their names lower-cased; ``Host`` not among them, its
        value is ``host``, signed but not returned) with the date, token and ``Authorization``
        headers of a SigV4 signature over this request, as ``SigV4Auth.add_auth`` sets them."""
        frozen = self.credentials.get_frozen_credentials()
        stamp, second = _signing_time()
        day = stamp[:8]
        added = [("X-Amz-Date", stamp)]
        drop = {"x-amz-date"}
        if "date" in lowered:  # botocore replaces a Date header rather than add X-Amz-Date
            drop.add("date")
            added = [("Date", formatdate(second))]
        if frozen.token:
            drop.add("x-amz-security-token")
            added.append(("X-Amz-Security-Token", frozen.token))
        out, signed, payload = _headers_to_sign(headers, lowered, drop, added, host)
        names = sorted(signed)
        signed_names = ";".join(names)
        canonical = "\n".join(
            (
                method.upper(),
                _canonical_path(path),
                _canonical_query(query),
                "".join(f"{n}:{','.join(signed[n])}\n" for n in names),
                signed_names,
                _sha256_hex(body) if payload is None else payload,
            )
        )
        scope = f"{day}/{self.region}/{self.service}/aws4_request"
        to_sign = "\n".join(("AWS4-HMAC-SHA256", stamp, scope, _sha256_hex(canonical.encode())))
        mac = self._key(frozen.secret_key, day).copy()
        mac.update(to_sign.encode())
        signature = mac.digest()
        out.append(
            (
                "Authorization",
                f"AWS4-HMAC-SHA256 Credential={frozen.access_key}/{scope}, "
                f"SignedHeaders={signed_names}, Signature={signature.hex()}",
            )
        )
        return out

    def _key(self, secret: str, day: str) -> Any:
        """An HMAC-SHA256 keyed with the day's signing key (copied for each signature: a
        fresh one costs a digest lookup in OpenSSL 3 each time, a copy does not)."""
        cached = self._signing_key
        if cached[0] != secret or cached[1] != day:
            key = hmac.new(f"AWS4{secret}".encode(), day.encode(), sha256).digest()
            for part in (self.region, self.service, "aws4_request"):
                key = hmac.new(key, part.encode(), sha256).digest()
            cached = self._signing_key = (secret, day, hmac.new(key, digestmod=sha256))
        return cached[2]


def _headers_to_sign(
    headers: list[tuple[str, str]],
    lowered: list[str],
    drop: set[str],
    added: list[tuple[str, str]],
    host: str,
) -> tuple[list[tuple[str, str]], dict[str, list[str]], str | None]:
    """In one pass: the headers to send (``headers`` but the names ``drop`` holds, then
    ``added``), every signed name's values as SigV4 canonicalizes them (``host`` among them),
    and the request's own ``X-Amz-Content-SHA256`` (its first value, if any)."""
    out: list[tuple[str, str]] = []
    signed: dict[str, list[str]] = {"host": [host]}
    payload: str | None = None
    for header, low in zip(headers, lowered, strict=True):
        if low in drop:
            continue
        out.append(header)
        if low not in _UNSIGNED:
            signed.setdefault(low, []).append(" ".join(header[1].split()))
        if low == "x-amz-content-sha256" and payload is None:
            payload = header[1]
    for header in added:
        out.append(header)
        signed[header[0].lower()] = [" ".join(header[1].split())]
    return out, signed, payload


#: botocore's own clock (``botocore.compat``), as its signer finds it in ``botocore.auth``
_BOTOCORE_CLOCK = botocore.auth.get_current_datetime  # type: ignore[attr-defined]
#: the last second signed at: (seconds since the epoch, its SigV4 timestamp)
_last_stamp: list[tuple[int, str]] = [(-1, "")]


def _signing_time() -> tuple[str, int]:
    """The SigV4 timestamp of now and its second since the epoch, from the clock botocore's
    signer reads (``botocore.auth.get_current_datetime``, which a test may freeze). While that
    is botocore's own clock (UTC now, of which the signature keeps the second), the system
    clock is read directly and each second's timestamp is formatted once."""
    clock = botocore.auth.get_current_datetime  # type: ignore[attr-defined]
    if clock is not _BOTOCORE_CLOCK:
        now = clock()
        return now.strftime(_TIMESTAMP), calendar.timegm(now.timetuple())
    second = int(time.time())
    cached = _last_stamp[0]
    if cached[0] != second:
        cached = _last_stamp[0] = (second, time.strftime(_TIMESTAMP, time.gmtime(second)))
    return cached[1], cached[0]


#: an empty SHA-256, copied for each digest (see :meth:`ProxySigner._key`)
_SHA256 = sha256()


def _sha256_hex(data: bytes) -> str:
    digest = _SHA256.copy()
    digest.update(data)
    return digest.hexdigest()


@functools.lru_cache(maxsize=256)
def _canonical_path(path: str) -> str:
    """The path with dot segments and repeated slashes removed, percent-encoded (botocore's
    rule; a proxy sees few distinct paths, so each is worked out once)."""
    return quote(normalize_url_path(path), safe="/~")


def _canonical_query(query: str) -> str:
    """The query's ``name=value`` pairs sorted, each as sent (botocore's rule for a URL's
    own query string)."""
    if not query:
        return ""
    pairs = sorted(pair.partition("=")[::2] for pair in query.split("&"))
    return "&".join(f"{k}={v}" for k, v in pairs)
