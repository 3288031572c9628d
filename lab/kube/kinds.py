"""Strategies of the workload, RBAC and aggregation kinds (beyond the data plane's set).

Read off upstream: the defaulting functions (``pkg/apis/apps/v1/defaults.go``,
``pkg/apis/batch/v1/defaults.go``, ``pkg/apis/core/v1/defaults.go`` for ReplicationController,
``pkg/apis/rbac/v1/defaults.go``), the registry strategies (``pkg/registry/<group>/<kind>/
strategy.go``: status reset on create, generation, the Job's generated selector, the
DaemonSet's template generation) and the parts of validation a client meets first (selector
vs template labels, replicas >= 0, a Job's restart policy, RBAC rules and role references, an
APIService's name). The OpenAPI schemas carry no defaults for these kinds (``default`` appears
in two definitions only), so the defaults are written here, each from its Go function.
"""

from __future__ import annotations

import re
from typing import Any

from lab.kube.exceptions import FieldError, invalid_value, not_supported, required
from lab.kube.objects import Obj, clone
from lab.kube.strategies import Strategy, default_pod_spec, validate_pod_spec
from lab.kube.validation import validate_labels

RBAC_GROUP = "rbac.authorization.k8s.io"
MAX_INT32 = 2**31 - 1


def _spec(obj: Obj) -> Obj:
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        spec = obj["spec"] = {}
    return spec


def _template_spec(spec: Obj) -> Obj:
    template = spec.get("template")
    if not isinstance(template, dict):
        template = spec["template"] = {}
    pod = template.get("spec")
    if not isinstance(pod, dict):
        pod = template["spec"] = {}
    return pod


def _go_map(labels: dict[str, Any]) -> str:
    return ",".join(f'"{k}":"{v}"' for k, v in sorted(labels.items()))


def _selector_errors(spec: Obj, *, label_selector: bool = True) -> list[FieldError]:
    """A selector that exists and selects the template's labels (``ValidatePodTemplateSpec
    ForReplicaSet`` and friends)."""
    selector = spec.get("selector") or {}
    errs: list[FieldError] = []
    template = spec.get("template") or {}
    labels = (template.get("metadata") or {}).get("labels") or {}
    errs.extend(validate_labels(labels, "spec.template.metadata.labels"))
    if label_selector:
        wanted = selector.get("matchLabels") or {}
        if not wanted and not selector.get("matchExpressions"):
            errs.append(required("spec.selector"))
            return errs
        if selector.get("matchExpressions"):
            return errs  # expressions are checked by the controllers, not compared here
    else:
        wanted = selector
        if not wanted:
            errs.append(required("spec.selector"))
            return errs
    if any(labels.get(k) != v for k, v in wanted.items()):
        errs.append(
            FieldError(
                "FieldValueInvalid",
                "spec.template.metadata.labels",
                f"Invalid value: map[string]string{{{_go_map(labels)}}}: "
                "`selector` does not match template `labels`",
            )
        )
    return errs


def _replicas_errors(spec: Obj) -> list[FieldError]:
    replicas = spec.get("replicas")
    if replicas is None:
        return []
    if not isinstance(replicas, int) or isinstance(replicas, bool) or replicas < 0:
        return [invalid_value("spec.replicas", replicas, "must be greater than or equal to 0")]
    return []


class _Workload(Strategy):
    generation_managed = True
    initial_status: Obj = {}

    def prepare_for_create(self, obj: Obj) -> None:
        obj["status"] = clone(self.initial_status)


