"""Per-section uncertainty (supported / thin_evidence / not_found / stale) and the run's confidence."""

from __future__ import annotations

from datetime import UTC, datetime

from veracity.domain import Evidence, SectionDraft, SectionStatus
from veracity.specs.models import Spec

LABEL_WEIGHT = {"supported": 1.0, "partial": 0.6, "unsupported": 0.0}
"""How much a claim of each label adds to the run's confidence."""


def _published(value: str | None) -> datetime | None:
    if not value:
        return None
    try:
        parsed = datetime.fromisoformat(value[:10])
    except ValueError:
        return None
    return parsed.replace(tzinfo=UTC)


def cited_evidence(section: SectionDraft, known: dict[str, Evidence] | None = None) -> set[str]:
    """The distinct evidences the section's grounded claims (supported or partial) cite; with ``known``, only those
    the run retrieved."""
    return {
        e
        for c in section.claims
        if c.label in ("supported", "partial")
        for e in c.evidence_ids
        if known is None or e in known
    }


def section_status(spec: Spec, section: SectionDraft, by_id: dict[str, Evidence], now: datetime) -> SectionStatus:
    """``supported``: relevant, grounded claims citing at least the section's ``min_evidence`` distinct evidences;
    ``thin_evidence``: fewer;
    ``not_found``: none; ``stale``: every source older than the template allows. (Claims the relevance check cut
    are no longer in the section, so only relevant claims count.)"""
    cited = cited_evidence(section, by_id)
    if not cited:
        return "not_found"
    if spec.stale_after_days:
        dates = [_published(by_id[eid].source.published) for eid in cited]
        if all(d is not None and (now - d).days > spec.stale_after_days for d in dates):
            return "stale"
    needed = max(1, spec.section(section.id).min_evidence)
    return "supported" if len(cited) >= needed else "thin_evidence"


def with_status(spec: Spec, draft: list[SectionDraft], evidence: list[Evidence]) -> list[SectionDraft]:
    by_id = {ev.id: ev for ev in evidence}
    now = datetime.now(UTC)
    return [s.model_copy(update={"status": section_status(spec, s, by_id, now)}) for s in draft]


def section_support(spec: Spec, section: SectionDraft) -> float:
    """1 for a supported section, 0 for one with nothing found (or only stale sources); a thin section counts the
    share of its ``min_evidence`` its grounded claims cite: a one-sentence answer where two sources were asked for
    is half supported, not unsupported (it ships, and a confidence of 0 would say nothing of it was trusted). The
    ids are the claims' own, never checked against the run's evidence here: a claim citing an id the run did not
    retrieve fails the citation check and never ships, and the cap keeps a thin section below a supported one."""
    if section.status == "supported":
        return 1.0
    if section.status != "thin_evidence":
        return 0.0
    needed = max(1, spec.section(section.id).min_evidence)
    return min(len(cited_evidence(section)), needed - 1) / needed


def confidence(
    spec: Spec, draft: list[SectionDraft], stated: float | None = None, *, partial_weight: float | None = None
) -> float:
    """Mean label weight over every claim the composer drafted, a claim the relevance check cut as off topic
    counting zero (so the share of the draft that answers the question weighs in, not just how well the kept
    claims are anchored), times how far the required sections are supported (``section_support``); capped by the
    composer's own stated confidence when it gives one.

    The relevance model's raw probabilities are not used as weights: they are relative to a pool of candidates
    (about one in five relevant), so a true answer sentence may score 0.35 — above the cut-off, yet it would
    read as a weak claim. ``partial_weight`` replaces a partial claim's weight (the qa policy's ``ship_partial``)."""
    weights = LABEL_WEIGHT if partial_weight is None else {**LABEL_WEIGHT, "partial": partial_weight}
    claims = [c for s in draft for c in s.claims]
    cut = sum(len(s.off_topic_cut) for s in draft)
    if not claims:
        return 0.0
    mean = sum(weights.get(c.label or "unsupported", 0.0) for c in claims) / (len(claims) + cut)
    required = [s for s in draft if spec.section(s.id).required]
    share = sum(section_support(spec, s) for s in required) / len(required) if required else 1.0
    value = mean * share
    return round(min(value, stated) if stated is not None else value, 3)
