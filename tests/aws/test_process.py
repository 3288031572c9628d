"""The CLI (``python -m lab.aws``) and the AwsProcess helper: ready line, clean SIGTERM exit."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from lab.aws import AwsControlClient, AwsControlError, load_jsonl, make_client
from lab.aws.process import AwsProcess
from lab.component import ComponentNotReady
from lab.component.bearer import TOKEN_ENV

READY = re.compile(r"^ccm-lab aws endpoint ready at http://127\.0\.0\.1:(\d+)$")


def test_cli_prints_one_ready_line_and_exits_cleanly_on_sigint(tmp_path: Path) -> None:
    trail = tmp_path / "trail.jsonl"
    proc = subprocess.Popen(
        [sys.executable, "-m", "lab.aws", "--port", "0", "--seed", "5", "--trail", str(trail)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline().rstrip("\n")
        match = READY.match(line)
        assert match, line
        url = line.rsplit(" ", 1)[1]
        make_client("ec2", url, "us-east-1").describe_vpcs()
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, err
    assert out == ""  # nothing after the ready line
    assert [e.action for e in load_jsonl(trail.read_text().splitlines())] == ["DescribeVpcs"]


def test_aws_process_serves_and_stops_on_sigterm(tmp_path: Path) -> None:
    log = tmp_path / "aws.log"
    aws = AwsProcess(region="eu-central-1", seed=3, log_path=log, detach=True, token="t0ken")
    assert "t0ken" not in " ".join(aws.command), "a command line is public"
    with aws:
        assert aws.running
        ref = aws.ref
        assert aws.control.health().region == "eu-central-1"  # sends the token
        with pytest.raises(AwsControlError) as refused:
            AwsControlClient(aws.url).reset()
        assert refused.value.status == 401
        ec2 = aws.client("ec2")
        group = ec2.create_security_group(GroupName="g", Description="g")["GroupId"]
        assert [e.response["GroupId"] for e in aws.control.trail("CreateSecurityGroup")] == [group]
        assert aws.stop() == 0  # clean exit on SIGTERM
    assert aws.stop() == 0  # idempotent: the same exit code again
    assert not aws.running
    assert not ref.alive()  # already gone
    assert ref.terminate()  # nothing left to stop
    assert "signal 15: shutting down" in log.read_text()


def test_readiness_failure_carries_the_log(tmp_path: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        aws = AwsProcess(port=port, log_path=tmp_path / "aws.log", ready_timeout=20)
        with pytest.raises(ComponentNotReady, match="Address already in use"):
            aws.start()
    assert not aws.running


def test_cli_control_token_file_is_generated_once_and_required(tmp_path: Path) -> None:
    """``--control-token-file``: a fresh token written 0600, then required on ``/_lab/`` and
    ``/moto-api/``; a second start with the same file keeps the token."""
    token_file = tmp_path / "control-token"
    tokens = []
    env = {k: v for k, v in os.environ.items() if k != TOKEN_ENV}
    for _ in range(2):
        proc = subprocess.Popen(
            [sys.executable, "-m", "lab.aws", "--port", "0", "--no-warm-up",
             "--control-token-file", str(token_file)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
        )  # fmt: skip
        try:
            assert proc.stdout is not None
            line = proc.stdout.readline().rstrip("\n")
            assert READY.match(line), (line, proc.stderr.read() if proc.stderr else "")
            url = line.rsplit(" ", 1)[1]
            assert token_file.stat().st_mode & 0o777 == 0o600
            token = token_file.read_text(encoding="utf-8").strip()
            tokens.append(token)
            with pytest.raises(AwsControlError) as refused:
                AwsControlClient(url).reset()
            assert "401" in str(refused.value) or "token" in str(refused.value)
            AwsControlClient(url, token=token).reset()
            for path in ("/moto-api/reset", "/_lab/reset"):
                request = urllib.request.Request(url + path, method="POST", data=b"")
                with pytest.raises(urllib.error.HTTPError) as http:
                    urllib.request.urlopen(request, timeout=10)
                http.value.close()
                assert http.value.code == 401
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.communicate(timeout=20)
    assert tokens[0] == tokens[1]
    assert len(tokens[0]) >= 32
