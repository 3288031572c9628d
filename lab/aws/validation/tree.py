"""The flat query parameters of a call as a tree, for the validators to walk.

Role: EC2 writes lists as ``Name.N``, ELB as ``Name.member.N``; :func:`param_tree` splits the
flat keys on ``.`` so the model validator (:mod:`.model`) and the semantic rules
(:mod:`.rules`, :mod:`.existence`) read nested members by name; :func:`scalar` and
:func:`items` read a value and a list's indexed elements.

Neighbours: read by every module of :mod:`lab.aws.validation`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Union

#: Services whose requests are validated (query protocol, botocore model names).
MODEL_SERVICES = ("ec2", "elb", "elbv2")

Tree = dict[str, Union[str, "Tree"]]
"""Flat query parameters split on ``.``: ``{"IpPermissions": {"1": {"IpProtocol": "tcp"}}}``.
A key that is both a value and a prefix keeps its value under ``""``."""


def param_tree(params: Mapping[str, str]) -> Tree:
    """The flat ``params`` as a tree (see :data:`Tree`)."""
    root: Tree = {}
    for key, value in params.items():
        node = root
        parts = key.split(".")
        for part in parts[:-1]:
            child = node.get(part)
            if not isinstance(child, dict):
                child = {} if child is None else {"": child}
                node[part] = child
            node = child
        last = parts[-1]
        existing = node.get(last)
        if isinstance(existing, dict):
            existing[""] = value
        else:
            node[last] = value
    return root


def scalar(value: str | Tree | None) -> str | None:
    if isinstance(value, dict):
        inner = value.get("")
        return inner if isinstance(inner, str) else None
    return value


def list_items(value: str | Tree | None, *, member: str | None) -> list[tuple[int, str | Tree]]:
    """The indexed elements of a list node (``member`` is ELB's ``member`` level, or None)."""
    if not isinstance(value, dict):
        return []
    if member is not None:
        inner = value.get(member)
        if not isinstance(inner, dict):
            return []
        value = inner
    found = [(int(k), v) for k, v in value.items() if k.isdigit()]
    found.sort(key=lambda kv: kv[0])
    return found


#: an integer as the query protocol writes one
INT_RE = re.compile(r"^[+-]?\d+\Z")
