"""The floor: a deterministic, per-spec answer that needs no model — an honest note plus the evidence
digest with anchors. It replaces any result that is not shippable."""

from __future__ import annotations

from typing import Literal

from veracity import messages
from veracity.domain import Claim, Evidence, Report, ReportSection
from veracity.runs.report import report_evidence
from veracity.specs.models import Spec

DIGEST_SIZE = 8
NOTHING_PREFIX = messages.NOTHING_RELEVANT.split("{")[0]
SEARCH_FAILED_PREFIX = messages.SEARCH_FAILED.split("{")[0]
FallbackKind = Literal["nothing_relevant", "search_failed", "not_verified"]


def fallback_kind(reason: str | None) -> FallbackKind:
    """Why a fallback has nothing written, read from its reason: nothing retrieved answers the question, the
    search failed, or a draft was made and could not be verified. The floor, the run page's banner and its
    status line all say it from this one rule."""
    reason = reason or ""
    if reason.startswith(NOTHING_PREFIX):
        return "nothing_relevant"
    if reason.startswith(SEARCH_FAILED_PREFIX):
        return "search_failed"
    return "not_verified"


def floor_report(
    *,
    run_id: str,
    spec: Spec,
    question: str,
    corpus: str,
    evidence: list[Evidence],
    reason: str,
    outcome: Literal["fallback", "handoff"] = "fallback",
    needs_human_reason: str | None = None,
) -> Report:
    """The honest note plus the evidence digest. Also the body of a ``handoff``: a person gets the evidence,
    the reader gets no unverified prose."""
    digest = evidence[:DIGEST_SIZE]
    unwritten = (
        "Not shipped: confidence is too low; a person will review it."
        if outcome == "handoff"
        else {
            "nothing_relevant": "Not written: nothing retrieved answers the question.",
            "search_failed": "Not written: the search failed, so there was nothing to write from.",
            "not_verified": "Not written: the draft could not be verified.",
        }[fallback_kind(reason)]
    )
    sections = [
        ReportSection(
            id=s.id,
            title=s.title,
            required=s.required,
            status="not_found",
            claims=[],
            note=unwritten,
        )
        for s in spec.sections
    ]
    sections.append(
        ReportSection(
            id="evidence_digest",
            title="Evidence digest",
            required=False,
            status="supported" if digest else "not_found",
            claims=[Claim(text=ev.quote, evidence_ids=[ev.id], label="supported") for ev in digest],
            note="Verbatim sentences retrieved for this question, best-scored first; not a written answer.",
        )
    )
    note = f"{spec.policy.floor_note} Reason: {reason}."
    if fallback_kind(reason) == "nothing_relevant":  # said plainly: the corpus does not hold an answer
        note = f"{reason}."
    if outcome == "handoff":
        note = f"This answer needs a person before it can be given: {needs_human_reason or reason}."
    return Report(
        run_id=run_id,
        template=spec.id,
        question=question,
        corpus=corpus,
        outcome=outcome,
        outcome_reason=reason,
        needs_human_reason=needs_human_reason,
        sections=sections,
        evidence=report_evidence(digest),
        notes=[note],
        disclaimer=next(iter(spec.policy.disclaimer.values()), None) if spec.policy.disclaimer else None,
    )


def routed_report(*, run_id: str, spec: Spec, question: str, corpus: str, route: str, reason: str) -> Report:
    """The whole answer when the router stops a run: no search was made and no model was called."""
    outcome: Literal["crisis", "escalated"] = "crisis" if route == "crisis" else "escalated"
    answer = spec.policy.crisis_answer if route == "crisis" else spec.policy.escalation_answer
    return Report(
        run_id=run_id,
        template=spec.id,
        question=question,
        corpus=corpus,
        outcome=outcome,
        outcome_reason=reason,
        sections=[],
        evidence=[],
        notes=[answer],
    )
