"""Per-kind strategies: what differs between kinds on top of the generic store.

A strategy answers the questions ``k8s.io/apiserver``'s ``RESTCreateStrategy`` and friends
answer: how names are validated, what a create resets, which half of the object the main
resource and ``/status`` may change, whether ``metadata.generation`` is managed, which field
selectors exist, whether delete is graceful and whether it returns the object. The store
(``store.py``) calls these hooks under its lock; Services (allocation) live in ``services.py``,
the workload, RBAC and aggregation kinds in ``kinds.py``, and ``strategy_table.py`` picks one
strategy per resource type. Adding a kind = one entry in ``resources.py`` and, if it behaves
specially, a class here (or beside it) and a line in the table.
"""

from __future__ import annotations

from typing import Any

from lab.kube import events
from lab.kube.exceptions import (
    FieldError,
    bad_request,
    forbidden,
    invalid_value,
    not_supported,
    required,
)
from lab.kube.objects import Obj, clone
from lab.kube.resources import ResourceType
from lab.kube.validation import validate_labels

GENERIC_FIELDS = ("metadata.name", "metadata.namespace")

OBJECT_META_FIELDS = frozenset(
    [
        "name",
        "generateName",
        "namespace",
        "selfLink",
        "uid",
        "resourceVersion",
        "generation",
        "creationTimestamp",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "labels",
        "annotations",
        "ownerReferences",
        "finalizers",
        "managedFields",
    ]
)
# top-level JSON fields of each kind besides apiVersion/kind/metadata (k8s.io/api types.go);
# the basis of fieldValidation (unknown-field detection is top-level and metadata only)
TOP_LEVEL_FIELDS: dict[tuple[str, str], frozenset[str]] = {
    key: frozenset(fields.split())
    for key, fields in {
        ("", "namespaces"): "spec status",
        ("", "nodes"): "spec status",
        ("", "services"): "spec status",
        ("", "pods"): "spec status",
        ("", "endpoints"): "subsets",
        ("", "events"): "involvedObject reason message source firstTimestamp lastTimestamp "
        "count type eventTime series action related reportingComponent reportingInstance",
        ("", "configmaps"): "data binaryData immutable",
        ("", "secrets"): "data stringData type immutable",
        ("", "serviceaccounts"): "secrets imagePullSecrets automountServiceAccountToken",
        ("discovery.k8s.io", "endpointslices"): "addressType endpoints ports",
        ("coordination.k8s.io", "leases"): "spec",
        ("events.k8s.io", "events"): "eventTime series reportingController reportingInstance "
        "action reason regarding related note type deprecatedSource deprecatedFirstTimestamp "
        "deprecatedLastTimestamp deprecatedCount",
        ("apps", "deployments"): "spec status",
        ("apps", "replicasets"): "spec status",
        ("apps", "daemonsets"): "spec status",
        ("apps", "statefulsets"): "spec status",
        ("batch", "jobs"): "spec status",
        ("batch", "cronjobs"): "spec status",
        ("", "replicationcontrollers"): "spec status",
        ("rbac.authorization.k8s.io", "roles"): "rules",
        ("rbac.authorization.k8s.io", "clusterroles"): "rules aggregationRule",
        ("rbac.authorization.k8s.io", "rolebindings"): "subjects roleRef",
        ("rbac.authorization.k8s.io", "clusterrolebindings"): "subjects roleRef",
        ("apiregistration.k8s.io", "apiservices"): "spec status",
    }.items()
}


def unknown_fields(rt: ResourceType, body: Obj) -> list[str]:
    """Paths of fields in ``body`` that ``rt``'s schema does not have (top level, metadata)."""
    known = TOP_LEVEL_FIELDS.get((rt.group, rt.plural))
    if known is None:
        return []
    out = [
        k
        for k in body
        if k not in known and k not in ("apiVersion", "kind", "metadata") and not k.startswith("$")
    ]
    meta = body.get("metadata")
    if isinstance(meta, dict):
        out += [
            f"metadata.{k}" for k in meta if k not in OBJECT_META_FIELDS and not k.startswith("$")
        ]
    return out


