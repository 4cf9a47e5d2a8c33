"""Java properties files as Apache BookKeeper reads its bk_server.conf (Apache Commons
Configuration over java.util.Properties' syntax).

``key=value``, ``key: value`` or ``key value``; leading whitespace skipped; ``#`` and ``!``
start comment lines; a line ending in an odd number of backslashes continues on the next
(its leading whitespace dropped); ``\\t \\n \\r \\f \\uXXXX`` and ``\\x`` (for x) are
escapes; a value's unescaped commas separate list items (Commons Configuration's list
delimiter), which the directory keys use. Values are not interpolated (``${...}`` stays).

Invariant PR1: a key given twice is refused naming both lines, never silently last-wins.
"""

from __future__ import annotations

import dataclasses

from bookie.config import ConfigError

_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}
_WHITESPACE = " \t\f"

@dataclasses.dataclass(frozen=True)
class Property:
    key: str
    value: str  # unescaped, whitespace-trimmed
    items: tuple[str, ...]  # the value split at unescaped commas (Commons Configuration)
    line: int


def _logical_lines(text: str):
    """(first line number, logical line) without comments and blank lines."""
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        number, line = i + 1, lines[i].lstrip(_WHITESPACE)
        i += 1
        if not line or line[0] in "#!":
            continue
        while _continues(line):
            line = line[:-1]
            if i < len(lines):
                line += lines[i].lstrip(_WHITESPACE)
                i += 1
        yield number, line


def _continues(line: str) -> bool:
    trailing = len(line) - len(line.rstrip("\\"))
    return trailing % 2 == 1


def _unescape(text: str) -> str:
    out, i = [], 0
    while i < len(text):
        char = text[i]
        if char == "\\" and i + 1 < len(text):
            nxt = text[i + 1]
            if nxt == "u" and i + 6 <= len(text):
                out.append(chr(int(text[i + 2:i + 6], 16)))
                i += 6
                continue
            out.append(_ESCAPES.get(nxt, nxt))
            i += 2
            continue
        out.append(char)
        i += 1
    return "".join(out)


def _split_key(line: str) -> tuple[str, str]:
    """(raw key, raw value): the key ends at the first unescaped =, : or whitespace."""
    i = 0
    while i < len(line) and line[i] not in "=:" + _WHITESPACE:
        i += 2 if line[i] == "\\" else 1
    key, rest = line[:i], line[i:].lstrip(_WHITESPACE)
    if rest[:1] in ("=", ":"):
        rest = rest[1:].lstrip(_WHITESPACE)
    return key, rest


def _split_list(raw: str) -> tuple[str, ...]:
    parts, current, i = [], [], 0
    while i < len(raw):
        if raw[i] == "\\" and raw[i + 1:i + 2] == ",":
            current.append(",")  # an escaped comma stays in its item
            i += 2
            continue
        if raw[i] == ",":
            parts.append("".join(current))
            current = []
        else:
            current.append(raw[i])
        i += 1
    parts.append("".join(current))
    return tuple(item for item in (_unescape(p).strip() for p in parts) if item)


def parse_properties(text: str, path: str = "bk_server.conf") -> dict[str, Property]:
    """Every key of a properties text; a key given twice is refused, naming both lines
    (Commons Configuration would make a list of them, which no scalar key can take)."""
    found: dict[str, Property] = {}
    for number, line in _logical_lines(text):
        raw_key, raw_value = _split_key(line)
        key = _unescape(raw_key)
        if key in found:
            raise ConfigError(f"{path}: {key} is given twice (lines {found[key].line} and "
                              f"{number}): give it once")
        found[key] = Property(key, _unescape(raw_value).strip(), _split_list(raw_value), number)
    return found
