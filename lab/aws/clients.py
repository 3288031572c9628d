"""boto3 clients for the lab's AWS endpoint and recording proxy.

Role: :func:`make_client` gives a boto3 client for one service at a URL, signed with the lab's
dummy credentials (moto accepts any) or with given ones (a proxy that checks its callers),
without retries, so a test sees every answer. The moto endpoint's server
(:mod:`lab.aws.server`), the proxy's (:mod:`lab.aws.proxy.server`) and their process
launchers all hand them out.

Design: apart from the servers so that the proxy, which must not know the moto endpoint's
app, can make clients too (the ``lab.aws`` layers contract in ``pyproject.toml``); one shared
boto3 session so service models load once per process.

Neighbours: :mod:`lab.aws.server`, :mod:`lab.aws.process`, :mod:`lab.aws.proxy`.
"""

from __future__ import annotations

import threading
from typing import Any

#: Credentials the lab's clients sign with (moto accepts any).
DUMMY_ACCESS_KEY = "testing"
DUMMY_SECRET_KEY = "testing"

_session_lock = threading.Lock()
_shared: dict[str, Any] = {}


def make_client(
    service: str,
    url: str,
    region: str,
    *,
    max_attempts: int = 1,
    credentials: tuple[str, str] | None = None,
) -> Any:
    """A boto3 client for ``service`` at ``url`` with the lab's dummy credentials, or
    ``credentials`` (key, secret) when given (a recording proxy that checks its callers).

    Clients come from one shared boto3 session (created lazily, used under a lock because
    session client creation is not thread-safe) so service models load once per process.
    """
    import boto3
    from botocore.config import Config

    with _session_lock:
        session: Any = _shared.get("session")
        if session is None:
            session = _shared["session"] = boto3.session.Session()
        return session.client(
            service,
            endpoint_url=url,
            region_name=region,
            aws_access_key_id=credentials[0] if credentials else DUMMY_ACCESS_KEY,
            aws_secret_access_key=credentials[1] if credentials else DUMMY_SECRET_KEY,
            config=Config(retries={"total_max_attempts": max_attempts, "mode": "standard"}),
        )
