"""Repository-wide pytest configuration.

Registers the lab's pytest plugin once it exists; test discovery and markers are configured in
``pyproject.toml``.
"""

from __future__ import annotations

import importlib.util

pytest_plugins = [
    name for name in ("lab.pytest_plugin",) if importlib.util.find_spec(name) is not None
]
