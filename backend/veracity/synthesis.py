"""Evidence → template sections. With the semantic model each sentence goes to the section whose description it
fits, scored as in the source design (seed 002):

    score = 0.74 · cos(fact, section) + 0.26 · cos(fact, question)

(the section read as "title: description"); the keyword route (how many of the section's routing words the
sentence holds) only breaks ties. Backfill of an empty required section uses the same score. Without the model,
the keyword route decides and orphans go round-robin, as before.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass

import numpy as np

from veracity.domain import Evidence
from veracity.semantic.model import SemanticModel, titled
from veracity.specs.models import SectionSpec, Spec
from veracity.text import content_terms, words

SECTION_WEIGHT, QUESTION_WEIGHT = 0.74, 0.26


def section_vocabulary(section: SectionSpec) -> set[str]:
    return {w.lower() for w in section.keywords} | set(content_terms(section.title + " " + section.description))


def affinity(ev: Evidence, section: SectionSpec) -> int:
    """How many of the section's routing words the evidence sentence contains."""
    return len(section_vocabulary(section) & set(words(ev.quote)))


def section_text(section: SectionSpec) -> str:
    return f"{section.title}: {section.description}"


@dataclass(frozen=True)
class SectionFit:
    """Scores evidence against sections for one question (semantic when the model is there)."""

    model: SemanticModel | None
    question: str

    def scores(self, evidence: list[Evidence], sections: list[SectionSpec]) -> np.ndarray:
        """(evidence × sections) matrix: the design's weighted cosine, or the keyword affinity without a model."""
        if not evidence or not sections:
            return np.zeros((len(evidence), len(sections)))
        if self.model is None:
            return np.array([[float(affinity(ev, s)) for s in sections] for ev in evidence])
        facts = self.model.encode([titled(ev.source.title, ev.quote) for ev in evidence])
        heads = self.model.encode([section_text(s) for s in sections] + [self.question])
        scores: np.ndarray = SECTION_WEIGHT * (facts @ heads[:-1].T) + QUESTION_WEIGHT * (facts @ heads[-1])[:, None]
        return scores

    def best(self, evidence: list[Evidence], sections: list[SectionSpec], prefer: set[str]) -> list[int]:
        """Per evidence, the index of its section: highest score, then keyword affinity, then a section in
        ``prefer`` (the subtask's own targets), then template order."""
        scores = self.scores(evidence, sections)
        out = []
        for row, ev in enumerate(evidence):
            keyed = [
                (round(float(scores[row, j]), 6), affinity(ev, s), s.id in prefer, -j) for j, s in enumerate(sections)
            ]
            out.append(-max(keyed)[3])
        return out


def route_shard(
    evidence: list[Evidence], targets: list[SectionSpec], fit: SectionFit, candidates: list[SectionSpec] | None = None
) -> tuple[dict[str, list[str]], int]:
    """Route one subtask's evidence into sections. Returns (shard, orphans).

    With the model every sentence goes to the best-fitting of ``candidates`` (all evidence sections; the
    subtask's ``targets`` win ties); without it, keyword routing into ``targets`` and orphans round-robin."""
    if fit.model is not None:
        pool = candidates or targets
        shard: dict[str, list[str]] = {s.id: [] for s in pool}
        for ev, j in zip(evidence, fit.best(evidence, pool, {s.id for s in targets}), strict=True):
            shard[pool[j].id].append(ev.id)
        return {sid: ids for sid, ids in shard.items() if ids or sid in {t.id for t in targets}}, 0
    shard = {s.id: [] for s in targets}
    orphans: list[Evidence] = []
    for ev in evidence:
        scores = [(affinity(ev, s), -i, s.id) for i, s in enumerate(targets)]
        best = max(scores)
        if best[0] > 0 and len(targets) > 1:
            shard[best[2]].append(ev.id)
        else:
            orphans.append(ev)
    for i, ev in enumerate(orphans):
        shard[targets[i % len(targets)].id].append(ev.id)
    return shard, (len(orphans) if len(targets) > 1 else 0)


def reading_order(evidence: Sequence[Evidence]) -> Callable[[Evidence], tuple[float, int, int]]:
    """A sort key for ``evidence``'s sentences: the most relevant first; equal relevance in reading order (the
    source met first in ``evidence`` first, then by place in its source), so a sentence lifted to its pronoun's
    relevance (``with_antecedents``), the one naming what "It" stands for, comes just before it."""
    first: dict[str, int] = {}
    for i, ev in enumerate(evidence):
        first.setdefault(ev.source.doc_id, i)

    def key(ev: Evidence) -> tuple[float, int, int]:
        relevance = ev.relevance if ev.relevance is not None else ev.score
        return (-relevance, first.get(ev.source.doc_id, len(evidence)), ev.start)

    return key


def take_answers(
    spec: Spec, sections: dict[str, list[str]], evidence: list[Evidence]
) -> tuple[dict[str, list[str]], dict[str, list[str]]]:
    """Each section that is a direct answer (``answers`` > 0, in template order) takes the run's most relevant
    sentences not yet taken (``reading_order``), out of whichever section their description put them in: a
    description such as "who, when, where" fits a definition as well as the sentence that names who, and only the
    relevance model read the question itself ("Who wrote To Kill a Mockingbird?": the sentence naming Harper Lee,
    not the Pulitzer Prize). A required section keeps its ``min_evidence`` (at least one): a sentence that would
    leave it short stays and the next is taken. Returns (sections, taken: section id → evidence ids)."""
    sections = {sid: list(ids) for sid, ids in sections.items()}
    keeps = {s.id: max(1, s.min_evidence) for s in spec.evidence_sections if s.required}
    taken: dict[str, list[str]] = {}
    ranked = [ev.id for ev in sorted(evidence, key=reading_order(evidence))]
    for section in spec.evidence_sections:
        if not section.answers:
            continue
        given = {eid for ids in taken.values() for eid in ids}
        picks: list[str] = []
        for eid in ranked:
            if len(picks) == section.answers:
                break
            homes = [sid for sid, ids in sections.items() if sid != section.id and eid in ids]
            if eid in given or any(sid in keeps and len(sections[sid]) <= keeps[sid] for sid in homes):
                continue
            picks.append(eid)
            for sid in homes:
                sections[sid].remove(eid)
        if picks:
            taken[section.id] = picks
            sections[section.id] = picks + [eid for eid in sections.get(section.id, []) if eid not in picks]
    return sections, taken


def backfill(
    spec: Spec,
    sections: dict[str, list[str]],
    evidence: list[Evidence],
    fit: SectionFit,
    taken: Collection[str] = (),
) -> tuple[dict[str, list[str]], list[str]]:
    """Fill required evidence sections left empty after the merge with the evidence that fits them best (the
    same score as assignment; the keyword route and evidence score break ties), never a sentence a direct answer
    took (``taken``: it would be dropped there as the answer's duplicate). Returns (sections, filled)."""
    skip = set(taken)
    evidence = [ev for ev in evidence if ev.id not in skip]
    filled: list[str] = []
    for section in spec.evidence_sections:
        if not section.required or section.min_evidence == 0 or sections.get(section.id):
            continue
        column = fit.scores(evidence, [section])[:, 0] if evidence else np.zeros(0)
        order = sorted(
            range(len(evidence)),
            key=lambda i: (
                -round(float(column[i]), 6),
                -affinity(evidence[i], section),
                -evidence[i].score,
                evidence[i].id,
            ),
        )
        picked = [evidence[i].id for i in order[: max(1, section.min_evidence)]]
        if picked:
            sections[section.id] = picked
            filled.append(section.id)
    return sections, filled
