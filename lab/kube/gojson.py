"""Go's ``encoding/json`` syntax errors and go-yaml's YAML errors, so a malformed body is refused
in kube-apiserver's words.

Role: Python's decoder reports ``Expecting value: line 1 column 2 (char 1)``; Go's scanner
(``encoding/json/scanner.go``, the one ``json.Unmarshal`` runs before decoding) reports
``invalid character 'x' looking for beginning of value`` or ``unexpected end of JSON input``.
:func:`syntax_error` walks the bytes with the same states and returns Go's text for the first
error (or None for a valid document). It also refuses what Python accepts and Go does not
(``NaN``, ``Infinity``). ``wire.parse`` calls it when a JSON body does not decode, and
:func:`yaml_error` when a YAML one does not (libyaml's wording and ``yaml: line N:``, not
PyYAML's marks and snippets).
"""

from __future__ import annotations

import re
from collections.abc import Callable

_SPACE = b" \t\r\n"
_DIGITS = b"0123456789"
_HEX = b"0123456789abcdefABCDEF"
_ESCAPES = b'bfnrt\\/"'


def quote_char(c: int) -> str:
    """Go's ``quoteChar``: the byte as a rune, in single quotes, ``strconv.Quote``-escaped."""
    if c == ord("'"):
        return "'\\''"
    if c == ord('"'):
        return "'\"'"
    ch = chr(c)
    if ch.isprintable():
        return f"'{ch}'"
    escapes = {"\a": "\\a", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t"}
    escapes["\v"] = "\\v"
    if ch in escapes:
        return f"'{escapes[ch]}'"
    return f"'\\x{c:02x}'" if c < 0x80 else f"'\\u{c:04x}'"


class _Error(Exception):
    pass


class _Scanner:
    """The scanner's states as methods taking one byte and returning the next state."""

    def __init__(self) -> None:
        self.stack: list[str] = []  # "key" (object key expected next), "value", "array"
        self.literal = b""

    def fail(self, c: int, context: str) -> _Error:
        return _Error(f"invalid character {quote_char(c)} {context}")

    def begin_value(self, c: int) -> Callable[[int], object]:
        if c in _SPACE:
            return self.begin_value
        if c == ord("{"):
            self.stack.append("key")
            return self.begin_string_or_empty
        if c == ord("["):
            self.stack.append("array")
            return self.begin_value_or_empty
        if c == ord('"'):
            return self.in_string
        if c == ord("-"):
            return self.neg
        if c == ord("0"):
            return self.zero
        if c in b"123456789":
            return self.one
        for word in (b"true", b"false", b"null"):
            if c == word[0]:
                self.literal = word[1:]
                return self._literal_state(word)
        raise self.fail(c, "looking for beginning of value")

    def _literal_state(self, word: bytes) -> Callable[[int], object]:
        def state(c: int) -> Callable[[int], object]:
            want = self.literal[0]
            if c != want:
                raise self.fail(c, f"in literal {word.decode()} (expecting {quote_char(want)})")
            self.literal = self.literal[1:]
            return state if self.literal else self.end_value

        return state

    def begin_value_or_empty(self, c: int) -> Callable[[int], object]:
        if c in _SPACE:
            return self.begin_value_or_empty
        if c == ord("]"):
            return self.end_value(c)
        return self.begin_value(c)

    def begin_string_or_empty(self, c: int) -> Callable[[int], object]:
        if c in _SPACE:
            return self.begin_string_or_empty
        if c == ord("}"):
            self.stack[-1] = "value"
            return self.end_value(c)
        return self.begin_string(c)

    def begin_string(self, c: int) -> Callable[[int], object]:
        if c in _SPACE:
            return self.begin_string
        if c == ord('"'):
            return self.in_string
        raise self.fail(c, "looking for beginning of object key string")

    def end_value(self, c: int) -> Callable[[int], object]:
        if not self.stack:
            return self.end_top(c)
        if c in _SPACE:
            return self.end_value
        top = self.stack[-1]
        if top == "key":
            if c == ord(":"):
                self.stack[-1] = "value"
                return self.begin_value
            raise self.fail(c, "after object key")
        if top == "value":
            if c == ord(","):
                self.stack[-1] = "key"
                return self.begin_string
            if c == ord("}"):
                self.stack.pop()
                return self.end_value
            raise self.fail(c, "after object key:value pair")
        if c == ord(","):
            return self.begin_value
        if c == ord("]"):
            self.stack.pop()
            return self.end_value
        raise self.fail(c, "after array element")

    def end_top(self, c: int) -> Callable[[int], object]:
        if c not in _SPACE:
            raise self.fail(c, "after top-level value")
        return self.end_top

    def in_string(self, c: int) -> Callable[[int], object]:
        if c == ord('"'):
            return self.end_value
        if c == ord("\\"):
            return self.in_escape
        if c < 0x20:
            raise self.fail(c, "in string literal")
        return self.in_string

    def in_escape(self, c: int) -> Callable[[int], object]:
        if c in _ESCAPES:
            return self.in_string
        if c == ord("u"):
            return self._hex(4)
        raise self.fail(c, "in string escape code")

    def _hex(self, left: int) -> Callable[[int], object]:
        def state(c: int) -> Callable[[int], object]:
            if c not in _HEX:
                raise self.fail(c, "in \\u hexadecimal character escape")
            return self._hex(left - 1) if left > 1 else self.in_string

        return state

    def neg(self, c: int) -> Callable[[int], object]:
        if c == ord("0"):
            return self.zero
        if c in b"123456789":
            return self.one
        raise self.fail(c, "in numeric literal")

    def one(self, c: int) -> Callable[[int], object]:
        return self.one if c in _DIGITS else self.zero(c)

    def zero(self, c: int) -> Callable[[int], object]:
        if c == ord("."):
            return self.dot
        if c in b"eE":
            return self.exp
        return self.end_value(c)

    def dot(self, c: int) -> Callable[[int], object]:
        if c in _DIGITS:
            return self.dot0
        raise self.fail(c, "after decimal point in numeric literal")

    def dot0(self, c: int) -> Callable[[int], object]:
        if c in _DIGITS:
            return self.dot0
        return self.exp if c in b"eE" else self.end_value(c)

    def exp(self, c: int) -> Callable[[int], object]:
        return self.exp_sign if c in b"+-" else self.exp_sign(c)

    def exp_sign(self, c: int) -> Callable[[int], object]:
        if c in _DIGITS:
            return self.exp0
        raise self.fail(c, "in exponent of numeric literal")

    def exp0(self, c: int) -> Callable[[int], object]:
        return self.exp0 if c in _DIGITS else self.end_value(c)


def syntax_error(data: bytes | str) -> str | None:
    """Go's ``checkValid`` over ``data``: its first syntax error's text, or None."""
    raw = data.encode() if isinstance(data, str) else data
    scanner = _Scanner()
    state: Callable[[int], object] = scanner.begin_value
    try:
        for c in raw:
            state = state(c)  # type: ignore[assignment]
        state = state(ord(" "))  # type: ignore[assignment]  # Go's eof(): a number may end here
    except _Error as err:  # from the end too: "tru" is "invalid character ' ' in literal ..."
        return str(err)
    if state != scanner.end_top:
        return "unexpected end of JSON input"
    return None


#: PyYAML's problem texts -> libyaml's (go-yaml is a port of libyaml, PyYAML a rewrite)
_YAML_PROBLEMS: tuple[tuple[str, str], ...] = (
    (r"expected ',' or '\]', but got .*", "did not find expected ',' or ']'"),
    (r"expected ',' or '\}', but got .*", "did not find expected ',' or '}'"),
    (r"expected the node content, but found .*", "did not find expected node content"),
    (
        r"found character .* that cannot start any token",
        "found character that cannot start any token",
    ),
    (r"mapping values are not allowed here", "mapping values are not allowed in this context"),
)


def yaml_error(exc: Exception) -> str:
    """A YAML decoding error as sigs.k8s.io/yaml over go-yaml words it: ``error converting
    YAML to JSON: yaml: line 2: mapping values are not allowed in this context``."""
    problem = str(getattr(exc, "problem", "") or "")
    context = str(getattr(exc, "context", "") or "")
    alias = re.fullmatch(r"found undefined alias '(.*)'", problem)
    if alias:
        return f"error converting YAML to JSON: yaml: unknown anchor '{alias.group(1)}' referenced"
    for pattern, text in _YAML_PROBLEMS:
        if re.fullmatch(pattern, problem):
            problem = text
            break
    else:
        if problem.startswith("expected <block end>"):
            problem = (
                "did not find expected '-' indicator"
                if "collection" in context
                else "did not find expected key"
            )
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    where = f"line {mark.line + 1}: " if mark is not None else ""
    problem = problem or "unknown problem parsing YAML content"
    return f"error converting YAML to JSON: yaml: {where}{problem}"
