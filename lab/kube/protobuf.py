"""Decode the Kubernetes protobuf envelope for the request bodies kubectl sends that way.

kubectl's generator subcommands (``kubectl create configmap|secret|namespace|service|
serviceaccount|deployment|job|cronjob|role|clusterrole|rolebinding|clusterrolebinding|token``,
``kubectl auth can-i|whoami``) POST ``application/vnd.kubernetes.protobuf`` and do not retry with
JSON after a 415 (``apiserver-spec.md`` §0.3, §1.8). The wire format is the magic ``k8s\\0``
followed by a ``runtime.Unknown`` whose ``raw`` field holds the object in ``k8s.io/api``
``generated.proto`` encoding. This module decodes that into the JSON-shaped dict the rest of
the simulator handles, using hand-written field maps for those kinds (field numbers from
``k8s.io/api`` ``core/v1`` and ``apps/v1`` ``generated.proto``). Responses stay JSON, which
every kubectl ``Accept`` header allows. Unknown fields are skipped; empty strings and zero
timestamps are dropped, matching the JSON ``omitempty`` encoding of the same objects.
"""

from __future__ import annotations

import base64
from datetime import UTC, datetime
from typing import Any

MAGIC = b"k8s\x00"
PROTOBUF = "application/vnd.kubernetes.protobuf"


class ProtobufError(ValueError):
    pass


# A message schema: field number -> (json name, kind, sub-schema or None, repeated)
Schema = dict[int, tuple[str, str, Any, bool]]


def _f(
    name: str, kind: str, sub: Any = None, *, repeated: bool = False
) -> tuple[str, str, Any, bool]:
    return (name, kind, sub, repeated)


