"""The lab's token: the one check every control plane uses, and how a lab wires its API.

The refusals themselves are tested where each control plane lives (``tests/aws``,
``tests/imds``, ``tests/kube``), against a running ``invoke lab.up`` lab
(``tests/test_front_door.py``) and the session lab (``tests/test_pytest_plugin.py``).
"""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from lab.clock import ScaledClock
from lab.component.bearer import TOKEN_ENV, bearer_ok, control_token, refusal
from lab.compose.factory import make_cluster_provider
from lab.spec import LabSpec


@pytest.mark.parametrize(
    ("header", "ok"),
    [
        ("Bearer s3cret", True),
        ("bearer s3cret", True),  # the scheme is case-insensitive (RFC 7235)
        ("Bearer  s3cret ", True),
        ("", False),
        (None, False),
        ("Bearer", False),
        ("Bearer s3cret2", False),
        ("Bearer s3cre", False),
        ("Basic s3cret", False),
        ("s3cret", False),
    ],
)
def test_bearer_ok_wants_exactly_the_token(header: str | None, ok: bool) -> None:
    assert bearer_ok(header, "s3cret") is ok
    assert bearer_ok(header, None) is True, "a component without a token is open"


@pytest.mark.parametrize(
    ("header", "problem"),
    [
        (None, "no bearer token was sent"),
        ("Basic dXNlcjpwYXNz", "is not `Bearer <token>`"),
        ("Bearer guessed-token", "the bearer token is not this lab's"),
    ],
)
def test_a_refusal_is_one_line_saying_where_the_token_is(header: str | None, problem: str) -> None:
    text = refusal("the AWS endpoint's /_lab/", header)
    assert "\n" not in text
    assert text.startswith("the AWS endpoint's /_lab/ needs the lab's token")
    assert problem in text
    assert ".lab/<name>/state.json" in text
    assert "guessed-token" not in text, "never echoes what was sent"
    assert "dXNlcjpwYXNz" not in text


def test_a_lab_serves_its_api_with_tls_and_its_token_unless_told(tmp_path: Path) -> None:
    def options(config: LabSpec) -> dict[str, object]:
        provider = make_cluster_provider(config, tmp_path, ScaledClock(), token="lab-token")
        return dict(provider.simulator_options)  # type: ignore[attr-defined]

    assert options(LabSpec()) == {"tls": True, "token": "lab-token", "control_token": "lab-token"}
    assert options(LabSpec(insecure_api=True)) == {
        "tls": False,
        "token": None,
        "control_token": "lab-token",  # /_lab stays closed
    }


def test_insecure_api_is_the_sim_backends_only() -> None:
    with pytest.raises(ValueError, match=r"^--insecure-api .* kind cluster's API server"):
        LabSpec(backend="kind", insecure_api=True)


def test_control_token_file_is_made_once_private_and_shared(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(TOKEN_ENV, raising=False)
    assert control_token(None) is None
    path = tmp_path / "token"
    got: list[str | None] = []
    threads = [threading.Thread(target=lambda: got.append(control_token(path))) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(set(got)) == 1, "components started together share one token"
    assert got[0] is not None
    assert len(got[0]) >= 32
    assert path.stat().st_mode & 0o777 == 0o600
    assert control_token(path) == got[0], "a later start reads it"
    monkeypatch.setenv(TOKEN_ENV, "from-env")
    assert control_token(path) == "from-env"
    monkeypatch.delenv(TOKEN_ENV)
    loose = tmp_path / "loose"
    loose.write_text("t0ken\n", encoding="utf-8")
    loose.chmod(0o644)
    with pytest.raises(OSError, match="chmod 600"):
        control_token(loose)
    link = tmp_path / "link"
    link.symlink_to(tmp_path / "elsewhere")
    with pytest.raises(OSError, match=r"symbolic link"):
        control_token(link)
    assert not (tmp_path / "elsewhere").exists(), "never written through a symlink"
