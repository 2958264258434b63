"""The offline grounding judge: the lexical reading and the sentence model's similarity, weighed by a logistic
model fitted on written-for-the-purpose material (``python -m veracity.guards.judge.fit``, ``make fit-judge``) and
shipped as ``guards/data/judge.json`` with its split, sources and cross-validated figures.

A clause (``veracity.guards.judge.clauses``) contradicted by the source sentence stating the same fact — another
number, another name, a flipped negation — is unsupported: that is a rule, as in the lexical judge, bounded by how
surely that sentence states the same fact (``Sameness``: the share of the clause's other words it covers, and
whether another sentence states the clause's number with the rest of it — on a long page the sentence closest in
words is often about another year or another person), chosen by the fit. So is a clause the contradiction reader
(``semantic.nli``, a cross-encoder that reads the clause and its closest source sentence together: "fell" for
"rose", swapped roles) reads as contradicted at or above the fit's logit. A clause holding a number or a name that
no source sentence holds (``signals.unstated``) is never supported: partly supported when the model gives the rest
of it the fit's ``unstated_partial_from`` probability ("sells gear in twelve stores" is, "across Washington" is
not), unsupported otherwise. Every other clause gets the probability that the sources state it: above the upper
cut-off it is supported, below the lower one unsupported, in between partly supported. The claim is supported
when every clause is, unsupported when none is or when one is contradicted, and partial otherwise — how WiCE
defines a partially supported claim. The weights and every cut-off come from the file, chosen on out-of-fold
predictions; nothing here is a hand-set weight or threshold. Without the semantic model the lexical model (fitted
on the same material) decides, and every reason says so.

``score`` is the clauses' mean probability (a contradicted or unstated clause's is 0), weighted by their content
words.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

import numpy as np

from veracity.guards.judge.lexical import Analysis, ClauseResult, LexicalJudge, pct, scarce, snippet
from veracity.guards.judge.signals import LEXICAL_FEATURES, NOT_READ, SEMANTIC_FEATURES, Signals, signals, unstated
from veracity.ports import Judgement, Label, Source, Span
from veracity.semantic.logistic import LogisticModel, load_fit
from veracity.semantic.model import Semantics, process_semantics
from veracity.semantic.nli import Contradiction, process_contradiction
from veracity.settings import get_settings


def fitted() -> dict[str, Any]:
    """The shipped fit: per mode (``semantic``, ``lexical``) the two models, with the split and the figures."""
    return load_fit("veracity.guards", "judge.json")


@dataclass(frozen=True)
class Reading:
    """The contradiction reader's cut-offs: its logit, and the share of the clause its closest sentence holds."""

    above: float
    share: float


@dataclass(frozen=True)
class Sameness:
    """When the lexical reading's contradiction (another number, name or negation in the sentence that would state
    the clause's other words) counts: that sentence covers at least ``share`` of those words, and, with
    ``unless_elsewhere``, no other source sentence holds every number of the clause and would state the rest of it
    (as surely as the reading asks of any sentence: two words in three) — then that one states the clause's fact
    and the first another fact. On a long page the sentence closest in
    words often states another fact (another year's figure, another person's role): the fit chooses how surely it
    must be the same fact. (0, False): every contradiction counts, as in the lexical judge."""

    share: float = 0.0
    unless_elsewhere: bool = False

    def holds(self, result: ClauseResult) -> bool:
        return (
            bool(result.contradiction)
            and result.context_share >= self.share
            and not (self.unless_elsewhere and result.stated_elsewhere)
        )


@dataclass(frozen=True)
class Cutoffs:
    """A clause is supported at ``supported`` or above, unsupported below ``unsupported``; contradicted when the
    lexical reading contradicts it and ``sameness`` holds, or when the contradiction reader's logit reaches
    ``contradiction`` (None: the fit did not use the reader) and its closest sentence holds at least ``share`` of
    its content words."""

    model: LogisticModel
    unsupported: float
    contradiction: Reading | None = None
    sameness: Sameness = Sameness()
    partly: float | None = None
    """A clause with an unstated number or name is partly supported from this probability (None: only where any
    other clause would be supported)."""

    @classmethod
    def from_fit(cls, fit: dict[str, Any]) -> Cutoffs:
        stated = fit["stated"]
        above = stated.get("contradiction_above")
        reading = None if above is None else Reading(float(above), float(stated["contradiction_share"]))
        sameness = Sameness(float(stated.get("lexical_share", 0.0)), bool(stated.get("lexical_unless_elsewhere")))
        partly = stated.get("unstated_partial_from")
        return cls(
            LogisticModel.from_dict(stated),
            float(stated["unsupported_below"]),
            reading,
            sameness,
            None if partly is None else float(partly),
        )

    def clause_labels(self, p: np.ndarray, contradicted: list[bool], unstated: list[bool]) -> list[Label]:
        return clause_labels(p, self.unsupported, self.model.threshold, contradicted, unstated, self.partly)


