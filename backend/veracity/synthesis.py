"""Keyword routing of evidence to template sections (explainable: the matched words are the reason)."""

from __future__ import annotations

from veracity.domain import Evidence
from veracity.specs.models import SectionSpec, Spec
from veracity.text import content_terms, words


def section_vocabulary(section: SectionSpec) -> set[str]:
    return {w.lower() for w in section.keywords} | set(content_terms(section.title + " " + section.description))


def affinity(ev: Evidence, section: SectionSpec) -> int:
    """How many of the section's routing words the evidence sentence contains."""
    return len(section_vocabulary(section) & set(words(ev.quote)))


def route_shard(evidence: list[Evidence], targets: list[SectionSpec]) -> tuple[dict[str, list[str]], int]:
    """Route one subtask's evidence into its target sections; orphans go round-robin. Returns (shard, orphans)."""
    shard: dict[str, list[str]] = {s.id: [] for s in targets}
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


def backfill(
    spec: Spec, sections: dict[str, list[str]], evidence: list[Evidence]
) -> tuple[dict[str, list[str]], list[str]]:
    """Fill required evidence sections left empty after the merge: keyword matches first, then the
    best-scored evidence (a required section answers the question itself). Returns (sections, filled ids)."""
    filled: list[str] = []
    for section in spec.evidence_sections:
        if not section.required or section.min_evidence == 0 or sections.get(section.id):
            continue
        ranked = sorted(evidence, key=lambda ev: (-affinity(ev, section), -ev.score, ev.id))
        picked = [ev.id for ev in ranked[: max(1, section.min_evidence)]]
        if picked:
            sections[section.id] = picked
            filled.append(section.id)
    return sections, filled