OWNER_REF: Schema = {
    1: _f("kind", "str"),
    3: _f("name", "str"),
    4: _f("uid", "str"),
    5: _f("apiVersion", "str"),
    6: _f("controller", "bool"),
    7: _f("blockOwnerDeletion", "bool"),
}
OBJECT_META: Schema = {
    1: _f("name", "str"),
    2: _f("generateName", "str"),
    3: _f("namespace", "str"),
    5: _f("uid", "str"),
    6: _f("resourceVersion", "str"),
    7: _f("generation", "int0"),
    8: _f("creationTimestamp", "time"),
    11: _f("labels", "map_str"),
    12: _f("annotations", "map_str"),
    13: _f("ownerReferences", "msg", OWNER_REF, repeated=True),
    14: _f("finalizers", "str", repeated=True),
}
LABEL_SELECTOR: Schema = {
    1: _f("matchLabels", "map_str"),
    2: _f(
        "matchExpressions",
        "msg",
        {1: _f("key", "str"), 2: _f("operator", "str"), 3: _f("values", "str", repeated=True)},
        repeated=True,
    ),
}
INT_OR_STRING: Schema = {1: _f("type", "int"), 2: _f("intVal", "int"), 3: _f("strVal", "str")}
SERVICE_PORT: Schema = {
    1: _f("name", "str"),
    2: _f("protocol", "str"),
    6: _f("appProtocol", "str"),
    3: _f("port", "int"),
    4: _f("targetPort", "intstr", INT_OR_STRING),
    5: _f("nodePort", "int0"),
}
SERVICE_SPEC: Schema = {
    1: _f("ports", "msg", SERVICE_PORT, repeated=True),
    2: _f("selector", "map_str"),
    3: _f("clusterIP", "str"),
    18: _f("clusterIPs", "str", repeated=True),
    4: _f("type", "str"),
    5: _f("externalIPs", "str", repeated=True),
    7: _f("sessionAffinity", "str"),
    8: _f("loadBalancerIP", "str"),
    9: _f("loadBalancerSourceRanges", "str", repeated=True),
    10: _f("externalName", "str"),
    11: _f("externalTrafficPolicy", "str"),
    12: _f("healthCheckNodePort", "int0"),
    13: _f("publishNotReadyAddresses", "bool"),
    14: _f(
        "sessionAffinityConfig", "msg", {1: _f("clientIP", "msg", {1: _f("timeoutSeconds", "int")})}
    ),
    19: _f("ipFamilies", "str", repeated=True),
    17: _f("ipFamilyPolicy", "str"),
    20: _f("allocateLoadBalancerNodePorts", "bool"),
    21: _f("loadBalancerClass", "str"),
    22: _f("internalTrafficPolicy", "str"),
    23: _f("trafficDistribution", "str"),
}
CONTAINER: Schema = {
    1: _f("name", "str"),
    2: _f("image", "str"),
    3: _f("command", "str", repeated=True),
    4: _f("args", "str", repeated=True),
    6: _f(
        "ports",
        "msg",
        {
            1: _f("name", "str"),
            2: _f("hostPort", "int0"),
            3: _f("containerPort", "int"),
            4: _f("protocol", "str"),
            5: _f("hostIP", "str"),
        },
        repeated=True,
    ),
    7: _f("env", "msg", {1: _f("name", "str"), 2: _f("value", "str")}, repeated=True),
    8: _f("resources", "msg", {}),
}
POD_TEMPLATE: Schema = {
    1: _f("metadata", "msg", OBJECT_META),
    2: _f("spec", "msg", {2: _f("containers", "msg", CONTAINER, repeated=True)}),
}
# batch/v1 and rbac.authorization.k8s.io/v1 generated.proto: what kubectl create job|cronjob|
# role|clusterrole|rolebinding|clusterrolebinding send.
JOB_POD_TEMPLATE: Schema = {
    1: _f("metadata", "msg", OBJECT_META),
    2: _f(
        "spec",
        "msg",
        {2: _f("containers", "msg", CONTAINER, repeated=True), 3: _f("restartPolicy", "str")},
    ),
}
JOB_SPEC: Schema = {
    1: _f("parallelism", "int"),
    2: _f("completions", "int"),
    3: _f("activeDeadlineSeconds", "int"),
    4: _f("selector", "msg", LABEL_SELECTOR),
    5: _f("manualSelector", "bool"),
    6: _f("template", "msg", JOB_POD_TEMPLATE),
    7: _f("backoffLimit", "int"),
    8: _f("ttlSecondsAfterFinished", "int"),
    9: _f("completionMode", "str"),
    10: _f("suspend", "bool"),
}
POLICY_RULE: Schema = {
    1: _f("verbs", "str", repeated=True),
    2: _f("apiGroups", "str", repeated=True),
    3: _f("resources", "str", repeated=True),
    4: _f("resourceNames", "str", repeated=True),
    5: _f("nonResourceURLs", "str", repeated=True),
}
BINDING: Schema = {
    1: _f("metadata", "msg", OBJECT_META),
    2: _f(
        "subjects",
        "msg",
        {
            1: _f("kind", "str"),
            2: _f("apiGroup", "str"),
            3: _f("name", "str"),
            4: _f("namespace", "str"),
        },
        repeated=True,
    ),
    3: _f("roleRef", "msg", {1: _f("apiGroup", "str"), 2: _f("kind", "str"), 3: _f("name", "str")}),
}
WORKLOAD_KINDS: dict[tuple[str, str], Schema] = {
    ("batch/v1", "Job"): {1: _f("metadata", "msg", OBJECT_META), 2: _f("spec", "msg", JOB_SPEC)},
    ("batch/v1", "CronJob"): {
        1: _f("metadata", "msg", OBJECT_META),
        2: _f(
            "spec",
            "msg",
            {
                1: _f("schedule", "str"),
                2: _f("startingDeadlineSeconds", "int"),
                3: _f("concurrencyPolicy", "str"),
                4: _f("suspend", "bool"),
                5: _f(
                    "jobTemplate",
                    "msg",
                    {1: _f("metadata", "msg", OBJECT_META), 2: _f("spec", "msg", JOB_SPEC)},
                ),
                6: _f("successfulJobsHistoryLimit", "int"),
                7: _f("failedJobsHistoryLimit", "int"),
                8: _f("timeZone", "str"),
            },
        ),
    },
    ("rbac.authorization.k8s.io/v1", "Role"): {
        1: _f("metadata", "msg", OBJECT_META),
        2: _f("rules", "msg", POLICY_RULE, repeated=True),
    },
    ("rbac.authorization.k8s.io/v1", "ClusterRole"): {
        1: _f("metadata", "msg", OBJECT_META),
        2: _f("rules", "msg", POLICY_RULE, repeated=True),
    },
    ("rbac.authorization.k8s.io/v1", "RoleBinding"): BINDING,
    ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"): BINDING,
}
# authentication.k8s.io/v1 and authorization.k8s.io/v1 generated.proto: what kubectl create
# token, auth whoami and auth can-i send.
RESOURCE_ATTRIBUTES: Schema = {
    1: _f("namespace", "str"),
    2: _f("verb", "str"),
    3: _f("group", "str"),
    4: _f("version", "str"),
    5: _f("resource", "str"),
    6: _f("subresource", "str"),
    7: _f("name", "str"),
}
NON_RESOURCE_ATTRIBUTES: Schema = {1: _f("path", "str"), 2: _f("verb", "str")}
ACCESS_SPEC: Schema = {
    1: _f("resourceAttributes", "msg", RESOURCE_ATTRIBUTES),
    2: _f("nonResourceAttributes", "msg", NON_RESOURCE_ATTRIBUTES),
    3: _f("user", "str"),
    4: _f("groups", "str", repeated=True),
    6: _f("uid", "str"),
}
REVIEW_KINDS: dict[tuple[str, str], Schema] = {
    ("authentication.k8s.io/v1", "TokenRequest"): {
        1: _f("metadata", "msg", OBJECT_META),
        2: _f(
            "spec",
            "msg",
            {
                1: _f("audiences", "str", repeated=True),
                4: _f("expirationSeconds", "int"),
                3: _f(
                    "boundObjectRef",
                    "msg",
                    {
                        1: _f("kind", "str"),
                        2: _f("apiVersion", "str"),
                        3: _f("name", "str"),
                        4: _f("uid", "str"),
                    },
                ),
            },
        ),
    },
    ("authentication.k8s.io/v1", "TokenReview"): {
        1: _f("metadata", "msg", OBJECT_META),
        2: _f("spec", "msg", {1: _f("token", "str"), 2: _f("audiences", "str", repeated=True)}),
    },
    ("authentication.k8s.io/v1", "SelfSubjectReview"): {1: _f("metadata", "msg", OBJECT_META)},
    ("authorization.k8s.io/v1", "SelfSubjectAccessReview"): {
        1: _f("metadata", "msg", OBJECT_META),
        2: _f("spec", "msg", ACCESS_SPEC),
    },
    ("authorization.k8s.io/v1", "SubjectAccessReview"): {
        1: _f("metadata", "msg", OBJECT_META),
        2: _f("spec", "msg", ACCESS_SPEC),
    },
    ("authorization.k8s.io/v1", "LocalSubjectAccessReview"): {
        1: _f("metadata", "msg", OBJECT_META),
        2: _f("spec", "msg", ACCESS_SPEC),
    },
    ("authorization.k8s.io/v1", "SelfSubjectRulesReview"): {
        1: _f("metadata", "msg", OBJECT_META),
        2: _f("spec", "msg", {1: _f("namespace", "str")}),
    },
}

