"""Documents in the browser and the API: an upload's files are staged, ingested one by one (ingested, unchanged,
refused and why), each step an upload event streamed as SSE; the corpora page lists what the reader may see; a
document or a whole corpus can be removed. With accounts an uploaded corpus is its owner's: others get 404 for
it, cannot search it, and cannot upload into its name; shared corpora are changed by admins only."""

from __future__ import annotations

import io
import json
import tempfile
from typing import Any

from httpx import AsyncClient
from reportlab.pdfgen import canvas
from sqlalchemy import select

from conftest import form, make_settings
from test_accounts import auth_settings, browser_of, rows, signup
from veracity import messages
from veracity.corpus.uploads import STALE_AFTER
from veracity.db.engine import make_engine
from veracity.db.models import Chunk, Corpus, Document, SecurityEvent, Upload, UploadEvent, utcnow

NOTES = (
    "# Solar notes\n\nThe rooftop array on building 4 produced 38 megawatt-hours in 2025. "
    "Output fell in December because of snow on the panels.\n"
)
JSONL = '{"id": "a", "title": "Tidal power", "text": "The Sihwa Lake plant generates 552 gigawatt-hours a year."}\n'


def files(*named: tuple[str, bytes | str]) -> list[tuple[str, tuple[str, bytes, str]]]:
    return [
        ("files", (name, body.encode() if isinstance(body, str) else body, "application/octet-stream"))
        for name, body in named
    ]


async def upload(client: AsyncClient, corpus: str, *named: tuple[str, bytes | str], new: bool = True) -> Any:
    fields = form(new_corpus=corpus) if new else form(corpus=corpus)
    return await client.post("/corpora/upload", data=fields, files=files(*named))


async def finished(client: AsyncClient, upload_id: str) -> list[tuple[str, dict[str, Any]]]:
    """The upload's events, read from its JSON stream until its last."""
    events: list[tuple[str, dict[str, Any]]] = []
    async with client.stream("GET", f"/v1/uploads/{upload_id}/events") as response:
        assert response.status_code == 200
        name = ""
        async for line in response.aiter_lines():
            if line.startswith("event:"):
                name = line.split(":", 1)[1].strip()
            elif line.startswith("data:"):
                events.append((name, json.loads(line.split(":", 1)[1])))
    return events


async def test_upload_from_the_form_ingests_reports_each_file_and_the_corpus_is_searchable(client_for, db_url) -> None:
    client = await client_for(make_settings(db_url))
    response = await upload(
        client, "notes", ("solar.md", NOTES), ("tidal.jsonl", JSONL), ("photo.png", b"\x89PNG"), ("empty.txt", "")
    )
    assert response.status_code == 303
    upload_id = response.headers["location"].rsplit("/", 1)[1]
    events = await finished(client, upload_id)
    names = [name for name, _ in events]
    assert names[0] == "upload_started" and names[-1] == "upload_complete"
    steps = {p["name"]: p for name, p in events if name == "file_done"}
    assert steps["solar.md"]["outcome"] == "ingested" and steps["solar.md"]["documents"] == 1
    assert steps["tidal.jsonl"]["outcome"] == "ingested"
    assert steps["photo.png"]["outcome"] == "refused"
    assert "Unsupported file type '.png'" in steps["photo.png"]["reason"]
    assert steps["empty.txt"]["outcome"] == "refused"
    assert "veracity-upload-" not in json.dumps(events)  # the staging folder is never shown
    assert [p["done"] for name, p in events if name == "file_done"] == [1, 2, 3, 4]
    summary = events[-1][1]
    assert (summary["added"], summary["corpus"]) == (2, "notes")

    page = await client.get(f"/uploads/{upload_id}")
    assert page.status_code == 200
    assert 'data-name="solar.md"' in page.text and "Done." in page.text and "sse-connect" not in page.text

    # The same file again: unchanged; an edited one: updated (same name → same document).
    again = await upload(client, "notes", ("solar.md", NOTES), new=False)
    steps2 = [
        p for name, p in await finished(client, again.headers["location"].rsplit("/", 1)[1]) if name == "file_done"
    ]
    assert steps2[0]["outcome"] == "unchanged"
    assert await rows(db_url, Document, Document.corpus == "notes") == 2

    # Searchable: a run on the uploaded corpus ships the uploaded fact.
    question = form(question="How much did the rooftop array produce in 2025?", template="answer", corpus="notes")
    started = await client.post("/runs", data=question)
    assert started.status_code == 303
    run_id = started.headers["location"].rsplit("/", 1)[1]
    await client.app.state.service.wait(run_id)
    report = (await client.get(f"/v1/research/{run_id}")).json()["report"]
    shipped = " ".join(c["text"] for s in report["sections"] for c in s["claims"])
    assert report["outcome"] == "shipped" and "38 megawatt-hours" in shipped
    listing = await client.get("/corpora")
    row = listing.text.split('data-corpus="notes"', 1)[1].split("</tr>", 1)[0]
    assert "<td>shared</td>" in row  # single-user mode: no owner


