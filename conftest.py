"""Repository-wide pytest configuration.

Registers the lab's pytest plugin once it exists and forbids real AWS (below); test discovery
and markers are configured in ``pyproject.toml``.
"""

from __future__ import annotations

import importlib.util
import os

# No test may reach a real AWS account: with this set, the lab's real-account path
# (``lab.aws.realaccount``) refuses a client whose endpoint is one of Amazon's own hosts.
# Subprocesses (labs, controllers) inherit it.
os.environ["CCM_LAB_NO_REAL_AWS"] = "1"

pytest_plugins = [
    name for name in ("lab.pytest_plugin",) if importlib.util.find_spec(name) is not None
]
