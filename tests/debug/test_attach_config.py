"""The VS Code attach configuration and its renderings (pure functions, no debuggee)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from rich.console import Console

from lab.debug import launch_json, render_attach_rich, render_attach_text, vscode_attach_config


def test_attach_config_is_what_vscode_expects() -> None:
    config = vscode_attach_config("127.0.0.1", 5678, remote_root="/work/main")
    assert config == {
        "name": "Attach: ccm-lab controller (debugpy)",
        "type": "debugpy",
        "request": "attach",
        "connect": {"host": "127.0.0.1", "port": 5678},
        "pathMappings": [{"localRoot": "${workspaceFolder}", "remoteRoot": "/work/main"}],
        "justMyCode": False,
    }


def test_in_cluster_mapping_and_options() -> None:
    config = vscode_attach_config(
        "localhost",
        15678,
        remote_root=Path("/app"),
        local_root="${workspaceFolder}/controller",
        name="Attach CCM in kind",
        just_my_code=True,
    )
    assert config["pathMappings"] == [
        {"localRoot": "${workspaceFolder}/controller", "remoteRoot": "/app"}
    ]
    assert config["name"] == "Attach CCM in kind"
    assert config["justMyCode"] is True


def test_launch_json_document_round_trips() -> None:
    a = vscode_attach_config("127.0.0.1", 1234, remote_root="/src")
    b = vscode_attach_config("127.0.0.1", 2345, remote_root="/src", name="second")
    doc = launch_json(a, b)
    assert json.loads(json.dumps(doc)) == {"version": "0.2.0", "configurations": [a, b]}


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"host": "127.0.0.1", "port": 5678, "remote_root": "."}, "absolute path, got '.'"),
        ({"host": "127.0.0.1", "port": 5678, "remote_root": "src"}, "absolute path, got 'src'"),
        ({"host": "127.0.0.1", "port": 0, "remote_root": "/src"}, "got 0"),
        ({"host": "127.0.0.1", "port": 65536, "remote_root": "/src"}, "got 65536"),
        ({"host": "", "port": 5678, "remote_root": "/src"}, "host"),
    ],
)
def test_bad_values_are_named(kwargs: dict[str, object], message: str) -> None:
    host, port, remote = kwargs["host"], kwargs["port"], kwargs["remote_root"]
    assert isinstance(host, str)
    assert isinstance(port, int)
    assert isinstance(remote, str)
    with pytest.raises(ValueError, match=message):
        vscode_attach_config(host, port, remote_root=remote)


def test_plain_text_rendering_has_address_and_pasteable_json() -> None:
    config = vscode_attach_config("127.0.0.1", 41234, remote_root="/work/main")
    text = render_attach_text(config, waiting_for_client=True)
    first = text.partition("\n")[0]
    assert first == "debugpy is listening on 127.0.0.1:41234"
    assert "waits for a debugger" in text
    assert "${workspaceFolder} -> /work/main" in text
    json_part = text[text.index("\n{\n") :]  # the block after the summary
    assert json.loads(json_part) == config
    assert "waits for a debugger" not in render_attach_text(config, waiting_for_client=False)


def test_rich_rendering_shows_the_same_facts() -> None:
    config = vscode_attach_config("127.0.0.1", 41234, remote_root="/work/main")
    console = Console(record=True, width=120, color_system=None)
    console.print(render_attach_rich(config, waiting_for_client=True))
    out = console.export_text()
    assert "debugpy is listening on 127.0.0.1:41234" in out
    assert '"port": 41234' in out
    assert '"type": "debugpy"' in out
    assert "waits for a debugger" in out