async def test_corpus_page_lists_documents_and_removes_one_then_the_whole_corpus(client_for, db_url) -> None:
    client = await client_for(make_settings(db_url))
    response = await upload(client, "notes", ("solar.md", NOTES), ("tidal.jsonl", JSONL))
    await finished(client, response.headers["location"].rsplit("/", 1)[1])
    page = await client.get("/corpora/notes")
    assert page.status_code == 200
    assert "Solar notes" in page.text and "Tidal power" in page.text and "2 documents" in page.text
    engine = make_engine(db_url)
    async with engine.connect() as conn:
        solar = await conn.scalar(select(Document.id).where(Document.doc_id == "solar.md"))
    await engine.dispose()
    removed = await client.post(f"/corpora/notes/documents/{solar}/delete", data=form())
    assert removed.status_code == 303
    assert await rows(db_url, Document, Document.corpus == "notes") == 1
    assert await rows(db_url, Chunk, Chunk.document_id == solar) == 0
    again = await client.post(f"/corpora/notes/documents/{solar}/delete", data=form())
    assert again.status_code == 404

    confirm = await client.get("/corpora/notes/delete")
    assert "Delete corpus" in confirm.text and 'id="delete-corpus-form"' in confirm.text
    assert await rows(db_url, Document, Document.corpus == "notes") == 1  # asking deletes nothing
    gone = await client.post("/corpora/notes/delete", data=form())
    assert gone.status_code == 303
    assert await rows(db_url, Document, Document.corpus == "notes") == 0
    assert await rows(db_url, Corpus, Corpus.name == "notes") == 0
    assert await rows(db_url, Upload, Upload.corpus == "notes") == 0
    assert await rows(db_url, UploadEvent) == 0
    assert (await client.get("/corpora/notes")).status_code == 404
    actions = await rows(db_url, SecurityEvent, SecurityEvent.action.in_(["document_deleted", "corpus_deleted"]))
    assert actions == 2


async def test_bad_uploads_are_refused_with_a_message_and_store_nothing(client_for, db_url) -> None:
    client = await client_for(make_settings(db_url, max_body_bytes=2000))
    nothing = await client.post("/corpora/upload", data=form(new_corpus="notes"))
    assert nothing.status_code == 400 and messages.UPLOAD_NO_FILES in nothing.text
    unnamed = await client.post("/corpora/upload", data=form(), files=files(("a.md", NOTES)))
    assert unnamed.status_code == 400 and messages.UPLOAD_CORPUS_NEEDED in unnamed.text
    bad_name = await upload(client, "no spaces allowed", ("a.md", NOTES))
    assert bad_name.status_code == 400 and "Corpus names are 1-64 letters" in bad_name.text
    reserved = await upload(client, "web", ("a.md", NOTES))
    assert reserved.status_code == 400 and "reserved" in reserved.text
    no_csrf = await client.post("/corpora/upload", data={"new_corpus": "notes"}, files=files(("a.md", NOTES)))
    assert no_csrf.status_code == 403
    # The upload routes take more than the 2,000-byte body limit of the rest (their own limit), others do not.
    big = "word " * 1000
    assert (await upload(client, "notes", ("big.md", big))).status_code == 303
    assert (await client.post("/v1/research", json={"question": big, "template": "answer"})).status_code == 413
    assert await rows(db_url, Upload) == 1


