"""How to attach to a debuggee: the address and a VS Code ``launch.json`` configuration.

Role: ``invoke lab.debug`` prints this after ``launcher.Debuggee`` reports its endpoint, and
``lab.status`` can show it again. The configuration is built by a pure function (a dict that
tests compare and that can be written to ``.vscode/launch.json``); rendering to plain text or to
a rich renderable is separate.

Path mappings: ``localRoot`` is where the sources are in the editor's workspace,
``remoteRoot`` where the debuggee imports them from. For the local-process controller both are
this checkout; for an in-cluster controller ``remoteRoot`` is the path inside the image. The
remote root must be absolute: a relative one is resolved against the debuggee's working
directory, a classic cause of "unverified breakpoints" (debugpy#318).
"""

from __future__ import annotations

import json
from pathlib import Path, PurePosixPath, PureWindowsPath
from typing import TYPE_CHECKING, Literal, NotRequired, TypedDict

if TYPE_CHECKING:
    from rich.console import RenderableType

WORKSPACE_FOLDER = "${workspaceFolder}"
DEFAULT_NAME = "Attach: ccm-lab controller (debugpy)"


class ConnectConfig(TypedDict):
    host: str
    port: int


class PathMappingConfig(TypedDict):
    localRoot: str
    remoteRoot: str


class AttachConfiguration(TypedDict):
    """One entry of ``launch.json``'s ``configurations`` for the VS Code Python debugger."""

    name: str
    type: Literal["debugpy"]
    request: Literal["attach"]
    connect: ConnectConfig
    pathMappings: list[PathMappingConfig]
    justMyCode: bool
    subProcess: NotRequired[bool]


class LaunchJson(TypedDict):
    version: str
    configurations: list[AttachConfiguration]


def _is_absolute(path: str) -> bool:
    return PurePosixPath(path).is_absolute() or PureWindowsPath(path).is_absolute()


def vscode_attach_config(
    host: str,
    port: int,
    *,
    remote_root: str | Path,
    local_root: str = WORKSPACE_FOLDER,
    name: str = DEFAULT_NAME,
    just_my_code: bool = False,
) -> AttachConfiguration:
    """The VS Code attach configuration for a debugpy listening on ``host:port``.

    ``remote_root`` is the absolute directory the debuggee loads the project from (for a local
    process: the repository root). ``just_my_code`` defaults to ``False`` so breakpoints and
    stepping also work inside the Kubernetes client and boto3.
    """
    if not host:
        raise ValueError("host must not be empty")
    if not 0 < port < 65536:
        raise ValueError(f"port must be in 1..65535, got {port}")
    remote = str(remote_root)
    if not _is_absolute(remote):
        raise ValueError(
            f"remote_root must be an absolute path, got {remote!r} (a relative root is resolved "
            "against the debuggee's working directory and leaves breakpoints unverified)"
        )
    if not local_root:
        raise ValueError("local_root must not be empty")
    return AttachConfiguration(
        name=name,
        type="debugpy",
        request="attach",
        connect=ConnectConfig(host=host, port=port),
        pathMappings=[PathMappingConfig(localRoot=local_root, remoteRoot=remote)],
        justMyCode=just_my_code,
    )


def launch_json(*configurations: AttachConfiguration) -> LaunchJson:
    """A complete ``.vscode/launch.json`` document holding ``configurations``."""
    return LaunchJson(version="0.2.0", configurations=list(configurations))


def attach_summary(config: AttachConfiguration) -> list[str]:
    """The lines that say where to attach, shared by both renderings."""
    connect = config["connect"]
    address = f"{connect['host']}:{connect['port']}"
    mapping = config["pathMappings"][0] if config["pathMappings"] else None
    lines = [
        f"debugpy is listening on {address}",
        "  VS Code: add the configuration below to .vscode/launch.json, "
        f"then run {config['name']!r}",
        f"  any DAP client: connect to {address}, request 'attach'",
    ]
    if mapping is not None:
        lines.append(f"  path mapping: {mapping['localRoot']} -> {mapping['remoteRoot']}")
    return lines


def render_attach_text(config: AttachConfiguration, *, waiting_for_client: bool) -> str:
    """Plain-text attach instructions (for logs, CI output and terminals without rich)."""
    lines = attach_summary(config)
    if waiting_for_client:
        lines.append("  the program waits for a debugger before it starts")
    lines.append("")
    lines.append(json.dumps(config, indent=2))
    return "\n".join(lines) + "\n"


def render_attach_rich(config: AttachConfiguration, *, waiting_for_client: bool) -> RenderableType:
    """The same instructions as a rich renderable: a panel, then the JSON outside any border
    so that it can be copied from the terminal as is."""
    from rich.console import Group
    from rich.panel import Panel
    from rich.syntax import Syntax
    from rich.text import Text

    lines = attach_summary(config)
    head = Text(lines[0], style="bold green")
    body = Text("\n".join(lines[1:]))
    parts: list[RenderableType] = [head, body]
    if waiting_for_client:
        parts.append(Text("the program waits for a debugger before it starts", style="yellow"))
    panel = Panel(Group(*parts), title="lab.debug", expand=False)
    return Group(panel, Syntax(json.dumps(config, indent=2), "json", word_wrap=True))
