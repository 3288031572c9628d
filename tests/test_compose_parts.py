"""The composed lab's parts, without starting a lab: which AWS side each ``aws`` value gets,
what a side says before it runs, the start steps' order, and where sim-only parts live.

A started lab on every side is exercised by ``tests/test_localstack_lab.py``,
``tests/aws/test_realaccount_lab.py``, ``tests/test_lab_kind.py`` and the e2e catalog.
"""

from __future__ import annotations

import pytest

from lab.compose import LabNotReady
from lab.compose.aws_localstack import LocalStackAws
from lab.compose.aws_moto import MotoAws
from lab.compose.aws_real import RealAccountAws
from lab.compose.factory import AWS_SIDES, make_aws_side
from lab.compose.steps import start_steps
from lab.compose.world import World
from lab.spec import AwsKind, LabSpec


def test_every_aws_value_has_its_side() -> None:
    assert sorted(AWS_SIDES) == sorted(AwsKind)
    assert isinstance(make_aws_side(LabSpec()), MotoAws)
    assert isinstance(make_aws_side(LabSpec(aws="localstack")), LocalStackAws)
    real = make_aws_side(LabSpec(aws="real", run_id="r1"))
    assert isinstance(real, RealAccountAws)


@pytest.mark.parametrize(
    "config", [LabSpec(), LabSpec(aws="localstack"), LabSpec(aws="real", run_id="r1")]
)
def test_a_side_not_started_has_no_endpoint_and_says_so(config: LabSpec) -> None:
    side = make_aws_side(config)
    assert side.endpoint is None
    assert side.describe() == "no AWS endpoint"
    with pytest.raises(LabNotReady, match="not running"):
        side.lacks(("elb-model",))
    side.stop()  # idempotent before a start


def test_a_real_account_cannot_be_reset() -> None:
    side = make_aws_side(LabSpec(aws="real", run_id="r1"))
    with pytest.raises(LabNotReady, match="cannot be reset"):
        side.check_reset()
    with pytest.raises(LabNotReady, match="cannot be reset"):
        side.reset(LabSpec(aws="real", run_id="r1"), World())


def test_start_steps_run_in_the_documented_order() -> None:
    assert [s.name for s in start_steps()] == [
        "prepare-cluster",
        "start-aws",
        "seed-aws",
        "start-imds",
        "provision-cluster",
        "align-instances",
        "wire-health-checks",
        "write-cloud-config",
    ]
