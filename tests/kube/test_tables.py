"""Server-side Table printing (lab.kube.tables): negotiation, columns, cells, embedded objects.

Expected cells come from what a v1.32 kube-apiserver prints for the same objects (the rules of
kubernetes ``pkg/printers/internalversion``); the clock is fixed so AGE cells are exact.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from lab.kube.resources import RESOURCES, ResourceType, lookup
from lab.kube.tables import (
    TableRequestError,
    columns_for,
    table_version,
    to_table,
    wants_table,
)
from lab.kube.tables_cells import format_label_selector, human_duration
from lab.kube.tables_core import service_external_ip

NOW = datetime(2026, 11, 22, 12, 0, 0, tzinfo=UTC)
KUBECTL_TABLE_ACCEPT = (
    "application/json;as=Table;v=v1;g=meta.k8s.io,"
    "application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json"
)


def ago(**delta: float) -> str:
    return (NOW - timedelta(**delta)).strftime("%Y-%m-%dT%H:%M:%SZ")


def rt(group: str, plural: str) -> ResourceType:
    found = lookup(group, "v1", plural)
    assert found is not None
    return found


def meta(name: str, **extra: Any) -> dict[str, Any]:
    return {"name": name, "creationTimestamp": ago(minutes=5), "resourceVersion": "7", **extra}


def row(group: str, plural: str, obj: dict[str, Any]) -> dict[str, Any]:
    """Header name -> cell for one object."""
    table = to_table(rt(group, plural), [obj], list_meta=None, include_object="None", now=NOW)
    names = [c["name"] for c in table["columnDefinitions"]]
    (only,) = table["rows"]
    assert len(only["cells"]) == len(names)
    return dict(zip(names, only["cells"], strict=True))


# ---- negotiation ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("accept", "version"),
    [
        (KUBECTL_TABLE_ACCEPT, "v1"),
        ("application/json;as=Table;v=v1beta1;g=meta.k8s.io", "v1beta1"),
        ("application/json;g=meta.k8s.io;v=v1;as=Table", "v1"),
        ("application/json", None),
        ("application/json, application/json;as=Table;v=v1;g=meta.k8s.io", None),
        ("", None),
        ("*/*", None),
        ("application/vnd.kubernetes.protobuf,application/json", None),
        ("application/vnd.kubernetes.protobuf;as=Table;v=v1;g=meta.k8s.io", None),
        ("application/json;as=Table;v=v9;g=meta.k8s.io,application/json", None),
        ("application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io", None),
    ],
)
def test_table_negotiation(accept: str, version: str | None) -> None:
    assert table_version(accept) == version
    assert wants_table(accept) is (version is not None)


# ---- AGE --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (-5, "<invalid>"),
        (-0.5, "0s"),
        (0, "0s"),
        (59, "59s"),
        (119, "119s"),
        (120, "2m"),
        (200, "3m20s"),
        (599, "9m59s"),
        (600, "10m"),
        (179 * 60, "179m"),
        (3 * 3600, "3h"),
        (5 * 3600 + 7 * 60, "5h7m"),
        (8 * 3600 + 59 * 60, "8h"),
        (47 * 3600, "47h"),
        (2 * 86400, "2d"),
        (3 * 86400 + 4 * 3600, "3d4h"),
        (30 * 86400, "30d"),
        (2 * 365 * 86400, "2y"),
        (3 * 365 * 86400 + 12 * 86400, "3y12d"),
        (9 * 365 * 86400 + 40 * 86400, "9y"),
    ],
)
def test_human_duration(seconds: float, text: str) -> None:
    assert human_duration(seconds) == text


def test_age_cell_is_unknown_without_creation_timestamp() -> None:
    assert row("", "configmaps", {"metadata": {"name": "x"}})["Age"] == "<unknown>"


# ---- services --------------------------------------------------------------------------------


def svc(svc_type: str, **spec: Any) -> dict[str, Any]:
    return {
        "metadata": meta("web"),
        "spec": {"type": svc_type, "clusterIP": "10.96.0.10", "clusterIPs": ["10.96.0.10"], **spec},
        "status": {},
    }


def test_service_columns_and_cells() -> None:
    obj = svc(
        "LoadBalancer",
        ports=[
            {"port": 80, "nodePort": 31234, "protocol": "TCP"},
            {"port": 53, "protocol": "UDP"},
        ],
        selector={"tier": "fe", "app": "web"},
    )
    obj["status"] = {"loadBalancer": {"ingress": [{"ip": "203.0.113.9"}]}}
    assert row("", "services", obj) == {
        "Name": "web",
        "Type": "LoadBalancer",
        "Cluster-IP": "10.96.0.10",
        "External-IP": "203.0.113.9",
        "Port(s)": "80:31234/TCP,53/UDP",
        "Age": "5m",
        "Selector": "app=web,tier=fe",
    }
    selector = next(c for c in columns_for(rt("", "services")) if c["name"] == "Selector")
    assert selector["priority"] == 1


@pytest.mark.parametrize(
    ("obj", "expected"),
    [
        (svc("ClusterIP"), "<none>"),
        (svc("ClusterIP", externalIPs=["1.2.3.4", "5.6.7.8"]), "1.2.3.4,5.6.7.8"),
        (svc("NodePort"), "<none>"),
        (svc("LoadBalancer"), "<pending>"),
        (svc("LoadBalancer", externalIPs=["9.9.9.9"]), "9.9.9.9"),
        (svc("ExternalName", externalName="db.example.com"), "db.example.com"),
        (svc("Weird"), "<unknown>"),
    ],
)
def test_service_external_ip(obj: dict[str, Any], expected: str) -> None:
    assert service_external_ip(obj, wide=False) == expected


def test_long_load_balancer_hostname_is_cut_to_16_only_when_not_wide() -> None:
    obj = svc("LoadBalancer")
    host = "a1b2c3d4e5f6-123456789.us-east-1.elb.amazonaws.com"
    obj["status"] = {"loadBalancer": {"ingress": [{"hostname": host}, {"ip": "1.2.3.4"}]}}
    assert service_external_ip(obj, wide=False) == "1.2.3.4,a1b2c..."
    assert service_external_ip(obj, wide=True) == f"1.2.3.4,{host}"
    # the API server renders tables with Wide on: kubectl shows the whole ELB hostname
    assert row("", "services", obj)["External-IP"] == f"1.2.3.4,{host}"


def test_service_without_ports_or_cluster_ip() -> None:
    obj = {"metadata": meta("h"), "spec": {"type": "ClusterIP", "clusterIP": "None"}}
    cells = row("", "services", obj)
    assert (cells["Cluster-IP"], cells["Port(s)"], cells["Selector"]) == (
        "None",
        "<none>",
        "<none>",
    )
    assert row("", "services", {"metadata": meta("e"), "spec": {}})["Cluster-IP"] == "<none>"


# ---- nodes -------------------------------------------------------------------------------------


def test_node_cells_including_wide_columns() -> None:
    node = {
        "metadata": meta(
            "ip-10-0-1-5",
            labels={
                "node-role.kubernetes.io/control-plane": "",
                "node-role.kubernetes.io/worker": "",
                "kubernetes.io/role": "infra",
            },
        ),
        "spec": {"unschedulable": True},
        "status": {
            "conditions": [
                {"type": "MemoryPressure", "status": "False"},
                {"type": "Ready", "status": "False"},
            ],
            "addresses": [
                {"type": "Hostname", "address": "ip-10-0-1-5"},
                {"type": "InternalIP", "address": "10.0.1.5"},
                {"type": "InternalIP", "address": "10.0.1.6"},
            ],
            "nodeInfo": {
                "kubeletVersion": "v1.32.0",
                "osImage": "Ubuntu 24.04",
                "kernelVersion": "6.8.0",
                "containerRuntimeVersion": "containerd://2.0.0",
            },
        },
    }
    assert row("", "nodes", node) == {
        "Name": "ip-10-0-1-5",
        "Status": "NotReady,SchedulingDisabled",
        "Roles": "control-plane,infra,worker",
        "Age": "5m",
        "Version": "v1.32.0",
        "Internal-IP": "10.0.1.5",
        "External-IP": "<none>",
        "OS-Image": "Ubuntu 24.04",
        "Kernel-Version": "6.8.0",
        "Container-Runtime": "containerd://2.0.0",
    }


def test_node_without_conditions_or_roles() -> None:
    cells = row("", "nodes", {"metadata": meta("bare"), "status": {}})
    assert (cells["Status"], cells["Roles"], cells["Version"]) == ("Unknown", "<none>", "")
    assert cells["OS-Image"] == "<unknown>"
    ready = {"metadata": meta("r"), "status": {"conditions": [{"type": "Ready", "status": "True"}]}}
    assert row("", "nodes", ready)["Status"] == "Ready"


# ---- pods --------------------------------------------------------------------------------------


def pod(status: dict[str, Any], **spec: Any) -> dict[str, Any]:
    containers = spec.pop("containers", [{"name": "a"}, {"name": "b"}])
    return {"metadata": meta("p"), "spec": {"containers": containers, **spec}, "status": status}


def running(name: str, restarts: int = 0, **extra: Any) -> dict[str, Any]:
    return {
        "name": name,
        "ready": True,
        "restartCount": restarts,
        "state": {"running": {"startedAt": ago(minutes=1)}},
        **extra,
    }


def test_running_pod_with_restarts_and_wide_cells() -> None:
    obj = pod(
        {
            "phase": "Running",
            "podIP": "10.244.0.5",
            "podIPs": [{"ip": "10.244.0.5"}],
            "conditions": [{"type": "Ready", "status": "True"}],
            "containerStatuses": [
                running(
                    "a",
                    restarts=2,
                    lastState={"terminated": {"exitCode": 1, "finishedAt": ago(minutes=3)}},
                ),
                running("b"),
            ],
        },
        nodeName="n1",
        readinessGates=[{"conditionType": "Ready"}, {"conditionType": "x/y"}],
    )
    assert row("", "pods", obj) == {
        "Name": "p",
        "Ready": "2/2",
        "Status": "Running",
        "Restarts": "2 (3m ago)",
        "Age": "5m",
        "IP": "10.244.0.5",
        "Node": "n1",
        "Nominated Node": "<none>",
        "Readiness Gates": "1/2",
    }


@pytest.mark.parametrize(
    ("status", "expected"),
    [
        ({"phase": "Pending"}, "Pending"),
        ({"phase": "Failed", "reason": "Evicted"}, "Evicted"),
        (
            {
                "phase": "Pending",
                "containerStatuses": [
                    {"name": "a", "state": {"waiting": {"reason": "ImagePullBackOff"}}}
                ],
            },
            "ImagePullBackOff",
        ),
        (
            {
                "phase": "Running",
                "containerStatuses": [
                    {"name": "a", "state": {"terminated": {"exitCode": 137, "signal": 9}}}
                ],
            },
            "Signal:9",
        ),
        (
            {
                "phase": "Running",
                "containerStatuses": [{"name": "a", "state": {"terminated": {"exitCode": 3}}}],
            },
            "ExitCode:3",
        ),
        (
            {
                "phase": "Pending",
                "conditions": [{"type": "PodScheduled", "reason": "SchedulingGated"}],
            },
            "SchedulingGated",
        ),
    ],
)
def test_pod_status_reason(status: dict[str, Any], expected: str) -> None:
    assert row("", "pods", pod(status))["Status"] == expected


def test_pod_init_containers_progress() -> None:
    obj = pod(
        {
            "phase": "Pending",
            "initContainerStatuses": [
                {"name": "i1", "state": {"terminated": {"exitCode": 0}}},
                {"name": "i2", "state": {"running": {}}},
            ],
        },
        initContainers=[{"name": "i1"}, {"name": "i2"}, {"name": "i3"}],
    )
    assert row("", "pods", obj)["Status"] == "Init:1/3"
    crash = pod(
        {
            "phase": "Pending",
            "initContainerStatuses": [
                {"name": "i1", "state": {"waiting": {"reason": "CrashLoopBackOff"}}}
            ],
        },
        initContainers=[{"name": "i1"}],
    )
    assert row("", "pods", crash)["Status"] == "Init:CrashLoopBackOff"


def test_restarts_count_init_containers_only_while_initializing() -> None:
    crashed_init = {
        "name": "i1",
        "restartCount": 4,
        "state": {"terminated": {"exitCode": 0}},
        "lastState": {"terminated": {"exitCode": 1, "finishedAt": ago(minutes=30)}},
    }
    running_pod = pod(
        {
            "phase": "Running",
            "initContainerStatuses": [crashed_init],
            "containerStatuses": [running("a", restarts=1)],
        },
        containers=[{"name": "a"}],
        initContainers=[{"name": "i1"}],
    )
    assert row("", "pods", running_pod)["Restarts"] == "1"
    stuck = {**crashed_init, "state": {"waiting": {"reason": "CrashLoopBackOff"}}}
    initializing = pod(
        {"phase": "Pending", "initContainerStatuses": [stuck]},
        containers=[{"name": "a"}],
        initContainers=[{"name": "i1"}],
    )
    cells = row("", "pods", initializing)
    assert (cells["Status"], cells["Restarts"]) == ("Init:CrashLoopBackOff", "4 (30m ago)")


def test_sidecar_init_container_counts_towards_ready() -> None:
    obj = pod(
        {
            "phase": "Running",
            "conditions": [{"type": "Initialized", "status": "True"}],
            "initContainerStatuses": [
                {"name": "side", "started": True, "ready": True, "state": {"running": {}}}
            ],
            "containerStatuses": [running("a")],
        },
        containers=[{"name": "a"}],
        initContainers=[{"name": "side", "restartPolicy": "Always"}],
    )
    cells = row("", "pods", obj)
    assert (cells["Ready"], cells["Status"]) == ("2/2", "Running")


def test_terminating_pod_and_completed_row_conditions() -> None:
    obj = pod({"phase": "Running"})
    obj["metadata"]["deletionTimestamp"] = ago(seconds=1)
    assert row("", "pods", obj)["Status"] == "Terminating"

    done = pod({"phase": "Succeeded"})
    table = to_table(rt("", "pods"), [done], list_meta=None, include_object="None", now=NOW)
    assert table["rows"][0]["conditions"] == [
        {
            "type": "Completed",
            "status": "True",
            "reason": "Succeeded",
            "message": "The pod has completed successfully.",
        }
    ]
    plain = to_table(rt("", "pods"), [obj], list_meta=None, include_object="None", now=NOW)
    assert "conditions" not in plain["rows"][0]


# ---- the other kinds --------------------------------------------------------------------------


def test_namespace_configmap_secret_serviceaccount_lease() -> None:
    assert row("", "namespaces", {"metadata": meta("d"), "status": {"phase": "Active"}}) == {
        "Name": "d",
        "Status": "Active",
        "Age": "5m",
    }
    cm = {"metadata": meta("c"), "data": {"a": "1", "b": "2"}, "binaryData": {"c": "AA=="}}
    assert row("", "configmaps", cm) == {"Name": "c", "Data": 3, "Age": "5m"}
    assert row("", "configmaps", {"metadata": meta("e")})["Data"] == 0
    secret = {"metadata": meta("s"), "type": "Opaque", "data": {"k": "dg=="}}
    assert row("", "secrets", secret) == {"Name": "s", "Type": "Opaque", "Data": 1, "Age": "5m"}
    sa = {"metadata": meta("default"), "secrets": [{"name": "tok"}]}
    assert row("", "serviceaccounts", sa) == {"Name": "default", "Secrets": 1, "Age": "5m"}
    lease = {"metadata": meta("n1"), "spec": {"holderIdentity": "n1"}}
    assert row("coordination.k8s.io", "leases", lease) == {
        "Name": "n1",
        "Holder": "n1",
        "Age": "5m",
    }
    assert row("coordination.k8s.io", "leases", {"metadata": meta("x"), "spec": {}})["Holder"] == ""


def test_endpoints_list_three_then_more() -> None:
    ep = {
        "metadata": meta("web"),
        "subsets": [
            {
                "addresses": [{"ip": f"10.0.0.{i}"} for i in range(1, 4)],
                "ports": [{"port": 80}, {"port": 443}],
            }
        ],
    }
    assert row("", "endpoints", ep)["Endpoints"] == (
        "10.0.0.1:80,10.0.0.2:80,10.0.0.3:80 + 3 more..."
    )
    v6 = {
        "metadata": meta("v6"),
        "subsets": [{"addresses": [{"ip": "fd00::1"}], "ports": [{"port": 80}]}],
    }
    assert row("", "endpoints", v6)["Endpoints"] == "[fd00::1]:80"
    headless = {"metadata": meta("h"), "subsets": [{"addresses": [{"ip": "10.0.0.9"}]}]}
    assert row("", "endpoints", headless)["Endpoints"] == "10.0.0.9"
    assert row("", "endpoints", {"metadata": meta("none")})["Endpoints"] == "<none>"


def test_endpoint_slice() -> None:
    eps = {
        "metadata": meta("web-abc"),
        "addressType": "IPv4",
        "ports": [{"port": 80}, {"name": "metrics"}, {}],
        "endpoints": [{"addresses": ["10.0.0.1"]}, {"addresses": ["10.0.0.2"]}],
    }
    assert row("discovery.k8s.io", "endpointslices", eps) == {
        "Name": "web-abc",
        "AddressType": "IPv4",
        "Ports": "80,metrics,*",
        "Endpoints": "10.0.0.1,10.0.0.2",
        "Age": "5m",
    }
    empty = {"metadata": meta("e"), "addressType": "IPv4", "endpoints": []}
    cells = row("discovery.k8s.io", "endpointslices", empty)
    assert (cells["Ports"], cells["Endpoints"]) == ("<unset>", "<unset>")


def test_core_event() -> None:
    event = {
        "metadata": meta("web.1"),
        "involvedObject": {"kind": "Service", "name": "web", "fieldPath": ""},
        "reason": "EnsuringLoadBalancer",
        "message": "Ensuring load balancer\n",
        "type": "Normal",
        "source": {"component": "service-controller"},
        "firstTimestamp": ago(minutes=10),
        "lastTimestamp": ago(seconds=30),
        "count": 4,
    }
    assert row("", "events", event) == {
        "Last Seen": "30s",
        "Type": "Normal",
        "Reason": "EnsuringLoadBalancer",
        "Object": "service/web",
        "Subobject": "",
        "Source": "service-controller",
        "Message": "Ensuring load balancer",
        "First Seen": "10m",
        "Count": 4,
        "Name": "web.1",
    }


def test_events_k8s_io_event_uses_new_field_names() -> None:
    event = {
        "metadata": meta("n1.2"),
        "regarding": {"kind": "Node", "name": "n1"},
        "note": "Node n1 status is now: NodeReady",
        "reason": "NodeReady",
        "type": "Normal",
        "eventTime": "2026-11-22T11:58:00.000000Z",
        "reportingController": "kubelet",
        "reportingInstance": "n1",
    }
    cells = row("events.k8s.io", "events", event)
    assert cells["Object"] == "node/n1"
    assert cells["Message"] == "Node n1 status is now: NodeReady"
    assert (cells["Last Seen"], cells["First Seen"], cells["Count"]) == ("2m", "2m", 1)
    assert cells["Source"] == "kubelet, n1"
    event["series"] = {"count": 7, "lastObservedTime": ago(seconds=5)}
    cells = row("events.k8s.io", "events", event)
    assert (cells["Last Seen"], cells["Count"]) == ("5s", 7)


def test_deployment() -> None:
    dep = {
        "metadata": meta("web"),
        "spec": {
            "replicas": 3,
            "selector": {
                "matchLabels": {"app": "web"},
                "matchExpressions": [{"key": "tier", "operator": "In", "values": ["b", "a"]}],
            },
            "template": {"spec": {"containers": [{"name": "c", "image": "nginx:1"}]}},
        },
        "status": {"readyReplicas": 2, "updatedReplicas": 3, "availableReplicas": 2},
    }
    assert row("apps", "deployments", dep) == {
        "Name": "web",
        "Ready": "2/3",
        "Up-to-date": 3,
        "Available": 2,
        "Age": "5m",
        "Containers": "c",
        "Images": "nginx:1",
        "Selector": "app=web,tier in (a,b)",
    }


def test_label_selector_formatting() -> None:
    selector = {
        "matchExpressions": [
            {"key": "z", "operator": "DoesNotExist"},
            {"key": "b", "operator": "Exists"},
            {"key": "c", "operator": "NotIn", "values": ["x"]},
        ]
    }
    assert format_label_selector(selector) == "b,c notin (x),!z"
    assert format_label_selector({}) == "<none>"
    assert format_label_selector(None) == "<none>"


def test_default_table_for_kinds_without_a_printer() -> None:
    unknown = ResourceType("example.com", "v1", "Widget", "widgets", "widget", namespaced=True)
    obj = {"metadata": meta("w1")}
    table = to_table(unknown, [obj], list_meta=None, include_object="None", now=NOW)
    assert [(c["name"], c["type"], c["format"]) for c in table["columnDefinitions"]] == [
        ("Name", "string", "name"),
        ("Created At", "date", ""),
    ]
    assert table["rows"][0]["cells"] == ["w1", ago(minutes=5)]


@pytest.mark.parametrize("resource", RESOURCES, ids=lambda r: f"{r.group_version}/{r.plural}")
def test_every_kind_prints_one_cell_per_column_even_for_empty_objects(
    resource: ResourceType,
) -> None:
    table = to_table(resource, [{}, {"metadata": meta("m")}], list_meta=None, include_object="")
    width = len(table["columnDefinitions"])
    assert width >= 2
    assert all(len(r["cells"]) == width for r in table["rows"])
    names = [c["name"] for c in table["columnDefinitions"]]
    assert "Name" in names
    if resource.kind != "Event":
        assert names[0] == "Name"
        # upstream prints Roles, ClusterRoles and the review kinds as Name + Created At
        created_at = resource.kind in ("Role", "ClusterRole") or resource.verbs == ("create",)
        assert ("Created At" if created_at else "Age") in names


# ---- table envelope and includeObject --------------------------------------------------------


def configmap(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {**meta(name), "namespace": "default", "labels": {"a": "b"}},
        "data": {"k": "v"},
    }


def test_list_table_envelope_and_metadata_rows() -> None:
    objs = [configmap("one"), configmap("two")]
    table = to_table(
        rt("", "configmaps"),
        objs,
        list_meta={"resourceVersion": "42", "continue": "tok", "remainingItemCount": 3},
        include_object="Metadata",
        now=NOW,
    )
    assert table["kind"] == "Table"
    assert table["apiVersion"] == "meta.k8s.io/v1"
    assert table["metadata"] == {
        "resourceVersion": "42",
        "continue": "tok",
        "remainingItemCount": 3,
    }
    assert [c["name"] for c in table["columnDefinitions"]] == ["Name", "Data", "Age"]
    first = table["rows"][0]
    assert first["cells"] == ["one", 1, "5m"]
    assert first["object"] == {
        "kind": "PartialObjectMetadata",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": objs[0]["metadata"],
    }
    assert "data" not in first["object"]


def test_empty_list_keeps_columns_and_drops_empty_continue() -> None:
    table = to_table(
        rt("", "services"),
        [],
        list_meta={"resourceVersion": "9", "continue": ""},
        include_object="",
    )
    assert table["rows"] == []
    assert table["metadata"] == {"resourceVersion": "9"}
    assert len(table["columnDefinitions"]) == 7


def test_include_object_modes() -> None:
    obj = {"metadata": meta("bare")}  # stored objects may lack apiVersion/kind
    full = to_table(rt("", "configmaps"), [obj], list_meta=None, include_object="Object")
    assert full["rows"][0]["object"] == {"apiVersion": "v1", "kind": "ConfigMap", **obj}
    default = to_table(rt("", "configmaps"), [obj], list_meta=None, include_object="")
    assert default["rows"][0]["object"]["kind"] == "PartialObjectMetadata"
    none = to_table(rt("", "configmaps"), [obj], list_meta=None, include_object="None")
    assert "object" not in none["rows"][0]


def test_invalid_include_object_is_a_bad_request() -> None:
    with pytest.raises(TableRequestError, match='unrecognized includeObject value: "Everything"'):
        to_table(rt("", "configmaps"), [], list_meta=None, include_object="Everything")
    assert TableRequestError.code == 400


def test_single_object_table_carries_its_resource_version() -> None:
    table = to_table(rt("", "configmaps"), [configmap("one")], list_meta=None, include_object="")
    assert table["metadata"] == {"resourceVersion": "7"}
    assert len(table["rows"]) == 1


def test_watch_event_table_without_headers_and_v1beta1() -> None:
    table = to_table(
        rt("", "configmaps"),
        [configmap("one")],
        list_meta=None,
        include_object="",
        column_definitions=False,
        version="v1beta1",
    )
    assert table["columnDefinitions"] == []
    assert table["apiVersion"] == "meta.k8s.io/v1beta1"
    assert table["rows"][0]["object"]["apiVersion"] == "meta.k8s.io/v1beta1"
    with pytest.raises(TableRequestError, match="v3"):
        to_table(rt("", "configmaps"), [], list_meta=None, include_object="", version="v3")


def test_column_definition_shape() -> None:
    for column in columns_for(rt("", "nodes")):
        assert set(column) == {"name", "type", "format", "description", "priority"}
        assert column["type"] in {"string", "integer", "number", "boolean", "date"}
        assert column["description"]
    priorities = {c["name"]: c["priority"] for c in columns_for(rt("", "nodes"))}
    assert priorities["Version"] == 0
    assert priorities["Internal-IP"] == 1
