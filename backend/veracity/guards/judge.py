"""L2 grounding judge: is a claim supported by its cited sources, and by which sentences?

``LexicalJudge`` is offline and deterministic. It splits the claim into clauses, covers each clause's content
terms with a few source sentences (greedy set cover, rarer terms first), then checks numbers, multi-word names and
negation. Each clause is supported, partial or unsupported; the claim is supported when every clause is,
unsupported when none is, and partial otherwise (how WiCE defines a partially supported claim).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Literal, Protocol

from veracity.text import STOPWORDS, sentence_spans

Label = Literal["supported", "partial", "unsupported"]

# Coverage is the share of a clause's content words found in its covering sentences, cut into thirds. Faithful
# prose rewords freely (synonyms, light verbs, reordered dates), so a supported clause needs two words in three
# found, not all of them ...
SUPPORTED_COVERAGE = 2 / 3
# ... and with fewer than one in three the sources share the topic, not the fact.
UNSUPPORTED_COVERAGE = 1 / 3
# A further covering sentence must add about one in seven of the clause's words; less is coincidental overlap.
MIN_SENTENCE_GAIN = 0.15
# Evidence stays small: a single fact rarely needs more than three sentences.
MAX_SENTENCES_PER_CLAUSE = 3
# A clause needs two content words (a predicate and an argument) to be a checkable fact; shorter pieces stay with
# a neighbour. It is also the fewest shared words for a sentence to count as stating the same fact.
MIN_CLAUSE_TERMS = 2
# A negation word scopes over the next few words only ("not available", "never won an award").
NEGATION_WINDOW = 3
# A name counts as present when more than this share of its words occur together in one source sentence
# (tolerates a dropped middle name, not a different person with the same first name).
ENTITY_MIN_MATCH = 0.5
# Stems sharing this long a prefix, one (nearly) a prefix of the other, are one word ("direct"/"director").
SOFT_PREFIX_MIN = 5


@dataclass(frozen=True)
class Source:
    id: str
    text: str


@dataclass(frozen=True)
class Span:
    source_id: str
    start: int  # char offset into that Source.text
    end: int


@dataclass(frozen=True)
class Judgement:
    label: Label
    score: float  # 0..1, higher = better supported
    evidence: list[Span]  # the supporting source sentences: the smallest set found that covers the claim
    reason: str  # one short human sentence: why this label


class GroundingJudge(Protocol):
    name: str

    async def judge(self, claim: str, sources: list[Source]) -> Judgement: ...


# ---------------------------------------------------------------------------------------------------------------
# Tokens

_CONTENT, _NUMBER, _NEGATION, _STOP = 0, 1, 2, 3

_THOUSANDS_RE = re.compile(r"(?<=\d),(?=\d{3}(?!\d))")
_TOKEN_RE = re.compile(r"\d+(?:\.\d+)?(?:st|nd|rd|th)?(?![^\W_])|\d+(?:\.\d+)?|[^\W\d_]+(?:['’][^\W\d_]+)*|%")
_ORDINAL_RE = re.compile(r"(\d+)(?:st|nd|rd|th)$")
_NUMERIC_RE = re.compile(r"\d+(?:\.\d+)?$")
_NEGATIONS = frozenset("not no never none nobody nothing neither nor without cannot".split())
_NUMBER_WORDS = {
    w: str(i)
    for i, w in enumerate(
        "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
        "seventeen eighteen nineteen twenty".split()
    )
    if i >= 2  # "one" is far more often a pronoun than a count
} | {w: str(10 * i) for i, w in enumerate("thirty forty fifty sixty seventy eighty ninety".split(), start=3)}
# Function words missing from the shared STOPWORDS, and discourse or hedge words that carry no checkable fact.
_FILLER = frozenset(
    """within among amongst across toward towards upon via onto throughout despite per whose yet since already still
    even though although just ever well must shall might however thus therefore moreover furthermore meanwhile
    additionally subsequently later currently eventually whereas according respectively including particularly
    especially approximately several various""".split()
)
_MONTHS = {
    "jan": "january",
    "feb": "february",
    "mar": "march",
    "apr": "april",
    "jun": "june",
    "jul": "july",
    "aug": "august",
    "sep": "september",
    "sept": "september",
    "oct": "october",
    "nov": "november",
    "dec": "december",
}


def stem(word: str) -> str:
    """A deliberately tiny suffix stripper (plural, -ed, -ing, -ly, final e) so inflections of a word meet."""
    if len(word) <= 3 or not word.isalpha():
        return word
    if word.endswith("sses"):
        word = word[:-2]
    elif word.endswith("ies") and len(word) > 4:
        word = word[:-3] + "y"
    elif word.endswith("s") and not word.endswith(("ss", "us", "is")):
        word = word[:-1]
    for suffix, min_len in (("ing", 6), ("ed", 5)):
        if word.endswith(suffix) and len(word) >= min_len:
            word = word[: -len(suffix)]
            if len(word) > 3 and word[-1] == word[-2] and word[-1] not in "lsz":
                word = word[:-1]
            break
    if word.endswith("ly") and len(word) > 5:
        word = word[:-2]
    if word.endswith("e") and len(word) > 4:
        word = word[:-1]
    return word


@lru_cache(maxsize=65536)
def _normalise(raw: str) -> tuple[str, int]:
    """(key, kind) of one raw token; numbers keep their value, words are stemmed."""
    if raw == "may":  # the modal verb; "May" is the month
        return "", _STOP
    word = raw.lower().replace("’", "'")
    if word in _NEGATIONS or word.endswith("n't"):
        return "", _NEGATION
    if word == "%":
        return "percent", _CONTENT
    ordinal = _ORDINAL_RE.match(word)
    if ordinal:
        word = ordinal.group(1)
    if _NUMERIC_RE.match(word):
        if "." in word:
            word = word.rstrip("0").rstrip(".")
        return word.lstrip("0") or "0", _NUMBER
    if word in _NUMBER_WORDS:
        return _NUMBER_WORDS[word], _NUMBER
    if word.endswith("'s"):
        word = word[:-2]
    word = word.rstrip("'")
    if word in STOPWORDS or word in _FILLER or len(word) < 2:
        return "", _STOP
    return stem(_MONTHS.get(word, word)), _CONTENT


def _tokens(text: str) -> list[tuple[str, int]]:
    return [_normalise(m.group()) for m in _TOKEN_RE.finditer(_THOUSANDS_RE.sub("", text))]


@dataclass(frozen=True)
class _Number:
    value: str
    raw: str
    year: bool
    unit: str  # key of the word right after the number ("day" in "14 days"), "" when none


def _numbers(tokens: list[tuple[str, int]], raws: list[str] | None = None) -> list[_Number]:
    found: list[_Number] = []
    for i, (key, kind) in enumerate(tokens):
        if kind != _NUMBER:
            continue
        unit = tokens[i + 1][0] if i + 1 < len(tokens) and tokens[i + 1][1] == _CONTENT else ""
        year = key.isdigit() and len(key) == 4 and 1000 <= int(key) <= 2100
        found.append(_Number(key, raws[i] if raws else key, year, unit))
    return found


def _negated(tokens: list[tuple[str, int]], targets: set[str]) -> bool:
    """Whether a negation word scopes over one of ``targets`` within the next few tokens."""
    for i, (_, kind) in enumerate(tokens):
        if kind == _NEGATION and any(key in targets for key, _ in tokens[i + 1 : i + 1 + NEGATION_WINDOW]):
            return True
    return False


# ---------------------------------------------------------------------------------------------------------------
# Sources


@dataclass(frozen=True)
class _Sentence:
    source_id: str
    start: int
    end: int
    text: str
    tokens: list[tuple[str, int]]
    keys: frozenset[str]
    numbers: list[_Number]


@lru_cache(maxsize=2048)
def _split_source(text: str) -> list[tuple[int, int, list[tuple[str, int]]]]:
    return [(s, e, _tokens(text[s:e])) for s, e in sentence_spans(text)]


def _sentences(sources: list[Source]) -> list[_Sentence]:
    out: list[_Sentence] = []
    for source in sources:
        for start, end, tokens in _split_source(source.text):
            keys = frozenset(k for k, kind in tokens if kind in (_CONTENT, _NUMBER))
            if keys:
                out.append(_Sentence(source.id, start, end, source.text[start:end], tokens, keys, _numbers(tokens)))
    return out


# ---------------------------------------------------------------------------------------------------------------
# Claims

_PAREN_RE = re.compile(r"\(([^()]*)\)")
# Clause boundaries: semicolons and coordinating or relative connectors. A piece with fewer than MIN_CLAUSE_TERMS
# content words is a list item rather than a clause and stays with its neighbour ("in Tokyo and Berlin").
_BREAK_RE = re.compile(
    r"\s*;\s*|,\s+(?:and|but|or|yet|while|whereas|which|who|whom|whose|where|although|though)\s+"
    r"|\s+(?:and|but|while|whereas)\s+",
    re.IGNORECASE,
)
_NAME_JOINERS = frozenset("of the de da di del der den von van la le du".split())


@dataclass
class _Clause:
    text: str
    tokens: list[tuple[str, int]]
    terms: list[str]
    numbers: list[_Number]
    entities: list[tuple[str, list[str]]]


def _word_count(text: str) -> int:
    return len({k for k, kind in _tokens(text) if kind == _CONTENT})


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
        if merged and _word_count(text[merged[-1][0] : merged[-1][1]]) < MIN_CLAUSE_TERMS:
            merged[-1] = (merged[-1][0], piece[1])
        elif merged and _word_count(text[piece[0] : piece[1]]) < MIN_CLAUSE_TERMS:
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
        if _word_count(inner) < MIN_CLAUSE_TERMS:
            return match.group(0)
        asides.extend(_merge_small(inner, [m.span() for m in re.finditer(r"\s*;\s*", inner)]))
        return " "

    return re.sub(r"\s+", " ", _PAREN_RE.sub(lift, sentence)).strip(), asides


def _clause_texts(claim: str) -> list[tuple[str, bool]]:
    """(clause, starts_sentence) pairs; parentheticals with a fact of their own become clauses."""
    out: list[tuple[str, bool]] = []
    for s, e in sentence_spans(claim):
        main, asides = _lift_asides(claim[s:e])
        pieces = _merge_small(main, [m.span() for m in _BREAK_RE.finditer(main)])
        out.extend((piece, i == 0) for i, piece in enumerate(pieces))
        out.extend((aside, False) for aside in asides)
    return out


def _entities(text: str, starts_sentence: bool) -> list[tuple[str, list[str]]]:
    """Multi-word capitalised names (joined by "of", "de", ...); a sentence-initial word only when a name follows."""
    matches = list(_TOKEN_RE.finditer(text))
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
            keys = [key for key, kind in (_normalise(m.group()) for m in capitalised) if kind == _CONTENT]
            if len(keys) >= 2:
                name = text[capitalised[0].start() : capitalised[-1].end()]
                out.append((re.sub(r"['’]s$", "", name), keys))
        i = parts[-1] + 1
    return out


def _clauses(claim: str) -> list[_Clause]:
    clauses: list[_Clause] = []
    for text, starts_sentence in _clause_texts(claim):
        flat = _THOUSANDS_RE.sub("", text)
        raws = [m.group() for m in _TOKEN_RE.finditer(flat)]
        tokens = [_normalise(raw) for raw in raws]
        terms = list(dict.fromkeys(k for k, kind in tokens if kind in (_CONTENT, _NUMBER)))
        if terms:
            clauses.append(_Clause(text, tokens, terms, _numbers(tokens, raws), _entities(text, starts_sentence)))
    return clauses


# ---------------------------------------------------------------------------------------------------------------
# Judging


@dataclass
class _ClauseResult:
    label: Label
    coverage: float
    weight: float
    cover: list[int]
    reason: str
    context: int | None = None  # the sentence a contradiction was found in
    contradiction: bool = False
    gaps: list[str] = field(default_factory=list)


def _total(weight: dict[str, float], terms: set[str] | frozenset[str]) -> float:
    # Rounded so that set iteration order (it varies with the hash seed) cannot break ties differently.
    return round(sum(weight[t] for t in terms), 9)


def _context(covers: list[frozenset[str]], words: set[str], weight: dict[str, float]) -> int | None:
    """The sentence that would support ``words`` on its own (most of them, at least two), if there is one."""
    best, best_key = None, (0, 0.0)
    for i, cover in enumerate(covers):
        hit = cover & words
        key = (len(hit), _total(weight, hit))
        if hit and key > best_key:
            best, best_key = i, key
    if best is None or best_key[0] < MIN_CLAUSE_TERMS or best_key[0] < SUPPORTED_COVERAGE * len(words):
        return None
    return best


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


def _pct(x: float) -> str:
    return f"{round(100 * x)}%"


def _scarce(x: float, whose: str) -> str:
    share = f"only {_pct(x)}" if x > 0 else "none"
    return f"{share} of {whose} content words are found in the sources"


def _snippet(text: str, limit: int = 60) -> str:
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


class LexicalJudge:
    """Offline, deterministic, no model."""

    name = "lexical"

    async def judge(self, claim: str, sources: list[Source]) -> Judgement:
        return self.judge_sync(claim, sources)

    def judge_sync(self, claim: str, sources: list[Source]) -> Judgement:
        clauses = _clauses(claim)
        if not clauses:
            return Judgement("unsupported", 0.0, [], "the claim has no content words to check")
        sentences = _sentences(sources)
        if not sentences:
            return Judgement("unsupported", 0.0, [], "there is no source text to check the claim against")

        # Which claim terms each sentence covers; numbers must match exactly, words may also match softly.
        claim_terms = list(dict.fromkeys(t for c in clauses for t in c.terms))
        by_prefix: dict[str, list[str]] = {}
        vocab = sorted(set().union(*(s.keys for s in sentences)))
        for word in vocab:
            if not _NUMERIC_RE.match(word) and len(word) >= SOFT_PREFIX_MIN:
                by_prefix.setdefault(word[:SOFT_PREFIX_MIN], []).append(word)
        matches: dict[str, set[str]] = {}
        for term in claim_terms:
            matches.setdefault(term, set()).add(term)
            if not _NUMERIC_RE.match(term) and len(term) >= SOFT_PREFIX_MIN:
                for word in by_prefix.get(term[:SOFT_PREFIX_MIN], []):
                    if _soft_match(term, word):
                        matches.setdefault(word, set()).add(term)
        covers = [frozenset(t for k in s.keys if k in matches for t in matches[k]) for s in sentences]

        # Rarity over the source sentences: a term every sentence shares (the page's subject) says little.
        n = len(sentences)
        df = dict.fromkeys(claim_terms, 0)
        for cover in covers:
            for term in cover:
                df[term] += 1
        weight = {t: 1.0 + math.log((n + 1) / (df[t] + 1)) for t in claim_terms}

        results = [self._judge_clause(c, sentences, covers, weight, df, matches) for c in clauses]
        return self._combine(clauses, results, sentences)

    def _judge_clause(
        self,
        clause: _Clause,
        sentences: list[_Sentence],
        covers: list[frozenset[str]],
        weight: dict[str, float],
        df: dict[str, int],
        matches: dict[str, set[str]],
    ) -> _ClauseResult:
        # Rarity decides which sentence is the better evidence; the coverage figures count content words plainly so
        # that "73% of the content words" means what it says.
        terms = set(clause.terms)
        covered: set[str] = set()
        chosen: list[int] = []
        for _ in range(MAX_SENTENCES_PER_CLAUSE):
            best, best_gain = -1, 0.0
            for i, cover in enumerate(covers):
                new = (cover & terms) - covered
                gain = _total(weight, new)
                if gain > best_gain:
                    best, best_gain = i, gain
            if best < 0 or len((covers[best] & terms) - covered) < MIN_SENTENCE_GAIN * len(terms):
                break
            chosen.append(best)
            covered |= covers[best] & terms
        coverage = len(covered) / len(terms)
        result = _ClauseResult("partial", coverage, float(len(terms)), chosen, "")

        # Only a sentence that would support the clause's other words states the same fact, so only there is a
        # different number, a different name or a flipped negation a contradiction rather than another fact.
        words = {t for t in terms if not _NUMERIC_RE.match(t)}
        context = _context(covers, words, weight)
        if context is not None:
            sentence = sentences[context]
            claimed = {number.value for number in clause.numbers}
            for number in clause.numbers:
                if number.value in sentence.keys:
                    continue
                rival = next((o for o in sentence.numbers if self._rivals(number, o, claimed)), None)
                if rival is not None:
                    result.reason = f"the matching source sentence says {rival.value} where the claim says {number.raw}"
                    return self._contradicted(result, context)
            targets = {k for k in sentence.keys if matches.get(k, set()) & terms}
            claim_neg = _negated(clause.tokens, terms)
            if claim_neg != _negated(sentence.tokens, targets):
                result.reason = (
                    "the claim is negated but the matching source sentence is not"
                    if claim_neg
                    else "the matching source sentence negates what the claim asserts"
                )
                return self._contradicted(result, context)

        missing_names = [
            (text, keys)
            for text, keys in clause.entities
            if max(len(set(keys) & s.keys) for s in sentences) / len(keys) <= ENTITY_MIN_MATCH
        ]
        for text, keys in missing_names:
            context = _context(covers, words - set(keys), weight)
            if context is None:
                continue
            rival_name = next(
                (name for name, name_keys in _entities(sentences[context].text, True) if not set(name_keys) & terms),
                None,
            )
            if rival_name is not None:
                result.reason = f"the matching source sentence names {rival_name} where the claim says {text}"
                return self._contradicted(result, context)

        for number in clause.numbers:
            if df.get(number.value, 0) == 0:
                result.gaps.append(f"number {number.raw} is not found in the sources")
        for text, _ in missing_names:
            result.gaps.append(f"the name “{text}” is not found in the sources")

        if coverage < UNSUPPORTED_COVERAGE:
            result.label = "unsupported"
            result.reason = _scarce(coverage, "its")
        elif result.gaps:
            result.reason = result.gaps[0]
        elif coverage < SUPPORTED_COVERAGE:
            result.reason = f"{_pct(coverage)} of its content words are covered"
        else:
            result.label = "supported"
            result.reason = f"{_pct(coverage)} of its content words are covered"
        return result

    @staticmethod
    def _contradicted(result: _ClauseResult, context: int) -> _ClauseResult:
        result.label, result.contradiction, result.context = "unsupported", True, context
        return result

    @staticmethod
    def _rivals(number: _Number, other: _Number, claimed: set[str]) -> bool:
        """A number the claim never mentions, of the same kind: another year, or another count of the same unit."""
        if other.value in claimed:
            return False
        if number.year or other.year:
            return number.year and other.year
        return bool(number.unit) and number.unit == other.unit

    @staticmethod
    def _combine(clauses: list[_Clause], results: list[_ClauseResult], sentences: list[_Sentence]) -> Judgement:
        total = sum(r.weight for r in results)
        score = sum(r.weight * (0.0 if r.contradiction else r.coverage) for r in results) / total
        labels = {r.label for r in results}
        if labels == {"supported"}:
            label: Label = "supported"
        elif labels == {"unsupported"}:
            label = "unsupported"
        else:
            label = "partial"

        if label == "unsupported":
            cited = sorted({r.context for r in results if r.context is not None})
        else:
            cited = sorted({i for r in results if r.label != "unsupported" for i in r.cover})
        evidence = [Span(sentences[i].source_id, sentences[i].start, sentences[i].end) for i in cited]

        if label == "supported":
            reason = (
                f"{_pct(score)} of the claim's content words are covered by {len(evidence)} source "
                f"sentence{'s' if len(evidence) != 1 else ''}"
            )
        elif label == "unsupported":
            hard = next((r for r in results if r.contradiction), None)
            reason = hard.reason if hard else _scarce(score, "the claim's")
        elif len(results) == 1:
            reason = results[0].reason.replace("its content words", "the claim's content words")
        else:
            k = next(i for i, r in enumerate(results) if r.label != "supported")
            ok = sum(r.label == "supported" for r in results)
            reason = f"{ok} of {len(results)} parts supported; “{_snippet(clauses[k].text)}”: {results[k].reason}"
        return Judgement(label, round(score, 4), evidence, reason)


def make_judge(embedder: object | None = None) -> GroundingJudge:
    """The grounding judge to use. ``embedder`` is a hook for a future semantic judge and is unused for now."""
    return LexicalJudge()
