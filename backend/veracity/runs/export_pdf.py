"""The report as a PDF (reportlab's platypus: pure Python, BSD): the question as title, the header facts and the
permalink, each section with its status and its claims, each claim's numbered references linked to its entry in
the References, and each reference's quote, source link and offsets. Numbering and wording come from
``runs.report``, the same as the Markdown's."""

from __future__ import annotations

import io
from datetime import datetime

from reportlab.lib import colors
from reportlab.lib.pagesizes import A4
from reportlab.lib.styles import ParagraphStyle
from reportlab.lib.units import cm
from reportlab.platypus import Flowable, Paragraph, SimpleDocTemplate, Spacer

from veracity import __version__
from veracity.domain import Report
from veracity.runs.pdf_text import fonts, link, markup
from veracity.runs.report import (
    claim_tag,
    export_facts,
    export_notes,
    markers,
    numbered_references,
    one_line,
    reference_numbers,
    section_status,
)

MEDIA_TYPE = "application/pdf"
GREY = colors.HexColor("#555555")


def _styles() -> dict[str, ParagraphStyle]:
    family = fonts().family
    body = ParagraphStyle("body", fontName=family, fontSize=10, leading=14, spaceAfter=4)
    return {
        "title": ParagraphStyle("title", body, fontName=f"{family}-Bold", fontSize=17, leading=22, spaceAfter=8),
        "meta": ParagraphStyle("meta", body, fontSize=8.5, leading=12, textColor=GREY, spaceAfter=1),
        "h2": ParagraphStyle("h2", body, fontName=f"{family}-Bold", fontSize=13, leading=17, spaceBefore=12),
        "status": ParagraphStyle("status", body, fontName=f"{family}-Italic", fontSize=9, textColor=GREY),
        "note": ParagraphStyle("note", body, fontName=f"{family}-Italic", leftIndent=10),
        "claim": ParagraphStyle("claim", body, leftIndent=14, bulletIndent=4),
        "ref": ParagraphStyle("ref", body, fontSize=9, leading=12.5, leftIndent=18, firstLineIndent=-18),
        "body": body,
    }


def render_pdf(report: Report, *, version: int, created: datetime, permalink: str) -> bytes:
    """The PDF's bytes. Every link is ``http(s)`` (``report.link_url``) or to a reference in the file."""
    style = _styles()
    numbers = reference_numbers(report)
    story: list[Flowable] = [Paragraph(markup(report.question), style["title"])]
    facts = export_facts(report, version=version, created=created)
    story.append(Paragraph(" · ".join(f"<b>{label}:</b> {markup(value)}" for label, value in facts), style["meta"]))
    story.append(Paragraph(f"<b>Permalink:</b> {link(permalink, permalink)}", style["meta"]))
    story += [Paragraph(f"<b>{label}:</b> {markup(value)}", style["meta"]) for label, value in export_notes(report)]
    story += [Paragraph(markup(note), style["note"]) for note in report.notes]
    for section in report.sections:
        story.append(Paragraph(markup(section.title), style["h2"]))
        story.append(Paragraph(f"Status: {markup(section_status(section))}", style["status"]))
        if section.note:
            story.append(Paragraph(markup(section.note), style["note"]))
        for claim in section.claims:
            refs = "".join(
                link(f"#ref-{n}", text) if n else markup(text) for text, n in markers(claim.evidence_ids, numbers)
            )
            label = f" <i>({markup(tag)})</i>" if (tag := claim_tag(claim)) else ""
            story.append(Paragraph(f"{markup(claim.text)} {refs}{label}", style["claim"], bulletText="•"))
    if report.disclaimer:
        story += [Spacer(1, 6), Paragraph(f"<i>{markup(report.disclaimer)}</i>", style["body"])]
    entries = numbered_references(report)
    if entries:
        story.append(Paragraph("References", style["h2"]))
    for ref in entries:
        source = link(ref.link, ref.title) if ref.link else f"{markup(ref.title)} ({markup(ref.locator)})"
        story.append(
            Paragraph(
                f'<a name="ref-{ref.number}"/>{ref.number}. “{markup(ref.quote)}” — {source}, {markup(ref.where)} '
                f'<font size="7.5" color="#555555">{markup(ref.evidence_id)}</font>',
                style["ref"],
            )
        )
    out = io.BytesIO()
    doc = SimpleDocTemplate(
        out,
        pagesize=A4,
        leftMargin=2.2 * cm,
        rightMargin=2.2 * cm,
        topMargin=2 * cm,
        bottomMargin=2 * cm,
        title=one_line(report.question),
        subject=f"Veracity report, {report.template}, version {version}",
        author="Veracity",
        creator=f"Veracity {__version__}",
    )
    doc.build(story)
    return out.getvalue()
