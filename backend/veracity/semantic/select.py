"""Choosing claims that read as one report: near-duplicates dropped, the most relevant first, a summary that
draws on several sections (maximal marginal relevance, Carbonell and Goldstein 1998), short paragraphs."""

from __future__ import annotations

from collections.abc import Sequence

from veracity.domain import Claim, Evidence
from veracity.ports import Encoder
from veracity.semantic.model import titled
from veracity.text import words

DUPLICATE_COSINE = 0.95
"""Two claims this similar say the same thing. Sentences are embedded with their source title, which lifts two
sentences of one article to about 0.6–0.9; a reworded sentence stays above 0.99."""
DUPLICATE_JACCARD = 0.8
"""Without the model: two claims sharing this share of their words are the same claim."""
MMR_LAMBDA = 0.7
"""Relevance against novelty in the summary: the usual weighting, favouring relevance."""
PARAGRAPH_CLAIMS = 3


class Similarity:
    """Pairwise similarity of evidence sentences: cosine with the model, word overlap (Jaccard) without."""

    def __init__(self, model: Encoder | None, evidence: Sequence[Evidence]) -> None:
        self._index = {ev.id: i for i, ev in enumerate(evidence)}
        self._model = model
        if model is not None:
            self._vectors = model.encode([titled(ev.source.title, ev.quote) for ev in evidence])
        else:
            self._words = [set(words(ev.quote)) for ev in evidence]

    def __call__(self, a: str, b: str) -> float:
        i, j = self._index[a], self._index[b]
        if self._model is not None:
            return float(self._vectors[i] @ self._vectors[j])
        union = self._words[i] | self._words[j]
        return len(self._words[i] & self._words[j]) / len(union) if union else 0.0

    def duplicate(self, a: str, b: str) -> bool:
        return self(a, b) >= (DUPLICATE_COSINE if self._model is not None else DUPLICATE_JACCARD)


def summary_pick(
    sections: dict[str, list[Claim]], relevance: dict[str, float], similar: Similarity, held: list[Claim]
) -> tuple[str, Claim] | None:
    """The next (section id, claim) for a summary that holds ``held``: maximal marginal relevance over every
    section's claims (relevant, and unlike what the summary already says); None when no section has a claim."""
    pool = [(sid, c) for sid, claims in sections.items() for c in claims if c.evidence_ids]
    said = [c.evidence_ids[0] for c in held if c.evidence_ids]

    def mmr(pair: tuple[str, Claim]) -> float:
        eid = pair[1].evidence_ids[0]
        redundancy = max((similar(eid, other) for other in said), default=0.0)
        return MMR_LAMBDA * relevance.get(eid, 0.0) - (1 - MMR_LAMBDA) * redundancy

    return max(pool, key=mmr, default=None)


def paragraphs(claims: list[Claim], by_id: dict[str, Evidence]) -> list[Claim]:
    """Claims in relevance order, those from one source kept together, cut into paragraphs of at most
    ``PARAGRAPH_CLAIMS``; each claim's ``paragraph`` set."""
    groups: dict[str, list[Claim]] = {}
    for claim in claims:
        ev = by_id.get(claim.evidence_ids[0]) if claim.evidence_ids else None
        groups.setdefault(ev.source.doc_id if ev else claim.text, []).append(claim)
    out: list[Claim] = []
    paragraph = 0
    for group in groups.values():
        for start in range(0, len(group), PARAGRAPH_CLAIMS):
            out += [c.model_copy(update={"paragraph": paragraph}) for c in group[start : start + PARAGRAPH_CLAIMS]]
            paragraph += 1
    return out
