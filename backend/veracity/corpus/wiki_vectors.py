"""``make wiki-vectors`` (``python -m veracity.corpus.wiki_vectors [--out PATH]``): build the shipped vectors of
``semantic.shipped`` from the wiki text itself, never from a database a user filled nor from the file being
replaced: the default corpus's documents are chunked as ``make corpus`` chunks them (``corpus_repo.chunk_spans`` at
the default ``VERACITY_CORPUS__CHUNK_CHARS``), every passage head is embedded by the pinned model, and the file is
written whole (a temporary file renamed over it). Run it after the model's pin or the wiki package changes;
``tests/test_shipped_vectors.py`` fails until then. Each refresh adds about 7 MB to the repository's history.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

import numpy as np
import numpy.typing as npt

from veracity.corpus.wiki import load_documents
from veracity.db.corpus_repo import DocumentIn, chunk_spans
from veracity.rank.embed import MODEL_PIN
from veracity.semantic import shipped
from veracity.semantic.model import SemanticModel, head_text, process_semantics
from veracity.semantic.shipped import FILE, KEY_BYTES, head_key
from veracity.settings import CorpusSettings

DEFAULT_OUT = Path(shipped.__file__).parent / "data" / FILE
CHUNK_CHARS = CorpusSettings.model_fields["chunk_chars"].default


def passage_heads(docs: list[DocumentIn], chunk_chars: int = CHUNK_CHARS) -> list[str]:
    """The head of each passage ``docs`` are chunked into, as ingest chunks and stores them (``chunk_spans``; a
    doc_id given twice stored once, the later)."""
    stored = {doc.doc_id: doc for doc in docs}.values()
    return [head_text(d.title, d.text[s:e]) for d in stored for s, e in chunk_spans(d.text, chunk_chars)]


def build(heads: list[str], model: SemanticModel, out: Path) -> int:
    """Embed ``heads`` (each distinct one once) and write them to ``out`` whole; how many were written."""
    unique = sorted(set(heads))
    vectors: npt.NDArray[np.float16] = model.encode_heads(unique).astype(np.float16)
    keys = np.frombuffer(b"".join(head_key(h) for h in unique), dtype=np.uint8).reshape(len(unique), KEY_BYTES)
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile(dir=out.parent, suffix=".npz", delete=False) as handle:
        partial = Path(handle.name)
        np.savez_compressed(handle, pin=np.array(MODEL_PIN), keys=keys, vectors=vectors)
    partial.chmod(0o644)  # a temporary file is private; the package's data is readable by all
    os.replace(partial, out)
    return len(unique)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m veracity.corpus.wiki_vectors", description=__doc__)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help=f"where to write (default: {DEFAULT_OUT})")
    args = parser.parse_args(argv)
    semantics = process_semantics(True)
    if semantics.model is None:
        print(f"the semantic model is not available: {semantics.reason}", file=sys.stderr)
        return 1
    heads = passage_heads(load_documents())
    written = build(heads, semantics.model, args.out)
    print(f"wrote {written} passage vectors ({MODEL_PIN}) to {args.out} ({args.out.stat().st_size:,} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
