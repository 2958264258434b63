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


def section_status(spec: Spec, section: SectionDraft, by_id: dict[str, Evidence], now: datetime) -> SectionStatus:
    """``supported``: at least the section's ``min_evidence`` relevant, grounded claims; ``thin_evidence``: fewer;
    ``not_found``: none; ``stale``: every source older than the template allows. (Claims the relevance check cut
    are no longer in the section, so only relevant claims count.)"""
    grounded = [
        c for c in section.claims if c.label in ("supported", "partial") and any(e in by_id for e in c.evidence_ids)
    ]
    cited = {eid for c in grounded for eid in c.evidence_ids if eid in by_id}
    if not cited:
        return "not_found"
    if spec.stale_after_days:
        dates = [_published(by_id[eid].source.published) for eid in cited]
        if all(d is not None and (now - d).days > spec.stale_after_days for d in dates):
            return "stale"
    needed = max(1, spec.section(section.id).min_evidence)
    return "supported" if len(grounded) >= needed else "thin_evidence"


def with_status(spec: Spec, draft: list[SectionDraft], evidence: list[Evidence]) -> list[SectionDraft]:
    by_id = {ev.id: ev for ev in evidence}
    now = datetime.now(UTC)
    return [s.model_copy(update={"status": section_status(spec, s, by_id, now)}) for s in draft]


def confidence(spec: Spec, draft: list[SectionDraft], stated: float | None = None) -> float:
    """Mean over the claims of label weight × relevance (how well each is grounded and how much it answers the
    question), times the share of required sections that are supported; capped by the composer's own stated
    confidence when it gives one."""
    claims = [c for s in draft for c in s.claims]
    if not claims:
        return 0.0
    mean = sum(
        LABEL_WEIGHT.get(c.label or "unsupported", 0.0) * (c.relevance if c.relevance is not None else 1.0)
        for c in claims
    ) / len(claims)
    required = [s for s in draft if spec.section(s.id).required]
    share = sum(1 for s in required if s.status == "supported") / len(required) if required else 1.0
    value = mean * share
    return round(min(value, stated) if stated is not None else value, 3)
