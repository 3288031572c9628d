"""The ready file: how the bootstrap inside the debuggee tells the launcher where debugpy listens.

Role: shared by ``bootstrap.py`` (writer, inside the debuggee) and ``launcher.py`` (reader).
Kept apart from both so that importing the launcher never imports the bootstrap module, which
must first be imported by ``python -m`` itself.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TypedDict

READY_FILE_VERSION = 1


class ReadyFile(TypedDict):
    """What the bootstrap writes once debugpy accepts client connections."""

    version: int
    pid: int
    host: str
    port: int
    wait_for_client: bool


class ReadyFileError(ValueError):
    """The ready file exists but is not one this version of the lab understands."""


def write_ready_file(path: Path, ready: ReadyFile) -> None:
    """Write ``ready`` so that a reader never sees a partial file (write, then rename)."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(ready), encoding="utf-8")
    os.replace(tmp, path)


def read_ready_file(path: Path) -> ReadyFile:
    """Read and check a ready file; raises ``ReadyFileError`` naming the bad field."""
    raw = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(raw, dict):
        raise ReadyFileError(f"{path}: expected a JSON object, got {raw!r:.100}")
    if raw.get("version") != READY_FILE_VERSION:
        raise ReadyFileError(f"{path}: version={raw.get('version')!r}, expected 1")
    for field, kind in (("pid", int), ("host", str), ("port", int), ("wait_for_client", bool)):
        if not isinstance(raw.get(field), kind):
            raise ReadyFileError(f"{path}: field {field}={raw.get(field)!r} is not {kind.__name__}")
    return ReadyFile(
        version=READY_FILE_VERSION,
        pid=raw["pid"],
        host=raw["host"],
        port=raw["port"],
        wait_for_client=raw["wait_for_client"],
    )
