"""The lab's bearer token on its control planes: the check, the refusal, how a child gets it.

Role: every lab has one secret (``LabState.token``, ``Lab.token``). The control planes beside
the emulated APIs (the AWS endpoint's ``/_lab/`` and moto's ``/moto-api/``, the metadata
service's ``/_lab/``, the API simulator's ``/_lab/``, the lab daemon's) accept a request only
with ``Authorization: Bearer <token>`` when the component was given one. The emulated APIs
themselves keep their own rules (SigV4 on AWS calls, none on instance-metadata reads, the
kubeconfig's token on the Kubernetes API), since real clients call them.

A component started as a child process (``python -m lab.aws`` ...) reads its token from the
environment variable :data:`TOKEN_ENV`, never from its command line, which any user of the
machine can read in ``/proc``.

Neighbours: used by ``lab.aws.app``, ``lab.imds.routes``, ``lab.kube.handlers``, ``lab.daemon``
and the control clients. This module imports nothing else of the lab.
"""

from __future__ import annotations

import hmac
import os
import secrets
from pathlib import Path

#: where a component started as a child process finds the lab's token
TOKEN_ENV = "CCM_LAB_TOKEN"

#: what a 401 carries (RFC 6750: a bearer-protected resource names its scheme)
CHALLENGE = 'Bearer realm="ccm-lab"'

WHERE = (
    "the lab's token is `token` in .lab/<name>/state.json (also the user token of its "
    "kubeconfig, unless the lab runs with --insecure-api)"
)


def bearer_ok(authorization: str | None, token: str | None) -> bool:
    """True when ``token`` is None (an open component) or the header carries exactly it."""
    if token is None:
        return True
    scheme, _, given = (authorization or "").partition(" ")
    if scheme.lower() != "bearer":
        return False
    return hmac.compare_digest(given.strip().encode(), token.encode())


def refusal(what: str, authorization: str | None) -> str:
    """The one-line reason a control request was refused (never echoes what was sent)."""
    if not authorization:
        problem = "no bearer token was sent"
    elif authorization.partition(" ")[0].lower() != "bearer":
        problem = "the Authorization header is not `Bearer <token>`"
    else:
        problem = "the bearer token is not this lab's"
    return (
        f"{what} needs the lab's token ({problem}): send `Authorization: Bearer <token>`; {WHERE}"
    )


def token_from_env() -> str | None:
    """The token a parent handed a child component (None: serve without one)."""
    return os.environ.get(TOKEN_ENV) or None


def control_token(token_file: Path | None) -> str | None:
    """A standalone component's token (``--control-token-file``): :data:`TOKEN_ENV` when set;
    else the token in ``token_file``, or a new one written there (mode 0600, created only if
    absent) when the file does not exist or is empty; None without either (an open control
    plane, which the component's log says). Raises ``OSError`` naming the file."""
    given = token_from_env()
    if given is not None or token_file is None:
        return given
    try:
        text = token_file.read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        text = ""
    if text:
        return text
    token = secrets.token_urlsafe(24)
    fd = os.open(token_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(token + "\n")
    os.chmod(token_file, 0o600)
    return token


def auth_headers(token: str | None) -> dict[str, str]:
    """The header a control client sends (none without a token)."""
    return {"Authorization": f"Bearer {token}"} if token else {}