async def test_upload_limits_files_and_bytes(client_for, db_url) -> None:
    settings = make_settings(db_url).model_copy(deep=True)
    settings.corpus.max_upload_files = 2
    settings.corpus.max_upload_bytes = 20_000
    client = await client_for(settings)
    three = await upload(client, "notes", ("a.md", NOTES), ("b.md", NOTES), ("c.md", NOTES))
    assert three.status_code == 400 and "3 files in one upload" in three.text
    huge = await upload(client, "notes", ("a.md", "x" * 30_000))
    assert huge.status_code == 413
    assert await rows(db_url, Upload) == 0


async def test_with_accounts_an_uploaded_corpus_is_its_owners(client_for, db_url) -> None:
    ada = await client_for(auth_settings(db_url, open_signup=True))
    await signup(ada, "ada")  # the first account: admin
    bob = browser_of(ada)
    await signup(bob, "bob")
    cy = browser_of(ada)
    await signup(cy, "cyd")

    made = await upload(bob, "bobs-notes", ("solar.md", NOTES))
    assert made.status_code == 303
    upload_id = made.headers["location"].rsplit("/", 1)[1]
    await finished(bob, upload_id)
    assert await rows(db_url, Corpus, Corpus.name == "bobs-notes", Corpus.user_id.is_not(None)) == 1

    # Another user: 404 on the corpus, its upload and its stream; not listed; not searchable; name not reusable.
    assert (await cy.get("/corpora/bobs-notes")).status_code == 404
    assert (await cy.get(f"/uploads/{upload_id}")).status_code == 404
    assert (await cy.get(f"/v1/uploads/{upload_id}/events")).status_code == 404
    assert "bobs-notes" not in (await cy.get("/corpora")).text
    assert "bobs-notes" not in json.dumps((await cy.get("/v1/corpora")).json())
    asked = await cy.post("/runs", data=form(question="rooftop array output", template="answer", corpus="bobs-notes"))
    assert asked.status_code == 422 and "Unknown corpus &#39;bobs-notes&#39;" in asked.text
    assert "bobs-notes" not in (await cy.get("/")).text  # not offered on the home page either
    taken = await upload(cy, "bobs-notes", ("mine.md", NOTES))
    assert taken.status_code == 400
    assert messages.CORPUS_TAKEN.format(corpus="bobs-notes").replace("'", "&#39;") in taken.text
    assert (await cy.delete("/v1/corpora/bobs-notes")).status_code == 404
    assert (await cy.post("/corpora/bobs-notes/delete", data=form())).status_code == 404
    assert await rows(db_url, Document, Document.corpus == "bobs-notes") == 1

    # The owner searches it; the admin sees it too.
    assert "bobs-notes" in (await bob.get("/corpora")).text
    assert (await ada.get("/corpora/bobs-notes")).status_code == 200

    # A shared corpus (made by the CLI or bundled) is searched by all and changed by admins only.
    shared = await upload(ada, "team", ("tidal.jsonl", JSONL))
    await finished(ada, shared.headers["location"].rsplit("/", 1)[1])
    assert (await bob.get("/corpora/team")).status_code == 404  # ada's own, not shared
    engine = make_engine(db_url)
    async with engine.begin() as conn:
        await conn.execute(Corpus.__table__.update().where(Corpus.name == "team").values(user_id=None))
    await engine.dispose()
    assert (await bob.get("/corpora/team")).status_code == 200
    refused = await bob.delete("/v1/corpora/team")
    assert refused.status_code == 403
    not_yours = await upload(bob, "team", ("x.md", NOTES), new=False)
    assert not_yours.status_code == 400
    assert messages.CORPUS_NOT_YOURS.format(corpus="team").replace("'", "&#39;") in not_yours.text
    assert await rows(db_url, Document, Document.corpus == "team") == 1

    # The owner deletes their corpus through the API.
    deleted = await bob.delete("/v1/corpora/bobs-notes")
    assert deleted.status_code == 200 and deleted.json()["deleted_documents"] == 1
    assert await rows(db_url, Corpus, Corpus.name == "bobs-notes") == 0


