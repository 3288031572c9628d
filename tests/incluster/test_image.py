"""The image's build inputs: the Dockerfile, its pinned constraints and the build context that
``.dockerignore`` lets through (copied out, it still runs the controller)."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from lab.incluster import REPO_ROOT
from tests.incluster.support import (
    build_context_files,
    dockerfile_steps,
    dockerignore_patterns,
    dockerignored,
)


def test_dockerfile_is_slim_non_root_without_dev_extras() -> None:
    steps = dockerfile_steps()
    args = dict(a.split("=", 1) for s in steps if s.cmd == "ARG" for a in s.value if "=" in a)
    assert args["BASE_IMAGE"].startswith("python:3.11-slim")
    froms = [" ".join(s.value) for s in steps if s.cmd == "FROM"]
    assert froms == ["${BASE_IMAGE} AS build", "${BASE_IMAGE}"]
    final = steps[max(i for i, s in enumerate(steps) if s.cmd == "FROM") :]
    users = [s.value for s in final if s.cmd == "USER"]
    assert users == [("65532:65532",)]
    entrypoints = [(s.json, s.value) for s in final if s.cmd == "ENTRYPOINT"]
    assert entrypoints == [(True, ("python", "-m", "controller"))]  # exec form, no shell
    runs = " ".join(" ".join(s.value) for s in steps if s.cmd == "RUN")
    assert "pip install --constraint deploy/constraints.txt ." in runs
    assert "[dev]" not in runs
    env = {
        key: value
        for s in steps
        if s.cmd == "ENV"
        for key, value in zip(s.value[::2], s.value[1::2], strict=True)
    }
    assert "--no-cache-dir" in runs or env.get("PIP_NO_CACHE_DIR") == "1"
    for s in steps:
        if s.cmd == "COPY" and not any(f.startswith("--from") for f in s.flags):
            for src in s.value[:-1]:
                assert (REPO_ROOT / src).exists(), src


def test_constraints_pin_what_the_tests_run_with() -> None:
    """The image installs exactly the runtime versions this virtualenv tests."""
    spec = importlib.util.spec_from_file_location(
        "pin", REPO_ROOT / "deploy" / "pin_constraints.py"
    )
    assert spec is not None
    assert spec.loader is not None
    pin = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(pin)
    pins = pin.runtime_pins()
    assert {"boto3", "kubernetes", "moto", "prometheus-client"} <= pins.keys()
    assert not {"pytest", "mypy", "ruff", "hypothesis"} & pins.keys()  # no dev extras
    current = (REPO_ROOT / "deploy" / "constraints.txt").read_text()
    assert current == pin.render(pins), (
        "deploy/constraints.txt is stale; run .venv/bin/python deploy/pin_constraints.py"
    )


@pytest.mark.parametrize(
    ("path", "ignored"),
    [
        ("pyproject.toml", False),
        ("README.md", False),
        ("controller/app.py", False),
        ("controller/aws/config.py", False),
        ("lab/exec.py", False),
        ("deploy/Dockerfile", False),
        ("deploy/constraints.txt", False),
        ("deploy/pin_constraints.py", True),
        (".venv/bin/python", True),
        (".lab/default/state.json", True),
        (".git/config", True),
        ("tests/test_incluster.py", True),
        ("tests/incluster/test_image.py", True),
        ("e2e/test_node_lifecycle.py", True),
        ("controller/__pycache__/app.cpython-311.pyc", True),
        ("lab/kube/__pycache__/store.cpython-311.pyc", True),
        (".mypy_cache/3.11/x.json", True),
        ("ccm_lab.egg-info/PKG-INFO", True),
        ("kubeconfig", True),
    ],
)
def test_dockerignore_is_an_allow_list(path: str, ignored: bool) -> None:
    assert dockerignored(path, dockerignore_patterns()) is ignored


def test_the_build_context_holds_a_runnable_controller(tmp_path: Path) -> None:
    """What Docker would send: copied out, it still runs ``python -m controller --help``."""
    ctx = tmp_path / "ctx"
    for path in build_context_files():
        target = ctx / path.relative_to(REPO_ROOT)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, target)
    assert (ctx / "controller" / "__main__.py").exists()
    assert not (ctx / "tests").exists()
    assert not list(ctx.rglob("__pycache__"))
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run(
        [sys.executable, "-B", "-m", "controller", "--help"],
        cwd=ctx,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "--leader-elect" in done.stdout
