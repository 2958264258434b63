"""The lexical reading of a claim against its sources: which source sentences cover each clause's words, and
whether a matching sentence contradicts it (another number, another name, a flipped negation).

``LexicalJudge`` labels from that reading alone: each clause is covered (two words in three found), scarce
(fewer than one in three) or in between, the claim is supported when every clause is, unsupported when none is
(or one is contradicted), and partial otherwise (how WiCE defines a partially supported claim). Its
``analyse`` is also what the learned judge (``veracity.guards.judge.learned``) reads its lexical signals from.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from veracity.guards.judge.clauses import MIN_CLAUSE_TERMS, Clause, clauses, entities, slot_rival
from veracity.guards.judge.sources import SourceSentence, matching_part, source_sentences, term_matches
from veracity.guards.judge.words import Number, negated
from veracity.ports import Judgement, Label, Source

# Coverage is the share of a clause's content words found in its covering sentences, cut into thirds. Faithful
# prose rewords freely (synonyms, light verbs, reordered dates), so a covered clause needs two words in three
# found, not all of them ...
SUPPORTED_COVERAGE = 2 / 3
# ... and with fewer than one in three the sources share the topic, not the fact.
UNSUPPORTED_COVERAGE = 1 / 3
# A further covering sentence must add about one in seven of the clause's words; less is coincidental overlap.
MIN_SENTENCE_GAIN = 0.15
# Evidence stays small: a single fact rarely needs more than three sentences.
MAX_SENTENCES_PER_CLAUSE = 3
# A name counts as present when more than this share of its words occur together in one source sentence
# (tolerates a dropped middle name, not a different person with the same first name).
ENTITY_MIN_MATCH = 0.5
NO_CONTENT = "the claim has no content words to check"
NO_SOURCES = "there is no source text to check the claim against"


@dataclass
class ClauseResult:
    label: Label
    coverage: float
    weight: float
    cover: list[int]  # indices of the covering sentences
    reason: str
    context: int | None = None  # the sentence a contradiction was found in
    contradiction: str = ""  # what contradicts it there: "number", "name", "negation_added" or "negation_dropped"
    context_share: float = 0.0  # the share of the clause's other words (all but the contradicted value) it holds
    stated_elsewhere: bool = False  # another sentence holds every number of the clause and would state the rest
    gaps: list[str] = field(default_factory=list)
    missing_number: bool = False
    missing_name: bool = False


@dataclass
class Analysis:
    """Everything the lexical reading found: per clause, and over the whole claim."""

    claim: str
    clauses: list[Clause]
    sentences: list[SourceSentence]
    results: list[ClauseResult]
    judgement: Judgement
    found: frozenset[str] = frozenset()  # claim terms some source sentence holds

    @property
    def terms(self) -> list[str]:
        return list(dict.fromkeys(t for c in self.clauses for t in c.terms))

    @property
    def absent_names(self) -> list[str]:
        """Capitalised words of the claim (as written) that no source sentence holds."""
        return [word for c in self.clauses for word, key in c.names if key not in self.found]


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


def pct(x: float) -> str:
    return f"{round(100 * x)}%"


def scarce(x: float, whose: str) -> str:
    share = f"only {pct(x)}" if x > 0 else "none"
    return f"{share} of {whose} content words are found in the sources"


def snippet(text: str, limit: int = 60) -> str:
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def _rivals(number: Number, other: Number, claimed: set[str]) -> bool:
    """A number the claim never mentions, of the same kind: another year, another clock time, or another count of
    the same unit — the same unit word after it, or none after either ("$75" / "$50", "12 and 16" / "12 and 14").
    A bare number is no rival of a count of something ("developments of 20" / "34 votes"): the claim may be stating
    another fact of the same sentence."""
    if other.value in claimed:
        return False
    if number.year or other.year:
        return number.year and other.year
    if number.time or other.time:
        return number.time and other.time
    return number.unit == other.unit


class LexicalJudge:
    """Offline, deterministic, no model."""

    name = "lexical"

    async def judge(self, claim: str, sources: list[Source]) -> Judgement:
        return self.judge_sync(claim, sources)

    def judge_sync(self, claim: str, sources: list[Source]) -> Judgement:
        return self.analyse(claim, sources).judgement

    def analyse(self, claim: str, sources: list[Source]) -> Analysis:
        parts = clauses(claim)
        sentences = source_sentences(sources)
        if not parts:
            return Analysis(claim, parts, sentences, [], Judgement("unsupported", 0.0, [], NO_CONTENT))
        if not sentences:
            return Analysis(claim, parts, sentences, [], Judgement("unsupported", 0.0, [], NO_SOURCES))

        # Which claim terms each sentence covers; numbers must match exactly, words may also match softly.
        claim_terms = list(dict.fromkeys(t for c in parts for t in c.terms))
        matches = term_matches(claim_terms, sentences)
        covers = [frozenset(t for k in s.keys if k in matches for t in matches[k]) for s in sentences]

        # Rarity over the source sentences: a term every sentence shares (the page's subject) says little.
        n = len(sentences)
        df = dict.fromkeys(claim_terms, 0)
        for cover in covers:
            for term in cover:
                df[term] += 1
        weight = {t: 1.0 + math.log((n + 1) / (df[t] + 1)) for t in claim_terms}

        results = [_judge_clause(c, sentences, covers, weight, df, matches) for c in parts]
        found = frozenset(t for t in claim_terms if df[t])
        return Analysis(claim, parts, sentences, results, _combine(parts, results, sentences), found)


def _judge_clause(
    clause: Clause,
    sentences: list[SourceSentence],
    covers: list[frozenset[str]],
    weight: dict[str, float],
    df: dict[str, int],
    matches: dict[str, set[str]],
) -> ClauseResult:
    # Rarity decides which sentence is the better evidence; the coverage figures count content words plainly so
    # that "73% of the content words" means what it says.
    terms = set(clause.terms)
    covered: set[str] = set()
    chosen: list[int] = []
    for _ in range(MAX_SENTENCES_PER_CLAUSE):
        best, best_gain = -1, 0.0
        for i, cover in enumerate(covers):
            gain = _total(weight, (cover & terms) - covered)
            if gain > best_gain:
                best, best_gain = i, gain
        if best < 0 or len((covers[best] & terms) - covered) < MIN_SENTENCE_GAIN * len(terms):
            break
        chosen.append(best)
        covered |= covers[best] & terms
    coverage = len(covered) / len(terms)
    result = ClauseResult("partial", coverage, float(len(terms)), chosen, "")
    result.missing_number = any(df.get(number.value, 0) == 0 for number in clause.numbers)
    words = terms - {number.value for number in clause.numbers}
    missing_names = [
        (text, keys)
        for text, keys in clause.entities
        if max(len(set(keys) & s.keys) for s in sentences) / len(keys) <= ENTITY_MIN_MATCH
    ]
    result.missing_name = bool(missing_names)
    for number in clause.numbers:
        if df.get(number.value, 0) == 0:
            result.gaps.append(f"number {number.raw} is not found in the sources")
    for text, _ in missing_names:
        result.gaps.append(f"the name “{text}” is not found in the sources")

    if coverage < UNSUPPORTED_COVERAGE:
        result.label = "unsupported"
        result.reason = scarce(coverage, "its")
    elif result.gaps:
        result.reason = result.gaps[0]
    else:
        result.label = "supported" if coverage >= SUPPORTED_COVERAGE else "partial"
        result.reason = f"{pct(coverage)} of its content words are covered"
    # Every signal above is read whether or not a sentence contradicts the clause: the learned judge weighs a
    # contradiction by how surely its sentence states the same fact, and reads the clause as usual when it does not.
    _contradiction(result, clause, sentences, covers, weight, df, matches, words, missing_names)
    return result


def _contradiction(
    result: ClauseResult,
    clause: Clause,
    sentences: list[SourceSentence],
    covers: list[frozenset[str]],
    weight: dict[str, float],
    df: dict[str, int],
    matches: dict[str, set[str]],
    words: set[str],
    missing_names: list[tuple[str, list[str]]],
) -> None:
    """Mark the clause contradicted (label, kind, sentence, reason) by the first of: another number, a flipped
    negation, another name. Only a sentence that would support the clause's other words states the same fact, so
    only there is a different number, a different name or a flipped negation a contradiction rather than another
    fact."""
    terms = set(clause.terms)
    context = _context(covers, words, weight)
    if context is not None:
        sentence = sentences[context]
        claimed = {number.value for number in clause.numbers}
        for number in clause.numbers:
            if number.value in sentence.keys:
                continue
            rival = next((o for o in sentence.numbers if _rivals(number, o, claimed)), None)
            if rival is not None:
                # Another sentence states the clause's fact with all of its numbers ("52 million in 2021" beside
                # "40 million in 2019"): the first sentence is about another year. One holding only the contradicted
                # number (52 goals, but in 2021 where the claim says 2019) does not excuse it.
                result.stated_elsewhere = any(
                    claimed <= other.keys and _share(covers[i], words) >= SUPPORTED_COVERAGE
                    for i, other in enumerate(sentences)
                    if i != context
                )
                reason = f"the matching source sentence says {rival.value} where the claim says {number.raw}"
                return _contradicted(result, context, "number", _share(covers[context], words), reason)
        targets = {k for k in sentence.keys if matches.get(k, set()) & terms}
        claim_neg = negated(clause.tokens, terms)
        # A flipped negation is a contradiction only in a clause the sentence otherwise states word for word: a
        # paraphrase moves negations about ("were flat" / "did not grow", "had not joined" / "remains outside").
        if words <= covers[context] and claim_neg != negated(matching_part(sentence, targets), targets):
            if claim_neg:
                reason = "the claim is negated but the matching source sentence is not"
                return _contradicted(result, context, "negation_added", 1.0, reason)
            reason = "the matching source sentence negates what the claim asserts"
            return _contradicted(result, context, "negation_dropped", 1.0, reason)

    for text, keys in missing_names:
        context = _context(covers, words - set(keys), weight)
        if context is None:
            continue
        rival_name = next(
            (name for name, name_keys in entities(sentences[context].text, True) if not set(name_keys) & terms),
            None,
        )
        if rival_name is not None:
            reason = f"the matching source sentence names {rival_name} where the claim says {text}"
            return _contradicted(result, context, "name", _share(covers[context], words - set(keys)), reason)

    for word, key in clause.names:
        if df.get(key, 0):
            continue
        context = _context(covers, words - {key}, weight)
        if context is not None and (other := slot_rival(clause.text, word, sentences[context].text, terms)):
            reason = f"the matching source sentence names {other} where the claim says {word}"
            return _contradicted(result, context, "name", _share(covers[context], words - {key}), reason)
    return None


def _contradicted(result: ClauseResult, context: int, kind: str, share: float, reason: str) -> None:
    result.label, result.contradiction, result.context, result.context_share = "unsupported", kind, context, share
    result.reason = reason


def _share(cover: frozenset[str], words: set[str]) -> float:
    """How much of ``words`` a sentence covers: how surely it states the same fact as the clause (``_context``
    asks two in three; a flipped negation counts only where it covers them all)."""
    return len(cover & words) / len(words) if words else 0.0


def _combine(clauses: list[Clause], results: list[ClauseResult], sentences: list[SourceSentence]) -> Judgement:
    total = sum(r.weight for r in results)
    score = sum(r.weight * (0.0 if r.contradiction else r.coverage) for r in results) / total
    labels = {r.label for r in results}
    label: Label = "partial"
    if labels == {"supported"}:
        label = "supported"
    elif labels == {"unsupported"}:
        label = "unsupported"

    if label == "unsupported":
        cited = sorted({r.context for r in results if r.context is not None})
    else:
        cited = sorted({i for r in results if r.label != "unsupported" for i in r.cover})
    evidence = [sentences[i].span for i in cited]

    if label == "supported":
        reason = (
            f"{pct(score)} of the claim's content words are covered by {len(evidence)} source "
            f"sentence{'s' if len(evidence) != 1 else ''}"
        )
    elif label == "unsupported":
        hard = next((r for r in results if r.contradiction), None)
        reason = hard.reason if hard else scarce(score, "the claim's")
    elif len(results) == 1:
        reason = results[0].reason.replace("its content words", "the claim's content words")
    else:
        k = next(i for i, r in enumerate(results) if r.label != "supported")
        ok = sum(r.label == "supported" for r in results)
        reason = f"{ok} of {len(results)} parts supported; “{snippet(clauses[k].text)}”: {results[k].reason}"
    return Judgement(label, round(score, 4), evidence, reason)
