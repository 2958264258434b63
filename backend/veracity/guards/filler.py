"""The silent-filler block: unanchored sentences that assert nothing checkable (no figure, no name, hardly a
word of the evidence) are cut from the draft and flagged on their section, never shipped silently. Unanchored
sentences that do assert something stay, and L1 reports them as uncited claims."""

from __future__ import annotations

import re

from veracity.domain import Claim, Evidence, SectionDraft
from veracity.text import content_terms

_DIGIT = re.compile(r"\d")
_NAME = re.compile(r"(?<=[a-z,;:]\s)[A-Z][a-z]+")
MAX_SHARED_TERMS = 1
"""An unanchored sentence sharing at most this many content words with the run's evidence says nothing the
evidence could check."""


def is_filler(text: str, vocabulary: set[str]) -> bool:
    if _DIGIT.search(text) or _NAME.search(text):
        return False
    return len(set(content_terms(text)) & vocabulary) <= MAX_SHARED_TERMS


def cut_filler(draft: list[SectionDraft], evidence: list[Evidence]) -> list[SectionDraft]:
    vocabulary = {t for ev in evidence for t in content_terms(ev.quote, limit=200)}
    out: list[SectionDraft] = []
    for section in draft:
        kept: list[Claim] = []
        cut: list[Claim] = []
        for claim in section.claims:
            (cut if not claim.evidence_ids and is_filler(claim.text, vocabulary) else kept).append(claim)
        if cut:
            note = f"{len(cut)} sentence(s) of prose no evidence supports were cut."
            section = section.model_copy(
                update={"claims": kept, "filler_cut": section.filler_cut + [c.text for c in cut], "note": note}
            )
        out.append(section)
    return out