class DaemonSetStrategy(_Workload):
    """``SetDefaults_DaemonSet``; the registry's template generation, which apps/v1 carries
    as the ``deprecated.daemonset.template.generation`` annotation (1 on create, +1 whenever
    the template changes)."""

    def default(self, obj: Obj, old: Obj | None) -> None:
        spec = _spec(obj)
        strategy = spec.get("updateStrategy")
        if not isinstance(strategy, dict):
            strategy = spec["updateStrategy"] = {}
        strategy.setdefault("type", "RollingUpdate")
        if strategy["type"] == "RollingUpdate":
            rolling = strategy.setdefault("rollingUpdate", {})
            rolling.setdefault("maxUnavailable", 1)
            rolling.setdefault("maxSurge", 0)
        spec.setdefault("revisionHistoryLimit", 10)
        default_pod_spec(_template_spec(spec))
        meta = obj.setdefault("metadata", {})
        annotations = meta.get("annotations") or {}
        key = "deprecated.daemonset.template.generation"
        if old is None:
            annotations[key] = "1"
        else:
            before = (old.get("metadata") or {}).get("annotations") or {}
            generation = int(before.get(key, "0") or 0)
            if (old.get("spec") or {}).get("template") != spec.get("template"):
                generation += 1
            annotations[key] = str(generation)
        meta["annotations"] = annotations

    def validate(self, obj: Obj, old: Obj | None) -> list[FieldError]:
        spec = obj.get("spec") or {}
        errs = _selector_errors(spec)
        pod = (spec.get("template") or {}).get("spec") or {}
        errs += validate_pod_spec(pod, "spec.template.spec", creating=True)
        policy = pod.get("restartPolicy")
        if policy != "Always":
            errs.append(not_supported("spec.template.spec.restartPolicy", policy, ["Always"]))
        return errs


class StatefulSetStrategy(_Workload):
    """``SetDefaults_StatefulSet`` at v1.33 (PVC retention policy on, the alpha
    ``maxUnavailable`` gate off)."""

    initial_status = {"replicas": 0}

    def default(self, obj: Obj, old: Obj | None) -> None:
        spec = _spec(obj)
        spec.setdefault("podManagementPolicy", "OrderedReady")
        strategy = spec.get("updateStrategy")
        if not isinstance(strategy, dict):
            strategy = spec["updateStrategy"] = {}
        strategy.setdefault("type", "RollingUpdate")
        if strategy["type"] == "RollingUpdate":
            strategy.setdefault("rollingUpdate", {}).setdefault("partition", 0)
        retention = spec.get("persistentVolumeClaimRetentionPolicy")
        if not isinstance(retention, dict):
            retention = spec["persistentVolumeClaimRetentionPolicy"] = {}
        retention.setdefault("whenDeleted", "Retain")
        retention.setdefault("whenScaled", "Retain")
        spec.setdefault("replicas", 1)
        spec.setdefault("revisionHistoryLimit", 10)
        default_pod_spec(_template_spec(spec))

    def validate(self, obj: Obj, old: Obj | None) -> list[FieldError]:
        spec = obj.get("spec") or {}
        errs = _selector_errors(spec) + _replicas_errors(spec)
        pod = (spec.get("template") or {}).get("spec") or {}
        errs += validate_pod_spec(pod, "spec.template.spec", creating=True)
        return errs


_JOB_RESTART = ["OnFailure", "Never"]


def default_job_spec(spec: Obj) -> None:
    """``SetDefaults_Job`` (the spec half), at v1.33 with JobPodReplacementPolicy on."""
    if spec.get("completions") is None and spec.get("parallelism") is None:
        spec["completions"] = 1
        spec["parallelism"] = 1
    spec.setdefault("parallelism", 1)
    if spec.get("backoffLimit") is None:
        spec["backoffLimit"] = MAX_INT32 if spec.get("backoffLimitPerIndex") is not None else 6
    spec.setdefault("completionMode", "NonIndexed")
    spec.setdefault("suspend", False)
    if spec.get("podReplacementPolicy") is None:
        spec["podReplacementPolicy"] = (
            "Failed" if spec.get("podFailurePolicy") is not None else "TerminatingOrFailed"
        )
    spec.setdefault("manualSelector", False)
    default_pod_spec(_template_spec(spec))


def _job_template_errors(spec: Obj, path: str) -> list[FieldError]:
    pod = (spec.get("template") or {}).get("spec") or {}
    errs = validate_pod_spec(pod, f"{path}.template.spec", creating=True)
    policy = pod.get("restartPolicy")
    if policy not in _JOB_RESTART:
        errs.append(not_supported(f"{path}.template.spec.restartPolicy", policy, _JOB_RESTART))
    return errs