async def test_api_upload_returns_202_and_streams_events(client_for, db_url) -> None:
    client = await client_for(make_settings(db_url))
    response = await client.post("/v1/corpora/api-notes/documents", files=files(("solar.md", NOTES)))
    assert response.status_code == 202
    body = response.json()
    events = await finished(client, body["upload_id"])
    # The semantic model is in the default install: the new passages are embedded before the upload ends.
    assert [n for n, _ in events] == ["upload_started", "file_done", "embedding", "upload_complete"]
    assert events[-1][1]["vectors"] >= 1
    status = (await client.get(f"/v1/uploads/{body['upload_id']}")).json()
    assert status["status"] == "done" and status["report"]["added"] == 1
    # Resumable: after the first event, only the later ones.
    async with client.stream("GET", f"/v1/uploads/{body['upload_id']}/events", headers={"Last-Event-ID": "1"}) as r:
        text = "".join([line + "\n" async for line in r.aiter_lines()])
    assert "upload_started" not in text and "upload_complete" in text
    listing = (await client.get("/v1/corpora")).json()["corpora"]
    assert {"name": "api-notes", "documents": 1}.items() <= next(c for c in listing if c["name"] == "api-notes").items()
    docs = (await client.get("/v1/corpora/api-notes")).json()
    assert docs["documents"][0]["doc_id"] == "solar.md"
    removed = await client.delete(f"/v1/corpora/api-notes/documents/{docs['documents'][0]['id']}")
    assert removed.json()["deleted_documents"] == 1


def _pdf(text: str) -> bytes:
    """A one-page PDF holding ``text`` (reportlab, a dependency of the PDF export)."""
    buffer = io.BytesIO()
    page = canvas.Canvas(buffer)
    page.drawString(72, 720, text)
    page.save()
    return buffer.getvalue()


async def test_pdf_and_html_uploads_are_read_and_a_broken_pdf_is_refused(client_for, db_url) -> None:
    client = await client_for(make_settings(db_url))
    html = "<html><head><title>Wind farm</title></head><body><p>The wind farm has 12 turbines.</p></body></html>"
    response = await upload(
        client,
        "mixed",
        ("report.pdf", _pdf("The geothermal plant supplies 9 megawatts.")),
        ("wind.html", html),
        ("broken.pdf", b"%PDF-1.4 this is not really a pdf"),
    )
    events = await finished(client, response.headers["location"].rsplit("/", 1)[1])
    steps = {p["name"]: p for name, p in events if name == "file_done"}
    assert steps["report.pdf"]["outcome"] == "ingested" and steps["wind.html"]["outcome"] == "ingested"
    assert steps["broken.pdf"]["outcome"] == "refused" and "broken.pdf" in steps["broken.pdf"]["reason"]
    docs = (await client.get("/v1/corpora/mixed")).json()["documents"]
    assert {d["doc_id"] for d in docs} == {"report.pdf", "wind.html"}
    assert "Wind farm" in {d["title"] for d in docs}


