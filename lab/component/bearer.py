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
and the control clients, which also read a refusal's message with :func:`refusal_message`.
This module imports nothing else of the lab.
"""

from __future__ import annotations

import argparse
import contextlib
import hmac
import json
import os
import secrets
import sys
import time
import urllib.error
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
    else the token in ``token_file``; else a new one written there, created exclusively with
    mode 0600 (never through a symlink), so two components started together on one file end
    up with the same token; None without either (an open control plane, which the component
    says). Raises ``OSError`` naming the problem: a token file others can read is refused."""
    given = token_from_env()
    if given is not None or token_file is None:
        return given
    for _ in range(50):
        existing = _read_token(token_file)
        if existing:
            return existing
        if existing == "":  # an empty file (touched by hand, or a writer mid-way)
            with contextlib.suppress(FileNotFoundError):
                if token_file.stat().st_size == 0 and time.time() - token_file.stat().st_mtime > 1:
                    token_file.unlink()
            time.sleep(0.02)
            continue
        token = secrets.token_urlsafe(24)
        try:
            fd = os.open(token_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        except FileExistsError:
            continue  # another component made it first: read its token
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(token + "\n")
        return token
    raise OSError(f"{token_file} stays empty; remove it and start again")


def add_control_token_file(parser: argparse.ArgumentParser, *, plane: str) -> None:
    """``--control-token-file`` for a component's CLI (``plane``: what the token guards)."""
    parser.add_argument(
        "--control-token-file",
        type=Path,
        default=None,
        help=f"{plane}'s bearer token: read from this file, or generated and written there "
        f"(0600) when it is absent; {TOKEN_ENV} in the environment wins. Without either "
        f"{plane} is open to anyone on the host",
    )


def cli_control_token(token_file: Path | None, *, plane: str) -> str | None:
    """:func:`control_token` for a CLI: a warning on stderr when ``plane`` stays open; a bad
    token file is one line on stderr and exit status 2."""
    try:
        token = control_token(token_file)
    except OSError as exc:
        print(f"--control-token-file {token_file}: {exc.strerror or exc}", file=sys.stderr)
        raise SystemExit(2) from None
    if token is None:
        print(
            f"warning: {plane} is open to anyone on this host (set {TOKEN_ENV} or "
            "--control-token-file)",
            file=sys.stderr,
        )
    return token


def _read_token(token_file: Path) -> str | None:
    """The file's token ("" while empty), or None when there is no file."""
    try:
        fd = os.open(token_file, os.O_RDONLY | os.O_NOFOLLOW)
    except FileNotFoundError:
        return None
    with os.fdopen(fd, encoding="utf-8") as fh:
        if os.fstat(fh.fileno()).st_mode & 0o077:
            raise OSError(
                f"{token_file} can be read by other users (mode "
                f"{os.fstat(fh.fileno()).st_mode & 0o777:o}); `chmod 600 {token_file}` first"
            )
        return fh.read().strip()


def auth_headers(token: str | None) -> dict[str, str]:
    """The header a control client sends (none without a token)."""
    return {"Authorization": f"Bearer {token}"} if token else {}


def refusal_message(exc: urllib.error.HTTPError, key: str) -> tuple[str | None, str]:
    """A control plane's refusal, read once: the ``key`` field of its JSON body (None when the
    body is not such a document) and the body's text, for the caller's own fallback."""
    with exc:
        text = exc.read().decode("utf-8", errors="replace")
    try:
        return str(json.loads(text)[key]), text
    except (ValueError, KeyError, TypeError):
        return None, text
