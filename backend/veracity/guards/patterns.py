"""Policy phrases compiled once: case-insensitive regular expressions matched at word boundaries."""

from __future__ import annotations

import re
from functools import cache


@cache
def _compile(patterns: tuple[str, ...]) -> re.Pattern[str] | None:
    if not patterns:
        return None
    return re.compile("|".join(f"(?<!\\w)(?:{p})(?!\\w)" for p in patterns), re.I)


def compiled(patterns: list[str] | tuple[str, ...]) -> re.Pattern[str] | None:
    return _compile(tuple(patterns))


def first_match(patterns: list[str] | tuple[str, ...], text: str) -> str | None:
    """The matched text of the first pattern found in ``text``, or None."""
    pattern = compiled(patterns)
    if pattern is None:
        return None
    found = pattern.search(text)
    return found.group(0) if found else None


def all_matches(patterns: list[str] | tuple[str, ...], text: str) -> list[str]:
    pattern = compiled(patterns)
    return [] if pattern is None else list(dict.fromkeys(m.group(0) for m in pattern.finditer(text)))
