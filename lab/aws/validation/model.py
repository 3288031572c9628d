"""Request validation against botocore's service models (EC2, ELB, ELBv2).

Role: :class:`ModelValidator` knows from a service's model which actions exist, which members
are required, their types, enums, lengths, ranges and patterns, and checks every member a
call sends (nested ones included). EC2 answers the first problem with its own codes
(``MissingParameter``, ``InvalidParameterValue``); ELB and ELBv2 every problem at once as
``ValidationError`` with AWS's validation framework's message.

Design: one validator per service, cached for the process (:func:`model_validator`): the
models are large and read-only. The semantic rules (:mod:`.rules`) use its filter lists and
its error builders (:func:`validation_error`, :func:`invalid_value`).

Neighbours: :mod:`.tree` (the parameters as a tree), :mod:`.validator` (runs it first).
"""

from __future__ import annotations

import functools
import re
import threading
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from lab.aws.exceptions import AwsError, InvalidParameterValue, MissingParameter, ValidationError
from lab.aws.validation.tree import INT_RE, Tree, list_items, scalar

# --- problems ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Problem:
    """One constraint a request breaks, in both naming styles (EC2 wire name, ELB path)."""

    kind: str
    """``missing``, ``type``, ``enum``, ``length``, ``range``, ``pattern``, ``count``."""
    wire: str
    """The parameter as on the wire: ``IpPermissions.1.FromPort``."""
    path: str
    """AWS's validation path: ``listeners.1.member.instancePort``."""
    value: str | None
    constraint: str
    """What the member must be, in AWS's validation wording (``Member must not be null``)."""


def _coral_message(problems: list[Problem]) -> str:
    shown = problems[:10]
    noun = "error" if len(problems) == 1 else "errors"
    parts = []
    for p in shown:
        value = "null" if p.value is None else f"'{p.value}'"
        parts.append(f"Value {value} at '{p.path}' failed to satisfy constraint: {p.constraint}")
    return f"{len(problems)} validation {noun} detected: " + "; ".join(parts)


def _ec2_error(problem: Problem) -> AwsError:
    if problem.kind == "missing":
        return MissingParameter(
            f"The request must contain the parameter {problem.wire}", source="validation:model"
        )
    return InvalidParameterValue(
        f"Value ({problem.value}) for parameter {problem.wire} is invalid. {problem.constraint}",
        source="validation:model",
    )


def validation_error(message: str, rule: str) -> AwsError:
    """ELB/ELBv2's ``ValidationError`` (400)."""
    return ValidationError(message, source=f"validation:{rule}")


def invalid_value(message: str, rule: str) -> AwsError:
    """EC2's ``InvalidParameterValue`` (400)."""
    return InvalidParameterValue(message, source=f"validation:{rule}")


# --- the service models ------------------------------------------------------------------------

_BOOLEANS = frozenset({"true", "false"})
_INT_TYPES = frozenset({"integer", "long"})
_FLOAT_TYPES = frozenset({"float", "double"})
# \p{..} classes (Java regex in the models) in Python terms: letters+digits, separators
_UNICODE_CLASS = re.compile(r"\[((?:\\p\{[LZN]\})+)([^\]]*)\]")


def _python_pattern(pattern: str) -> re.Pattern[str]:
    """A model pattern compiled for Python (``[\\p{L}\\p{Z}\\p{N}_.]`` has no direct form)."""

    def replace(match: re.Match[str]) -> str:
        classes = match.group(1)
        rest = match.group(2)
        options = []
        if "\\p{L}" in classes or "\\p{N}" in classes:
            options.append(r"[^\W_]")
        extra = rest
        if "\\p{Z}" in classes:
            extra = " \u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000" + extra
        if extra:
            options.append(f"[{extra}]")
        return "(?:" + "|".join(options) + ")"

    return re.compile(_UNICODE_CLASS.sub(replace, pattern))


@dataclass(frozen=True)
class _Member:
    name: str
    wire: str
    shape: Any
    required: bool


