"""The floor: a deterministic, per-spec answer that needs no model — an honest note plus the evidence
digest with anchors. It replaces any result that is not shippable."""

from __future__ import annotations

from typing import Literal

from veracity.domain import Claim, Evidence, Report, ReportSection
from veracity.runs.report import report_evidence
from veracity.specs.models import Spec

DIGEST_SIZE = 8


def floor_report(
    *, run_id: str, spec: Spec, question: str, corpus: str, evidence: list[Evidence], reason: str
) -> Report:
    digest = evidence[:DIGEST_SIZE]
    sections = [
        ReportSection(
            id=s.id,
            title=s.title,
            required=s.required,
            status="not_found",
            claims=[],
            note="Not written: the draft could not be verified.",
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
    note = (
        "Veracity could not produce a report it can stand behind for this question, so it shows what it "
        f"found instead. Reason: {reason}."
    )
    return Report(
        run_id=run_id,
        template=spec.id,
        question=question,
        corpus=corpus,
        outcome="fallback",
        outcome_reason=reason,
        sections=sections,
        evidence=report_evidence(digest),
        notes=[note],
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