class JobStrategy(_Workload):
    """``registry/batch/job/strategy.go``: a selector generated from the Job's uid unless
    ``manualSelector``, with the uid and name labels (new and legacy keys) on the template;
    the Job's own labels default to its template's."""

    def prepare_for_create(self, obj: Obj) -> None:
        super().prepare_for_create(obj)
        spec = _spec(obj)
        if spec.get("manualSelector") is True:
            return
        meta = obj.get("metadata") or {}
        uid, name = meta.get("uid", ""), meta.get("name", "")
        template = spec.get("template")
        if not isinstance(template, dict):
            template = spec["template"] = {}
        tmeta = template.setdefault("metadata", {})
        labels = tmeta.get("labels") or {}
        labels.update(
            {
                "batch.kubernetes.io/controller-uid": uid,
                "batch.kubernetes.io/job-name": name,
                "controller-uid": uid,
                "job-name": name,
            }
        )
        tmeta["labels"] = labels
        if not spec.get("selector"):
            spec["selector"] = {"matchLabels": {"batch.kubernetes.io/controller-uid": uid}}

    def default(self, obj: Obj, old: Obj | None) -> None:
        spec = _spec(obj)
        default_job_spec(spec)
        meta = obj.setdefault("metadata", {})
        template_labels = ((spec.get("template") or {}).get("metadata") or {}).get("labels")
        if not meta.get("labels") and template_labels:
            meta["labels"] = dict(template_labels)

    def validate(self, obj: Obj, old: Obj | None) -> list[FieldError]:
        spec = obj.get("spec") or {}
        errs = _selector_errors(spec) + _job_template_errors(spec, "spec")
        for field in ("parallelism", "completions", "backoffLimit"):
            value = spec.get(field)
            if isinstance(value, int) and not isinstance(value, bool) and value < 0:
                errs.append(
                    invalid_value(f"spec.{field}", value, "must be greater than or equal to 0")
                )
        if old is not None:
            before = old.get("spec") or {}
            for field in ("selector", "completionMode"):
                if before.get(field) != spec.get(field):
                    errs.append(
                        invalid_value(f"spec.{field}", spec.get(field), "field is immutable")
                    )
        return errs


_CRON_FIELD = re.compile(r"^[\d*/,\-?LW#A-Za-z]+\Z")
_CRON_MACROS = frozenset(
    ["@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly"]
)


class CronJobStrategy(_Workload):
    """``SetDefaults_CronJob``; the schedule checked for shape (five fields or a macro)."""

    def default(self, obj: Obj, old: Obj | None) -> None:
        spec = _spec(obj)
        spec.setdefault("concurrencyPolicy", "Allow")
        spec.setdefault("suspend", False)
        spec.setdefault("successfulJobsHistoryLimit", 3)
        spec.setdefault("failedJobsHistoryLimit", 1)
        job_template = spec.get("jobTemplate")
        if not isinstance(job_template, dict):
            job_template = spec["jobTemplate"] = {}
        job_spec = job_template.get("spec")
        if not isinstance(job_spec, dict):
            job_spec = job_template["spec"] = {}
        default_job_spec(job_spec)

    def validate(self, obj: Obj, old: Obj | None) -> list[FieldError]:
        spec = obj.get("spec") or {}
        errs: list[FieldError] = []
        schedule = spec.get("schedule")
        if not schedule:
            errs.append(required("spec.schedule"))
        elif not _cron_ok(str(schedule)):
            errs.append(
                invalid_value(
                    "spec.schedule",
                    schedule,
                    f"expected exactly 5 fields, found {_fields(schedule)}",
                )
            )
        policy = spec.get("concurrencyPolicy")
        allowed = ["Allow", "Forbid", "Replace"]
        if policy not in allowed:
            errs.append(not_supported("spec.concurrencyPolicy", policy, allowed))
        job_spec = (spec.get("jobTemplate") or {}).get("spec") or {}
        errs += _job_template_errors(job_spec, "spec.jobTemplate.spec")
        return errs


def _fields(schedule: object) -> int:
    return len(str(schedule).split())


