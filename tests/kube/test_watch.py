"""Watch semantics through ``kubernetes.watch.Watch`` and raw streams [apiserver-spec.md 4].

Covers replay from a resourceVersion, synthetic ADDED for RV unset/0, selector transitions,
bookmarks, ``timeoutSeconds``, 410 Expired as an in-stream ERROR, control-plane closing, and a
concurrency check: several writers and watchers, every watcher sees every event exactly once
in resourceVersion order.
"""

from __future__ import annotations

import http.client
import json
import threading
import time
from typing import Any
from urllib.parse import urlsplit

import pytest
from kubernetes import client, watch
from kubernetes.client.exceptions import ApiException

from lab.kube.server import KubeServer
from tests.kube.conftest import make_cm


def events(core: client.CoreV1Api, **kw: Any) -> list[tuple[str, str, str]]:
    w = watch.Watch()
    out = []
    for ev in w.stream(core.list_namespaced_config_map, "default", **kw):
        obj = ev["object"]
        if ev["type"] == "BOOKMARK":
            out.append(("BOOKMARK", "", obj["metadata"]["resourceVersion"]))
        else:
            out.append((ev["type"], obj.metadata.name, obj.metadata.resource_version))
    return out


def open_stream(
    sim: KubeServer, path: str
) -> tuple[http.client.HTTPConnection, http.client.HTTPResponse]:
    u = urlsplit(sim.url)
    conn = http.client.HTTPConnection(u.hostname or "", u.port, timeout=10)
    conn.request("GET", path)
    return conn, conn.getresponse()


def test_watch_from_list_rv_replays_like_python_e2e(core: client.CoreV1Api) -> None:
    rv = core.list_namespaced_config_map("default").metadata.resource_version
    core.create_namespaced_config_map("default", make_cm("w1", e2e="yes"))
    core.patch_namespaced_config_map("w1", "default", {"data": {"k": "2"}})
    core.create_namespaced_config_map("default", make_cm("w2", e2e="yes"))
    core.delete_collection_namespaced_config_map("default", label_selector="e2e=yes")
    got = events(core, resource_version=rv, timeout_seconds=1, label_selector="e2e=yes")
    assert [(t, n) for t, n, _ in got] == [
        ("ADDED", "w1"),
        ("MODIFIED", "w1"),
        ("ADDED", "w2"),
        ("DELETED", "w1"),
        ("DELETED", "w2"),
    ]
    rvs = [int(r) for _, _, r in got]
    assert rvs == sorted(rvs)
    assert len(set(rvs)) == len(rvs)
    assert rvs[0] > int(rv)


def test_watch_without_rv_sends_current_state_then_live(core: client.CoreV1Api) -> None:
    core.create_namespaced_config_map("default", make_cm("s1"))
    got = events(core, timeout_seconds=1)
    assert sorted(n for t, n, _ in got if t == "ADDED") == ["kube-root-ca.crt", "s1"]
    got0 = events(core, timeout_seconds=1, resource_version="0")
    assert {n for _, n, _ in got0} == {"kube-root-ca.crt", "s1"}


def test_selector_transitions_become_added_and_deleted(core: client.CoreV1Api) -> None:
    rv = core.create_namespaced_config_map("default", make_cm("t")).metadata.resource_version
    core.patch_namespaced_config_map("t", "default", {"metadata": {"labels": {"sel": "on"}}})
    core.patch_namespaced_config_map("t", "default", {"data": {"k": "x"}})
    core.patch_namespaced_config_map("t", "default", {"metadata": {"labels": {"sel": "off"}}})
    got = events(core, resource_version=rv, timeout_seconds=1, label_selector="sel=on")
    assert [t for t, _, _ in got] == ["ADDED", "MODIFIED", "DELETED"]


def test_bookmark_before_timeout_and_stream_stays_open(core: client.CoreV1Api) -> None:
    rv = core.list_namespaced_config_map("default").metadata.resource_version
    start = time.monotonic()
    got = events(core, resource_version=rv, timeout_seconds=3, allow_watch_bookmarks=True)
    elapsed = time.monotonic() - start
    assert elapsed >= 2.5  # the stream stayed open until the timeout
    assert got
    assert got[-1][0] == "BOOKMARK"
    assert int(got[-1][2]) >= int(rv)


def test_too_old_resource_version_is_an_in_stream_410(
    sim: KubeServer, core: client.CoreV1Api
) -> None:
    rv = core.create_namespaced_config_map("default", make_cm("old")).metadata.resource_version
    core.patch_namespaced_config_map("old", "default", {"data": {"k": "1"}})
    compacted = sim.control.compact()
    conn, resp = open_stream(
        sim, f"/api/v1/namespaces/default/configmaps?watch=1&resourceVersion={rv}"
    )
    assert resp.status == 200
    line = json.loads(resp.readline())
    conn.close()
    assert line["type"] == "ERROR"
    assert line["object"]["code"] == 410
    assert line["object"]["reason"] == "Expired"
    assert line["object"]["message"] == f"too old resource version: {rv} ({compacted})"
    with pytest.raises(ApiException) as info:
        events(core, resource_version=rv, timeout_seconds=1)
    assert info.value.status == 410
    # a watch from the compaction point onwards is fine
    assert events(core, resource_version=compacted, timeout_seconds=1) == []