def clause_labels(
    p: np.ndarray,
    below: float,
    above: float,
    contradicted: list[bool],
    unstated: list[bool],
    partly: float | None = None,
) -> list[Label]:
    """A contradicted clause is unsupported (the rule); a clause with an unstated number or name is partly supported
    at most (partial when its probability reaches ``partly``, by default ``above``, else unsupported); the others by
    their probability: supported from ``above``, unsupported under ``below``, partial between."""
    partly = above if partly is None else partly
    out: list[Label] = []
    for x, hit, extra in zip(p, contradicted, unstated, strict=True):
        if hit or x < below or (extra and x < partly):
            out.append("unsupported")
        else:
            out.append("partial" if extra or x < above else "supported")
    return out


def claim_label(clause_labels: list[Label], contradicted: list[bool]) -> Label:
    """Supported when every clause is; unsupported when none is, or an unsupported clause is contradicted."""
    if all(label == "supported" for label in clause_labels):
        return "supported"
    if all(label == "unsupported" for label in clause_labels) or any(
        label == "unsupported" and hit for label, hit in zip(clause_labels, contradicted, strict=True)
    ):
        return "unsupported"
    return "partial"


class LearnedJudge:
    """Offline and deterministic: the lexical checks plus, when the process has it, semantic similarity."""

    def __init__(self, semantics: Semantics, contradiction: Contradiction | None = None) -> None:
        self.model = semantics.model
        self.name = semantics.mode  # "semantic" or "lexical", recorded in the audit trail
        self.cutoffs = Cutoffs.from_fit(fitted()[semantics.mode])
        self.features = SEMANTIC_FEATURES if semantics.model is not None else LEXICAL_FEATURES
        self.lexical = LexicalJudge()
        # The reader needs the sentence model (it reads a clause against its closest sentence in meaning) and a fit
        # that chose its cut-off.
        self.reader = None
        if semantics.model is None:
            self.note = f" (lexical only: {semantics.reason})"
        elif self.cutoffs.contradiction is None:
            self.note = ""
        elif contradiction is None or contradiction.model is None:
            reason = contradiction.reason if contradiction is not None else "not loaded"
            self.note = f" (no contradiction reader: {reason})"
        else:
            self.note, self.reader = "", contradiction.model

    async def judge(self, claim: str, sources: list[Source]) -> Judgement:
        # Off the event loop: embedding a claim and its sources is CPU work.
        return await asyncio.to_thread(self.judge_sync, claim, sources)

    def judge_sync(self, claim: str, sources: list[Source]) -> Judgement:
        analysis = self.lexical.analyse(claim, sources)
        if not analysis.results:  # no content words, or no source text: nothing to weigh
            return analysis.judgement
        clauses = signals(analysis, self.model, self.reader)
        p = self.cutoffs.model.probability(np.vstack([c.row(self.features) for c in clauses]))
        same = [self.cutoffs.sameness.holds(r) for r in analysis.results]
        contradicted = [hit or self._read_contrary(c) for hit, c in zip(same, clauses, strict=True)]
        extra = [unstated(c.values) for c in clauses]
        labels = self.cutoffs.clause_labels(p, contradicted, extra)
        p = np.where(np.array(contradicted) | np.array(extra), 0.0, p)  # not stated, whatever the model says
        label = claim_label(labels, contradicted)
        weights = np.array([r.weight for r in analysis.results])
        return Judgement(
            label,
            round(float(p @ weights / weights.sum()), 4),
            _evidence(analysis, clauses, labels, label, self.cutoffs.contradiction, same),
            _reason(analysis, clauses, labels, label, self.cutoffs.contradiction, same) + self._note(),
        )

    def _note(self) -> str:
        if self.reader is not None and self.reader.failure:
            return f" (no contradiction reader: {self.reader.failure})"
        return self.note

    def _read_contrary(self, found: Signals) -> bool:
        return _contrary(found, self.cutoffs.contradiction)


