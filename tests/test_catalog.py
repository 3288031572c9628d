"""The catalog registry, the e2e modules and the README table agree."""

from __future__ import annotations

from pathlib import Path

import pytest

from e2e.catalog import CATALOG, by_id

ROOT = Path(__file__).resolve().parent.parent


def test_every_scenario_has_its_module_and_every_module_a_scenario() -> None:
    modules = {p.name for p in (ROOT / "e2e").glob("test_*.py")}
    expected = {Path(s.module).name for s in CATALOG}
    assert modules == expected


def test_every_scenario_is_in_the_readme_table() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    for scenario in CATALOG:
        assert f"`{scenario.id}`" in readme, scenario.id
        assert f"invoke lab.repro {scenario.id}" in readme, scenario.id


def test_legacy_switches_exist_in_the_controller() -> None:
    from controller.legacy import BEHAVIORS

    for scenario in CATALOG:
        if scenario.legacy_switch:
            assert scenario.legacy_switch in BEHAVIORS


def test_unknown_ids_name_the_catalog() -> None:
    with pytest.raises(KeyError, match="k8s-84926"):
        by_id("nope")


def test_every_scenario_says_which_aws_features_it_needs() -> None:
    from e2e.catalog import AWS_NEEDS, scenario_of
    from lab.aws.proxied import FEATURES

    assert set(AWS_NEEDS) == {s.id for s in CATALOG}
    for scenario_id, needed in AWS_NEEDS.items():
        assert set(needed) <= set(FEATURES), (scenario_id, needed)
    for scenario in CATALOG:
        assert scenario_of(scenario.module) is scenario
        assert scenario_of("/somewhere/" + scenario.module) is scenario
    assert scenario_of("tests/test_catalog.py") is None
    assert scenario_of("tests/test_imds_required.py") is None, "only the catalog's own modules"


def test_scenario_entry_points_have_one_name_and_release_replays_are_registered() -> None:
    """A scenario module's steps are ``run_scenario`` (never ``run``); the replay of each
    release scenario is the module's own ``REPLAY``, registered under its catalog id."""
    import ast

    from e2e.catalog import ReleaseReplay
    from e2e.repro import RELEASE_SCENARIOS

    for path in sorted((ROOT / "e2e").glob("test_*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        names = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
        assert "run" not in names, f"{path.name}: name its steps run_scenario"
    ids = {s.id for s in CATALOG}
    for scenario_id, replay in RELEASE_SCENARIOS.items():
        assert scenario_id in ids
        assert isinstance(replay, ReleaseReplay)
        module = replay.run_scenario.__module__
        assert module == "e2e.test_" + scenario_id.replace("-", "_")
        assert replay.run_scenario.__name__ == "run_scenario"
