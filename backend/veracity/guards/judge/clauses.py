"""A claim as the judge checks it: clauses (one checkable fact each) with their numbers and multi-word names.

A sentence is cut at semicolons and coordinating or relative connectors; a piece with fewer than two content
words (a predicate and an argument) is a list item rather than a clause and stays with its neighbour ("in Tokyo
and Berlin"). A parenthetical that states a fact of its own becomes a clause too.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from veracity.guards.judge.words import CONTENT, NUMBER, Number, Token, content_count, normalise, numbers
from veracity.guards.judge.words import tokenize as tokenize_words
from veracity.text import FACT_TOKEN_RE, STOPWORDS, sentence_spans

MIN_CLAUSE_TERMS = 2
"""Content words a clause needs to be a checkable fact; also the fewest shared words for a source sentence to
count as stating the same fact."""

_PAREN_RE = re.compile(r"\(([^()]*)\)")
_BREAK_RE = re.compile(
    r"\s*;\s*|,\s+(?:and|but|or|yet|while|whereas|which|who|whom|whose|where|although|though)\s+"
    r"|\s+(?:and|but|while|whereas)\s+",
    re.IGNORECASE,
)
_NAME_JOINERS = frozenset("of the de da di del der den von van la le du".split())


@dataclass
class Clause:
    text: str
    tokens: list[Token]
    terms: list[str]  # content words and numbers, in order, once each
    numbers: list[Number]
    entities: list[tuple[str, list[str]]]  # (name as written, its content keys)
    names: list[tuple[str, str]]  # (as written, key) of capitalised words that are not a sentence's first word


def _merge_small(text: str, cuts: list[tuple[int, int]]) -> list[str]:
    """Split ``text`` at ``cuts`` (separator spans) and re-join pieces too small to be a fact on their own."""
    pieces: list[tuple[int, int]] = []
    start = 0
    for s, e in cuts:
        pieces.append((start, s))
        start = e
    pieces.append((start, len(text)))
    merged: list[tuple[int, int]] = []
    for piece in pieces:
        if merged and (
            content_count(text[merged[-1][0] : merged[-1][1]]) < MIN_CLAUSE_TERMS
            or content_count(text[piece[0] : piece[1]]) < MIN_CLAUSE_TERMS
        ):
            merged[-1] = (merged[-1][0], piece[1])
        else:
            merged.append(piece)
    return [text[s:e].strip() for s, e in merged if text[s:e].strip()]


def _lift_asides(sentence: str) -> tuple[str, list[str]]:
    """The sentence without its parentheticals that state a fact of their own, and those parentheticals."""
    asides: list[str] = []

    def lift(match: re.Match[str]) -> str:
        inner = match.group(1)
        # A parenthetical of bare numbers ("(1972–1973)") annotates the phrase before it, so it stays there.
        if content_count(inner) < MIN_CLAUSE_TERMS:
            return match.group(0)
        asides.extend(_merge_small(inner, [m.span() for m in re.finditer(r"\s*;\s*", inner)]))
        return " "

    return re.sub(r"\s+", " ", _PAREN_RE.sub(lift, sentence)).strip(), asides


def clause_texts(claim: str) -> list[tuple[str, bool]]:
    """(clause, starts_sentence) pairs; parentheticals with a fact of their own become clauses."""
    out: list[tuple[str, bool]] = []
    for s, e in sentence_spans(claim):
        main, asides = _lift_asides(claim[s:e])
        pieces = _merge_small(main, [m.span() for m in _BREAK_RE.finditer(main)])
        out.extend((piece, i == 0) for i, piece in enumerate(pieces))
        out.extend((aside, False) for aside in asides)
    return out


def entities(text: str, starts_sentence: bool) -> list[tuple[str, list[str]]]:
    """Multi-word capitalised names (joined by "of", "de", ...); a sentence-initial word only when a name follows."""
    matches = list(FACT_TOKEN_RE.finditer(text))
    out: list[tuple[str, list[str]]] = []
    i = 0
    while i < len(matches):
        if not matches[i].group()[0].isupper():
            i += 1
            continue
        if starts_sentence and i == 0:
            nxt = matches[1] if len(matches) > 1 else None
            first = matches[0].group().lower()
            if (
                first in STOPWORDS
                or nxt is None
                or not nxt.group()[0].isupper()
                or text[matches[0].end() : nxt.start()].strip()
            ):
                i += 1
                continue
        parts = [i]
        j = i + 1
        while j < len(matches):
            gap = text[matches[j - 1].end() : matches[j].start()].strip()
            word = matches[j].group()
            if gap not in ("", ".", "-"):
                break
            if word[0].isupper():
                parts.append(j)
            elif word.lower() not in _NAME_JOINERS:
                break
            j += 1
        capitalised = [matches[k] for k in parts]
        if len(capitalised) >= 2:
            keys = [key for key, kind in (normalise(m.group()) for m in capitalised) if kind == CONTENT]
            if len(keys) >= 2:
                name = text[capitalised[0].start() : capitalised[-1].end()]
                out.append((re.sub(r"['’]s$", "", name), keys))
        i = parts[-1] + 1
    return out


def proper_names(text: str, starts_sentence: bool) -> list[tuple[str, str]]:
    """(as written, key) of capitalised content words, the sentence's first word excepted (capitalised anyway)."""
    out: dict[str, str] = {}
    for i, match in enumerate(FACT_TOKEN_RE.finditer(text)):
        word = match.group()
        if (starts_sentence and i == 0) or not word[0].isupper():
            continue
        key, kind = normalise(word)
        if kind == CONTENT:
            out.setdefault(key, word)
    return [(word, key) for key, word in out.items()]


CALENDAR_WORDS = frozenset(
    "january february march april may june july august september october november december "
    "monday tuesday wednesday thursday friday saturday sunday".split()
)


def slot_rival(text: str, word: str, other: str, taken: set[str]) -> str | None:
    """The capitalised word of ``other`` standing where ``word`` stands in ``text`` — after the same word ("twelve
    stores across Oregon" for "… across Washington") — that ``text`` does not hold (``taken``: its keys); None when
    there is none. A changed one-word name, told apart from an added one: only a name in the same slot is a rival."""
    tokens = [m.group() for m in FACT_TOKEN_RE.finditer(text)]
    befores = {tokens[i - 1].lower() for i in range(1, len(tokens)) if tokens[i] == word}
    others = [m.group() for m in FACT_TOKEN_RE.finditer(other)]
    calendar = word.lower() in CALENDAR_WORDS
    for prev, cand in zip(others, others[1:], strict=False):
        if prev.lower() in befores and cand[0].isupper() and cand != word:
            key, kind = normalise(cand)
            # A month or a weekday stands in for another one, not for a place or a person ("in March" / "in Portland").
            if kind == CONTENT and key not in taken and (cand.lower() in CALENDAR_WORDS) == calendar:
                return cand
    return None


def clauses(claim: str) -> list[Clause]:
    out: list[Clause] = []
    for text, starts_sentence in clause_texts(claim):
        tokens, raws = tokenize_words(text)
        terms = list(dict.fromkeys(k for k, kind in tokens if kind in (CONTENT, NUMBER)))
        if terms:
            out.append(
                Clause(
                    text,
                    tokens,
                    terms,
                    numbers(tokens, raws),
                    entities(text, starts_sentence),
                    proper_names(text, starts_sentence),
                )
            )
    return out