def _get(obj: Obj, path: str) -> Any:
    cur: Any = obj
    for part in path.split("."):
        if not isinstance(cur, dict):
            return None
        cur = cur.get(part)
    return cur


def _str(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


class Strategy:
    """Defaults shared by the plain CRUD kinds (ConfigMap, Endpoints, Lease, …)."""

    name_rule = "subdomain"
    generation_managed = False
    create_on_update = False
    unconditional_update = True
    return_deleted_object = False
    field_labels: tuple[str, ...] = GENERIC_FIELDS
    custom_field_labels = False  # True: errors say "field label not supported"

    def __init__(self, rt: ResourceType) -> None:
        self.rt = rt
        self.has_status = "status" in rt.subresources

    # -- field selectors ------------------------------------------------------------------
    def check_field_selector(self, fields: tuple[str, ...]) -> None:
        for f in fields:
            if f not in self.field_labels:
                if self.custom_field_labels:
                    raise bad_request(f"field label not supported: {f}")
                raise bad_request(
                    f'"{f}" is not a known field selector: only "metadata.name", '
                    '"metadata.namespace"'
                )

    def fields(self, obj: Obj) -> dict[str, str]:
        return {f: _str(_get(obj, f)) for f in self.field_labels}

    # -- lifecycle hooks ------------------------------------------------------------------
    def prepare_for_create(self, obj: Obj) -> None:
        if self.has_status:
            obj.pop("status", None)

    def prepare_for_update(self, new: Obj, old: Obj, subresource: str) -> None:
        if not self.has_status:
            return
        if subresource == "status":
            _copy_key(new, old, "spec")
        else:
            _copy_key(new, old, "status")

    def default(self, obj: Obj, old: Obj | None) -> None:
        pass

    def validate(self, obj: Obj, old: Obj | None) -> list[FieldError]:
        return []

    def allocate(self, obj: Obj, old: Obj | None, *, dry_run: bool) -> None:
        """Claim cluster-wide resources (IPs, ports); raise ApiError when impossible."""

    def release(self, obj: Obj) -> None:
        """Give back what :meth:`allocate` claimed for ``obj`` (on final delete)."""

    def reset(self) -> None:
        """Forget allocator state (the store re-allocates from its objects afterwards)."""

    def grace_period(self, obj: Obj, requested: int | None) -> int:
        """Seconds of graceful deletion; 0 deletes at once (finalizers permitting)."""
        return 0


def _copy_key(new: Obj, old: Obj, key: str) -> None:
    if key in old:
        new[key] = clone(old[key])  # stored objects are never shared with a new one
    else:
        new.pop(key, None)


class NamespaceStrategy(Strategy):
    name_rule = "label"
    field_labels = ("metadata.name", "status.phase")
    custom_field_labels = True

    def prepare_for_create(self, obj: Obj) -> None:
        obj["status"] = {"phase": "Active"}
        spec = obj.setdefault("spec", {})
        fin = spec.get("finalizers") or []
        if "kubernetes" not in fin:
            spec["finalizers"] = [*fin, "kubernetes"]

    def default(self, obj: Obj, old: Obj | None) -> None:
        meta = obj.setdefault("metadata", {})
        labels = meta.get("labels") or {}
        labels["kubernetes.io/metadata.name"] = meta.get("name", "")
        meta["labels"] = labels
        obj.setdefault("spec", {})
        obj.setdefault("status", {"phase": "Active"})


class NodeStrategy(Strategy):
    field_labels = ("metadata.name", "spec.unschedulable")
    custom_field_labels = True

    def fields(self, obj: Obj) -> dict[str, str]:
        return {
            "metadata.name": _str(_get(obj, "metadata.name")),
            "spec.unschedulable": _str(bool(_get(obj, "spec.unschedulable"))),
        }

    def prepare_for_create(self, obj: Obj) -> None:
        pass  # "Nodes allow *all* fields, including status, to be set on create"

    def default(self, obj: Obj, old: Obj | None) -> None:
        status = obj.get("status")
        if isinstance(status, dict) and "capacity" in status and "allocatable" not in status:
            status["allocatable"] = dict(status["capacity"])

    def validate(self, obj: Obj, old: Obj | None) -> list[FieldError]:
        errs: list[FieldError] = []
        for i, t in enumerate((obj.get("spec") or {}).get("taints") or []):
            if not t.get("key"):
                errs.append(required(f"spec.taints[{i}].key"))
            effect = t.get("effect")
            allowed = ["NoExecute", "NoSchedule", "PreferNoSchedule"]
            if effect not in allowed:
                errs.append(
                    required(f"spec.taints[{i}].effect")
                    if not effect
                    else not_supported(f"spec.taints[{i}].effect", effect, allowed)
                )
        # ValidateNodeUpdate: providerID may go from "" to a value, never change after that.
        old_id = ((old or {}).get("spec") or {}).get("providerID") or ""
        new_id = (obj.get("spec") or {}).get("providerID") or ""
        if old_id and new_id != old_id:
            errs.append(
                forbidden(
                    "spec.providerID",
                    'node updates may not change providerID except from "" to valid',
                )
            )
        return errs


class PodStrategy(Strategy):
    return_deleted_object = True
    field_labels = (
        "metadata.name",
        "metadata.namespace",
        "spec.nodeName",
        "spec.restartPolicy",
        "spec.schedulerName",
        "spec.serviceAccountName",
        "spec.hostNetwork",
        "status.phase",
        "status.podIP",
        "status.podIPs",
        "status.nominatedNodeName",
    )
    custom_field_labels = True

    def check_field_selector(self, fields: tuple[str, ...]) -> None:
        super().check_field_selector(
            tuple("spec.nodeName" if f == "spec.host" else f for f in fields)
        )

    def fields(self, obj: Obj) -> dict[str, str]:
        out = super().fields(obj)
        out["spec.host"] = out["spec.nodeName"]
        out["spec.hostNetwork"] = _str(bool(_get(obj, "spec.hostNetwork")))
        ips = _get(obj, "status.podIPs") or []
        out["status.podIPs"] = ips[0].get("ip", "") if ips else ""
        return out

    def prepare_for_create(self, obj: Obj) -> None:
        obj["status"] = {"phase": "Pending", "qosClass": "BestEffort"}
        default_toleration_seconds(obj.setdefault("spec", {}))

    def default(self, obj: Obj, old: Obj | None) -> None:
        spec = obj.setdefault("spec", {})
        default_pod_spec(spec)
        spec.setdefault("enableServiceLinks", True)
        spec.setdefault("serviceAccountName", "default")
        spec.setdefault("serviceAccount", spec["serviceAccountName"])
        spec.setdefault("preemptionPolicy", "PreemptLowerPriority")
        spec.setdefault("priority", 0)

    def validate(self, obj: Obj, old: Obj | None) -> list[FieldError]:
        return validate_pod_spec(obj.get("spec") or {}, "spec", creating=old is None)

    def grace_period(self, obj: Obj, requested: int | None) -> int:
        spec = obj.get("spec") or {}
        phase = (obj.get("status") or {}).get("phase")
        if not spec.get("nodeName") or phase in ("Succeeded", "Failed"):
            return 0
        if requested is not None:
            return max(requested, 0)
        return int(spec.get("terminationGracePeriodSeconds", 30))


#: The DefaultTolerationSeconds admission plugin's taints and delay (its flags' defaults).
DEFAULT_TOLERATION_TAINTS = ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable")
DEFAULT_TOLERATION_SECONDS = 300


def default_toleration_seconds(spec: Obj) -> None:
    """The DefaultTolerationSeconds admission plugin (on by default; pods, on create): a pod
    that tolerates neither NoExecute taint of an unhealthy node gets a 300 s toleration for it,
    so taint-based eviction waits five minutes."""
    tolerations = spec.get("tolerations") or []
    for key in DEFAULT_TOLERATION_TAINTS:
        if any(
            t.get("key") in (key, None, "") and t.get("effect") in ("NoExecute", None, "")
            for t in tolerations
        ):
            continue
        tolerations.append(
            {
                "key": key,
                "operator": "Exists",
                "effect": "NoExecute",
                "tolerationSeconds": DEFAULT_TOLERATION_SECONDS,
            }
        )
    if tolerations:
        spec["tolerations"] = tolerations


def default_pod_spec(spec: Obj) -> None:
    """``SetDefaults_PodSpec`` and container defaults, for pods and pod templates."""
    spec.setdefault("restartPolicy", "Always")
    spec.setdefault("terminationGracePeriodSeconds", 30)
    spec.setdefault("dnsPolicy", "ClusterFirst")
    spec.setdefault("schedulerName", "default-scheduler")
    spec.setdefault("securityContext", {})
    for c in spec.get("containers") or []:
        c.setdefault("terminationMessagePath", "/dev/termination-log")
        c.setdefault("terminationMessagePolicy", "File")
        c.setdefault("resources", {})
        image = str(c.get("image", ""))
        tagged = ":" in image.rsplit("/", 1)[-1] and not image.endswith(":latest")
        c.setdefault("imagePullPolicy", "IfNotPresent" if tagged else "Always")
        for p in c.get("ports") or []:
            p.setdefault("protocol", "TCP")


def validate_pod_spec(spec: Obj, path: str, *, creating: bool) -> list[FieldError]:
    containers = spec.get("containers")
    if not containers:
        return [required(f"{path}.containers")]
    errs: list[FieldError] = []
    for i, c in enumerate(containers):
        if not c.get("name"):
            errs.append(required(f"{path}.containers[{i}].name"))
        if not c.get("image") and creating:
            errs.append(required(f"{path}.containers[{i}].image"))
    return errs


class SecretStrategy(Strategy):
    field_labels = ("metadata.name", "metadata.namespace", "type")
    custom_field_labels = True

    def default(self, obj: Obj, old: Obj | None) -> None:
        obj.setdefault("type", "Opaque")


class EventStrategy(Strategy):
    field_labels: tuple[str, ...] = (
        "metadata.name",
        "metadata.namespace",
        "involvedObject.kind",
        "involvedObject.namespace",
        "involvedObject.name",
        "involvedObject.uid",
        "involvedObject.apiVersion",
        "involvedObject.resourceVersion",
        "involvedObject.fieldPath",
        "reason",
        "reportingComponent",
        "source",
        "type",
    )
    custom_field_labels = True

    def fields(self, obj: Obj) -> dict[str, str]:
        out = {f: _str(_get(obj, f)) for f in EventStrategy.field_labels}
        source = obj.get("source") or {}
        out["source"] = _str(source.get("component")) if isinstance(source, dict) else ""
        out["reportingComponent"] = _str(obj.get("reportingComponent"))
        return out

    def validate(self, obj: Obj, old: Obj | None) -> list[FieldError]:
        # timestamps are rewritten here, where a malformed one can be reported
        events.fill_core(obj)
        errs = events.normalise(obj, v1=False)
        return errs + events.validate(obj, v1=False)


#: events.k8s.io/v1 field labels -> the core/v1 ones they select on, as the group's
#: ``AddFieldLabelConversionsForEvent`` converts them (the stored object is core-shaped
#: upstream too); a core name such as ``involvedObject.name`` is not supported there.
EVENTS_V1_FIELD_LABELS: dict[str, str] = {
    "reason": "reason",
    "regarding.kind": "involvedObject.kind",
    "regarding.namespace": "involvedObject.namespace",
    "regarding.name": "involvedObject.name",
    "regarding.uid": "involvedObject.uid",
    "regarding.apiVersion": "involvedObject.apiVersion",
    "regarding.resourceVersion": "involvedObject.resourceVersion",
    "regarding.fieldPath": "involvedObject.fieldPath",
    "reportingController": "reportingComponent",
    "source": "source",
    "type": "type",
    "metadata.namespace": "metadata.namespace",
    "metadata.name": "metadata.name",
}


class EventsV1Strategy(EventStrategy):
    """events.k8s.io/v1 Events: validated and selected on their core/v1 form, by the
    group's own field labels."""

    field_labels = tuple(EVENTS_V1_FIELD_LABELS)

    def fields(self, obj: Obj) -> dict[str, str]:
        core = super().fields(events.to_core(obj))
        return {label: core[name] for label, name in EVENTS_V1_FIELD_LABELS.items()}

    def validate(self, obj: Obj, old: Obj | None) -> list[FieldError]:
        core = events.to_core(obj)
        errs = events.normalise(core, v1=True)
        if old is None:
            errs += events.validate(core, v1=True)
        else:
            errs += events.validate(core, v1=True, strict=False)
            errs += events.validate_update(core, events.to_core(old))
        obj.clear()
        obj.update(events.to_v1(core))
        return errs


class ServiceAccountStrategy(Strategy):
    pass


class DeploymentStrategy(Strategy):
    generation_managed = True

    def prepare_for_create(self, obj: Obj) -> None:
        obj["status"] = {}

    def default(self, obj: Obj, old: Obj | None) -> None:
        spec = obj.setdefault("spec", {})
        spec.setdefault("replicas", 1)
        spec.setdefault("revisionHistoryLimit", 10)
        spec.setdefault("progressDeadlineSeconds", 600)
        strategy = spec.get("strategy") or {}
        if not strategy.get("type"):
            strategy["type"] = "RollingUpdate"
        if strategy["type"] == "RollingUpdate":
            rolling = strategy.setdefault("rollingUpdate", {})
            rolling.setdefault("maxUnavailable", "25%")
            rolling.setdefault("maxSurge", "25%")
        spec["strategy"] = strategy
        template = spec.setdefault("template", {})
        default_pod_spec(template.setdefault("spec", {}))

    def validate(self, obj: Obj, old: Obj | None) -> list[FieldError]:
        spec = obj.get("spec") or {}
        # ValidateDeploymentSpec checks the replica count first (ValidateNonnegativeField)
        errs = nonnegative(spec, "replicas", "spec")
        if not (spec.get("selector") or {}).get("matchLabels") and not (
            spec.get("selector") or {}
        ).get("matchExpressions"):
            errs.append(required("spec.selector"))
        template = spec.get("template") or {}
        labels = (template.get("metadata") or {}).get("labels")
        errs.extend(validate_labels(labels, "spec.template.metadata.labels"))
        errs.extend(
            validate_pod_spec(template.get("spec") or {}, "spec.template.spec", creating=True)
        )
        return errs


class ReplicaSetStrategy(Strategy):
    """``registry/apps/replicaset/strategy.go``: status reset on create, generation managed,
    one replica by default, a selector that must select the template's labels."""

    generation_managed = True

    def prepare_for_create(self, obj: Obj) -> None:
        obj["status"] = {"replicas": 0}

    def default(self, obj: Obj, old: Obj | None) -> None:
        spec = obj.setdefault("spec", {})
        spec.setdefault("replicas", 1)
        template = spec.setdefault("template", {})
        default_pod_spec(template.setdefault("spec", {}))

    def validate(self, obj: Obj, old: Obj | None) -> list[FieldError]:
        spec = obj.get("spec") or {}
        selector = spec.get("selector") or {}
        errs: list[FieldError] = []
        if not selector.get("matchLabels") and not selector.get("matchExpressions"):
            errs.append(required("spec.selector"))
        template = spec.get("template") or {}
        labels = (template.get("metadata") or {}).get("labels") or {}
        errs.extend(validate_labels(labels, "spec.template.metadata.labels"))
        wanted = selector.get("matchLabels") or {}
        if wanted and any(labels.get(k) != v for k, v in wanted.items()):
            go_map = ",".join(f'"{k}":"{v}"' for k, v in sorted(labels.items()))
            errs.append(
                FieldError(
                    "FieldValueInvalid",
                    "spec.template.metadata.labels",
                    f"Invalid value: map[string]string{{{go_map}}}: "
                    "`selector` does not match template `labels`",
                )
            )
        errs.extend(nonnegative(spec, "replicas", "spec", required_int=True))
        errs.extend(
            validate_pod_spec(template.get("spec") or {}, "spec.template.spec", creating=True)
        )
        return errs


def nonnegative(
    spec: Obj, field: str, path: str, *, required_int: bool = False
) -> list[FieldError]:
    """apimachinery's ``ValidateNonnegativeField`` for ``spec.<field>`` (absent: fine unless
    ``required_int``, for a field defaulting has filled in)."""
    value = spec.get(field)
    if value is None and not required_int:
        return []
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        return [invalid_value(f"{path}.{field}", value, "must be greater than or equal to 0")]
    return []


class LeaseStrategy(Strategy):
    pass
