"""The signals the learned judge weighs for each clause of a claim, the same at fitting and at run time. (A clause
the lexical reading finds contradicted — another number, name or negation — is unsupported by rule and never
weighed; a clause with a number or a name that no source sentence holds, ``unstated``, is never supported.)

Lexical, from ``LexicalJudge.analyse``:

- ``coverage``: share of the clause's content words found in the few source sentences that cover it;
- ``missing_number``: a number of the clause that no source sentence holds (by value: "two weeks" is 14 days);
- ``missing_name``: a multi-word name of the clause that no source sentence holds;
- ``absent_share``: share of the clause's content words found in no source sentence at all;
- ``absent_name``: a capitalised word of the clause (not a sentence's first) found in no source sentence;
- ``size``: log(1 + the clause's content words): a long clause covered at 70% is not a short one at 70%.

Semantic, from the process's sentence model (``SemanticModel.encode``), when there is one:

- ``cos_clause``: the highest cosine of the clause with a source sentence.

Each clause is compared with at most ``SEMANTIC_SENTENCES`` source sentences, those sharing the most of its words
(then the earliest): a long article costs a bounded number of embeddings per claim.

Read, not weighed: ``contradiction``, the contradiction reader's logit (``semantic.nli``) for the clause against that
closest source sentence, when the process has the reader (a clause the sentence holds word for word is not read:
``NOT_READ``), and ``closest_share``, the share of the clause's content words that sentence holds. The judge's fit
chooses the logit from which it is a contradiction, a rule like a changed number, and the share the sentence must
hold for it to count (a contradiction is of a sentence that speaks of the same thing).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from veracity.guards.judge.lexical import Analysis
from veracity.semantic.model import SemanticModel
from veracity.semantic.nli import UNREAD, ContradictionModel

LEXICAL_FEATURES = (
    "coverage",
    "missing_number",
    "missing_name",
    "absent_share",
    "absent_name",
    "size",
)
SEMANTIC_FEATURES = (*LEXICAL_FEATURES, "cos_clause")
SIGNS = {"coverage": 1, "size": 0, "cos_clause": 1}
"""The direction each signal may move the probability that a clause is stated (1 up, -1 down, 0 either way);
the rest (missing numbers and names, absent words) can only lower it. Fitted weights keep these
signs, so a quirk of the training material (its hallucinations are minimal edits, so they share more words with
the source than its paraphrases do) cannot teach that covering more of a claim makes it less supported."""
NOT_READ = UNREAD
"""The ``contradiction`` value of a clause the reader did not read: below any cut-off."""
SEMANTIC_SENTENCES = 6
"""Source sentences a clause is embedded against: a bound on the work per claim, not a weight."""


@dataclass(frozen=True)
class Signals:
    """One clause's signals, and the source sentence closest to it in meaning (an index into the analysis'
    sentences; None without the model)."""

    values: dict[str, float]
    closest: int | None

    def row(self, names: tuple[str, ...]) -> np.ndarray:
        return np.array([self.values[n] for n in names], dtype=np.float64)


def unstated(values: dict[str, float]) -> bool:
    """A number (by value) or a name of the clause that no source sentence holds: the sources never state the
    fact it carries, so the clause is not supported whatever its words and meaning share with them (partial at
    most). A deterministic bound on the model: similarity cannot tell "… across Oregon" from "… across Washington"."""
    return bool(values["missing_number"] or values["missing_name"] or values["absent_name"])


def lexical_values(analysis: Analysis) -> list[dict[str, float]]:
    out = []
    for clause, result in zip(analysis.clauses, analysis.results, strict=True):
        out.append(
            {
                "coverage": result.coverage,
                "missing_number": float(result.missing_number),
                "missing_name": float(result.missing_name),
                "absent_share": sum(t not in analysis.found for t in clause.terms) / len(clause.terms),
                "absent_name": float(any(key not in analysis.found for _, key in clause.names)),
                "size": math.log1p(len(clause.terms)),
            }
        )
    return out


def _candidates(analysis: Analysis) -> list[int]:
    """Per clause, the sentences sharing the most of its words (then the earliest); their union, in order."""
    picked: set[int] = set()
    for clause in analysis.clauses:
        terms = set(clause.terms)
        shared = [(-len(s.keys & terms), i) for i, s in enumerate(analysis.sentences)]
        picked.update(i for _, i in sorted(shared)[:SEMANTIC_SENTENCES])
    return sorted(picked)


def _plain(text: str) -> str:
    return " ".join(text.casefold().split()).strip(" .;,")


def signals(analysis: Analysis, model: SemanticModel | None, reader: ContradictionModel | None = None) -> list[Signals]:
    """Each clause's signals (the analysis must have judged clauses); the semantic ones only with a model, the
    contradiction reader's only with both."""
    values = lexical_values(analysis)
    if model is None:
        return [Signals(v, None) for v in values]
    picked = _candidates(analysis)
    texts = [c.text for c in analysis.clauses]
    vectors = model.encode([*texts, *(analysis.sentences[i].text for i in picked)])
    cosines = vectors[: len(texts)] @ vectors[len(texts) :].T  # one row per clause
    best = cosines.argmax(axis=1)
    closest = [picked[int(b)] for b in best]
    for k, v in enumerate(values):
        v["cos_clause"] = float(cosines[k, best[k]])
    if reader is not None:
        pairs = [(analysis.sentences[i].text, text) for i, text in zip(closest, texts, strict=True)]
        read = [k for k, (premise, clause) in enumerate(pairs) if _plain(clause) not in _plain(premise)]
        logits = reader.logits([pairs[k] for k in read]) if read else np.zeros(0)
        for v, i, clause in zip(values, closest, analysis.clauses, strict=True):
            v["contradiction"] = NOT_READ
            v["closest_share"] = len(analysis.sentences[i].keys & set(clause.terms)) / len(clause.terms)
        for k, logit in zip(read, logits, strict=True):
            values[k]["contradiction"] = float(logit)
    return [Signals(v, i) for v, i in zip(values, closest, strict=True)]
