"""debug-attach: stopping inside the controller at a Service sync.

Source: seed 002 (attaching dlv to components of a local cluster to step through their sync
loops). ``invoke lab.debug`` runs the controller under debugpy on loopback, waiting for a
client, and prints how to attach (address, VS Code ``launch.json`` with path mappings). This
scenario does what a person does in the editor, through the Debug Adapter Protocol: attach,
set a breakpoint in the service controller's sync, create a Service, see ``stopped`` at that
line, evaluate the Service's key in that frame, continue, and the ELB is then created
normally. While the controller is stopped there, no load balancer exists yet: the breakpoint
really holds the sync.

Stand-ins on sim: none beyond the usual kubelet stand-in; on kind the controller runs as a
local process too (in-cluster debugging is not covered).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import controller.service
from e2e.support import create_service, describe_elb, elb_name, lb_service, wait_hostname
from lab.compose import Lab
from lab.debug.source import function_body_line

SYNC = "ServiceController.sync_service"


def test_breakpoint_in_service_sync_then_elb_created(
    lab: Lab, core_v1: Any, elb: Any, debugged_controller: Any
) -> None:
    aws = lab.aws
    assert aws is not None
    source = Path(controller.service.__file__).resolve()
    line = function_body_line(source, SYNC)
    with debugged_controller({str(source): [line]}) as dap:
        svc = create_service(core_v1, lb_service("web"))
        stopped = dap.wait_for_stop(reason="breakpoint", timeout=30)
        frame = dap.top_frame(stopped["threadId"])
        assert frame["line"] == line
        assert Path(frame["source"]["path"]).resolve() == source
        assert dap.evaluate("key", frame["id"])["result"] == "'default/web'"
        # Held at the breakpoint: nothing was created in AWS for this Service yet.
        assert describe_elb(elb, elb_name(svc)) is None
        assert aws.trail.count("CreateLoadBalancer") == 0
        dap.set_breakpoints(str(source), [])
        dap.continue_(stopped["threadId"])
        hostname = wait_hostname(core_v1, "web", timeout=30)
        dap.disconnect()
    assert hostname.endswith(".elb.amazonaws.com")
    assert describe_elb(elb, elb_name(svc)) is not None
    assert aws.trail.count("CreateLoadBalancer") == 1
