"""The default corpus's passage vectors ship with the package (``semantic.shipped``): a machine loading the wiki
corpus stores them instead of embedding 10,094 passages, and any passage the file does not hold (another corpus,
changed text, another model) is embedded as before. ``make wiki-vectors`` (``corpus.wiki_vectors``) makes the
file from the wiki text."""

from __future__ import annotations

import asyncio
import hashlib
import sqlite3
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from conftest import load_docs
from veracity.corpus.wiki import CORPUS, load_documents
from veracity.corpus.wiki_vectors import build, passage_heads
from veracity.db.corpus_repo import DocumentIn
from veracity.db.engine import make_engine, make_sessionmaker
from veracity.rank.embed import MODEL_PIN
from veracity.semantic.model import head_text, process_semantics
from veracity.semantic.shipped import head_key, load, shipped_vectors
from veracity.semantic.vectors import ensure_vectors


def _heads(db: Path, corpus: str) -> list[tuple[str, bytes]]:
    with sqlite3.connect(db) as con:
        rows = con.execute(
            "SELECT d.title, c.text, v.vector FROM chunks c JOIN documents d ON d.id = c.document_id "
            "JOIN chunk_vectors v ON v.chunk_id = c.id WHERE d.corpus = ?",
            (corpus,),
        ).fetchall()
    return [(head_text(title, text), vector) for title, text, vector in rows]


def test_the_shipped_file_covers_every_passage_the_default_corpus_is_chunked_into(wiki_template_db: Path) -> None:
    """Fails when the wiki text, its chunking or the model's pin changed without ``make wiki-vectors``: the file
    holds exactly the heads the session's wiki template (chunked as ``make corpus`` chunks at the default size) has,
    and each stored vector is the shipped one."""
    model = process_semantics(True).model
    assert model is not None
    shipped = shipped_vectors()
    assert shipped is not None and shipped.pin == MODEL_PIN, "run `make wiki-vectors` for this model"
    stored = _heads(wiki_template_db, CORPUS)
    assert {head_key(head) for head, _ in stored} == set(shipped.rows), "run `make wiki-vectors`"
    for head, vector in stored:
        found = shipped.get(model.id, head)
        assert found is not None and found.tobytes() == vector


def test_shipped_vectors_are_the_model_s_own(wiki_template_db: Path) -> None:
    """A sample of the default corpus's passages, embedded now: the same vectors as shipped."""
    model = process_semantics(True).model
    shipped = shipped_vectors()
    assert model is not None and shipped is not None
    heads = [head for head, _ in _heads(wiki_template_db, CORPUS)[::841]]
    assert len(heads) >= 10
    fresh = model.encode_heads(heads)
    for head, vector in zip(heads, fresh, strict=True):
        found = shipped.get(model.id, head)
        assert found is not None
        cosine = float(np.dot(found.astype(np.float32), vector) / np.linalg.norm(found.astype(np.float32)))
        assert cosine > 0.999, head[:80]


class Counting:
    """The real model, counting the heads it is asked to embed."""

    def __init__(self, inner: Any, id: str | None = None) -> None:
        self.inner, self.id = inner, id or inner.id
        self.heads: list[str] = []

    def encode_heads(self, heads: list[str]) -> Any:
        self.heads += heads
        return self.inner.encode_heads(heads)


def _vectors(url: str, corpus: str) -> dict[str, bytes]:
    path = Path(url.split("///", 1)[1])
    return dict(_heads(path, corpus))


