"""EC2 filter values as AWS reads them: ``*`` (any run), ``?`` (one character), all else literal.

Role: an EC2 ``Filter.N.Value.M`` may carry wildcards, and nothing else is special: AWS's
"List and filter your resources" (EC2 User Guide) says an asterisk matches zero or more
characters, a question mark exactly one, and a backslash escapes either (``\\*``, ``\\?``,
``\\\\`` are the literal characters; a backslash before anything else is a backslash, so
``C:\\Users`` finds itself). moto 5.2.5 turns the value into a regular expression
instead (``.`` and ``(`` become special, ``(unclosed`` is a 500, ``(a+)+b`` backtracks for
seconds while the GIL stalls every server of the process) or into an ``fnmatch`` pattern
(``[...]`` becomes a character class). :func:`matches` is what :mod:`lab.aws.motopatches`
installs in their place.

Design: no backtracking over the pattern, and little work per character of it. First, in C
(two passes of :mod:`re` and :meth:`str.count`, no per-character objects): the pattern's
fixed characters are counted, and a pattern with more of them than the text is refused at
once; a 1 MiB hostile value costs one scan and never reaches Python-level work, so it holds no
server thread and makes no garbage (a million small objects would mean collector pauses that
stall every server of the process). Otherwise the pattern is read into its literal segments
between stars (a run of stars is one token), a pattern no longer than about twice the text:
the first segment is anchored at the start, the last at the end, and each one between is
taken at its leftmost place (for globs the leftmost choice is always as good as any other).
Cost: O(len(pattern)) in C, then O(len(text)²) at worst; the texts are AWS names and values
(at most a few hundred characters).

Neighbours: installed by :mod:`lab.aws.motopatches` (``filter_wildcards``); no other module of
the lab reads filters.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

#: A segment is a tuple of characters, where ``None`` stands for ``?`` (any one character).
Segment = tuple[str | None, ...]

#: an escape: AWS documents three (``\\*``, ``\\?``, ``\\\\``); a backslash before any other
#: character is that backslash (``C:\\Users`` is itself)
_ESCAPE = re.compile(r"\\[*?\\]")
#: the pattern's tokens: an escape, a run of stars, a literal run, a backslash that escapes nothing
_TOKEN = re.compile(r"\\[*?\\]|\*+|[^*\\]+|\\", re.DOTALL)


def fixed_characters(pattern: str) -> int:
    """How many characters of a text the pattern's non-star parts take (``?`` takes one, an
    escape one), counted in C."""
    rest, escapes = _ESCAPE.subn("", pattern)
    return escapes + len(rest) - rest.count("*")


def parse(pattern: str) -> list[Segment]:
    """The segments of a filter value between its (unescaped) stars, in order: one segment
    when it has no star, the first anchored at the start and the last at the end otherwise."""
    pieces: list[list[str | None]] = [[]]
    for token in _TOKEN.findall(pattern):
        if token.startswith("*"):
            pieces.append([])
        elif token.startswith("\\"):
            pieces[-1].append(token[-1])  # the escaped character, or a backslash that is itself
        else:
            pieces[-1].extend(None if char == "?" else char for char in token)
    return [tuple(piece) for piece in pieces]


def _fits(segment: Segment, text: str, at: int) -> bool:
    return all(want is None or want == text[at + i] for i, want in enumerate(segment))


def _find(segment: Segment, text: str, start: int, stop: int) -> int:
    """The leftmost place in ``text[start:stop]`` where ``segment`` fits, or -1."""
    for at in range(start, stop - len(segment) + 1):
        if _fits(segment, text, at):
            return at
    return -1


def matches(pattern: str, text: str) -> bool:
    """Whether ``text`` matches the EC2 filter value ``pattern`` (see the module docstring)."""
    if fixed_characters(pattern) > len(text):
        return False  # more fixed characters than the text has: one pass in C, whatever else
    segments = parse(pattern)
    first, last = segments[0], segments[-1]
    if len(segments) == 1:
        return len(first) == len(text) and _fits(first, text, 0)
    start, stop = len(first), len(text) - len(last)
    if stop < start or not _fits(first, text, 0) or not _fits(last, text, stop):
        return False
    for segment in segments[1:-1]:
        if segment:
            at = _find(segment, text, start, stop)
            if at < 0:
                return False
            start = at + len(segment)
    return True


def matches_any(patterns: Iterable[str], text: str) -> bool:
    """Whether ``text`` matches one of the filter values ``patterns``."""
    return any(matches(pattern, text) for pattern in patterns)
