"""imds-required: the controller needs instance metadata to start.

Source: seed 000 ("the cloud provider is gonna request the metadata, thinking that it's
running on an EC2 machine, and of course will be unable to do so, and this early exits the
program"); the write-up patched the provider's source with fake metadata to get past it.

The AWS provider asks the instance metadata service for its own identity (instance id,
region, zone, VPC, subnet) at start-up. Off EC2 nothing answers, so it exits early. What a
user needs from that exit: a non-zero code, within a bounded time (no hang), and a message
naming the metadata endpoint it tried and what to do, not a traceback. Two fixes: a metadata
service (the lab's, per node, backed by the EC2 state), or the off-cluster "dummy self
instance" mode where ``[Global]`` names ``Region``, ``VPC``, ``SubnetID`` and
``KubernetesClusterID`` so no metadata is needed.

"No metadata" here is a closed loopback port (``http://127.0.0.1:9``) handed to the
controller as ``AWS_EC2_METADATA_SERVICE_ENDPOINT``: the real default, 169.254.169.254, would
send traffic off this machine.

Stand-ins on sim: none (the controller runs as a real process; the metadata service is ours).
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from lab.compose import Lab

NO_METADATA = "http://127.0.0.1:9"


@dataclass(frozen=True)
class Evidence:
    exit_code: int | None  # None: still running (started)
    ready: bool
    log: str


def run_scenario(lab: Lab, *, imds: bool, dummy_self: bool = False) -> Evidence:
    cloud_config = None
    if dummy_self:
        topo = lab.topology
        assert topo is not None
        subnet = topo.subnets[lab.control_plane.zone].subnet_id
        cloud_config = lab.write_cloud_config(
            extra_global=[("VPC", topo.vpc_id), ("SubnetID", subnet)]
        )
    ctl = lab.start_controller(imds=imds, cloud_config=cloud_config, wait_ready=False)
    try:
        ctl.wait_ready(timeout=30)
    except Exception:
        code = ctl.wait_exit(timeout=30)  # bounded: a hang fails here
        return Evidence(exit_code=code, ready=False, log=ctl.log_text())
    return Evidence(exit_code=None, ready=True, log=ctl.log_text())


def assert_symptoms(ev: Evidence) -> None:
    assert ev.exit_code is not None, "the controller exits"
    assert ev.exit_code != 0
    assert not ev.ready
    assert NO_METADATA in ev.log, "the message names the endpoint it tried"
    assert "metadata" in ev.log
    assert "Traceback" not in ev.log


def assert_started(ev: Evidence) -> None:
    assert ev.ready
    assert ev.exit_code is None
    assert "AWS cloud ready" in ev.log
    assert "Traceback" not in ev.log


def test_reproduce_no_metadata_service(lab: Lab) -> None:
    ev = run_scenario(lab, imds=False)
    assert_symptoms(ev)
    with pytest.raises(AssertionError):
        assert_started(ev)


def test_fixed_with_the_labs_metadata_service(lab: Lab) -> None:
    ev = run_scenario(lab, imds=True)
    assert_started(ev)
    # The identity came from the control-plane node's instance, via our IMDS.
    assert lab.topology is not None
    assert lab.topology.vpc_id in ev.log
    with pytest.raises(AssertionError):
        assert_symptoms(ev)


def test_fixed_off_cluster_dummy_self_instance(lab: Lab) -> None:
    ev = run_scenario(lab, imds=False, dummy_self=True)
    assert_started(ev)
    with pytest.raises(AssertionError):
        assert_symptoms(ev)