KINDS: dict[tuple[str, str], Schema] = {
    **REVIEW_KINDS,
    **WORKLOAD_KINDS,
    ("v1", "ConfigMap"): {
        1: _f("metadata", "msg", OBJECT_META),
        2: _f("data", "map_str"),
        3: _f("binaryData", "map_bytes"),
        4: _f("immutable", "bool"),
    },
    ("v1", "Secret"): {
        1: _f("metadata", "msg", OBJECT_META),
        2: _f("data", "map_bytes"),
        4: _f("stringData", "map_str"),
        3: _f("type", "str"),
        5: _f("immutable", "bool"),
    },
    ("v1", "Namespace"): {
        1: _f("metadata", "msg", OBJECT_META),
        2: _f("spec", "msg", {1: _f("finalizers", "str", repeated=True)}),
    },
    ("v1", "Service"): {1: _f("metadata", "msg", OBJECT_META), 2: _f("spec", "msg", SERVICE_SPEC)},
    ("v1", "ServiceAccount"): {
        1: _f("metadata", "msg", OBJECT_META),
        2: _f("secrets", "msg", {3: _f("name", "str"), 2: _f("namespace", "str")}, repeated=True),
        3: _f("imagePullSecrets", "msg", {1: _f("name", "str")}, repeated=True),
        4: _f("automountServiceAccountToken", "bool"),
    },
    ("apps/v1", "Deployment"): {
        1: _f("metadata", "msg", OBJECT_META),
        2: _f(
            "spec",
            "msg",
            {
                1: _f("replicas", "int"),
                2: _f("selector", "msg", LABEL_SELECTOR),
                3: _f("template", "msg", POD_TEMPLATE),
                4: _f("strategy", "msg", {1: _f("type", "str")}),
            },
        ),
    },
}
UNKNOWN: Schema = {
    1: _f("typeMeta", "msg", {1: _f("apiVersion", "str"), 2: _f("kind", "str")}),
    2: _f("raw", "raw"),
    3: _f("contentEncoding", "str"),
    4: _f("contentType", "str"),
}


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(buf):
            raise ProtobufError("truncated varint")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7
        if shift > 63:
            raise ProtobufError("varint too long")


