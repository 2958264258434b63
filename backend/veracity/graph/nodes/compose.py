"""``compose`` (extractive): each claim is a verbatim evidence sentence with its ``[evidence:ID]`` anchor.

Sentences are deduplicated across sections; summary sections are written after, and only from, the
claims of the other sections. Claims named by the last attempt's violations are dropped.
"""

from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime

from veracity.domain import Claim, Evidence, SectionDraft
from veracity.graph.context import Context
from veracity.graph.state import RunState
from veracity.text import words

SUMMARY_CLAIMS = 3


def extractive_draft(
    *,
    spec_sections: list[Any],
    section_evidence: dict[str, list[str]],
    evidence: list[Evidence],
    per_section: int,
    rejected: set[tuple[str, str]],
) -> list[SectionDraft]:
    by_id = {ev.id: ev for ev in evidence}
    used: set[str] = set()
    drafts: dict[str, SectionDraft] = {}
    for section in (s for s in spec_sections if not s.summary):
        claims: list[Claim] = []
        for eid in section_evidence.get(section.id, []):
            ev = by_id.get(eid)
            if ev is None or (section.id, ev.quote) in rejected:
                continue
            key = " ".join(words(ev.quote))
            if key in used:
                continue
            used.add(key)
            claims.append(Claim(text=ev.quote, evidence_ids=[ev.id]))
            if len(claims) >= per_section:
                break
        drafts[section.id] = SectionDraft(id=section.id, title=section.title, claims=claims)
    for section in (s for s in spec_sections if s.summary):
        # The lead claim of each other section, in template order.
        leads = [d.claims[0] for d in drafts.values() if d.claims][:SUMMARY_CLAIMS]
        leads = [c for c in leads if (section.id, c.text) not in rejected]
        drafts[section.id] = SectionDraft(id=section.id, title=section.title, claims=[c.model_copy() for c in leads])
    return [drafts[s.id] for s in spec_sections]


async def compose(state: RunState, runtime: Runtime[Context]) -> dict[str, Any]:
    ctx = runtime.context
    rejected = {
        (v.section_id, state["draft"][_index(state, v.section_id)].claims[v.claim_index].text)
        for v in state.get("violations", [])
        if v.section_id is not None and v.claim_index is not None and state.get("draft")
    }
    draft = extractive_draft(
        spec_sections=ctx.spec.sections,
        section_evidence=state.get("section_evidence", {}),
        evidence=state.get("evidence", []),
        per_section=ctx.limits.claims_per_section,
        rejected=rejected,
    )
    return {"draft": draft, "attempt": state.get("attempt", 0) + 1}


def _index(state: RunState, section_id: str) -> int:
    return next(i for i, s in enumerate(state["draft"]) if s.id == section_id)
