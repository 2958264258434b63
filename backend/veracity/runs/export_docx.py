"""The report as a Word file (python-docx, MIT): the question as title, the header facts and the permalink, each
section with its status and its claims, each claim's numbered references linked to a bookmark on its entry in the
References, and each reference's quote, source link and offsets. Numbering and wording come from
``runs.report``, the same as the Markdown's and the PDF's.

python-docx has no call for a hyperlink or a bookmark, so ``_link`` and ``_bookmark`` write those few elements of
WordprocessingML themselves."""

from __future__ import annotations

import io
from datetime import datetime

from docx import Document
from docx.enum.text import WD_COLOR_INDEX
from docx.opc.constants import RELATIONSHIP_TYPE
from docx.oxml import OxmlElement
from docx.oxml.ns import qn
from docx.shared import Pt, RGBColor
from docx.text.paragraph import Paragraph

from veracity import __version__
from veracity.domain import Report
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

MEDIA_TYPE = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
LINK_COLOUR = "1A4FA0"
GREY = RGBColor(0x55, 0x55, 0x55)


def bookmark_name(number: int) -> str:
    """The bookmark on reference ``number``'s entry (Word's names: a letter first, no spaces)."""
    return f"ref_{number}"


def _link(paragraph: Paragraph, text: str, *, url: str | None = None, bookmark: str | None = None) -> None:
    """``text`` as a hyperlink to ``url`` (http(s) only, checked by the caller) or to a bookmark in the file."""
    link = OxmlElement("w:hyperlink")
    if url is not None:
        link.set(qn("r:id"), paragraph.part.relate_to(url, RELATIONSHIP_TYPE.HYPERLINK, is_external=True))
    else:
        link.set(qn("w:anchor"), bookmark or "")
    run = OxmlElement("w:r")
    props = OxmlElement("w:rPr")
    colour = OxmlElement("w:color")
    colour.set(qn("w:val"), LINK_COLOUR)
    underline = OxmlElement("w:u")
    underline.set(qn("w:val"), "single")
    props.append(colour)
    props.append(underline)
    run.append(props)
    shown = OxmlElement("w:t")
    shown.text = one_line(text)
    shown.set(qn("xml:space"), "preserve")
    run.append(shown)
    link.append(run)
    paragraph._p.append(link)


def _bookmark(paragraph: Paragraph, name: str, number: int) -> None:
    """An empty bookmark at the start of ``paragraph`` (ids only need to be unique in the file)."""
    start, end = OxmlElement("w:bookmarkStart"), OxmlElement("w:bookmarkEnd")
    start.set(qn("w:id"), str(number))
    start.set(qn("w:name"), name)
    end.set(qn("w:id"), str(number))
    paragraph._p.insert(0, end)
    paragraph._p.insert(0, start)


def _labelled(paragraph: Paragraph, label: str, value: str) -> None:
    paragraph.add_run(f"{label}: ").bold = True
    paragraph.add_run(one_line(value))


def render_docx(report: Report, *, version: int, created: datetime, permalink: str) -> bytes:
    """The Word file's bytes. Every link is ``http(s)`` (``report.link_url``) or to a reference in the file."""
    doc = Document()
    doc.core_properties.title = one_line(report.question)[:255]
    doc.core_properties.subject = f"Veracity report, {report.template}, version {version}"
    doc.core_properties.author = "Veracity"
    doc.core_properties.comments = f"Made by Veracity {__version__}"
    doc.core_properties.created = created
    numbers = reference_numbers(report)
    doc.add_heading(one_line(report.question), level=0)
    for label, value in [*export_facts(report, version=version, created=created), *export_notes(report)]:
        _labelled(doc.add_paragraph(), label, value)
    permalink_line = doc.add_paragraph()
    permalink_line.add_run("Permalink: ").bold = True
    _link(permalink_line, permalink, url=permalink)
    for note in report.notes:
        doc.add_paragraph(one_line(note), style="Intense Quote")
    for section in report.sections:
        doc.add_heading(one_line(section.title), level=1)
        status = doc.add_paragraph().add_run(f"Status: {section_status(section)}")
        status.italic, status.font.color.rgb = True, GREY
        if section.note:
            doc.add_paragraph().add_run(one_line(section.note)).italic = True
        for claim in section.claims:
            line = doc.add_paragraph(one_line(claim.text) + " ", style="List Bullet")
            for text, n in markers(claim.evidence_ids, numbers):
                if n is None:
                    line.add_run(text).font.highlight_color = WD_COLOR_INDEX.YELLOW
                else:
                    _link(line, text, bookmark=bookmark_name(n))
            if tag := claim_tag(claim):
                line.add_run(f" ({tag})").italic = True
    if report.disclaimer:
        doc.add_paragraph().add_run(one_line(report.disclaimer)).italic = True
    entries = numbered_references(report)
    if entries:
        doc.add_heading("References", level=1)
    for ref in entries:
        entry = doc.add_paragraph(f"{ref.number}. “{one_line(ref.quote)}” — ")
        _bookmark(entry, bookmark_name(ref.number), ref.number)
        if ref.link:
            _link(entry, ref.title, url=ref.link)
        else:
            entry.add_run(f"{one_line(ref.title)} ({one_line(ref.locator)})")
        entry.add_run(f", {ref.where} ")
        ident = entry.add_run(ref.evidence_id)
        ident.font.size, ident.font.color.rgb = Pt(8), GREY
    out = io.BytesIO()
    doc.save(out)
    return out.getvalue()
