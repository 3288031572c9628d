"""The store without HTTP: history retention, watch registration, persistence round trip."""

from __future__ import annotations

import pytest

from lab.kube.exceptions import ApiError
from lab.kube.registry import Registry
from lab.kube.store import Selection
from lab.kube.watch import CLOSED, Event, ExpiredError


def test_bounded_history_expires_old_watches_and_replays_recent_ones() -> None:
    store = Registry(history=5)
    cms = store.rt("", "configmaps")
    start = store.rv
    for i in range(10):
        store.writer.create(cms, "default", {"metadata": {"name": f"h{i}"}})
    with pytest.raises(ExpiredError) as info:
        store.watch(cms, "default", Selection(), resource_version=str(start))
    assert (
        info.value.message
        == f"too old resource version: {start} ({store.compacted(('', 'configmaps'))})"
    )
    watcher, _ = store.watch(cms, "default", Selection(), resource_version=str(store.rv - 2))
    got = [watcher.next(0) for _ in range(3)]
    assert [e.obj["metadata"]["name"] for e in got if isinstance(e, Event)] == ["h8", "h9"]
    assert got[2] is None
    watcher.close()
    assert watcher.next(0) is CLOSED


def test_dump_and_load_keep_objects_allocations_and_revision() -> None:
    store = Registry()
    svc = store.rt("", "services")
    made = store.writer.create(
        svc,
        "default",
        {"metadata": {"name": "lb"}, "spec": {"type": "LoadBalancer", "ports": [{"port": 80}]}},
    )
    state = store.dump()
    other = Registry(seed=False)
    other.load(state)
    assert other.rv == store.rv
    got = other.get(svc, "default", "lb").obj
    assert got["spec"]["ports"][0]["nodePort"] == made["spec"]["ports"][0]["nodePort"]
    taken = {
        "metadata": {"name": "dup"},
        "spec": {
            "type": "NodePort",
            "ports": [{"port": 80, "nodePort": made["spec"]["ports"][0]["nodePort"]}],
        },
    }
    with pytest.raises(ApiError, match="provided port is already allocated"):
        other.writer.create(svc, "default", taken)