def _cron_ok(schedule: str) -> bool:
    text = schedule.strip()
    if text.startswith("TZ=") or text.startswith("CRON_TZ="):
        return False  # upstream refuses a time zone in the schedule (spec.timeZone instead)
    if text in _CRON_MACROS or text.startswith("@every "):
        return True
    parts = text.split()
    return len(parts) == 5 and all(_CRON_FIELD.match(p) for p in parts)


class ReplicationControllerStrategy(_Workload):
    """``SetDefaults_ReplicationController``: selector and labels from the template's labels,
    one replica; ``registry/core/replicationcontroller/strategy.go`` resets the status."""

    initial_status = {"replicas": 0}

    def default(self, obj: Obj, old: Obj | None) -> None:
        spec = _spec(obj)
        template = spec.get("template")
        labels = ((template or {}).get("metadata") or {}).get("labels") if template else None
        if labels:
            if not spec.get("selector"):
                spec["selector"] = dict(labels)
            meta = obj.setdefault("metadata", {})
            if not meta.get("labels"):
                meta["labels"] = dict(labels)
        spec.setdefault("replicas", 1)
        if isinstance(template, dict):
            default_pod_spec(_template_spec(spec))

    def validate(self, obj: Obj, old: Obj | None) -> list[FieldError]:
        spec = obj.get("spec") or {}
        if not spec.get("template"):
            return [required("spec.template"), *_replicas_errors(spec)]
        errs = _selector_errors(spec, label_selector=False) + _replicas_errors(spec)
        pod = (spec.get("template") or {}).get("spec") or {}
        errs += validate_pod_spec(pod, "spec.template.spec", creating=True)
        return errs


# --------------------------------------------------------------------------------- RBAC


def _rule_errors(rules: object, *, namespaced: bool) -> list[FieldError]:
    """``ValidatePolicyRule`` (``pkg/apis/rbac/validation``)."""
    errs: list[FieldError] = []
    for i, rule in enumerate(rules if isinstance(rules, list) else []):
        path = f"rules[{i}]"
        if not isinstance(rule, dict):
            continue
        if not rule.get("verbs"):
            errs.append(required(f"{path}.verbs", "verbs must contain at least one value"))
        urls = rule.get("nonResourceURLs") or []
        if urls:
            if namespaced:
                errs.append(
                    invalid_value(
                        f"{path}.nonResourceURLs",
                        urls,
                        "namespaced rules cannot apply to non-resource URLs",
                    )
                )
            if rule.get("apiGroups") or rule.get("resources") or rule.get("resourceNames"):
                errs.append(
                    invalid_value(
                        f"{path}.nonResourceURLs",
                        urls,
                        "rules cannot apply to both regular resources and non-resource URLs",
                    )
                )
            continue
        if not rule.get("apiGroups"):
            errs.append(
                required(f"{path}.apiGroups", "resource rules must supply at least one api group")
            )
        if not rule.get("resources"):
            errs.append(
                required(f"{path}.resources", "resource rules must supply at least one resource")
            )
    return errs


class RoleStrategy(Strategy):
    name_rule = "path-segment"  # ValidateRBACName
    namespaced_rules = True

    def validate(self, obj: Obj, old: Obj | None) -> list[FieldError]:
        return _rule_errors(obj.get("rules"), namespaced=self.namespaced_rules)


class ClusterRoleStrategy(RoleStrategy):
    namespaced_rules = False


_SUBJECT_KINDS = ["ServiceAccount", "User", "Group"]


