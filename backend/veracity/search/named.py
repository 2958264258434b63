"""Which articles a query names by title: the lookup behind the in-memory search's named-title lift
(``veracity.search.memindex``). A query that names an article ("the film Kiss and Tell", "World War I") asks about
it; its lead passage is what the search brings first.
"""

from __future__ import annotations

import re

from veracity.db.corpus_repo import ChunkHit
from veracity.semantic.relevance import title_name
from veracity.text import STOPWORDS

MAX_NAME_WORDS = 8
MIN_NAME_CHARS = 4
"""A title shorter than this (its qualifier left out) names nothing reliably: "I", "War", "CAR" (as written in
"CAR T-cell therapy")."""
_NAME_TOKEN = re.compile(r"[^\W_]+", re.UNICODE)


def named_titles(hits: list[ChunkHit]) -> dict[tuple[str, ...], list[tuple[str, int]]]:
    """Per title (its ``title_name``, as lower-cased word pieces), each article's lead passage (the chunk at offset 0)
    with the name as written: what a query naming the title asks about. Left out: titles shorter than
    ``MIN_NAME_CHARS``, longer than ``MAX_NAME_WORDS`` pieces, or all digits (a year names no article: "1920")."""
    out: dict[tuple[str, ...], list[tuple[str, int]]] = {}
    for row, hit in enumerate(hits):
        name = title_name(hit.title)
        tokens = tuple(t.lower() for t in _NAME_TOKEN.findall(name))
        if hit.start != 0 or len(name) < MIN_NAME_CHARS or not tokens or len(tokens) > MAX_NAME_WORDS:
            continue
        if all(t.isdigit() for t in tokens):
            continue
        out.setdefault(tokens, []).append((name, row))
    return out


def _as_written_only(name: str) -> bool:
    """A name of one written word ("Australia", "AT&T", "Spider-Man"), or only of small words ("You and Me"), is
    named only as written: in any case it is an ordinary word of the question."""
    return len(name.split()) == 1 or all(w.lower() in STOPWORDS for w in _NAME_TOKEN.findall(name))


def name_starts(named: dict[tuple[str, ...], list[tuple[str, int]]]) -> frozenset[str]:
    """The word pieces a name can begin with: ``named_in`` tries a place only when the query's piece is one."""
    return frozenset(key[0] for key in named)


def named_in(
    query: str, named: dict[tuple[str, ...], list[tuple[str, int]]], starts: frozenset[str] | None = None
) -> list[int]:
    """Rows of the lead passages whose titles the query names, longest name first at each place and left to right
    (greedy: "World War I" is named, not also "World War"; "New York City FC" names "New York City" when that is a
    title, and not "York City FC" after it). A name of several words matches in any case ("electric car" names
    "Electric car"); one of a single written word or only of small words only as written ("Australia" names it,
    "australia" does not; "Python" names "Python (programming language)" and "Python (genus)" alike)."""
    lowered = [t.lower() for t in _NAME_TOKEN.findall(query)]
    starts = name_starts(named) if starts is None else starts
    rows: list[int] = []
    i = 0
    while i < len(lowered):
        if lowered[i] not in starts:
            i += 1
            continue
        for size in range(min(MAX_NAME_WORDS, len(lowered) - i), 0, -1):
            found = [
                (name, row)
                for name, row in named.get(tuple(lowered[i : i + size]), [])
                if not _as_written_only(name) or re.search(rf"(?<!\w){re.escape(name)}(?!\w)", query)
            ]
            if found:
                rows += [row for _, row in found if row not in rows]
                i += size
                break
        else:
            i += 1
    return rows
