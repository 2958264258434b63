"""Storage on both databases: migrations up/down/up, event and artifact sequencing, full-text search,
and ingest (idempotent by id, one bad file never aborts the rest)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from sqlalchemy import inspect

from conftest import SMALL_CORPUS, load_docs, sqlite_url, write_jsonl
from veracity.corpus.ingest import ingest_path
from veracity.db import corpus_repo, runs_repo
from veracity.db.engine import make_engine, make_sessionmaker
from veracity.db.migrate import downgrade, upgrade

TABLES = {"research_runs", "run_events", "artifact_versions", "documents", "chunks", "alembic_version"}


def _tables(url: str) -> set[str]:
    async def go() -> set[str]:
        engine = make_engine(url)
        async with engine.connect() as conn:
            names = await conn.run_sync(lambda c: set(inspect(c).get_table_names()))
        await engine.dispose()
        return names

    return asyncio.run(go())


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def any_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return sqlite_url(tmp_path / "s.db")
    return request.getfixturevalue("pg_url")


def test_migrations_up_down_up(any_url: str) -> None:
    upgrade(any_url)
    assert TABLES <= _tables(any_url)
    downgrade(any_url)
    assert _tables(any_url) & (TABLES - {"alembic_version"}) == set()
    upgrade(any_url)
    assert TABLES <= _tables(any_url)


async def _repo_round_trip(url: str) -> None:
    engine = make_engine(url)
    sm = make_sessionmaker(engine)
    try:
        async with sm() as session, session.begin():
            await runs_repo.create_run(
                session=session,
                run_id="b" * 32,
                template_id="market_brief",
                question="q",
                corpus="small",
                budgets={"max_pages": 3},
            )
            seqs = [
                (await runs_repo.append_event(session=session, run_id="b" * 32, name=f"e{i}", payload={"i": i})).seq
                for i in range(3)
            ]
            versions = [
                (
                    await runs_repo.add_artifact_version(
                        session=session, run_id="b" * 32, report={"v": i}, markdown=f"# {i}"
                    )
                ).version
                for i in range(2)
            ]
        assert seqs == [1, 2, 3] and versions == [1, 2]
        async with sm() as session:
            after = await runs_repo.events_after(session=session, run_id="b" * 32, after_seq=1)
            assert [(e.seq, e.name, e.payload) for e in after] == [(2, "e1", {"i": 1}), (3, "e2", {"i": 2})]
            latest = await runs_repo.latest_artifact(session=session, run_id="b" * 32)
            assert latest is not None and latest.report == {"v": 1} and latest.version == 2
    finally:
        await engine.dispose()


def test_events_and_artifact_versions_are_numbered_per_run(any_url: str) -> None:
    upgrade(any_url)
    asyncio.run(_repo_round_trip(any_url))


async def _search(url: str, query: str) -> list[str]:
    engine = make_engine(url)
    try:
        async with make_sessionmaker(engine)() as session:
            hits = await corpus_repo.search_chunks(session=session, corpus="small", query=query, k=5)
            return [h.doc_id for h in hits]
    finally:
        await engine.dispose()


def test_full_text_search_ranks_the_matching_document_first(any_url: str) -> None:
    upgrade(any_url)
    asyncio.run(load_docs(any_url, "small", SMALL_CORPUS))
    assert asyncio.run(_search(any_url, "Who grows the most tea?"))[0] == "tea"
    assert asyncio.run(_search(any_url, "electric cars sold in 2023"))[0] == "electric-car"
    assert asyncio.run(_search(any_url, "the of and")) == []  # only stopwords: no query, no hits
    assert asyncio.run(_search(any_url, "zeppelin")) == []


def test_chunks_keep_offsets_into_the_document(tmp_path: Path) -> None:
    text = " ".join(f"Sentence number {i} says something plain." for i in range(60))
    spans = corpus_repo.chunk_spans(text, 300)
    assert len(spans) > 1 and spans[0][0] == 0 and spans[-1][1] == len(text)
    for (_s1, e1), (s2, _) in zip(spans, spans[1:], strict=False):
        assert e1 <= s2 and text[e1:s2].strip() == ""


async def _ingest(url: str, path: Path) -> dict[str, object]:
    engine = make_engine(url)
    try:
        report = await ingest_path(sessionmaker=make_sessionmaker(engine), path=path, corpus="docs", chunk_chars=500)
        return report.as_dict()
    finally:
        await engine.dispose()


def test_ingest_is_idempotent_and_skips_only_the_corrupt_file(db_url: str, tmp_path: Path) -> None:
    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "a.md").write_text("# Alpha\n\nAlpha particles are helium nuclei emitted in radioactive decay.\n")
    (folder / "b.txt").write_text("Beta decay turns a neutron into a proton, an electron and an antineutrino.\n")
    (folder / "c.html").write_text(
        "<html><head><title>Gamma</title></head><body><nav>menu</nav><article><p>Gamma rays are the most "
        "energetic electromagnetic radiation, emitted by atomic nuclei during radioactive decay.</p>"
        "<p>They penetrate matter deeply and need thick lead or concrete shielding.</p></article></body></html>"
    )
    write_jsonl(
        folder / "d.jsonl",
        [
            {"_id": "x1", "title": "X", "text": "X rays were discovered in 1895."},
            {"id": 7, "text": "Neutrons were discovered in 1932 by James Chadwick."},
        ],
    )
    (folder / "e.pdf").write_bytes(b"%PDF-1.4 this is not really a pdf")
    (folder / "f.txt").write_bytes(b"\xff\xfe\x00bad")
    (folder / "g.jsonl").write_text('{"_id": "ok", "text": "fine"}\nnot json\n')
    first = asyncio.run(_ingest(db_url, folder))
    assert first["added"] == 5 and first["files"] == 4
    errors = "\n".join(first["errors"])  # type: ignore[arg-type]
    assert "e.pdf: not a readable PDF" in errors
    assert "f.txt: it looks like a binary file, not text" in errors
    assert "g.jsonl: line 2 is not JSON" in errors
    second = asyncio.run(_ingest(db_url, folder))
    assert (second["added"], second["unchanged"]) == (0, 5)
    (folder / "b.txt").write_text("Beta decay was explained by Enrico Fermi in 1934 with a new interaction.\n")
    third = asyncio.run(_ingest(db_url, folder))
    assert (third["added"], third["updated"], third["unchanged"]) == (0, 1, 4)
    assert asyncio.run(_search_docs(db_url, "Fermi interaction")) == ["b.txt"]
    assert asyncio.run(_search_docs(db_url, "antineutrino")) == []  # old text gone


async def _search_docs(url: str, query: str) -> list[str]:
    engine = make_engine(url)
    try:
        async with make_sessionmaker(engine)() as session:
            return [h.doc_id for h in await corpus_repo.search_chunks(session=session, corpus="docs", query=query, k=5)]
    finally:
        await engine.dispose()


def test_a_batch_stores_each_document_as_one_at_a_time_would(any_url: str) -> None:
    """Documents are written a batch at a time: one added, one given twice with new text (the later replaces the
    earlier), one given twice the same (unchanged the second time), and, ingested again, one changed and the rest
    unchanged; the chunks and the search follow the stored text."""
    from veracity.corpus.ingest import IngestReport, ingest_documents
    from veracity.db.corpus_repo import DocumentIn

    upgrade(any_url)

    async def ingest(docs: list[DocumentIn]) -> dict[str, int]:
        engine = make_engine(any_url)
        try:
            report = IngestReport()
            await ingest_documents(
                sessionmaker=make_sessionmaker(engine), corpus="small", docs=docs, chunk_chars=60, report=report
            )
            return {k: getattr(report, k) for k in ("added", "updated", "unchanged")}
        finally:
            await engine.dispose()

    async def stored() -> dict[str, str]:
        """Each document's text, checked against its chunks: numbered in order, each at the offsets chunking the
        stored text gives, holding that span."""
        engine = make_engine(any_url)
        Document, Chunk = corpus_repo.Document, corpus_repo.Chunk
        try:
            async with make_sessionmaker(engine)() as session:
                docs = {d.doc_id: d for d in await session.scalars(corpus_repo.select(Document))}
                chunks = (await session.scalars(corpus_repo.select(Chunk).order_by(Chunk.document_id, Chunk.ord))).all()
        finally:
            await engine.dispose()
        for doc in docs.values():
            mine = [(c.ord, c.start, c.end, c.text) for c in chunks if c.document_id == doc.id]
            spans = corpus_repo.chunk_spans(doc.text, 60)
            assert doc.doc_id != "tea" or len(spans) > 1  # a document of several chunks is among them
            assert mine == [(i, s, e, doc.text[s:e]) for i, (s, e) in enumerate(spans)]
        assert {c.document_id for c in chunks} == {d.id for d in docs.values()}  # no chunk of a replaced text left
        return {doc_id: d.text for doc_id, d in docs.items()}

    tea = "Tea is grown in China and India. It is brewed from cured leaves. Green tea is not oxidised."
    first = [
        DocumentIn("tea", "Tea", tea),
        DocumentIn("kettle", "Kettle", "The kettle boils water in four minutes."),
        DocumentIn("coffee", "Coffee", "Coffee is grown in Brazil."),
        DocumentIn("kettle", "Kettle", "The kettle boils water in three minutes and switches itself off."),
        DocumentIn("coffee", "Coffee", "Coffee is grown in Brazil."),
    ]
    assert asyncio.run(ingest(first)) == {"added": 3, "updated": 1, "unchanged": 1}
    texts = asyncio.run(stored())
    assert texts == {
        "coffee": "Coffee is grown in Brazil.",
        "kettle": "The kettle boils water in three minutes and switches itself off.",
        "tea": tea,
    }
    assert asyncio.run(_search(any_url, "switches itself off")) == ["kettle"]
    second = [DocumentIn("tea", "Tea", tea), DocumentIn("coffee", "Coffee", "Coffee is grown in Vietnam.")]
    assert asyncio.run(ingest(second)) == {"added": 0, "updated": 1, "unchanged": 1}
    assert asyncio.run(stored())["coffee"] == "Coffee is grown in Vietnam."
    assert asyncio.run(_search(any_url, "Vietnam")) == ["coffee"] and asyncio.run(_search(any_url, "Brazil")) == []
