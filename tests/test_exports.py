"""The PDF and Word exports, read back: downloaded over HTTP for a finished run, the PDF's text extracted (pypdf)
and its link annotations listed, the Word file parsed (python-docx) with its hyperlinks and bookmarks. Each must
carry the question, the header (template, corpus, date, version), every section with its status, every claim with
its reference numbers, and every reference's quote, title and link, numbered as the JSON export numbers them.
Also: the Markdown header, ``?version=N``, unknown versions, and text no font holds."""

from __future__ import annotations

import asyncio
import io
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import docx
import pytest
from docx.oxml.ns import qn
from pypdf import PdfReader
from sqlalchemy.ext.asyncio import async_sessionmaker

from conftest import SMALL_CORPUS, form, load_docs, make_settings
from veracity import messages
from veracity.db import runs_repo
from veracity.db.corpus_repo import DocumentIn
from veracity.db.engine import make_engine
from veracity.domain import Claim, Report, ReportEvidence, ReportSection
from veracity.runs import pdf_text
from veracity.runs.export_docx import render_docx
from veracity.runs.export_pdf import render_pdf

QUESTION = "Who grows the world's coffee?"
EXPORT_CORPUS = [
    SMALL_CORPUS[0],  # Coffee, with a URL
    DocumentIn(
        doc_id="coffee-farming",
        title="Coffee farming",
        text=(
            "About 12.5 million farms grow the world's coffee. Coffee farmers in Brazil grow about a third of the "
            "world's coffee, more than any other country. Most coffee is grown by smallholders on farms of less "
            "than five hectares."
        ),
    ),  # without one
]
"""Two sources on the question, one linked and one not: the exports must number, quote and link both kinds."""
PDF = "application/pdf"
DOCX = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"


@pytest.fixture
def small_db_url(db_url: str) -> str:
    """A migrated SQLite database with ``EXPORT_CORPUS`` in corpus ``small`` (overrides conftest's)."""
    asyncio.run(load_docs(db_url, "small", EXPORT_CORPUS))
    return db_url


def squash(text: str) -> str:
    """Text with every whitespace removed: line wrapping in a PDF cannot make two equal texts differ."""
    return "".join(text.split())


def read_pdf(data: bytes) -> tuple[PdfReader, str, list[str], list[tuple[int, float]]]:
    """The reader, its text, the URIs its links open, and where each link inside the file goes (page, height)."""
    reader = PdfReader(io.BytesIO(data))
    text = "\n".join(page.extract_text() for page in reader.pages)
    pages = {page.indirect_reference.idnum: i for i, page in enumerate(reader.pages)}
    uris: list[str] = []
    inside: list[tuple[int, float]] = []
    for page in reader.pages:
        for annotation in page.get("/Annots") or []:
            link = annotation.get_object()
            assert link["/Subtype"] == "/Link"
            if "/A" in link:
                assert link["/A"]["/S"] == "/URI"
                uris.append(str(link["/A"]["/URI"]))
            else:
                dest = link["/Dest"]
                inside.append((pages[dest[0].idnum], float(dest[3])))
    return reader, text, uris, inside


def bookmarks(document: Any) -> list[str]:
    return [b.get(qn("w:name")) for b in document.element.body.iter(qn("w:bookmarkStart"))]


async def _finished_run(client: Any) -> tuple[str, dict[str, Any], dict[str, Any]]:
    """A finished run over the small corpus: its id, its report and its JSON export (numbered references)."""
    response = await client.post("/runs", data=form(question=QUESTION, template="market_brief", corpus="small"))
    assert response.status_code == 303, response.text
    run_id = response.headers["location"].rsplit("/", 1)[1]
    await client.app.state.service.wait(run_id)
    report = (await client.get(f"/v1/research/{run_id}")).json()["report"]
    assert report["outcome"] == "shipped" and report["evidence"], report["outcome"]
    exported = (await client.get(f"/runs/{run_id}/report.json")).json()
    return run_id, report, exported


def _expected_date(created_at: str) -> str:
    when = datetime.fromisoformat(created_at)
    return (when if when.tzinfo else when.replace(tzinfo=UTC)).astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")


