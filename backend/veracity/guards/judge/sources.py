"""The sources as the judge reads them: sentences with their tokens (a sentence is cut into clauses as a claim is,
when a negation's scope matters), and which source words meet a claim's terms — exactly for numbers, and for words
also softly, when their stems share a long prefix.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from veracity.guards.judge.clauses import clauses
from veracity.guards.judge.words import CONTENT, NUMBER, NUMERIC_RE, Number, Token, numbers, tokens_of
from veracity.ports import Source, Span
from veracity.text import sentence_spans

# Stems sharing this long a prefix, one (nearly) a prefix of the other, are one word ("direct"/"director").
SOFT_PREFIX_MIN = 5


@dataclass(frozen=True)
class SourceSentence:
    source_id: str
    start: int
    end: int
    text: str
    tokens: list[Token]
    keys: frozenset[str]
    numbers: list[Number]

    @property
    def span(self) -> Span:
        return Span(self.source_id, self.start, self.end)


@lru_cache(maxsize=2048)
def _split_source(text: str) -> list[tuple[int, int, list[Token]]]:
    return [(s, e, tokens_of(text[s:e])) for s, e in sentence_spans(text)]


def matching_part(sentence: SourceSentence, targets: set[str]) -> list[Token]:
    """The tokens of the source sentence's clause that shares most of ``targets``: a sentence is cut into clauses
    as a claim is, so a negation in one clause ("X does not issue a refund; refunds follow Y") does not scope over
    the fact another clause states."""
    parts = [part.tokens for part in clauses(sentence.text)]
    if len(parts) < 2:
        return sentence.tokens
    return max(parts, key=lambda tokens: len({key for key, _ in tokens} & targets))


def source_sentences(sources: list[Source]) -> list[SourceSentence]:
    out: list[SourceSentence] = []
    for source in sources:
        for start, end, tokens in _split_source(source.text):
            keys = frozenset(k for k, kind in tokens if kind in (CONTENT, NUMBER))
            if keys:
                out.append(SourceSentence(source.id, start, end, source.text[start:end], tokens, keys, numbers(tokens)))
    return out


def _soft_match(a: str, b: str) -> bool:
    short, long_ = (a, b) if len(a) <= len(b) else (b, a)
    if len(short) < SOFT_PREFIX_MIN or not long_.startswith(short[:SOFT_PREFIX_MIN]):
        return False
    common = len(short)
    for k in range(SOFT_PREFIX_MIN, len(short)):
        if short[k] != long_[k]:
            common = k
            break
    return common >= len(short) - 1


def term_matches(claim_terms: list[str], sentences: list[SourceSentence]) -> dict[str, set[str]]:
    """Source word → the claim terms it stands for: each term itself, and the words its stem softly matches."""
    by_prefix: dict[str, list[str]] = {}
    for word in sorted(set().union(*(s.keys for s in sentences))):
        if not NUMERIC_RE.match(word) and len(word) >= SOFT_PREFIX_MIN:
            by_prefix.setdefault(word[:SOFT_PREFIX_MIN], []).append(word)
    matches: dict[str, set[str]] = {}
    for term in claim_terms:
        matches.setdefault(term, set()).add(term)
        if not NUMERIC_RE.match(term) and len(term) >= SOFT_PREFIX_MIN:
            for word in by_prefix.get(term[:SOFT_PREFIX_MIN], []):
                if _soft_match(term, word):
                    matches.setdefault(word, set()).add(term)
    return matches
