"""Assemble the report from the final run state, and render it to Markdown."""

from __future__ import annotations

import re
from typing import Any

from veracity.domain import Draft, Evidence, Report, ReportEvidence, ReportSection, SectionDraft
from veracity.fetch.canonical import link_url
from veracity.specs.models import Spec
from veracity.text import ANALYZER


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
            context_before=ev.context_before,
            context_after=ev.context_after,
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
    gaps = unmentioned(question, [c.text for s in sections for c in s.claims]) if spec.state_gaps else []
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
        notes=[gaps_note(gaps)] if gaps else [],
    )


_NAME_OR_FIGURE = re.compile(r"\b(?:[A-Z][\w'’-]*|\d[\d.,]*)")


def unmentioned(question: str, claims: list[str]) -> list[str]:
    """The question's names and figures (capitalised words after its first, numbers) that no claim mentions,
    compared by the index's stems: what the sources found do not say."""
    shipped = {stem for text in claims for stem in ANALYZER.tokens(text)}
    start = len(question) - len(question.lstrip())  # the first word is capitalised anyway
    out: list[str] = []
    for match in _NAME_OR_FIGURE.finditer(question):
        word = match.group(0).rstrip(".,")
        if match.start() == start or word in out:
            continue
        stems = ANALYZER.tokens(word)
        if stems and not set(stems) <= shipped:
            out.append(word)
    return out


def gaps_note(gaps: list[str]) -> str:
    named = ", ".join(f"“{g}”" for g in gaps)
    return (
        f"What the sources found do not say: no shipped sentence mentions {named}, so this report does not "
        "answer that part of the question."
    )


def reference_numbers(report: Report) -> dict[str, int]:
    """Evidence id → reference number: in order of first citation, section by section, then any evidence the
    report carries but no claim cites. The page's anchor chips and both exports use these same numbers."""
    numbers: dict[str, int] = {}
    known = {ev.id for ev in report.evidence}
    for section in report.sections:
        for claim in section.claims:
            for eid in claim.evidence_ids:
                if eid in known and eid not in numbers:
                    numbers[eid] = len(numbers) + 1
    for ev in report.evidence:
        numbers.setdefault(ev.id, len(numbers) + 1)
    return numbers


def references(report: Report) -> list[tuple[int, ReportEvidence]]:
    """The report's evidence as numbered references, in number order (see ``reference_numbers``)."""
    by_id = {ev.id: ev for ev in report.evidence}
    return [(n, by_id[eid]) for eid, n in reference_numbers(report).items()]


def _markers(evidence_ids: list[str], numbers: dict[str, int]) -> str:
    return "".join(f"[{numbers[eid]}]" if eid in numbers else f"[{eid}: not in the report]" for eid in evidence_ids)


def _md_inline(text: str) -> str:
    """Source or model text on one Markdown line: whitespace folded, HTML and Markdown syntax made literal."""
    text = " ".join(text.split())
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return re.sub(r"([\\`*_\[\]])", r"\\\1", text)


def _md_url(url: str) -> str:
    return url.replace(" ", "%20").replace("(", "%28").replace(")", "%29").replace("<", "%3C").replace(">", "%3E")


def render_markdown(report: Report, *, version: int | None = None, permalink: str | None = None) -> str:
    """The report as Markdown: each claim ends with its numbered references ``[1]``; the References list gives each
    one's exact quote, its source (linked when it has a URL) and where in the source it stands."""
    numbers = reference_numbers(report)
    meta = [f"*Template:* {report.template}", f"*Outcome:* {report.outcome}", f"*Run:* `{report.run_id}`"]
    if version is not None:
        meta.append(f"*Version:* {version}")
    lines = [f"# {_md_inline(report.question)}", "", " · ".join(meta)]
    if permalink:
        lines.append(f"*Permalink:* <{permalink}>")
    if report.outcome_reason:
        lines.append(f"*Reason:* {_md_inline(report.outcome_reason)}")
    if report.needs_human_reason:
        lines.append(f"*Needs a human:* {_md_inline(report.needs_human_reason)}")
    for note in report.notes:
        lines += ["", f"> {_md_inline(note)}"]
    for section in report.sections:
        lines += ["", f"## {_md_inline(section.title)}", "", f"*Status:* {section.status.replace('_', ' ')}"]
        if section.note:
            lines += ["", f"_{_md_inline(section.note)}_"]
        for claim in section.claims:
            label = f" *({claim.label})*" if claim.label else ""
            lines += ["", f"- {_md_inline(claim.text)} {_markers(claim.evidence_ids, numbers)}{label}"]
    if report.disclaimer:
        lines += ["", f"*{_md_inline(report.disclaimer)}*"]
    if numbers:
        lines += ["", "## References", ""]
        for n, ev in references(report):
            title = _md_inline(ev.title or ev.doc_id)
            url = link_url(ev.url)
            if url:
                source = f"[{title}]({_md_url(url)})"
            else:  # no link, or one that is not http(s) (javascript:, data:, file:): shown as text, never linked
                source = f"{title} ({_md_inline(ev.url or ev.doc_id)})"
            when = f", published {ev.published}" if ev.published else ""
            lines.append(f"{n}. “{_md_inline(ev.quote)}” — {source}, characters {ev.start}–{ev.end}{when} `{ev.id}`")
    return "\n".join(lines) + "\n"


def export_json(report: Report, *, version: int, permalink: str) -> dict[str, Any]:
    """The report with its anchors resolved: each claim lists its reference numbers next to the evidence ids, and
    ``references`` holds, per number, the quote, its source, its offsets and the text around it."""
    numbers = reference_numbers(report)
    data = report.model_dump(mode="json", exclude={"evidence"})
    for section in data["sections"]:
        for claim in section["claims"]:
            claim["references"] = [numbers[eid] for eid in claim["evidence_ids"] if eid in numbers]
    refs = [{"number": n, **ev.model_dump(mode="json")} for n, ev in references(report)]
    return {"format": "veracity-report/1", "version": version, "permalink": permalink, **data, "references": refs}
