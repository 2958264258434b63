"""Assemble the report from the final run state; number its references and render it to Markdown and JSON.

The numbering, the reference entries and the header facts here are what every export prints (the PDF in
``export_pdf``, the Word file in ``export_docx``), so the formats cannot disagree."""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from veracity.domain import Claim, Draft, Evidence, Report, ReportEvidence, ReportSection, SectionDraft
from veracity.fetch.canonical import link_url
from veracity.specs.models import Spec
from veracity.text import ANALYZER

Fact = tuple[str, str]


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


@dataclass(frozen=True)
class Reference:
    """One numbered reference as every export shows it: the quote, the source's title, its link (``http(s)`` only,
    made safe for a link target) or else the text naming it, and where in the source the quote stands."""

    number: int
    evidence_id: str
    quote: str
    title: str
    link: str | None
    locator: str
    """What names the source when it has no link: its URL as text (never a live link) or its document id."""
    where: str
    """``characters 10–28`` and, when known, ``, published 2024-01-02``."""


def numbered_references(report: Report) -> list[Reference]:
    """The references of ``references`` in the shape every export prints."""
    out: list[Reference] = []
    for n, ev in references(report):
        when = f", published {ev.published}" if ev.published else ""
        url = link_url(ev.url)
        out.append(
            Reference(
                number=n,
                evidence_id=ev.id,
                quote=ev.quote,
                title=ev.title or ev.doc_id,
                link=_safe_url(url) if url else None,
                locator=ev.url or ev.doc_id,
                where=f"characters {ev.start}–{ev.end}{when}",
            )
        )
    return out


def markers(evidence_ids: list[str], numbers: dict[str, int]) -> list[tuple[str, int | None]]:
    """A claim's anchors as the exports print them: ``("[n]", n)`` per reference, in the claim's order; an
    anchor to evidence the report does not carry is shown as such, with no number to link to."""
    return [
        (f"[{numbers[eid]}]", numbers[eid]) if eid in numbers else (f"[{eid}: not in the report]", None)
        for eid in evidence_ids
    ]


def export_date(created: datetime) -> str:
    """An artifact version's time as the exports print it, in UTC (SQLite hands back naive times: UTC)."""
    if created.tzinfo is None:
        created = created.replace(tzinfo=UTC)
    return created.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")


def export_facts(report: Report, *, version: int | None = None, created: datetime | None = None) -> list[Fact]:
    """The header line every export opens with, label and value in order: template, corpus, the version's
    date, its number, the outcome, the run id (date and version only when known)."""
    facts = [("Template", report.template), ("Corpus", report.corpus)]
    if created is not None:
        facts.append(("Date", export_date(created)))
    if version is not None:
        facts.append(("Version", str(version)))
    return [*facts, ("Outcome", report.outcome), ("Run", report.run_id)]


IDENTIFIERS = frozenset({"Template", "Corpus", "Run"})
"""The facts whose values are names (set as code where the format has it), not prose."""


def export_notes(report: Report) -> list[Fact]:
    """What the header says after the facts, when the report has it: why this outcome, why a person is needed."""
    found = [("Reason", report.outcome_reason), ("Needs a human", report.needs_human_reason)]
    return [(label, value) for label, value in found if value]


_SPACE_LIKE = frozenset({"Cc", "Zs", "Zl", "Zp"})


def one_line(text: str) -> str:
    """Source or model text on one line, as every export prints it: line breaks, tabs, other control characters
    and odd spaces made one space; invisible formatting (soft hyphens, zero-width joiners) dropped; a lone
    surrogate (valid in JSON, not in UTF-8, PDF or Word's XML) replaced by ``?``."""
    out = []
    for ch in text:
        kind = unicodedata.category(ch)
        out.append(" " if kind in _SPACE_LIKE else "" if kind == "Cf" else "?" if kind == "Cs" else ch)
    return " ".join("".join(out).split())


def _md_inline(text: str) -> str:
    """Source or model text on one Markdown line: whitespace folded, HTML and Markdown syntax made literal."""
    text = one_line(text)
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return re.sub(r"([\\`*_\[\]])", r"\\\1", text)


def _safe_url(url: str) -> str:
    """A link target with the characters that would end it in Markdown (or confuse a PDF or Word reader) escaped."""
    return url.replace(" ", "%20").replace("(", "%28").replace(")", "%29").replace("<", "%3C").replace(">", "%3E")


def claim_tag(claim: Claim) -> str | None:
    """What follows a claim in an export: its label, or, for a closest passage no check judged, its relevance."""
    if claim.label:
        return claim.label
    return f"relevance {claim.relevance:.2f}" if claim.relevance is not None else None


def render_markdown(
    report: Report, *, version: int | None = None, created: datetime | None = None, permalink: str | None = None
) -> str:
    """The report as Markdown: a header (template, corpus, the version's date and number, outcome, run), then each
    claim ending with its numbered references ``[1]``; the References list gives each one's exact quote, its
    source (linked when it has a URL) and where in the source it stands."""
    numbers = reference_numbers(report)
    meta = [
        f"*{label}:* `{value.replace('`', '')}`" if label in IDENTIFIERS else f"*{label}:* {_md_inline(value)}"
        for label, value in export_facts(report, version=version, created=created)
    ]
    lines = [f"# {_md_inline(report.question)}", "", " · ".join(meta)]
    if permalink:
        lines.append(f"*Permalink:* <{permalink}>")
    lines += [f"*{label}:* {_md_inline(value)}" for label, value in export_notes(report)]
    for note in report.notes:
        lines += ["", f"> {_md_inline(note)}"]
    for section in report.sections:
        lines += ["", f"## {_md_inline(section.title)}", "", f"*Status:* {section_status(section)}"]
        if section.note:
            lines += ["", f"_{_md_inline(section.note)}_"]
        for claim in section.claims:
            label = f" *({tag})*" if (tag := claim_tag(claim)) else ""
            shown = "".join(text for text, _ in markers(claim.evidence_ids, numbers))
            lines += ["", f"- {_md_inline(claim.text)} {shown}{label}"]
    if report.disclaimer:
        lines += ["", f"*{_md_inline(report.disclaimer)}*"]
    if numbers:
        lines += ["", "## References", ""]
        for ref in numbered_references(report):
            title = _md_inline(ref.title)
            # no link, or one that is not http(s) (javascript:, data:, file:): shown as text, never linked
            source = f"[{title}]({ref.link})" if ref.link else f"{title} ({_md_inline(ref.locator)})"
            lines.append(f"{ref.number}. “{_md_inline(ref.quote)}” — {source}, {ref.where} `{ref.evidence_id}`")
    return "\n".join(lines) + "\n"


def section_status(section: ReportSection) -> str:
    return section.status.replace("_", " ")


def export_json(report: Report, *, version: int, permalink: str, created: datetime | None = None) -> dict[str, Any]:
    """The report with its anchors resolved: each claim lists its reference numbers next to the evidence ids, and
    ``references`` holds, per number, the quote, its source, its offsets and the text around it. ``created_at``:
    when the version was written, as the API's ``/versions`` gives it."""
    numbers = reference_numbers(report)
    data = report.model_dump(mode="json", exclude={"evidence"})
    for section in data["sections"]:
        for claim in section["claims"]:
            claim["references"] = [numbers[eid] for eid in claim["evidence_ids"] if eid in numbers]
    refs = [{"number": n, **ev.model_dump(mode="json")} for n, ev in references(report)]
    head = {"format": "veracity-report/1", "version": version, "permalink": permalink}
    if created is not None:
        head["created_at"] = created.isoformat()
    return {**head, **data, "references": refs}
