"""The lab's pytest fixtures work together: controller handle, metadata, node patches."""

from __future__ import annotations

from typing import Any

from botocore.utils import InstanceMetadataFetcher

from e2e.support import UNINITIALIZED, node_taint_keys, wait_for
from lab.compose import Lab

EXCLUDE = "node.kubernetes.io/exclude-from-external-load-balancers"


def test_controller_imds_and_node_patch_fixtures(
    lab: Lab, controller: Any, imds: Any, node_patches: Any, core_v1: Any
) -> None:
    assert controller.running
    assert controller.url
    # The controller's own identity, through botocore's real metadata client.
    fetcher = InstanceMetadataFetcher(timeout=2, num_attempts=1)
    fetcher._base_url = imds.url + "/"  # the documented override is the env variable
    doc = fetcher._get_request(
        "/latest/meta-data/instance-id", None, fetcher._fetch_metadata_token()
    )
    assert doc.text == lab.control_plane.instance_id
    worker = lab.workers[0]
    wait_for(
        lambda: UNINITIALIZED not in node_taint_keys(core_v1.read_node(worker.name)),
        what="worker initialized",
    )
    node_patches.exclude(worker.name)
    assert EXCLUDE in core_v1.read_node(worker.name).metadata.labels
    node_patches.include(worker.name)
    assert EXCLUDE not in (core_v1.read_node(worker.name).metadata.labels or {})


def test_each_test_gets_a_fresh_world(lab: Lab, core_v1: Any) -> None:
    """After the previous test the controller is stopped and nodes are as registered."""
    assert lab.controller is None
    for node in lab.nodes:
        assert UNINITIALIZED in node_taint_keys(core_v1.read_node(node.name))
