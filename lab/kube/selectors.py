"""Label and field selectors: parsing (with the API server's error texts) and matching.

Used by the store for list, watch and deletecollection. Label selectors follow
``apimachinery/pkg/labels/selector.go`` (``=``, ``==``, ``!=``, ``in``, ``notin``, exists,
``!key``, ``>``, ``<``); field selectors follow ``pkg/fields/selector.go`` (``=``, ``==``, ``!=``).
Which fields a kind supports lives with its strategy (``strategies.py``), since that is where
the real server defines them too (``apiserver-spec.md`` §5).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from lab.kube.exceptions import ApiError, bad_request

_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?\Z")
_QUALIFIED_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]\Z")
_DNS1123_SUBDOMAIN = re.compile(
    r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
)


def key_problem(key: str) -> str | None:
    """Why ``key`` is not a valid qualified name (label key), or None."""
    prefix, sep, name = key.rpartition("/")
    if sep and (not prefix or len(prefix) > 253 or not _DNS1123_SUBDOMAIN.match(prefix)):
        return "prefix part must be a valid DNS subdomain"
    if not name or len(name) > 63 or not _QUALIFIED_NAME.match(name):
        return (
            "name part must consist of alphanumeric characters, '-', '_' or '.', and must start "
            "and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or "
            "'123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
        )
    return None


def value_problem(value: str) -> str | None:
    if len(value) > 63:
        return "must be no more than 63 characters"
    if not _LABEL_VALUE.match(value):
        return (
            "a valid label must be an empty string or consist of alphanumeric characters, '-', "
            "'_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  "
            "or 'my_value',  or '12345', regex used for validation is "
            "'(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
        )
    return None


@dataclass(frozen=True)
class Requirement:
    key: str
    op: str  # "=", "!=", "in", "notin", "exists", "!", ">", "<"
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        present = self.key in labels
        value = labels.get(self.key, "")
        if self.op in ("=", "in"):
            return present and value in self.values
        if self.op in ("!=", "notin"):
            return not present or value not in self.values
        if self.op == "exists":
            return present
        if self.op == "!":
            return not present
        if not present:
            return False
        try:
            have, want = int(value), int(self.values[0])
        except ValueError:
            return False
        return have > want if self.op == ">" else have < want


_TOKEN = re.compile(r"\s*(!=|==|=|!|\(|\)|,|>|<|[^\s!=(),<>]+)")


def parse_label_selector(text: str) -> tuple[Requirement, ...]:
    """Parse a label selector; a syntax error raises 400 BadRequest."""
    tokens = _selector_tokens(text)
    reqs: list[Requirement] = []
    i = 0
    while i < len(tokens):
        requirement, i = _requirement(tokens, i)
        reqs.append(requirement)
        if i < len(tokens):
            if tokens[i] != ",":
                raise _fail(f"found '{tokens[i]}', expected: ',' or 'end of string'")
            i += 1
    return tuple(reqs)


def _fail(detail: str) -> ApiError:
    return bad_request(f"unable to parse requirement: {detail}")


def _selector_tokens(text: str) -> list[str]:
    """A selector's tokens (identifiers, values, operators, parentheses, commas)."""
    tokens: list[str] = []
    pos = 0
    text_s = text.strip()
    while pos < len(text_s):
        m = _TOKEN.match(text_s, pos)
        if not m:
            raise bad_request(f"unable to parse requirement: found '{text_s[pos:]}'")
        tokens.append(m.group(1))
        pos = m.end()
        while pos < len(text_s) and text_s[pos].isspace():
            pos += 1
    return tokens