def _fields(buf: bytes) -> list[tuple[int, int, Any]]:
    """(field number, wire type, value) triples; value is int or bytes."""
    out: list[tuple[int, int, Any]] = []
    pos = 0
    while pos < len(buf):
        key, pos = _varint(buf, pos)
        num, wire = key >> 3, key & 7
        val: int | bytes
        if wire == 0:
            val, pos = _varint(buf, pos)
        elif wire == 1:
            val, pos = int.from_bytes(buf[pos : pos + 8], "little"), pos + 8
        elif wire == 2:
            size, pos = _varint(buf, pos)
            val, pos = buf[pos : pos + size], pos + size
            if pos > len(buf):
                raise ProtobufError("truncated length-delimited field")
        elif wire == 5:
            val, pos = int.from_bytes(buf[pos : pos + 4], "little"), pos + 4
        else:
            raise ProtobufError(f"unsupported wire type {wire}")
        out.append((num, wire, val))
    return out


def _signed(v: int) -> int:
    return v - (1 << 64) if v >= 1 << 63 else v


def _decode(buf: bytes, schema: Schema) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for num, wire, val in _fields(buf):
        spec = schema.get(num)
        if spec is None:
            continue
        name, kind, sub, repeated = spec
        value: Any
        if kind == "str":
            value = bytes(val).decode() if wire == 2 else str(val)
        elif kind == "raw":
            value = bytes(val)
        elif kind in ("int", "int0"):
            value = _signed(int(val))
            if kind == "int0" and value == 0:
                continue  # a non-pointer omitempty integer left at zero
        elif kind == "bool":
            value = bool(val)
        elif kind == "msg":
            value = _decode(val, sub)
        elif kind == "intstr":
            ios = _decode(val, sub)
            value = ios.get("strVal", "") if ios.get("type") == 1 else ios.get("intVal", 0)
        elif kind == "time":
            seconds = _decode(val, {1: _f("s", "int")}).get("s", 0)
            if not seconds:
                continue
            value = datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        elif kind in ("map_str", "map_bytes"):
            entry = _decode(val, {1: _f("k", "str"), 2: _f("v", "raw")})
            raw = entry.get("v", b"")
            out.setdefault(name, {})[entry.get("k", "")] = (
                raw.decode() if kind == "map_str" else base64.b64encode(raw).decode()
            )
            continue
        else:  # pragma: no cover - schema typo
            raise ProtobufError(f"unknown field kind {kind}")
        if repeated:
            out.setdefault(name, []).append(value)
        elif not (kind == "str" and value == ""):
            out[name] = value
    return out


def decode_object(body: bytes) -> dict[str, Any]:
    """The JSON-shaped object inside a protobuf request body; raises ProtobufError."""
    if not body.startswith(MAGIC):
        raise ProtobufError("missing the k8s protobuf magic prefix")
    envelope = _decode(body[len(MAGIC) :], UNKNOWN)
    type_meta = envelope.get("typeMeta") or {}
    api_version, kind = type_meta.get("apiVersion", ""), type_meta.get("kind", "")
    schema = KINDS.get((api_version, kind))
    if schema is None:
        raise ProtobufError(f"protobuf bodies for {api_version}/{kind} are not supported")
    if envelope.get("contentEncoding"):
        raise ProtobufError("compressed protobuf bodies are not supported")
    obj = _decode(envelope.get("raw", b""), schema)
    return {"apiVersion": api_version, "kind": kind, **obj}
