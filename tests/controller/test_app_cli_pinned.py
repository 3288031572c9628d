"""``python -m controller`` flags pinned: the ``--help`` text byte for byte and every flag's
parsing (option strings, destination, default, type, metavar, group), each against a golden
file in ``golden/``. The controller must run unchanged against real AWS and in the lab's
manifests, so a change here is a change of the command line, never a side effect of a
refactoring of :func:`controller.app.build_parser`.

To accept a deliberate change: ``python -m tests.controller.test_app_cli_pinned`` rewrites
both files; review the diff.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any
from unittest import mock

import pytest

from controller.app import build_parser

GOLDEN = Path(__file__).parent / "golden"
HELP_FILE = GOLDEN / "controller_help.txt"
FLAGS_FILE = GOLDEN / "controller_flags.json"
COLUMNS = "100"


def help_text() -> str:
    with mock.patch.dict(os.environ, {"COLUMNS": COLUMNS}):
        return build_parser().format_help()


def _jsonable(value: Any) -> Any:
    if isinstance(value, tuple | list):
        return [_jsonable(v) for v in value]
    if callable(value):
        return getattr(value, "__name__", repr(value))
    return value


def flag_table() -> list[dict[str, Any]]:
    """Every action of the parser as data, in declaration order, with its group."""
    parser = build_parser()
    group_of = {
        id(action): group.title
        for group in parser._action_groups
        for action in group._group_actions
    }
    return [
        {
            "option_strings": a.option_strings,
            "dest": a.dest,
            "action": type(a).__name__,
            "default": _jsonable(a.default),
            "type": _jsonable(a.type),
            "metavar": a.metavar,
            "nargs": a.nargs,
            "const": a.const,
            "choices": _jsonable(a.choices),
            "required": a.required,
            "help": a.help,
            "group": group_of.get(id(a)),
        }
        for a in parser._actions
    ]


def parsed_defaults() -> dict[str, Any]:
    return {k: _jsonable(v) for k, v in vars(build_parser().parse_args([])).items()}


def flags_document() -> str:
    doc = {"actions": flag_table(), "defaults": parsed_defaults()}
    return json.dumps(doc, indent=2, sort_keys=True) + "\n"


@pytest.mark.skipif(
    sys.version_info[:2] != (3, 11),
    reason="the golden --help text is argparse's formatting on Python 3.11 (the project's)",
)
def test_help_text_is_pinned() -> None:
    assert help_text() == HELP_FILE.read_text(encoding="utf-8")


def test_every_flag_parses_as_pinned() -> None:
    assert flags_document() == FLAGS_FILE.read_text(encoding="utf-8")


def test_the_parser_is_built_the_same_each_time() -> None:
    a, b = build_parser(), build_parser()
    assert a.format_help() == b.format_help()
    assert isinstance(a, argparse.ArgumentParser)


if __name__ == "__main__":
    HELP_FILE.write_text(help_text(), encoding="utf-8")
    FLAGS_FILE.write_text(flags_document(), encoding="utf-8")
