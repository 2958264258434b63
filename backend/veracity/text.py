"""Small text utilities shared by search, planning and evidence extraction."""

from __future__ import annotations

import hashlib
import re

WORD_RE = re.compile(r"[^\W_]+(?:['’][^\W_]+)?", re.UNICODE)

STOPWORDS = frozenset(
    """a about above after again against all also am an and any are aren't as at be because been before being
    below between both but by can cannot could did do does doing down during each few for from further had has
    have having he her here hers herself him himself his how i if in into is it its itself let me more most my
    myself no nor not of off on once only or other ought our ours ourselves out over own same she should so some
    such than that the their theirs them themselves then there these they this those through to too under until
    up very was we were what when where which while who whom why will with would you your yours yourself
    yourselves tell explain describe give show list please know want need find much many whats s t
    """.split()
)


def words(text: str) -> list[str]:
    return [w.lower() for w in WORD_RE.findall(text)]


def content_terms(text: str, *, limit: int = 32) -> list[str]:
    """Lower-cased content words in first-seen order, stopwords and duplicates removed."""
    seen: dict[str, None] = {}
    for word in words(text):
        word = word.replace("’", "'")
        if word in STOPWORDS or (len(word) < 2 and not word.isdigit()):
            continue
        seen.setdefault(word, None)
        if len(seen) >= limit:
            break
    return list(seen)


def sha256_hex(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


# A sentence ends at . ! or ? followed by whitespace and an upper-case letter, digit or quote, unless the
# word before the dot is a known abbreviation or a single initial.
_ABBREVIATIONS = frozenset(
    "mr mrs ms dr prof sr jr st vs etc e.g i.e inc ltd co corp no fig approx est jan feb mar apr jun jul aug "
    "sep sept oct nov dec u.s u.k ss sec secs para paras art arts cf al".split()
)
_BOUNDARY_RE = re.compile(r"[.!?][\"'”’)\]]*\s+(?=[\"'“‘(\[]?[A-Z0-9])")


_BLOCK_RE = re.compile(r"\n[ \t]*\n|\n(?=[ \t]*#)")


def sentence_spans(text: str) -> list[tuple[int, int]]:
    """Character spans of the sentences in ``text`` (offsets into ``text``, whitespace trimmed). A blank line
    or a Markdown heading always ends a sentence."""
    spans: list[tuple[int, int]] = []
    start = 0
    for match in _BLOCK_RE.finditer(text):
        spans += [(start + s, start + e) for s, e in _block_spans(text[start : match.start()])]
        start = match.end()
    spans += [(start + s, start + e) for s, e in _block_spans(text[start:])]
    return spans


def _block_spans(text: str) -> list[tuple[int, int]]:
    spans: list[tuple[int, int]] = []
    start = 0
    for match in _BOUNDARY_RE.finditer(text):
        end = match.start() + 1
        before = text[start:end].rstrip(".!?")
        last_word = before.split()[-1].lower() if before.split() else ""
        if last_word in _ABBREVIATIONS or (len(last_word) == 1 and last_word.isalpha()):
            continue
        spans.append((start, match.end()))
        start = match.end()
    spans.append((start, len(text)))
    trimmed: list[tuple[int, int]] = []
    for s, e in spans:
        while s < e and text[s].isspace():
            s += 1
        while e > s and text[e - 1].isspace():
            e -= 1
        if e > s:
            trimmed.append((s, e))
    return trimmed