async def test_odd_file_names_are_reduced_to_base_names_or_refused_and_staging_is_cleaned(
    client_for, db_url, tmp_path, monkeypatch
) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # where this test's staging folders go
    client = await client_for(make_settings(db_url))
    long_name = "é" * 130 + ".md"  # 130 characters, 260 bytes: over a file system's 255
    response = await upload(
        client,
        "names",
        ("../escape.md", NOTES),
        ("dir/inner.md", "Inner note: the pump runs at 40 litres a minute."),
        ("C:\\\\Users\\\\x\\\\windows.md", "Windows note: the valve opens at 3 bar."),
        (".env.md", "SECRET=1"),
        (long_name, NOTES),
        ("inner.md", "The same name twice."),
    )
    events = await finished(client, response.headers["location"].rsplit("/", 1)[1])
    steps = [(p["name"], p["outcome"], p.get("reason")) for n, p in events if n == "file_done"]
    ingested = {name for name, outcome, _ in steps if outcome == "ingested"}
    assert ingested == {"escape.md", "inner.md", "windows.md"}
    reasons = {reason for _, outcome, reason in steps if outcome == "refused"}
    assert messages.UPLOAD_NO_NAME in reasons  # ".env.md": a dot-file has no usable name
    assert messages.UPLOAD_DUPLICATE.format(name="inner.md") in reasons
    assert any(r.startswith("Refused '" + "é" * 80) and "cannot be stored" in r for r in reasons)
    docs = {d["doc_id"] for d in (await client.get("/v1/corpora/names")).json()["documents"]}
    assert docs == {"escape.md", "inner.md", "windows.md"}
    assert not list(tmp_path.glob("veracity-upload-*"))  # every staging folder is gone


async def test_a_name_is_held_from_the_upload_that_makes_it_even_if_every_file_is_refused(client_for, db_url) -> None:
    ada = await client_for(auth_settings(db_url, open_signup=True))
    await signup(ada, "ada")
    bob, cyd = browser_of(ada), browser_of(ada)
    await signup(bob, "bob")
    await signup(cyd, "cyd")
    made = await upload(bob, "held", ("photo.png", b"\x89PNG"))
    await finished(bob, made.headers["location"].rsplit("/", 1)[1])
    taken = await upload(cyd, "held", ("a.md", NOTES))
    assert taken.status_code == 400 and messages.CORPUS_TAKEN.format(corpus="held").replace("'", "&#39;") in taken.text
    assert await rows(db_url, Corpus, Corpus.name == "held", Corpus.user_id.is_not(None)) == 1
    listing = (await bob.get("/v1/corpora")).json()["corpora"]
    assert {"name": "held", "documents": 0, "shared": False}.items() <= next(
        c for c in listing if c["name"] == "held"
    ).items()


async def test_an_upload_whose_process_died_is_ended_and_no_longer_holds_its_corpus(client_for, db_url) -> None:
    client = await client_for(make_settings(db_url))
    made = await upload(client, "notes", ("solar.md", NOTES))
    await finished(client, made.headers["location"].rsplit("/", 1)[1])
    engine = make_engine(db_url)
    async with engine.begin() as conn:  # an upload a dead process left running: untouched for long
        await conn.execute(
            Upload.__table__.insert().values(
                id="d" * 32,
                corpus="notes",
                user_id=None,
                status="running",
                report={},
                created_at=utcnow() - STALE_AFTER * 2,
                updated_at=utcnow() - STALE_AFTER * 2,
            )
        )
        await conn.execute(
            Upload.__table__.insert().values(
                id="e" * 32,
                corpus="notes",
                user_id=None,
                status="running",
                report={},
                created_at=utcnow(),
                updated_at=utcnow(),
            )
        )
    await engine.dispose()
    # A live one (touched just now) holds the corpus: 409 with the message.
    busy = await client.delete("/v1/corpora/notes")
    assert busy.status_code == 409
    assert busy.json()["error"]["message"] == messages.CORPUS_UPLOADING.format(corpus="notes", upload="e" * 32)
    # The dead one's stream ends, with the event that says so.
    events = await finished(client, "d" * 32)
    assert events[-1][0] == "upload_failed" and "cut off" in events[-1][1]["message"]
    assert (await client.get("/v1/uploads/" + "d" * 32)).json()["status"] == "failed"