@pytest.mark.parametrize(
    ("corpus", "model_id", "embedded"),
    [
        (CORPUS, None, 1),  # the default corpus: only the passage the file does not hold is embedded
        ("notes", None, 1),  # the key is the text: any corpus holding a wiki passage gets its vector
        (CORPUS, "another-model", 2),  # another model's vectors are never mixed in
    ],
)
def test_a_passage_the_file_holds_is_stored_not_embedded(
    db_url: str, corpus: str, model_id: str | None, embedded: int
) -> None:
    model = process_semantics(True).model
    assert model is not None
    known = next(d for d in load_documents() if 200 < len(d.text) < 1000)
    new = DocumentIn(doc_id="zephyr", title="Zephyr pumps", text="Zephyr heat pumps were first sold in Norway in 2011.")
    asyncio.run(load_docs(db_url, corpus, [known, new]))
    counting = Counting(model, model_id)
    engine = make_engine(db_url)
    try:
        made = asyncio.run(ensure_vectors(sessionmaker=make_sessionmaker(engine), model=counting, corpus=corpus))  # type: ignore[arg-type]
    finally:
        asyncio.run(engine.dispose())
    assert made == 2 and len(counting.heads) == embedded
    stored = _vectors(db_url, corpus)
    (known_head,) = [head for head in stored if "Zephyr" not in head]
    assert (known_head in counting.heads) == (embedded == 2)
    assert any("Zephyr" in head for head in counting.heads)
    shipped = shipped_vectors()
    assert shipped is not None
    from_file = shipped.get(model.id, known_head)
    assert from_file is not None
    vector = np.frombuffer(stored[known_head], dtype=np.float16).astype(np.float32)
    if embedded == 1:
        assert stored[known_head] == from_file.tobytes()
    else:  # embedded here: the same up to the CPU's arithmetic
        assert float(np.dot(vector, from_file.astype(np.float32))) > 0.999


def test_the_build_writes_a_whole_readable_file_that_reads_back(tmp_path: Path) -> None:
    """``make wiki-vectors`` on two documents: chunked as ingest chunks, embedded, written whole (readable by all),
    and read back to the same vectors, keys with a trailing zero byte included."""
    model = process_semantics(True).model
    assert model is not None
    docs = [
        DocumentIn(doc_id="a", title="Zephyr pumps", text="Zephyr heat pumps were first sold in Norway in 2011."),
        DocumentIn(
            doc_id="b", title="Tea", text=" ".join(f"Tea garden {i} picks its leaves by hand." for i in range(60))
        ),
    ]
    heads = passage_heads(docs)
    assert len(heads) == 3 and heads[0].startswith("Zephyr pumps")
    out = tmp_path / "vectors.npz"
    assert build(heads + heads[:1], model, out) == 3  # a repeated head is written once
    assert out.stat().st_mode & 0o777 == 0o644
    assert [p.name for p in tmp_path.iterdir()] == ["vectors.npz"]  # no temporary file left
    read = load(out)
    assert read is not None and len(read) == 3
    fresh = model.encode_heads(heads).astype(np.float16)
    for head, vector in zip(heads, fresh, strict=True):
        found = read.get(model.id, head)
        assert found is not None and found.tobytes() == vector.tobytes()
    assert read.get("another-model", heads[0]) is None


def test_an_unreadable_file_or_one_of_another_pin_is_not_used(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    broken = tmp_path / "broken.npz"
    broken.write_bytes(b"PK\x03\x04 not a zip")
    other = tmp_path / "other.npz"
    np.savez_compressed(
        other,
        pin=np.array("another model"),
        keys=np.zeros((1, 16), dtype=np.uint8),
        vectors=np.zeros((1, 384), dtype=np.float16),
    )
    with caplog.at_level("WARNING"):
        assert load(broken) is None and load(other) is None
    assert "cannot be read" in caplog.text and "not the pinned" in caplog.text


def test_every_key_keeps_its_sixteen_bytes() -> None:
    shipped = shipped_vectors()
    assert shipped is not None
    # About one key in 256 ends in a zero byte, which numpy's "S16" strings would drop.
    assert all(len(key) == 16 for key in shipped.rows) and any(key.endswith(b"\0") for key in shipped.rows)
    assert head_key("x") == hashlib.sha256(b"x").digest()[:16]
