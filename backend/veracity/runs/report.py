"""Assemble the report from the final run state, and render it to Markdown."""

from __future__ import annotations

from veracity.checks import anchored
from veracity.domain import Evidence, Report, ReportEvidence, ReportSection, SectionDraft
from veracity.specs.models import Spec


def report_evidence(evidence: list[Evidence], cited: set[str] | None = None) -> list[ReportEvidence]:
    return [
        ReportEvidence(
            id=ev.id,
            doc_id=ev.source.doc_id,
            url=ev.source.url,
            title=ev.source.title,
            quote=ev.quote,
            start=ev.start,
            end=ev.end,
            content_hash=ev.content_hash,
            origin_subtask_id=ev.origin_subtask_id,
            published=ev.source.published,
        )
        for ev in evidence
        if cited is None or ev.id in cited
    ]


def shipped_report(
    *,
    run_id: str,
    spec: Spec,
    question: str,
    corpus: str,
    draft: list[SectionDraft],
    evidence: list[Evidence],
) -> Report:
    sections = [
        ReportSection(
            id=d.id,
            title=d.title,
            required=spec.section(d.id).required,
            status=d.status or "not_found",
            claims=d.claims,
            note=None if d.claims else "No retrieved evidence supports this section.",
        )
        for d in draft
    ]
    cited = {eid for s in sections for c in s.claims for eid in c.evidence_ids}
    return Report(
        run_id=run_id,
        template=spec.id,
        question=question,
        corpus=corpus,
        outcome="shipped",
        sections=sections,
        evidence=report_evidence(evidence, cited),
    )


def render_markdown(report: Report) -> str:
    lines = [f"# {report.question}", "", f"*Template:* {report.template} · *Outcome:* {report.outcome}"]
    if report.outcome_reason:
        lines.append(f"*Reason:* {report.outcome_reason}")
    for note in report.notes:
        lines += ["", f"> {note}"]
    for section in report.sections:
        lines += ["", f"## {section.title}", "", f"*Status:* {section.status}"]
        if section.note:
            lines += ["", f"_{section.note}_"]
        for claim in section.claims:
            lines += ["", f"- {anchored(claim.text, claim.evidence_ids)}"]
    if report.evidence:
        lines += ["", "## Evidence", ""]
        for ev in report.evidence:
            where = ev.url or ev.doc_id
            lines.append(f"- `{ev.id}` — {ev.title} ({where}), chars {ev.start}–{ev.end}: “{ev.quote}”")
    return "\n".join(lines) + "\n"
