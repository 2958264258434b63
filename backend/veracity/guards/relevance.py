"""The relevance check (between L1 and L2): every claim is scored for relevance to the question (the relevance
model, ``veracity.semantic.relevance``) and to its section (``veracity.synthesis.SectionFit``). A claim below the
template's cut-off is cut from the draft and recorded as ``off_topic`` on its section and in the audit trail —
it never ships, whatever the judge would have said. A claim quoting its evidence verbatim keeps the relevance its
evidence was selected with; a reworded one is scored afresh, read with its cited source's title, and keeps at least
its evidence's relevance (read alone it has no neighbour or passage head, which the model weighs)."""

from __future__ import annotations

from typing import Any

from veracity.domain import Claim, Evidence, SectionDraft, Violation
from veracity.semantic.relevance import Candidate, RelevanceScorer
from veracity.specs.models import Spec
from veracity.synthesis import SectionFit


def check_relevance(
    draft: list[SectionDraft], evidence: list[Evidence], question: str, spec: Spec, scorer: RelevanceScorer
) -> tuple[list[SectionDraft], dict[str, Any], list[Violation]]:
    """The draft with off-topic claims cut (``off_topic_cut``) and every kept claim's ``relevance`` set, the
    check's summary for the audit trail, and its violations: cutting is not enough when it empties a required
    section, which then goes back to the composer (``emptied_by_relevance``)."""
    by_id = {ev.id: ev for ev in evidence}
    cutoff = scorer.threshold(spec.relevance.min_relevance)
    fit = SectionFit(scorer.model, question)
    out: list[SectionDraft] = []
    cut_log: list[dict[str, Any]] = []
    scored = 0
    for section in draft:
        cited = [c for c in section.claims if c.evidence_ids and c.evidence_ids[0] in by_id]
        fresh = [c for c in cited if _verbatim(c, by_id) is None]
        fresh_scores = scorer.score(
            question, [Candidate(text=c.text, title=by_id[c.evidence_ids[0]].source.title) for c in fresh]
        )
        relevance = {id(c): p for c, p in zip(fresh, fresh_scores, strict=True)}
        section_fit = _section_fit(fit, spec, section, cited, by_id)
        kept: list[Claim] = []
        cut: list[str] = []
        for claim in section.claims:
            if id(claim) not in relevance and claim not in cited:
                kept.append(claim)  # unanchored: L1 reports it
                continue
            scored += 1
            p = relevance.get(id(claim), _verbatim(claim, by_id))
            cited_relevance = by_id[claim.evidence_ids[0]].relevance
            if p is not None and id(claim) in relevance and cited_relevance is not None:
                # A reworded claim is read without its passage (no neighbour, no head): it keeps at least the
                # relevance its evidence was selected with; L2 checks the rewording says what the evidence says.
                p = max(p, cited_relevance)
            if p is not None and p < cutoff:
                cut.append(claim.text)
                cut_log.append(
                    {
                        "section": section.id,
                        "claim": claim.text[:300],
                        "relevance": p,
                        "section_fit": section_fit.get(id(claim)),
                    }
                )
                continue
            kept.append(claim.model_copy(update={"relevance": p}))
        if cut:
            note = f"{len(cut)} claim(s) cut as off topic: they do not answer the question."
            section = section.model_copy(
                update={"claims": kept, "off_topic_cut": section.off_topic_cut + cut, "note": note}
            )
        else:
            section = section.model_copy(update={"claims": kept})
        out.append(section)
    emptied = emptied_by_relevance(spec, out)
    summary = {
        "passed": not cut_log,
        "mode": scorer.mode,
        "cutoff": cutoff,
        "scored": scored,
        "off_topic": cut_log,
        "violations": [v.model_dump(exclude_none=True) for v in emptied],
    }
    return out, summary, emptied


def emptied_by_relevance(spec: Spec, draft: list[SectionDraft]) -> list[Violation]:
    """An ``off_topic`` violation for each required section the relevance check left without a claim."""
    return [
        Violation(
            check="off_topic",
            layer="relevance",
            section_id=s.id,
            detail=(
                f"all {len(s.off_topic_cut)} claim(s) of this required section were cut as off topic: they do not "
                "answer the question; cite evidence that answers it"
            ),
        )
        for s in draft
        if s.off_topic_cut and not s.claims and spec.section(s.id).required
    ]


def _verbatim(claim: Claim, by_id: dict[str, Evidence]) -> float | None:
    """The relevance of the evidence a claim quotes word for word (None when it rewords it)."""
    ev = by_id.get(claim.evidence_ids[0]) if claim.evidence_ids else None
    if ev is None or ev.relevance is None or " ".join(ev.quote.split()) != " ".join(claim.text.split()):
        return None
    return ev.relevance


def _section_fit(
    fit: SectionFit, spec: Spec, section: SectionDraft, claims: list[Claim], by_id: dict[str, Evidence]
) -> dict[int, float]:
    """Each claim's fit to its own section (the assignment score), recorded beside its relevance."""
    try:
        spec_section = spec.section(section.id)
    except KeyError:
        return {}
    if spec_section.summary or not claims:
        return {}
    scores = fit.scores([by_id[c.evidence_ids[0]] for c in claims], [spec_section])[:, 0]
    return {id(c): round(float(s), 4) for c, s in zip(claims, scores, strict=True)}