def _requirement(tokens: list[str], i: int) -> tuple[Requirement, int]:
    """The requirement starting at ``tokens[i]``, and the index after it."""
    tok = tokens[i]
    if tok == "!":
        if i + 1 >= len(tokens):
            raise _fail("found '', expected: identifier")
        key = tokens[i + 1]
        _check_key(key)
        return Requirement(key, "!"), i + 2
    key = tok
    if key in ("(", ")", ",", "=", "==", "!=", ">", "<"):
        raise _fail(f"found '{key}', expected: !, identifier, or 'end of string'")
    _check_key(key)
    i += 1
    if i >= len(tokens) or tokens[i] == ",":
        return Requirement(key, "exists"), i
    op = tokens[i]
    i += 1
    if op in ("=", "==", "!=", ">", "<"):
        return _compare(tokens, i, key, op)
    if op in ("in", "notin"):
        return _set(tokens, i, key, op)
    raise _fail(f"found '{op}', expected: in, notin, =, ==, !=, gt, lt")


def _compare(tokens: list[str], i: int, key: str, op: str) -> tuple[Requirement, int]:
    """``key op value`` (``=``, ``==``, ``!=``, ``>``, ``<``), the value at ``tokens[i]``."""
    value = ""
    if i < len(tokens) and tokens[i] not in (",", ")", "("):
        value = tokens[i]
        i += 1
    if op in (">", "<"):
        try:
            int(value)
        except ValueError:
            raise _fail("for 'Gt', 'Lt' operators, the value must be an integer") from None
    else:
        problem = value_problem(value)
        if problem:
            raise _fail(f"values[0][{key}]: Invalid value: {json.dumps(value)}: {problem}")
    return Requirement(key, "=" if op == "==" else op, (value,)), i


def _set(tokens: list[str], i: int, key: str, op: str) -> tuple[Requirement, int]:
    """``key in (a, b)`` / ``key notin (a, b)``, the ``(`` at ``tokens[i]``."""
    if i >= len(tokens) or tokens[i] != "(":
        raise _fail(f"found '{tokens[i] if i < len(tokens) else ''}', expected: '('")
    i += 1
    values: list[str] = []
    while i < len(tokens) and tokens[i] != ")":
        if tokens[i] != ",":
            values.append(tokens[i])
        i += 1
    if i >= len(tokens):
        raise _fail("found '', expected: ')'")
    i += 1
    if op == "in" and not values:
        raise _fail("for 'in', 'notin' operators, values set can't be empty")
    return Requirement(key, op, tuple(values)), i


def _check_key(key: str) -> None:
    problem = key_problem(key)
    if problem:
        raise bad_request(f'unable to parse requirement: invalid label key "{key}": {problem}')


def labels_match(reqs: tuple[Requirement, ...], labels: Mapping[str, str] | None) -> bool:
    lbls = labels or {}
    return all(r.matches(lbls) for r in reqs)


@dataclass(frozen=True)
class FieldRequirement:
    field: str
    op: str  # "=" or "!="
    value: str


def parse_field_selector(text: str) -> tuple[FieldRequirement, ...]:
    out: list[FieldRequirement] = []
    for part in _split_unescaped(text):
        part_s = part.strip()
        if not part_s:
            continue
        for op in ("!=", "==", "="):
            idx = part_s.find(op)
            if idx > 0:
                field, value = part_s[:idx], part_s[idx + len(op) :]
                out.append(FieldRequirement(field, "!=" if op == "!=" else "=", _unescape(value)))
                break
        else:
            raise bad_request(f"invalid selector: '{text}'; can't understand '{part_s}'")
    return tuple(out)


def _split_unescaped(text: str) -> list[str]:
    parts, cur, esc = [], [], False
    for ch in text:
        if esc:
            cur.append("\\" + ch)
            esc = False
        elif ch == "\\":
            esc = True
        elif ch == ",":
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    parts.append("".join(cur))
    return parts


def _unescape(value: str) -> str:
    return re.sub(r"\\(.)", r"\1", value)


FieldGetter = Callable[[dict[str, object]], dict[str, str]]


def fields_match(reqs: tuple[FieldRequirement, ...], fields: Mapping[str, str]) -> bool:
    for r in reqs:
        have = fields.get(r.field, "")
        if (have == r.value) != (r.op == "="):
            return False
    return True
