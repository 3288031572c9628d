"""``invoke lab.debug`` end to end: the task's function, a running lab, a DAP client.

``lab.frontdoor.debug.debug_controller`` replaces the lab's controller with one under debugpy
and blocks (as the task does in a terminal) until the controller exits; the test runs it in a
thread, attaches through the Debug Adapter Protocol using the address it published, stops at the
service sync, evaluates the Service's key, continues, sees the ELB created, then ends the
session and checks nothing is left running.
"""

from __future__ import annotations

import io
import json
import os
import signal
import threading
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

import controller.service
from lab import labview
from lab.compose import wait_for
from lab.debug import attach_session
from lab.debug.source import function_body_line
from lab.frontdoor.debug import debug_controller
from lab.frontdoor.down import down
from lab.frontdoor.up import up
from lab.spec import up_request
from lab.state import load_state


@pytest.mark.slow
def test_lab_debug_attach_break_evaluate_continue(tmp_path: Path) -> None:
    console = Console(file=io.StringIO(), width=120)
    state = up(up_request(name="dbg", backend="sim"), root=tmp_path, console=console)
    result: dict[str, Any] = {}
    runner = threading.Thread(
        target=lambda: result.update(
            code=debug_controller(name="dbg", root=tmp_path, console=console)
        ),
        daemon=True,
    )
    session_file = tmp_path / "dbg" / "debug" / "debug-session.json"
    try:
        runner.start()
        session = json.loads(
            wait_for(
                lambda: session_file.exists() and session_file.read_text(),
                timeout=60,
                what="session file",
            )
        )
        assert session["host"] == "127.0.0.1"
        recorded = wait_for(
            lambda: load_state("dbg", tmp_path).debug, timeout=10, what="debug state"
        )
        assert recorded.process.pid == session["pid"]
        assert recorded.address == f"127.0.0.1:{session['port']}"
        assert load_state("dbg", tmp_path).controller is None, "the old one was stopped"
        doc = labview.status(name="dbg", root=tmp_path)
        assert doc["live"]["debug_alive"], "lab.status shows the debug session"
        labview.render_status(doc, console)
        assert "under the debugger" in console.file.getvalue()  # type: ignore[attr-defined]
        launch = json.loads((tmp_path / "dbg" / "debug" / "launch.json").read_text())
        attach = launch["configurations"][0]
        assert attach["request"] == "attach"
        assert attach["connect"]["port"] == session["port"]
        printed = console.file  # the task prints the address to attach to
        wait_for(lambda: str(session["port"]) in printed.getvalue(), timeout=10, what="attach")  # type: ignore[attr-defined]

        source = Path(controller.service.__file__).resolve()
        line = function_body_line(source, "ServiceController.sync_service")
        core = labview.core_api(state)
        try:
            with attach_session(
                session["host"], session["port"], breakpoints={str(source): [line]}, timeout=30
            ) as dap:
                core.create_namespaced_service(
                    "default",
                    {
                        "metadata": {"name": "web"},
                        "spec": {"type": "LoadBalancer", "ports": [{"port": 80}]},
                    },
                )
                stopped = dap.wait_for_stop(reason="breakpoint", timeout=60)
                frame = dap.top_frame(stopped["threadId"])
                assert frame["line"] == line
                assert dap.evaluate("key", frame["id"])["result"] == "'default/web'"
                dap.set_breakpoints(str(source), [])
                dap.continue_(stopped["threadId"])

                def hostname() -> str | None:
                    svc = core.read_namespaced_service("web", "default")
                    ingress = svc.status.load_balancer.ingress or []
                    return ingress[0].hostname if ingress else None

                assert str(wait_for(hostname, timeout=60, what="hostname")).endswith(
                    ".elb.amazonaws.com"
                )
                dap.disconnect()
        finally:
            core.api_client.close()
        os.kill(session["pid"], signal.SIGTERM)
        runner.join(timeout=30)
        assert not runner.is_alive(), "lab.debug returns once the controller exits"
        assert "code" in result
        assert not recorded.process.alive()
        assert not session_file.exists(), "the session file is removed when it ends"
        after = load_state("dbg", tmp_path)
        assert after.debug is None
        assert after.controller is not None, "the lab's controller runs again"
        assert after.controller.process.alive()
        assert labview.status(name="dbg", root=tmp_path)["live"]["controller_healthy"]
    finally:
        down(name="dbg", root=tmp_path, console=console)
