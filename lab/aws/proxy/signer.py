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
* the signing key derived once per day, region, service and secret key.

``tests/aws/test_proxy_signer.py`` compares the headers with what ``SigV4Auth.add_auth`` on an
``AWSRequest`` gives, on fixed cases and on seeded random ones.

Neighbours: used by :mod:`lab.aws.proxy.upstream`; the caller-side check
(:mod:`lab.aws.proxy.callerauth`) keeps botocore's signer as it is.
"""

from __future__ import annotations

import calendar
import functools
import hmac
from email.utils import formatdate
from hashlib import sha256
from typing import Any
from urllib.parse import quote, urlsplit

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
        #: the last signing key derived: (secret key, date stamp, key)
        self._signing_key: tuple[str, str, bytes] = ("", "", b"")

    def sign(
        self, method: str, url: str, headers: list[tuple[str, str]], body: bytes
    ) -> list[tuple[str, str]]:
        """``headers`` (``Host`` among them) with the date, token and ``Authorization``
        headers of a SigV4 signature over this request, as ``SigV4Auth.add_auth`` sets them."""
        frozen = self.credentials.get_frozen_credentials()
        # botocore.compat's clock, looked up through botocore.auth as its signer does
        now = botocore.auth.get_current_datetime()  # type: ignore[attr-defined]
        stamp = now.strftime(_TIMESTAMP)
        day = stamp[:8]
        lowered = [k.lower() for k, _ in headers]
        drop = {"x-amz-date"}
        if "date" in lowered:  # botocore replaces a Date header rather than add X-Amz-Date
            drop.add("date")
            added = [("Date", formatdate(calendar.timegm(now.timetuple())))]
        else:
            added = [("X-Amz-Date", stamp)]
        if frozen.token:
            drop.add("x-amz-security-token")
            added.append(("X-Amz-Security-Token", frozen.token))
        kept = [(h, low) for h, low in zip(headers, lowered, strict=True) if low not in drop]
        kept += [(h, h[0].lower()) for h in added]
        headers = [h for h, _ in kept]
        signed: dict[str, list[str]] = {}
        payload: str | None = None  # the request's own X-Amz-Content-SHA256, first value
        for (_, value), low in kept:
            if low not in _UNSIGNED:
                signed.setdefault(low, []).append(" ".join(value.split()))
            if low == "x-amz-content-sha256" and payload is None:
                payload = value
        names = sorted(signed)
        signed_names = ";".join(names)
        parts = urlsplit(url)
        canonical = "\n".join(
            (
                method.upper(),
                _canonical_path(parts.path),
                _canonical_query(parts.query),
                "".join(f"{n}:{','.join(signed[n])}\n" for n in names),
                signed_names,
                sha256(body).hexdigest() if payload is None else payload,
            )
        )
        scope = f"{day}/{self.region}/{self.service}/aws4_request"
        to_sign = "\n".join(
            ("AWS4-HMAC-SHA256", stamp, scope, sha256(canonical.encode()).hexdigest())
        )
        signature = hmac.digest(self._key(frozen.secret_key, day), to_sign.encode(), "sha256")
        headers.append(
            (
                "Authorization",
                f"AWS4-HMAC-SHA256 Credential={frozen.access_key}/{scope}, "
                f"SignedHeaders={signed_names}, Signature={signature.hex()}",
            )
        )
        return headers

    def _key(self, secret: str, day: str) -> bytes:
        cached = self._signing_key
        if cached[0] != secret or cached[1] != day:
            key = hmac.new(f"AWS4{secret}".encode(), day.encode(), sha256).digest()
            for part in (self.region, self.service, "aws4_request"):
                key = hmac.new(key, part.encode(), sha256).digest()
            cached = self._signing_key = (secret, day, key)
        return cached[2]


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
