"""Provider selection: kind when a Docker engine answers quickly and kind works, else sim."""

from __future__ import annotations

import pytest

from lab.cluster.base import choose_provider
from lab.exec import RecordingRunner, Reply


def test_docker_and_kind_present_selects_kind() -> None:
    runner = RecordingRunner([Reply(("docker", "info"), stdout="27.3.1\n")])
    choice = choose_provider(runner=runner)
    assert choice.name == "kind"
    assert "Docker engine 27.3.1 answered" in choice.reason
    assert runner.argvs == [
        ("docker", "info", "--format", "{{.ServerVersion}}"),
        ("kind", "version"),
    ]


def test_no_engine_selects_sim_with_reason() -> None:
    runner = RecordingRunner(
        [Reply(("docker", "info"), returncode=1, stderr="Cannot connect to the Docker daemon")]
    )
    choice = choose_provider(runner=runner)
    assert choice.name == "sim"
    assert choice.reason == "no Docker engine answered `docker info`: exited with status 1"


def test_slow_engine_selects_sim() -> None:
    runner = RecordingRunner([Reply(("docker", "info"), timeout=True)])
    choice = choose_provider(runner=runner, docker_timeout=2)
    assert choice.name == "sim"
    assert "timed out after 2s" in choice.reason
    assert runner.calls[0].timeout == 2


def test_engine_without_kind_selects_sim() -> None:
    runner = RecordingRunner(
        [Reply(("docker", "info"), stdout="27\n"), Reply(("kind",), returncode=127)]
    )
    choice = choose_provider(runner=runner)
    assert choice.name == "sim"
    assert "kind CLI is unusable" in choice.reason


def test_explicit_request_wins_and_is_validated() -> None:
    runner = RecordingRunner()
    assert choose_provider("existing", runner=runner).name == "existing"
    assert runner.calls == []
    with pytest.raises(ValueError, match="'minikube' is not one of"):
        choose_provider("minikube")


def test_on_this_machine_without_docker_the_choice_is_sim() -> None:
    # Real probe against whatever this machine has: no engine here means sim, with a reason.
    choice = choose_provider(docker_timeout=3)
    assert choice.reason
    if choice.name == "sim":
        assert "Docker" in choice.reason