class ModelValidator:
    """Checks query parameters against one botocore service model (thread-safe, cached)."""

    def __init__(self, service: str) -> None:
        import botocore.session

        self.service = service
        self.model: Any = botocore.session.get_session().get_service_model(service)
        self.ec2 = self.model.protocol == "ec2"
        self.operations = frozenset(self.model.operation_names)
        self._members: dict[str, list[_Member]] = {}
        self._patterns: dict[str, re.Pattern[str]] = {}
        self._lock = threading.Lock()
        self._filters: dict[str, frozenset[str] | None] = {}

    def input_shape(self, action: str) -> Any:
        return self.model.operation_model(action).input_shape

    def members(self, shape: Any) -> list[_Member]:
        cached = self._members.get(shape.name)
        if cached is not None:
            return cached
        required = set(shape.required_members)
        out = []
        for name, member in shape.members.items():
            out.append(_Member(name, self._wire_name(name, member), member, name in required))
        with self._lock:
            self._members[shape.name] = out
        return out

    def _wire_name(self, name: str, member: Any) -> str:
        serialization = member.serialization
        if self.ec2:
            if "queryName" in serialization:
                return str(serialization["queryName"])
            if "name" in serialization:
                text = str(serialization["name"])
                return text[0].upper() + text[1:]
            return name
        return str(serialization.get("name", name))

    def problems(self, action: str, tree: Tree) -> list[Problem]:
        """Every constraint ``tree`` (the call's parameters) breaks, in model order."""
        shape = self.input_shape(action)
        out: list[Problem] = []
        if shape is not None:
            self._structure(shape, tree, "", "", out)
        return out

    # walkers: wire = EC2-style parameter name, path = AWS validation path

    def _structure(
        self, shape: Any, node: str | Tree, wire: str, path: str, out: list[Problem]
    ) -> None:
        if not isinstance(node, dict):
            node = {}
        for member in self.members(shape):
            child = node.get(member.wire)
            m_wire = f"{wire}.{member.wire}" if wire else member.wire
            m_path = f"{path}.{_camel(member.name)}" if path else _camel(member.name)
            if child is None:
                if member.required:
                    out.append(Problem("missing", m_wire, m_path, None, "Member must not be null"))
                continue
            self._value(member.shape, child, m_wire, m_path, out)

    def _value(
        self, shape: Any, node: str | Tree, wire: str, path: str, out: list[Problem]
    ) -> None:
        kind = shape.type_name
        if kind == "structure":
            self._structure(shape, node, wire, path, out)
            return
        if kind == "list":
            self._list(shape, node, wire, path, out)
            return
        if kind == "map":
            return  # no map parameter in the calls a controller makes; not checked
        value = scalar(node)
        if value is None:
            return
        self._scalar_value(shape, value, wire, path, out)

    def _list(self, shape: Any, node: str | Tree, wire: str, path: str, out: list[Problem]) -> None:
        if self.ec2 or shape.serialization.get("flattened"):
            items = list_items(node, member=None)
            member_level = ""
        else:
            member_name = str(shape.member.serialization.get("name", "member"))
            items = list_items(node, member=member_name)
            member_level = f".{member_name}"
        meta = shape.metadata
        if "min" in meta and len(items) < meta["min"] and items:
            count = Problem(
                "count",
                wire,
                path,
                str(len(items)),
                f"Member must have length greater than or equal to {meta['min']}",
            )
            out.append(count)
        if "max" in meta and len(items) > meta["max"]:
            count = Problem(
                "count",
                wire,
                path,
                str(len(items)),
                f"Member must have length less than or equal to {meta['max']}",
            )
            out.append(count)
        for position, (index, item) in enumerate(items, 1):
            self._value(
                shape.member,
                item,
                f"{wire}.{index}" if self.ec2 else f"{wire}{member_level}.{index}",
                f"{path}.{position}.member",
                out,
            )

    def _scalar_value(
        self, shape: Any, value: str, wire: str, path: str, out: list[Problem]
    ) -> None:
        kind = shape.type_name
        meta = shape.metadata
        if kind in _INT_TYPES:
            if not INT_RE.match(value):
                out.append(Problem("type", wire, path, value, "Member must be an integer"))
                return
            number = int(value)
            if "min" in meta and number < meta["min"]:
                limit = f"Member must have value greater than or equal to {meta['min']}"
                out.append(Problem("range", wire, path, value, limit))
            if "max" in meta and number > meta["max"]:
                limit = f"Member must have value less than or equal to {meta['max']}"
                out.append(Problem("range", wire, path, value, limit))
            return
        if kind in _FLOAT_TYPES:
            try:
                float(value)
            except ValueError:
                out.append(Problem("type", wire, path, value, "Member must be a number"))
            return
        if kind == "boolean":
            if value.lower() not in _BOOLEANS:
                out.append(Problem("type", wire, path, value, "Member must be true or false"))
            return
        if kind == "timestamp":
            if not _is_timestamp(value):
                constraint = "Member must be a timestamp (ISO 8601 or epoch seconds)"
                out.append(Problem("type", wire, path, value, constraint))
            return
        if kind != "string":
            return
        enum = meta.get("enum")
        if enum and value not in enum:
            shown = ", ".join(enum[:20]) + (", ..." if len(enum) > 20 else "")
            constraint = f"Member must satisfy enum value set: [{shown}]"
            out.append(Problem("enum", wire, path, value, constraint))
            return
        if "min" in meta and len(value) < meta["min"]:
            limit = f"Member must have length greater than or equal to {meta['min']}"
            out.append(Problem("length", wire, path, value, limit))
        if "max" in meta and len(value) > meta["max"]:
            limit = f"Member must have length less than or equal to {meta['max']}"
            out.append(Problem("length", wire, path, value, limit))
        pattern = meta.get("pattern")
        if pattern and not self._pattern(pattern).search(value):
            constraint = f"Member must satisfy regular expression pattern: {pattern}"
            out.append(Problem("pattern", wire, path, value, constraint))

    def _pattern(self, pattern: str) -> re.Pattern[str]:
        compiled = self._patterns.get(pattern)
        if compiled is None:
            compiled = self._patterns[pattern] = _python_pattern(pattern)
        return compiled

    def error(self, problems: list[Problem]) -> AwsError:
        """The AWS error for ``problems`` in this service's style."""
        if self.ec2:
            return _ec2_error(problems[0])
        return validation_error(_coral_message(problems), "model")

    def filter_names(self, action: str) -> frozenset[str] | None:
        """The ``Filter.N.Name`` values the model documents for ``action`` (None: not listed)."""
        if action in self._filters:
            return self._filters[action]
        shape = self.input_shape(action)
        names: frozenset[str] | None = None
        member = shape.members.get("Filters") if shape is not None else None
        if member is not None:
            found = re.findall(r"<li>\s*<p>\s*<code>([^<]+)</code>", member.documentation or "")
            names = frozenset(name.strip() for name in found if name.strip()) or None
        with self._lock:
            self._filters[action] = names
        return names


def _camel(name: str) -> str:
    return name[:1].lower() + name[1:]


def _is_timestamp(value: str) -> bool:
    try:
        float(value)
        return True
    except ValueError:
        pass
    try:
        datetime.fromisoformat(value.replace("Z", "+00:00"))
        return True
    except ValueError:
        return False


@functools.cache
def model_validator(service: str) -> ModelValidator:
    """The (process-wide, cached) validator of one service's model."""
    return ModelValidator(service)
