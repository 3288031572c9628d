"""Debugging support: the controller under debugpy, attach instructions, a DAP client.

* ``launcher.Debuggee`` runs any Python module or script under debugpy on loopback (port chosen
  by the kernel) and stops it leaving no process or port behind;
* ``attach`` builds the VS Code attach configuration and renders attach instructions;
* ``dap`` is a small Debug Adapter Protocol client for tests;
* ``bootstrap`` is the code that runs first inside the debuggee.

Only the standard library is imported eagerly (``rich`` on demand), so that
``python -m lab.debug.bootstrap`` stays cheap inside the debuggee.
"""

from __future__ import annotations

from lab.debug.attach import (
    AttachConfiguration,
    launch_json,
    render_attach_rich,
    render_attach_text,
    vscode_attach_config,
)
from lab.debug.dap import (
    DapClient,
    DapConnectionError,
    DapError,
    DapRequestError,
    DapTimeoutError,
    attach_session,
    find_line,
)
from lab.debug.launcher import DebugEndpoint, Debuggee, DebuggeeError

__all__ = [
    "AttachConfiguration",
    "DapClient",
    "DapConnectionError",
    "DapError",
    "DapRequestError",
    "DapTimeoutError",
    "DebugEndpoint",
    "Debuggee",
    "DebuggeeError",
    "attach_session",
    "find_line",
    "launch_json",
    "render_attach_rich",
    "render_attach_text",
    "vscode_attach_config",
]