def test_control_plane_closes_streams(sim: KubeServer, core: client.CoreV1Api) -> None:
    rv = core.list_namespaced_config_map("default").metadata.resource_version
    conn, resp = open_stream(
        sim,
        f"/api/v1/namespaces/default/configmaps?watch=true&resourceVersion={rv}&timeoutSeconds=30",
    )
    deadline = time.monotonic() + 5
    closed = 0
    while closed == 0 and time.monotonic() < deadline:
        closed = sim.control.close_watches("configmaps")
    assert closed == 1
    assert resp.read() == b""  # the chunked stream ended cleanly
    conn.close()


def test_watch_single_object_by_name(core: client.CoreV1Api) -> None:
    rv = core.list_namespaced_config_map("default").metadata.resource_version
    core.create_namespaced_config_map("default", make_cm("a"))
    core.create_namespaced_config_map("default", make_cm("b"))
    got = events(core, resource_version=rv, timeout_seconds=1, field_selector="metadata.name=b")
    assert [(t, n) for t, n, _ in got] == [("ADDED", "b")]


def test_send_initial_events_ends_with_marked_bookmark(sim: KubeServer) -> None:
    path = (
        "/api/v1/namespaces/default/configmaps?watch=1&sendInitialEvents=true&allowWatchBookmarks=true"
        "&resourceVersionMatch=NotOlderThan&timeoutSeconds=1"
    )
    conn, resp = open_stream(sim, path)
    lines = [json.loads(x) for x in resp.read().splitlines() if x]
    conn.close()
    assert lines[0]["type"] == "ADDED"
    assert lines[1]["type"] == "BOOKMARK"
    assert lines[1]["object"]["metadata"]["annotations"] == {"k8s.io/initial-events-end": "true"}
    conn, resp = open_stream(
        sim, "/api/v1/namespaces/default/configmaps?watch=1&sendInitialEvents=true"
    )
    assert resp.status == 422
    assert (
        "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan"
        in resp.read().decode()
    )
    conn.close()


def test_concurrent_writers_and_watchers_see_every_event_once_in_order(
    sim: KubeServer, api_client: Any
) -> None:
    core = client.CoreV1Api(api_client)
    start_rv = core.list_namespaced_config_map("default").metadata.resource_version
    writers, per_writer, n_watchers = 4, 25, 5
    seen: list[list[tuple[str, str, int]]] = [[] for _ in range(n_watchers)]
    total = writers * per_writer * 2  # create + delete each

    def watcher(i: int) -> None:
        conn, resp = open_stream(
            sim,
            f"/api/v1/namespaces/default/configmaps?watch=1&resourceVersion={start_rv}"
            "&timeoutSeconds=20&labelSelector=conc",
        )
        while len(seen[i]) < total:
            line = resp.readline()
            if not line:
                break
            ev = json.loads(line)
            seen[i].append(
                (
                    ev["type"],
                    ev["object"]["metadata"]["name"],
                    int(ev["object"]["metadata"]["resourceVersion"]),
                )
            )
        conn.close()

    def writer(w: int) -> None:
        for j in range(per_writer):
            name = f"c-{w}-{j}"
            core.create_namespaced_config_map("default", make_cm(name, conc="1"))
            core.delete_namespaced_config_map(name, "default")

    threads = [threading.Thread(target=watcher, args=(i,)) for i in range(n_watchers)]
    threads += [threading.Thread(target=writer, args=(w,)) for w in range(writers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    expected = None
    for got in seen:
        assert len(got) == total
        rvs = [r for _, _, r in got]
        assert rvs == sorted(rvs)
        assert len(set(rvs)) == total
        assert expected is None or got == expected
        expected = got
    assert expected is not None
    names = {n for _, n, _ in expected}
    assert len(names) == writers * per_writer


def test_abandoned_watch_is_released(sim: KubeServer, core: client.CoreV1Api) -> None:
    key = ("", "configmaps")
    before = len(sim.store.watchers[key])
    rv = core.list_namespaced_config_map("default").metadata.resource_version
    conn, resp = open_stream(sim, f"/api/v1/configmaps?watch=1&resourceVersion={rv}")
    assert resp.status == 200
    deadline = time.monotonic() + 5
    while len(sim.store.watchers[key]) == before and time.monotonic() < deadline:
        time.sleep(0.02)
    assert len(sim.store.watchers[key]) == before + 1
    resp.close()
    conn.close()
    deadline = time.monotonic() + 5
    while len(sim.store.watchers[key]) > before and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(sim.store.watchers[key]) == before
