"""Upstream's instance security-group tables (``security_group_tables``) against ours."""

from __future__ import annotations

from typing import Any

import pytest

from controller.aws.securitygroups import SecurityGroupError, find_group_for_instance
from tests.controller.upstream.security_group_tables import FIND_SECURITY_GROUP_FOR_INSTANCE


@pytest.mark.parametrize(
    ("case", "groups", "tagged", "found", "error"),
    FIND_SECURITY_GROUP_FOR_INSTANCE,
    ids=[r[0] for r in FIND_SECURITY_GROUP_FOR_INSTANCE],
)
def test_find_security_group_for_instance(
    case: str,
    groups: list[tuple[str, str]],
    tagged: list[str],
    found: str | None,
    error: list[str],
) -> None:
    """The "MultipleTagged" case failed before: ours counted a group listed twice once."""
    instance: Any = {"SecurityGroups": [{"GroupId": g, "GroupName": n} for g, n in groups]}
    tagged_groups = {g: {"GroupId": g} for g in tagged}
    if error:
        with pytest.raises(SecurityGroupError) as raised:
            find_group_for_instance(instance, tagged_groups)
        for text in error:
            assert text in str(raised.value)
    else:
        assert find_group_for_instance(instance, tagged_groups) == found
