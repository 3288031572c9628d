"""The write path's shortcuts give what the long way gives.

``objects.clone`` stands in for ``copy.deepcopy``; ``smd.compare`` skips equal subtrees;
``schema.type_error(stored=...)`` skips top-level fields a patch left as they were. Each is
checked against the long way on the same inputs, so a shortcut that changed an answer fails.
"""

from __future__ import annotations

import copy
import json
from typing import Any

from lab.kube.objects import clone
from lab.kube.registry import Registry
from lab.kube.resources import RESOURCES
from lab.kube.schema import type_error
from lab.kube.smd import Types, compare

NODES = next(r for r in RESOURCES if r.group == "" and r.plural == "nodes")
SERVICES = next(r for r in RESOURCES if r.group == "" and r.plural == "services")


def a_node() -> dict[str, Any]:
    return {
        "metadata": {"name": "n1", "labels": {"a": "1"}, "annotations": {"x": "y"}},
        "spec": {
            "providerID": "aws:///us-east-1a/i-1",
            "taints": [{"key": "k", "effect": "NoSchedule"}],
        },
        "status": {
            "conditions": [{"type": "Ready", "status": "True"}],
            "addresses": [{"type": "InternalIP", "address": "10.0.0.1"}],
            "capacity": {"cpu": "2"},
        },
    }


def test_clone_is_a_deep_independent_copy() -> None:
    obj = a_node()
    obj["odd"] = (1, 2)  # not JSON: handed to deepcopy
    got = clone(obj)
    assert got == copy.deepcopy(obj)
    got["status"]["conditions"][0]["status"] = "False"
    got["metadata"]["labels"]["b"] = "2"
    assert obj["status"]["conditions"][0]["status"] == "True"
    assert "b" not in obj["metadata"]["labels"]
    assert clone([1, "a", None, 2.5, True]) == [1, "a", None, 2.5, True]


def test_compare_skips_only_equal_subtrees() -> None:
    types = Types("1.33")
    root = types.root(NODES)
    old = a_node()
    new = a_node()
    new["metadata"]["labels"]["b"] = "2"
    new["spec"]["taints"] = []  # an atomic list in the Node schema: modified as one leaf
    new["status"]["conditions"][0]["status"] = "False"
    del new["status"]["capacity"]
    got = compare(types, old, new, root)
    assert got.modified == {
        ("f:spec", "f:taints"),
        ("f:status", "f:conditions", 'k:{"type":"Ready"}', "f:status"),
    }
    assert got.added == {("f:metadata", "f:labels", "f:b")}
    assert got.removed == {("f:status", "f:capacity"), ("f:status", "f:capacity", "f:cpu")}
    unchanged = compare(types, old, clone(old), root)
    assert (unchanged.added, unchanged.modified, unchanged.removed) == (set(), set(), set())


def test_type_error_with_the_stored_object_finds_the_same_first_error() -> None:
    stored = {"metadata": {"name": "s"}, "spec": {"ports": [{"port": 80}], "type": "ClusterIP"}}
    bad_spec = {**clone(stored), "spec": {"ports": [{"port": "eighty"}], "type": "ClusterIP"}}
    bad_meta = {**clone(stored), "metadata": {"name": "s", "labels": {"a": 5}}}
    for body in (bad_spec, bad_meta):
        full = type_error(SERVICES, body, version="1.33")
        assert full is not None
        assert type_error(SERVICES, body, version="1.33", stored=stored) == full
    # a value whose JSON type changed is checked though Python calls it equal (1 == True)
    deployments = next(r for r in RESOURCES if r.group == "apps" and r.plural == "deployments")
    stored_d = {"metadata": {"name": "d"}, "spec": {"replicas": 1}}
    for changed in (True, 1.5):
        patched = {"metadata": {"name": "d"}, "spec": {"replicas": changed}}
        full = type_error(deployments, patched, version="1.33")
        assert full is not None
        assert type_error(deployments, patched, version="1.33", stored=stored_d) == full
    # a stored field the patch kept is not decoded again (it decoded when it was written)
    assert type_error(SERVICES, clone(stored), version="1.33", stored=stored) is None


def test_a_writes_reply_reuses_its_commits_encoding_only_for_that_object() -> None:
    store = Registry()
    cms = store.rt("", "configmaps")
    first = store.writer.create(cms, "default", {"metadata": {"name": "a"}, "data": {"k": "v"}})
    cached = store.encoded(first)
    assert json.loads(cached) == first
    assert store.encoded(first) is cached, "the commit's own bytes"
    second = store.writer.create(cms, "default", {"metadata": {"name": "b"}})
    assert store.encoded(first) is not cached, "an earlier object is encoded afresh"
    assert json.loads(store.encoded(first)) == first
    copy_of_second = clone(second)
    assert json.loads(store.encoded(copy_of_second)) == second
    assert store.encoded(copy_of_second) is not store.encoded(second)
