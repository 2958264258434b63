"""Deterministic checks of a draft: anchors resolve to evidence retrieved in this run, every claim is
anchored, and each section's status follows from the evidence its claims cite."""

from __future__ import annotations

import re

from veracity.domain import Claim, Evidence, SectionDraft, SectionStatus, Violation
from veracity.specs.models import Spec
from veracity.text import words

ANCHOR_RE = re.compile(r"\[evidence:([A-Za-z0-9_-]+)\]")


def anchored(text: str, evidence_ids: list[str]) -> str:
    return text + "".join(f" [evidence:{eid}]" for eid in evidence_ids)


def parse_claim(sentence: str) -> Claim:
    """Split a written sentence into its text and the evidence ids of its anchors."""
    ids = ANCHOR_RE.findall(sentence)
    text = re.sub(r"\s+", " ", ANCHOR_RE.sub("", sentence)).strip()
    return Claim(text=text, evidence_ids=list(dict.fromkeys(ids)))


def _normal(text: str) -> str:
    return " ".join(words(text))


def claim_label(claim: Claim, by_id: dict[str, Evidence]) -> str:
    """``supported`` when the claim is a verbatim span of a cited quote; ``unsupported`` otherwise.
    (A graded judge for paraphrased claims belongs to the guard stack.)"""
    cited = [by_id[eid] for eid in claim.evidence_ids if eid in by_id]
    text = _normal(claim.text)
    if text and any(text in _normal(ev.quote) for ev in cited):
        return "supported"
    return "unsupported"


def citation_violations(draft: list[SectionDraft], evidence: list[Evidence]) -> list[Violation]:
    by_id = {ev.id: ev for ev in evidence}
    violations: list[Violation] = []
    for section in draft:
        for index, claim in enumerate(section.claims):
            if not claim.evidence_ids:
                violations.append(
                    Violation(
                        check="uncited_claim",
                        section_id=section.id,
                        claim_index=index,
                        detail=f"claim has no [evidence:ID] anchor: {claim.text[:80]!r}",
                    )
                )
            for eid in claim.evidence_ids:
                if eid not in by_id:
                    violations.append(
                        Violation(
                            check="unknown_anchor",
                            section_id=section.id,
                            claim_index=index,
                            detail=f"anchor [evidence:{eid}] was not retrieved in this run",
                        )
                    )
    return violations


def section_status(section_spec_min: int, cited: int) -> SectionStatus:
    if cited == 0:
        return "not_found"
    return "supported" if cited >= max(1, section_spec_min) else "thin_evidence"


def label_and_status(spec: Spec, draft: list[SectionDraft], evidence: list[Evidence]) -> list[SectionDraft]:
    by_id = {ev.id: ev for ev in evidence}
    labelled: list[SectionDraft] = []
    for section in draft:
        claims = [c.model_copy(update={"label": claim_label(c, by_id)}) for c in section.claims]
        cited = {eid for c in claims if c.label == "supported" for eid in c.evidence_ids if eid in by_id}
        status = section_status(spec.section(section.id).min_evidence, len(cited))
        labelled.append(section.model_copy(update={"claims": claims, "status": status}))
    return labelled


def label_violations(draft: list[SectionDraft]) -> list[Violation]:
    return [
        Violation(
            check="unsupported_claim",
            section_id=s.id,
            claim_index=i,
            detail=f"claim is not a span of the evidence it cites: {c.text[:80]!r}",
        )
        for s in draft
        for i, c in enumerate(s.claims)
        if c.label == "unsupported"
    ]
