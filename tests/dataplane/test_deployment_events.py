"""The Deployment controller stand-in's ScalingReplicaSet events against upstream's.

Upstream's ``scaleReplicaSet`` updates the ReplicaSet it read from its lister (an Update
carrying that copy's resourceVersion) and records the event only when that write succeeded.
A sync that runs on a stale cache (the informer has not yet shown the controller's own
previous write) therefore fails with a Conflict and records nothing; the stand-in used to
merge-patch without a precondition, so the stale sync succeeded and recorded the same scale-up
a second time (seen after ``kubectl create deployment`` + ``kubectl scale``).

The informers here are snapshots the test controls, so the stale cache is made, not waited
for; the API is a real simulator.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from lab.clock import ManualClock
from lab.dataplane.api import DEPLOYMENTS, EVENTS, REPLICA_SETS, Api, Resource, meta, path
from lab.dataplane.deployments import DeploymentController
from lab.kube.objects import Obj
from lab.kube.server import KubeServer
from lab.kubeclient import Conflict
from lab.versions.dataplane import deployment_behaviour


class _Snapshot:
    """An informer whose cache the test sets: ``get`` / ``objects`` / ``add_handler``."""

    def __init__(self) -> None:
        self.items: dict[tuple[str, str], Obj] = {}

    def put(self, obj: Obj) -> None:
        self.items[(meta(obj)["namespace"], meta(obj)["name"])] = obj

    def get(self, namespace: str, name: str) -> Obj | None:
        return self.items.get((namespace, name))

    def objects(self, namespace: str | None = None) -> list[Obj]:
        return [o for (ns, _), o in self.items.items() if namespace in (None, ns)]

    def add_handler(self, handler: Any) -> None:
        pass


class _Informers:
    def __init__(self) -> None:
        self.by_resource: dict[Resource, _Snapshot] = {}

    def __call__(self, resource: Resource) -> _Snapshot:
        return self.by_resource.setdefault(resource, _Snapshot())


@pytest.fixture
def api() -> Iterator[Api]:
    with KubeServer() as sim:
        yield Api(sim.api_client())
        assert sim.take_internal_errors() == []


def _deployment(api: Api, replicas: int) -> Obj:
    labels = {"app": "web"}
    return api.create(
        path(DEPLOYMENTS, "default"),
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "default"},
            "spec": {
                "replicas": replicas,
                "selector": {"matchLabels": labels},
                "template": {
                    "metadata": {"labels": labels},
                    "spec": {"containers": [{"name": "c", "image": "nginx"}]},
                },
            },
        },
    )


def _scaling_events(api: Api) -> list[str]:
    items = api.get(path(EVENTS, "default"))["items"]
    return [e["message"] for e in items if e.get("reason") == "ScalingReplicaSet"]


def test_a_sync_on_a_stale_replica_set_records_no_second_scaling_event(api: Api) -> None:
    informers = _Informers()
    controller = DeploymentController(api, informers, ManualClock())  # type: ignore[arg-type]
    informers(DEPLOYMENTS).put(_deployment(api, 3))

    controller.sync(("default", "web"))  # creates the ReplicaSet (0) and scales it to 3
    sets = api.get(path(REPLICA_SETS, "default"))["items"]
    assert [rs["spec"]["replicas"] for rs in sets] == [3]
    assert len(_scaling_events(api)) == 1

    # the informer still shows the ReplicaSet as created, before the controller's scale-up
    created = dict(sets[0], spec={**sets[0]["spec"], "replicas": 0})
    created["metadata"] = {
        **sets[0]["metadata"],
        "resourceVersion": str(int(sets[0]["metadata"]["resourceVersion"]) - 1),
    }
    informers(REPLICA_SETS).put(created)
    with pytest.raises(Conflict):  # as upstream's Update: the controller retries on fresh data
        controller.sync(("default", "web"))
    assert len(_scaling_events(api)) == 1, _scaling_events(api)

    informers(REPLICA_SETS).put(api.get(path(REPLICA_SETS, "default", meta(sets[0])["name"])))
    controller.sync(("default", "web"))  # up to date: nothing to scale, nothing recorded
    assert len(_scaling_events(api)) == 1, _scaling_events(api)


@pytest.mark.parametrize(
    ("version", "message"),
    [
        ("1.31", "Scaled up replica set web-{h} to 3 from 0"),
        ("1.32", "Scaled up replica set web-{h} from 0 to 3"),  # k/k#125118
    ],
)
def test_scaling_message_in_the_release_s_words(api: Api, version: str, message: str) -> None:
    informers = _Informers()
    controller = DeploymentController(
        api,
        informers,  # type: ignore[arg-type]
        ManualClock(),
        behaviour=deployment_behaviour(version),
    )
    informers(DEPLOYMENTS).put(_deployment(api, 3))
    controller.sync(("default", "web"))
    (rs,) = api.get(path(REPLICA_SETS, "default"))["items"]
    digest = meta(rs)["labels"]["pod-template-hash"]
    assert _scaling_events(api) == [message.format(h=digest)]