async def test_pdf_and_word_read_back_with_every_claim_reference_quote_and_link(client_for, small_db_url) -> None:
    client = await client_for(make_settings(small_db_url))
    run_id, report, exported = await _finished_run(client)
    created = (await client.get(f"/v1/research/{run_id}/versions")).json()["versions"][0]["created_at"]
    permalink = f"http://testserver/runs/{run_id}?version=1"
    number = {r["id"]: r["number"] for r in exported["references"]}
    refs = sorted(exported["references"], key=lambda r: r["number"])
    claims = [c for s in report["sections"] for c in s["claims"]]
    assert claims and any(r["url"] for r in refs) and any(not r["url"] for r in refs)  # linked and unlinked sources
    header = ["Template: market_brief", "Corpus: small", f"Date: {_expected_date(created)}", "Version: 1"]

    pdf = await client.get(f"/runs/{run_id}/report.pdf")
    assert pdf.status_code == 200 and pdf.headers["content-type"] == PDF
    assert pdf.headers["content-disposition"] == f'attachment; filename="veracity-{run_id[:12]}-v1.pdf"'
    reader, text, uris, inside = read_pdf(pdf.content)
    flat = squash(text)
    assert reader.metadata is not None and reader.metadata.title == QUESTION
    assert text.startswith(QUESTION[:20]) and squash(QUESTION) in flat
    for fact in [*header, f"Permalink: {permalink}"]:
        assert squash(fact) in flat, fact
    for section in report["sections"]:
        status = section["status"].replace("_", " ")
        assert squash(f"{section['title']} Status: {status}") in flat, section["id"]
    for claim in claims:
        markers = "".join(f"[{number[eid]}]" for eid in claim["evidence_ids"])
        assert squash(f"{claim['text']} {markers}") in flat, claim["text"]
    body, _, references = text.partition("\nReferences\n")
    assert references, "no References heading"
    for ref in refs:
        source = ref["title"] if ref["url"] else f"{ref['title']} ({ref['doc_id']})"
        entry = f"{ref['number']}. “{ref['quote']}” — {source}, characters {ref['start']}–{ref['end']}"
        assert squash(entry) in squash(references), entry
    # The permalink, and one link per reference with a URL (references from one source each link to it).
    assert sorted(uris) == sorted([permalink, *(r["url"] for r in refs if r["url"])])
    # Each [n] is a link to reference n's entry: as many links as markers, one place per reference number.
    cited = [number[eid] for c in claims for eid in c["evidence_ids"]]
    assert len(inside) == len(cited)
    place = dict(zip(cited, inside, strict=True))
    assert len(set(place.values())) == len(place)
    ordered = [place[n] for n in sorted(place)]  # later references stand lower on the page, or on a later page
    assert ordered == sorted(ordered, key=lambda p: (p[0], -p[1]))

    word = await client.get(f"/runs/{run_id}/report.docx")
    assert word.status_code == 200 and word.headers["content-type"] == DOCX
    assert word.headers["content-disposition"] == f'attachment; filename="veracity-{run_id[:12]}-v1.docx"'
    document = docx.Document(io.BytesIO(word.content))
    paragraphs = document.paragraphs
    assert document.core_properties.title == QUESTION
    assert (paragraphs[0].style.name, paragraphs[0].text) == ("Title", QUESTION)
    texts = [p.text for p in paragraphs]
    assert all(fact in texts for fact in header), texts[:8]
    permalink_line = next(p for p in paragraphs if p.text.startswith("Permalink: "))
    assert [(h.text, h.url) for h in permalink_line.hyperlinks] == [(permalink, permalink)]
    headings = [p.text for p in paragraphs if p.style.name == "Heading 1"]
    assert headings == [s["title"] for s in report["sections"]] + ["References"]
    bullets = [p for p in paragraphs if p.style.name == "List Bullet"]
    assert len(bullets) == len(claims)
    for paragraph, claim in zip(bullets, claims, strict=True):
        numbers = [number[eid] for eid in claim["evidence_ids"]]
        label = f" ({claim['label']})" if claim.get("label") else ""
        assert paragraph.text == f"{claim['text']} {''.join(f'[{n}]' for n in numbers)}{label}"
        assert [(h.text, h.fragment) for h in paragraph.hyperlinks] == [(f"[{n}]", f"ref_{n}") for n in numbers]
    entries = paragraphs[texts.index("References") + 1 :]
    assert len(entries) == len(refs)
    for paragraph, ref in zip(entries, refs, strict=True):
        assert paragraph.text.startswith(f"{ref['number']}. “{ref['quote']}” — {ref['title']}")
        assert f"characters {ref['start']}–{ref['end']}" in paragraph.text
        assert [h.url for h in paragraph.hyperlinks] == ([ref["url"]] if ref["url"] else [])
    assert bookmarks(document) == [f"ref_{r['number']}" for r in refs]