def _contrary(found: Signals, reading: Reading | None) -> bool:
    """The contradiction reader read the clause's closest source sentence, which speaks of the same thing (holds
    the fit's share of its words), as contradicting it."""
    return (
        reading is not None
        and found.values.get("contradiction", NOT_READ) >= reading.above
        and found.values.get("closest_share", 0.0) >= reading.share
    )


def _evidence(
    analysis: Analysis,
    clauses: list[Signals],
    labels: list[Label],
    label: Label,
    reading: Reading | None,
    same: list[bool],
) -> list[Span]:
    """For an unsupported claim, only the sentences that contradict it (``same``: the lexical contradictions that
    count). Otherwise the sentences covering its clauses that are not unsupported: those its words found or, when
    they found none, the closest in meaning."""
    if label == "unsupported":
        contexts = {r.context for r, hit in zip(analysis.results, same, strict=True) if hit and r.context is not None}
        contexts |= {c.closest for c in clauses if _contrary(c, reading) and c.closest is not None}
        return [analysis.sentences[i].span for i in sorted(contexts)]
    cited: set[int] = set()
    for result, found, clause_label in zip(analysis.results, clauses, labels, strict=True):
        if clause_label == "unsupported":
            continue
        cited.update(result.cover or ([found.closest] if found.closest is not None else []))
    return [analysis.sentences[i].span for i in sorted(cited)]


def _reason(
    analysis: Analysis,
    clauses: list[Signals],
    labels: list[Label],
    label: Label,
    reading: Reading | None,
    same: list[bool],
) -> str:
    """One sentence: the decisive finding (for a claim of several clauses, about its first clause that is not
    supported), and how close in meaning the nearest source sentence is."""
    if label == "supported":
        covered = sum(r.weight * r.coverage for r in analysis.results) / sum(r.weight for r in analysis.results)
        meaning = _meaning(clauses[0].values, "cos_clause") if len(clauses) == 1 else ""
        return f"{pct(covered)} of the claim's content words are covered{meaning}"
    hard = [
        k
        for k in range(len(analysis.results))
        if (same[k] or _contrary(clauses[k], reading)) and labels[k] == "unsupported"
    ]
    k = hard[0] if hard else next(i for i, lab in enumerate(labels) if lab != "supported")
    reason = _clause_reason(analysis, k, clauses[k], labels[k], reading, same[k])
    if len(labels) == 1:
        return reason.replace("its content words", "the claim's content words")
    ok = labels.count("supported")
    return f"{ok} of {len(labels)} parts supported; “{snippet(analysis.clauses[k].text)}”: {reason}"


def _clause_reason(
    analysis: Analysis, k: int, found: Signals, label: Label, reading: Reading | None, same: bool
) -> str:
    result, clause = analysis.results[k], analysis.clauses[k]
    if same:
        return result.reason
    if reading is not None and _contrary(found, reading) and found.closest is not None:
        sentence = analysis.sentences[found.closest].text
        return (
            f"the closest source sentence, “{snippet(sentence, 80)}”, contradicts it (contradiction reader: "
            f"{found.values['contradiction']:.1f} ≥ {reading.above})"
        )
    names = [word for word, key in clause.names if key not in analysis.found]
    if result.gaps:
        detail = result.gaps[0]
    elif names:
        detail = f"“{names[0]}” is not found in the sources"
    elif label == "unsupported":
        detail = scarce(result.coverage, "its")
    else:
        detail = f"{pct(result.coverage)} of its content words are covered"
    prefix = "partly supported: " if label == "partial" else ""
    return prefix + detail + _meaning(found.values, "cos_clause")


def _meaning(values: dict[str, float], key: str) -> str:
    return f"; the closest source sentence is {values[key]:.2f} similar in meaning" if key in values else ""


def make_judge(semantics: Semantics | None = None, contradiction: Contradiction | None = None) -> LearnedJudge:
    """The offline judge for ``semantics`` and the contradiction reader (default: the process's, as the settings
    allow)."""
    settings = get_settings().semantic
    if semantics is None:
        semantics = process_semantics(settings.enabled)
    if contradiction is None and semantics.model is not None:
        contradiction = process_contradiction(settings.contradiction)
    return LearnedJudge(semantics, contradiction)
