"""Assemble the report from the final run state, and render it to Markdown."""

from __future__ import annotations

from veracity.checks import anchored
from veracity.domain import Draft, Evidence, Report, ReportEvidence, ReportSection, SectionDraft
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


def render_draft(draft: list[SectionDraft]) -> str:
    """A draft as the reviewer reads it: headings and anchored sentences."""
    lines: list[str] = []
    for section in draft:
        lines += [f"## {section.title}"] + [anchored(c.text, c.evidence_ids) for c in section.claims]
    return "\n".join(lines)


def shipped_report(
    *,
    run_id: str,
    spec: Spec,
    question: str,
    corpus: str,
    draft: list[SectionDraft],
    evidence: list[Evidence],
    composed: Draft | None = None,
    language: str | None = None,
    confidence: float | None = None,
) -> Report:
    sections = [
        ReportSection(
            id=d.id,
            title=d.title,
            required=spec.section(d.id).required,
            status=d.status or "not_found",
            claims=d.claims,
            note=d.note or (None if d.claims else "No retrieved evidence supports this section."),
            filler_cut=len(d.filler_cut),
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
        disclaimer=composed.disclaimer if composed else None,
        language=language,
        confidence=confidence,
        contract=composed.contract if composed else None,
    )


def render_markdown(report: Report) -> str:
    lines = [f"# {report.question}", "", f"*Template:* {report.template} · *Outcome:* {report.outcome}"]
    if report.outcome_reason:
        lines.append(f"*Reason:* {report.outcome_reason}")
    if report.needs_human_reason:
        lines.append(f"*Needs a human:* {report.needs_human_reason}")
    for note in report.notes:
        lines += ["", f"> {note}"]
    for section in report.sections:
        lines += ["", f"## {section.title}", "", f"*Status:* {section.status}"]
        if section.note:
            lines += ["", f"_{section.note}_"]
        for claim in section.claims:
            lines += ["", f"- {anchored(claim.text, claim.evidence_ids)}"]
    if report.disclaimer:
        lines += ["", f"*{report.disclaimer}*"]
    if report.evidence:
        lines += ["", "## Evidence", ""]
        for ev in report.evidence:
            where = ev.url or ev.doc_id
            lines.append(f"- `{ev.id}` — {ev.title} ({where}), chars {ev.start}–{ev.end}: “{ev.quote}”")
    return "\n".join(lines) + "\n"
