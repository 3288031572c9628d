"""Upstream's ``TestUngroup`` (``permission_tables``) run against ours: the legacy
``k8s-98278`` path splits EC2 permissions as upstream does (:func:`legacy_ungroup`). All cases
pass; our fixed path splits to one rule per CIDR and never carries group pairs
(``controller/DEVIATIONS.md``)."""

from __future__ import annotations

from typing import Any

import pytest

from controller.aws.nlbrules import legacy_ungroup
from tests.controller.upstream.permission_tables import UNGROUP


def _key(perm: dict[str, Any]) -> str:
    """Upstream's set key (``keyForIPPermission``: the permission's JSON)."""
    return repr(sorted((k, repr(v)) for k, v in perm.items()))


@pytest.mark.parametrize("row", [r[1:] for r in UNGROUP], ids=[r[0] for r in UNGROUP])
def test_ungroup(row: tuple[list[dict[str, Any]], list[dict[str, Any]]]) -> None:
    """TestUngroup."""
    given, want = row
    assert sorted(map(_key, legacy_ungroup(given))) == sorted(map(_key, want))
