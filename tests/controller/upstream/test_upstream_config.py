"""Upstream's ``TestValidateOverridesActiveConfig`` (``config_tables``) run against ours."""

from __future__ import annotations

import pytest

from controller.aws.config import CloudConfigError, load_cloud_config
from tests.controller.upstream.config_tables import VALIDATE_OVERRIDES


@pytest.mark.parametrize(
    ("text", "fails", "active"),
    [row[1:] for row in VALIDATE_OVERRIDES],
    ids=[row[0] for row in VALIDATE_OVERRIDES],
)
def test_validate_overrides_active_config(text: str, fails: bool, active: bool) -> None:
    if fails:
        with pytest.raises(CloudConfigError):
            load_cloud_config(text)
        return
    cfg, _ = load_cloud_config(text)
    assert bool(cfg.service_overrides) == active
    for override in cfg.service_overrides:
        assert override.service == override.service.strip()
        assert override.url
        assert override.region
        assert override.signing_region
