"""The kind jobs of the CI workflow ask only for kind/node-image pairs the lab accepts.

Those jobs cannot run here (no image registry answers); a pair the lab would refuse, or a
version with no pinned image, would only show on GitHub. This reads every matrix entry that
names a kind release and a Kubernetes version and puts it through the lab's own checks.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from lab.cluster.kind_steps import check_kind_version
from lab.versions.release import LATEST, KubeVersion, node_image

WORKFLOW = Path(__file__).resolve().parents[2] / ".github" / "workflows" / "ci.yml"


def _pairs() -> list[tuple[str, str, str]]:
    doc: dict[str, Any] = yaml.safe_load(WORKFLOW.read_text(encoding="utf-8"))
    found = []
    for name, job in doc["jobs"].items():
        for entry in ((job.get("strategy") or {}).get("matrix") or {}).get("include") or []:
            if "kind" in entry and "k8s" in entry:
                found.append((name, str(entry["kind"]), str(entry["k8s"])))
    return found


def test_the_workflow_has_kind_jobs() -> None:
    jobs = {name for name, _, _ in _pairs()}
    assert {"catalog-kind", "seed-004-kind"} <= jobs, jobs


@pytest.mark.parametrize(("job", "kind", "k8s"), _pairs())
def test_each_pair_is_one_the_lab_accepts(job: str, kind: str, k8s: str) -> None:
    kube = LATEST if k8s == "latest" else KubeVersion.parse(k8s)
    image = node_image(kube)  # raises naming the pinned versions
    release = tuple(int(p) for p in kind.lstrip("v").split("."))
    assert len(release) == 3, kind
    check_kind_version(release, kube, explicit_image=False)  # type: ignore[arg-type]
    if k8s != "latest" and KubeVersion.parse(k8s).patch is not None:
        assert image.version == KubeVersion.parse(k8s), (job, image.reference)