async def test_markdown_and_json_name_template_corpus_date_and_version(client_for, small_db_url) -> None:
    client = await client_for(make_settings(small_db_url))
    run_id, _, _ = await _finished_run(client)
    created = (await client.get(f"/v1/research/{run_id}/versions")).json()["versions"][0]["created_at"]
    md = (await client.get(f"/runs/{run_id}/report.md")).text
    title, blank, header, permalink = md.splitlines()[:4]
    assert (title, blank) == (f"# {QUESTION}", "")
    assert header == (
        f"*Template:* `market_brief` · *Corpus:* `small` · *Date:* {_expected_date(created)} · *Version:* 1 · "
        f"*Outcome:* shipped · *Run:* `{run_id}`"
    )
    assert permalink == f"*Permalink:* <http://testserver/runs/{run_id}?version=1>"
    data = (await client.get(f"/runs/{run_id}/report.json")).json()
    assert (data["template"], data["corpus"], data["version"], data["created_at"]) == (
        "market_brief",
        "small",
        1,
        created,
    )


async def test_each_version_exports_its_own_content(client_for, small_db_url) -> None:
    client = await client_for(make_settings(small_db_url))
    run_id, report, _ = await _finished_run(client)
    assert len(report["sections"]) > 1
    engine = make_engine(small_db_url)
    async with async_sessionmaker(engine)() as session, session.begin():
        v2 = {**report, "outcome_reason": "A second version.", "sections": report["sections"][:1]}
        await runs_repo.add_artifact_version(session=session, run_id=run_id, report=v2, markdown="")
    await engine.dispose()
    kept = [c["text"] for c in report["sections"][0]["claims"]]
    dropped = [c["text"] for s in report["sections"][1:] for c in s["claims"] if c["text"] not in kept]
    assert kept and dropped

    for asked, shown in ((None, 2), (2, 2), (1, 1)):
        query = f"?version={asked}" if asked else ""
        pdf = await client.get(f"/runs/{run_id}/report.pdf{query}")
        word = await client.get(f"/runs/{run_id}/report.docx{query}")
        assert pdf.headers["content-disposition"].endswith(f'-v{shown}.pdf"')
        assert word.headers["content-disposition"].endswith(f'-v{shown}.docx"')
        # The body only: the References list every quote the version carries, cited or not.
        flat = squash(read_pdf(pdf.content)[1].partition("\nReferences\n")[0])
        texts = [p.text for p in docx.Document(io.BytesIO(word.content)).paragraphs]
        paragraphs = "\n".join(texts[: texts.index("References")])
        assert f"Version:{shown}" in flat and f"\nVersion: {shown}\n" in paragraphs
        assert ("Reason:Asecondversion." in flat) == (shown == 2)
        assert ("Reason: A second version." in paragraphs) == (shown == 2)
        for text in kept:
            assert squash(text) in flat and text in paragraphs
        for text in dropped:
            assert (squash(text) in flat) == (shown == 1) and (text in paragraphs) == (shown == 1)


@pytest.mark.parametrize("suffix", ["pdf", "docx"])
async def test_an_unknown_or_malformed_version_is_refused(client_for, small_db_url, suffix: str) -> None:
    client = await client_for(make_settings(small_db_url))
    run_id, _, _ = await _finished_run(client)
    missing = await client.get(f"/runs/{run_id}/report.{suffix}?version=7")
    assert missing.status_code == 404
    assert missing.json()["error"]["message"] == messages.VERSION_UNKNOWN.format(run_id=run_id, version=7, have="1")
    assert (await client.get(f"/runs/{run_id}/report.{suffix}?version=0")).status_code == 422
    unknown = "0" * 32
    gone = await client.get(f"/runs/{unknown}/report.{suffix}")
    assert gone.status_code == 404 and gone.json()["error"]["message"] == messages.RUN_UNKNOWN.format(run_id=unknown)


# ---- text no font holds ----------------------------------------------------------------------------------------

