"""Where a quote lies in its source: one lookup for the model judge's quotes and for the reviewer's "is this claim
a verbatim quote of its evidence?", so the two never disagree.

A quote is compared word by word (lower case; punctuation, quotation marks, dashes and spacing do not count), cut
at each ellipsis ("...", "…", "[...]") into pieces that must each be found, in order and on word boundaries (a
quote may start mid-sentence, not mid-word). A number keeps its digits: "1.5" is the words "1 5", never "15".
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import lru_cache

from veracity.ports import Source, Span

_WORD = re.compile(r"[^\W_]+(?:['’][^\W_]+)*")
_ELLIPSIS = re.compile(r"\[\s*(?:\.\s*){3,}\]|\[…\]|(?:\.\s*){3,}|…")


def _words(text: str) -> list[re.Match[str]]:
    return list(_WORD.finditer(text))


@lru_cache(maxsize=512)
def _flatten(text: str) -> tuple[str, tuple[int, ...]]:
    """``text``'s words, lower-cased and joined by single spaces (punctuation, quotation marks and dashes dropped),
    and each kept character's offset in ``text`` (a joining space takes the offset of the word before's end)."""
    chars: list[str] = []
    offsets: list[int] = []
    for match in _words(text):
        if chars:
            chars.append(" ")
            offsets.append(offsets[-1] + 1)
        chars.extend(match.group(0).replace("’", "'").lower())
        offsets.extend(range(match.start(), match.end()))
    return "".join(chars), tuple(offsets)


def quote_pieces(quote: str) -> list[str]:
    """A quote as the pieces that must each be found, in order: cut at each ellipsis ("...", "…", "[...]"), each
    piece its words (:func:`_flatten`)."""
    return [flat for piece in _ELLIPSIS.split(quote) if (flat := _flatten(piece)[0])]


def _find_pieces(text: str, pieces: list[str]) -> list[tuple[int, int]] | None:
    flat, offsets = _flatten(text)
    found: list[tuple[int, int]] = []
    at = 0
    for piece in pieces:
        match = re.compile(r"(?<!\S)" + re.escape(piece) + r"(?!\S)").search(flat, at)
        if match is None:
            return None
        found.append((offsets[match.start()], _close(text, offsets[match.start()], offsets[match.end() - 1] + 1)))
        at = match.end()
    return found


def _close(text: str, start: int, end: int) -> int:
    """A span's end taken past what belongs to its last word: a percent sign, a bracket the span opened
    ("Section 90A(1)")."""
    while end < len(text) and (text[end] == "%" or (text[end] in ")]" and _opens(text[start:end], text[end]))):
        end += 1
    return end


def _opens(span: str, closing: str) -> bool:
    opening = "(" if closing == ")" else "["
    return span.count(opening) > span.count(closing)


def locate_all(quote: str, sources: list[Source], source_id: str = "") -> list[Span]:
    """The spans of ``quote`` in one source (the named one first, else any), one per piece (:func:`quote_pieces`);
    empty when some piece is not there."""
    pieces = quote_pieces(quote)
    if not pieces:
        return []
    for source in sorted(sources, key=lambda s: s.id != source_id):  # stable: the named source first
        found = _find_pieces(source.text, pieces)
        if found:
            return [Span(source.id, start, end) for start, end in found]
    return []


def locate(quote: str, sources: list[Source], source_id: str = "") -> Span | None:
    """Where ``quote`` occurs in the named source, else in any source: the span from its first word to its last
    (:func:`locate_all` for the pieces of a quote with an ellipsis)."""
    spans = locate_all(quote, sources, source_id)
    if not spans:
        return None
    return Span(spans[0].source_id, spans[0].start, spans[-1].end)


def is_quote_of(text: str, quotes: Sequence[str]) -> bool:
    """Whether ``text`` is a verbatim span (pieces joined by an ellipsis in order) of one of ``quotes``."""
    return bool(locate_all(text, [Source(str(i), q) for i, q in enumerate(quotes)]))
