"""Debugging support: the controller under debugpy, attach instructions, a DAP client.

* ``launcher.Debuggee`` runs any Python module or script under debugpy on loopback (port chosen
  by the kernel) and stops it leaving no process or port behind;
* ``attach`` builds the VS Code attach configuration and renders attach instructions;
* ``dap`` is a small Debug Adapter Protocol client for tests, ``source`` finds breakpoint
  lines by marker or function name;
* ``session`` is the foreground session behind ``invoke lab.debug``;
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
from lab.debug.dap import DapClient, attach_session
from lab.debug.dap_types import (
    DapConnectionError,
    DapError,
    DapRequestError,
    DapTimeoutError,
)
from lab.debug.launcher import DebugEndpoint, Debuggee, DebuggeeError
from lab.debug.session import (
    SessionState,
    StartedSession,
    end_session,
    read_session_state,
    run_foreground,
    start_session,
)
from lab.debug.source import find_line, function_body_line

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
    "SessionState",
    "StartedSession",
    "attach_session",
    "end_session",
    "find_line",
    "function_body_line",
    "launch_json",
    "read_session_state",
    "render_attach_rich",
    "render_attach_text",
    "run_foreground",
    "start_session",
    "vscode_attach_config",
]