class RoleBindingStrategy(Strategy):
    """``SetDefaults_RoleBinding`` / ``_Subject`` and ``ValidateRoleBinding``."""

    name_rule = "path-segment"
    role_kinds = ["Role", "ClusterRole"]

    def default(self, obj: Obj, old: Obj | None) -> None:
        ref = obj.get("roleRef")
        if isinstance(ref, dict) and not ref.get("apiGroup"):
            ref["apiGroup"] = RBAC_GROUP
        for subject in obj.get("subjects") or []:
            if not isinstance(subject, dict) or subject.get("apiGroup"):
                continue
            if subject.get("kind") in ("User", "Group"):
                subject["apiGroup"] = RBAC_GROUP
            elif subject.get("kind") == "ServiceAccount":
                subject["apiGroup"] = ""

    def validate(self, obj: Obj, old: Obj | None) -> list[FieldError]:
        errs: list[FieldError] = []
        ref = obj.get("roleRef") or {}
        if ref.get("apiGroup") != RBAC_GROUP:
            errs.append(not_supported("roleRef.apiGroup", ref.get("apiGroup"), [RBAC_GROUP]))
        if ref.get("kind") not in self.role_kinds:
            errs.append(not_supported("roleRef.kind", ref.get("kind"), self.role_kinds))
        if not ref.get("name"):
            errs.append(required("roleRef.name"))
        for i, subject in enumerate(obj.get("subjects") or []):
            path = f"subjects[{i}]"
            kind = (subject or {}).get("kind")
            if not (subject or {}).get("name"):
                errs.append(required(f"{path}.name"))
            if kind not in _SUBJECT_KINDS:
                errs.append(not_supported(f"{path}.kind", kind, _SUBJECT_KINDS))
            elif kind == "ServiceAccount":
                if subject.get("apiGroup"):
                    errs.append(not_supported(f"{path}.apiGroup", subject["apiGroup"], [""]))
                if not self.rt.namespaced and not subject.get("namespace"):
                    errs.append(required(f"{path}.namespace"))
            elif subject.get("apiGroup") != RBAC_GROUP:
                errs.append(
                    not_supported(f"{path}.apiGroup", subject.get("apiGroup"), [RBAC_GROUP])
                )
        if old is not None and old.get("roleRef") != obj.get("roleRef"):
            errs.append(invalid_value("roleRef", ref, "cannot change roleRef"))
        return errs


class ClusterRoleBindingStrategy(RoleBindingStrategy):
    role_kinds = ["ClusterRole"]


# ------------------------------------------------------------------------- aggregation


class APIServiceStrategy(Strategy):
    """``ValidateAPIService`` (kube-aggregator): the name is ``<version>.<group>``, the
    priorities positive and bounded; the status is the availability controller's."""

    name_rule = "path-segment"

    def prepare_for_create(self, obj: Obj) -> None:
        obj["status"] = {}

    def validate(self, obj: Obj, old: Obj | None) -> list[FieldError]:
        spec = obj.get("spec") or {}
        name = (obj.get("metadata") or {}).get("name", "")
        errs: list[FieldError] = []
        group, version = spec.get("group", ""), spec.get("version", "")
        expected = f"{version}.{group}"
        if name != expected:
            errs.append(invalid_value("metadata.name", name, f"must be {expected}"))
        if not version:
            errs.append(required("spec.version"))
        gpm, vp = spec.get("groupPriorityMinimum", 0), spec.get("versionPriority", 0)
        if not isinstance(gpm, int) or gpm <= 0:
            errs.append(invalid_value("spec.groupPriorityMinimum", gpm, "must be positive"))
        elif gpm > 20000:
            errs.append(invalid_value("spec.groupPriorityMinimum", gpm, "must be less than 20000"))
        if not isinstance(vp, int) or vp <= 0:
            errs.append(invalid_value("spec.versionPriority", vp, "must be positive"))
        elif vp > 1000:
            errs.append(invalid_value("spec.versionPriority", vp, "must be less than 1000"))
        return errs


SPECIAL: dict[tuple[str, str], type[Strategy]] = {
    ("apps", "daemonsets"): DaemonSetStrategy,
    ("apps", "statefulsets"): StatefulSetStrategy,
    ("batch", "jobs"): JobStrategy,
    ("batch", "cronjobs"): CronJobStrategy,
    ("", "replicationcontrollers"): ReplicationControllerStrategy,
    (RBAC_GROUP, "roles"): RoleStrategy,
    (RBAC_GROUP, "clusterroles"): ClusterRoleStrategy,
    (RBAC_GROUP, "rolebindings"): RoleBindingStrategy,
    (RBAC_GROUP, "clusterrolebindings"): ClusterRoleBindingStrategy,
    ("apiregistration.k8s.io", "apiservices"): APIServiceStrategy,
}
