"""A Node's providerID can be set once (from empty) and never changed, as the real API server
enforces (``ValidateNodeUpdate``); the cloud node controller and ``lab.nodes`` rely on it."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes import client


def test_provider_id_is_set_once_then_immutable(sim: Any) -> None:
    core = client.CoreV1Api(sim.api_client())
    core.create_node({"metadata": {"name": "n1"}, "spec": {}})
    core.patch_node("n1", {"spec": {"providerID": "aws:///us-east-1a/i-0aaa"}})
    assert core.read_node("n1").spec.provider_id == "aws:///us-east-1a/i-0aaa"
    with pytest.raises(client.ApiException) as err:
        core.patch_node("n1", {"spec": {"providerID": "aws:///us-east-1a/i-0bbb"}})
    assert err.value.status == 422
    assert 'node updates may not change providerID except from \\"\\" to valid' in err.value.body
    assert "spec.providerID" in err.value.body
    # Other updates of a node with a providerID still work.
    core.patch_node("n1", {"metadata": {"labels": {"a": "b"}}})
    assert core.read_node("n1").spec.provider_id == "aws:///us-east-1a/i-0aaa"