HARD_QUESTION = "Harga “kopi” di Malaysia — berapa? 咖啡价格 커피 Кофе ăşţ 😀"
HARD_QUOTE = "Kopi “robusta” — ditanam\x00 di\u00ad Johor;\u2028 日本のコーヒー\x0b 커피 \ud800 Кофе."


def _hard_report() -> Report:
    evidence = ReportEvidence(
        id="ev1",
        doc_id="kopi",
        url="https://example.org/kopi (Malaysia)",
        title="Kopi — Wikipedia",
        quote=HARD_QUOTE,
        start=0,
        end=len(HARD_QUOTE),
        content_hash="0" * 64,
        origin_subtask_id="st1",
    )
    hostile = evidence.model_copy(update={"id": "ev2", "url": "javascript:alert(1)", "title": "<b>x</b> & y"})
    claim = Claim(text="Kopi “robusta” ditanam di Johor — 咖啡. " + "x" * 300, evidence_ids=["ev1", "ev2", "ev9"])
    section = ReportSection(id="summary", title="Ringkasan", required=True, status="thin_evidence", claims=[claim])
    return Report(
        run_id="b" * 32,
        template="answer",
        question=HARD_QUESTION,
        corpus="kopi",
        outcome="shipped",
        sections=[section],
        evidence=[evidence, hostile],
    )


@pytest.fixture(params=["DejaVu Sans", "Bitstream Vera"])
def font(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[str]:
    """Each body font the PDF may embed: the system's DejaVu Sans, or the Vera inside reportlab's wheel."""
    if request.param == "DejaVu Sans":
        # `make test` installs Debian's fonts-dejavu-core when missing: the system font path is always tested.
        assert (pdf_text.DEJAVU / "DejaVuSans.ttf").is_file(), "no DejaVu Sans: run `make chromium`"
    if request.param == "Bitstream Vera":
        monkeypatch.setattr(pdf_text, "DEJAVU", tmp_path)
    pdf_text.fonts.cache_clear()
    yield request.param
    pdf_text.fonts.cache_clear()


def test_pdf_sets_any_text_in_a_font_that_draws_it_or_says_what_it_replaced(font: str) -> None:
    when = datetime(2026, 11, 23, 12, 0)
    data = render_pdf(_hard_report(), version=1, created=when, permalink="http://testserver/runs/b?version=1")
    assert pdf_text.fonts().source == font
    reader, text, uris, inside = read_pdf(data)
    flat = squash(text)
    for piece in ("Harga“kopi”diMalaysia—berapa?", "咖啡价格", "커피", "日本のコーヒー", "Date:2026-11-2312:00UTC"):
        assert piece in flat, piece
    assert "Kopi“robusta”—ditanamdiJohor;" in flat  # controls and soft hyphens gone, never a crash
    assert ("Кофе" in flat) == (font == "DejaVu Sans")  # Vera has no Cyrillic: replaced, not fatal
    assert font == "DejaVu Sans" or ("ă" not in flat and "????" in flat)  # an accent dropped, else "?"
    assert "<b>x</b>&y(javascript:alert(1))" in flat  # markup stays text; a javascript: URL is never a link
    assert sorted(uris) == ["http://testserver/runs/b?version=1", "https://example.org/kopi%20%28Malaysia%29"]
    assert len(inside) == 2 and "[ev9:notinthereport]" in flat  # two anchors resolve; the unknown one says so
    assert "x" * 300 in flat  # a word longer than a line is split, not lost


def test_word_keeps_the_exact_text_but_for_characters_xml_cannot_hold() -> None:
    data = render_docx(_hard_report(), version=1, created=datetime(2026, 11, 23, 12, 0, tzinfo=UTC), permalink="p")
    document = docx.Document(io.BytesIO(data))
    texts = [p.text for p in document.paragraphs]
    assert texts[0] == HARD_QUESTION
    assert texts[-2].startswith(
        "1. “Kopi “robusta” — ditanam di Johor; 日本のコーヒー 커피 ? Кофе.” — Kopi — Wikipedia"
    )
    assert texts[-1].startswith("2. “Kopi") and "<b>x</b> & y (javascript:alert(1))" in texts[-1]
    links = [h.url for p in document.paragraphs for h in p.hyperlinks if h.url]
    assert links == ["p", "https://example.org/kopi%20%28Malaysia%29"]
    claim = next(p for p in document.paragraphs if p.style.name == "List Bullet")
    assert claim.text.endswith("[1][2][ev9: not in the report]")
