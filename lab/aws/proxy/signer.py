"""botocore's SigV4 signer without its per-call ``email`` header machinery.

Role: the recording proxy signs every forwarded call again (:mod:`lab.aws.proxy.upstream`).
botocore's :class:`~botocore.auth.SigV4Auth` builds the set of headers to sign as an
``email.message.Message`` (twice per call: once for the canonical request, once for the
``Authorization`` header), reads the request's own headers from another one (botocore's
``AWSRequest``) and hashes the body through a prepared copy of the whole request: most of what
signing one call cost the proxy (``benchmarks/aws.py``, issue 28). :class:`ProxySigner` is
botocore's signer with those steps done on plain Python values (:class:`SignedHeaderMap`,
:class:`SigningRequest`, which keep the same order and case rules); every other step
(timestamp, date and token headers, canonical request, string to sign, the ``Authorization``
header) is botocore's own code, and the signing key (SigV4's HMAC chain, which botocore derives
on every call) is derived once per day and secret key, so the headers sent are the same bytes
(``tests/aws/test_proxy_signer.py`` compares the two on calls with repeated headers, odd
whitespace, a ``Date`` header, a session token, queries and bodies).

Neighbours: used by :mod:`lab.aws.proxy.upstream`; the caller-side check
(:mod:`lab.aws.proxy.callerauth`) keeps botocore's signer as it is.
"""

from __future__ import annotations

import hmac
from collections.abc import Callable, Iterable, Iterator
from hashlib import sha256
from typing import Any

import botocore.auth
from botocore.auth import SIGNED_HEADERS_BLACKLIST, SigV4Auth

#: botocore's own ``Host`` value for a URL (what ``SigV4Auth.headers_to_sign`` falls back on)
_host_from_url: Callable[[str], str] = botocore.auth._host_from_url  # type: ignore[attr-defined]


class SignedHeaderMap:
    """What ``SigV4Auth`` reads of its headers-to-sign map: lower-cased names in first-seen
    order (``in``, iteration), each name's values in the order set (``get_all``); setting a
    name adds a value, as on botocore's ``HTTPHeaders``."""

    def __init__(self) -> None:
        self._values: dict[str, list[str]] = {}

    def __setitem__(self, name: str, value: str) -> None:
        self._values.setdefault(name.lower(), []).append(value)

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name.lower() in self._values

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def get_all(self, name: str) -> list[str]:
        return self._values.get(name.lower(), [])


class ProxySigner(SigV4Auth):
    """botocore's ``SigV4Auth`` with a plain headers-to-sign map and the body hashed as given
    (see the module docstring)."""

    def headers_to_sign(self, request: Any) -> Any:
        header_map = SignedHeaderMap()
        for name, value in request.headers.items():
            lname = name.lower()
            if lname not in SIGNED_HEADERS_BLACKLIST:
                header_map[lname] = value
        if "host" not in header_map:
            header_map["host"] = _host_from_url(request.url)
        return header_map

    def __init__(self, credentials: Any, service_name: str, region_name: str) -> None:
        super().__init__(credentials, service_name, region_name)
        self._scope_parts = (region_name, service_name, "aws4_request")
        #: the last signing key derived: (secret key, date stamp, key); one signer serves one
        #: region and service, so the key changes only with the day or the credentials
        self._signing_key: tuple[str, str, bytes] = ("", "", b"")

    def signature(self, string_to_sign: str, request: Any) -> str:
        """botocore's signature, its signing key (SigV4's four HMACs: date, region, service,
        ``aws4_request``) derived once per day and secret key instead of on every call."""
        secret = str(self.credentials.secret_key)
        day = str(request.context["timestamp"][0:8])
        cached = self._signing_key
        if cached[0] != secret or cached[1] != day:
            key = hmac.new(f"AWS4{secret}".encode(), day.encode(), sha256).digest()
            for part in self._scope_parts:
                key = hmac.new(key, part.encode(), sha256).digest()
            cached = self._signing_key = (secret, day, key)
        return hmac.new(cached[2], string_to_sign.encode(), sha256).hexdigest()

    def payload(self, request: Any) -> str:
        data = request.data
        if (
            isinstance(data, bytes)
            and not self._is_streaming_checksum_payload(request)  # type: ignore[attr-defined]
            and self._should_sha256_sign_payload(request)  # type: ignore[attr-defined]
        ):
            # what botocore hashes: the prepared body, which for bytes is the bytes themselves
            # (b"" prepares to None, whose hash botocore gives as the empty string's)
            return sha256(data).hexdigest()
        payload: str = super().payload(request)
        return payload


class RequestHeaders:
    """A request's headers as botocore's ``HTTPHeaders`` treats them, on a plain list: kept in
    order, repeated names kept, ``in`` / ``del`` / ``[name]`` case-insensitive (``del`` drops
    every value, ``[name]`` is the first), setting a name adds it at the end."""

    def __init__(self, pairs: Iterable[tuple[str, str]] = ()) -> None:
        self._pairs = list(pairs)

    def __contains__(self, name: object) -> bool:
        if not isinstance(name, str):
            return False
        lowered = name.lower()
        return any(k.lower() == lowered for k, _ in self._pairs)

    def __getitem__(self, name: str) -> str | None:
        lowered = name.lower()
        return next((v for k, v in self._pairs if k.lower() == lowered), None)

    def __setitem__(self, name: str, value: str) -> None:
        self._pairs.append((name, value))

    def __delitem__(self, name: str) -> None:
        lowered = name.lower()
        self._pairs = [(k, v) for k, v in self._pairs if k.lower() != lowered]

    def items(self) -> list[tuple[str, str]]:
        return list(self._pairs)


class SigningRequest:
    """What ``SigV4Auth.add_auth`` reads and writes of botocore's ``AWSRequest`` for a call
    with a bytes body and its query in the URL (``headers``: as ``AWSRequest(headers=dict)``
    would hold them)."""

    def __init__(self, method: str, url: str, headers: dict[str, str], data: bytes) -> None:
        self.method = method
        self.url = url
        self.headers = RequestHeaders(headers.items())
        self.data = data
        self.params: dict[str, str] = {}
        self.context: dict[str, Any] = {}
        self.stream_output = False

    @property
    def body(self) -> bytes | None:
        """The prepared body, as ``AWSRequest.body`` gives it (``b""`` is None)."""
        return self.data or None
