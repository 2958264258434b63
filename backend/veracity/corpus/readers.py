"""Turn one file into documents. Each reader raises ``IngestError`` with a reason a user can act on."""

from __future__ import annotations

import io
import json
import re
from collections.abc import Iterator
from pathlib import Path

from veracity import messages
from veracity.db.corpus_repo import DocumentIn
from veracity.errors import IngestError

SUPPORTED = (".md", ".markdown", ".txt", ".html", ".htm", ".pdf", ".jsonl")


def _corrupt(path: Path, reason: str) -> IngestError:
    return IngestError(messages.INGEST_CORRUPT.format(path=path, reason=reason))


def _decode(path: Path, raw: bytes) -> str:
    if b"\x00" in raw[:4096]:
        raise _corrupt(path, "it looks like a binary file, not text")
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise _corrupt(path, f"not UTF-8 text ({exc.reason} at byte {exc.start})") from exc


def _normalise(text: str) -> str:
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    text = re.sub(r"[ \t]+", " ", text)
    return re.sub(r"\n{3,}", "\n\n", text).strip()


def _require_text(path: Path, text: str) -> str:
    if not text.strip():
        raise _corrupt(path, "it holds no text")
    return text


def read_text(path: Path, doc_id: str) -> Iterator[DocumentIn]:
    text = _require_text(path, _normalise(_decode(path, path.read_bytes())))
    title = path.stem.replace("_", " ").replace("-", " ")
    if path.suffix.lower() in (".md", ".markdown"):
        heading = re.search(r"^#\s+(.+)$", text, re.MULTILINE)
        if heading:
            title = heading.group(1).strip()
    yield DocumentIn(doc_id=doc_id, title=title, text=text, source_path=str(path))


def read_html(path: Path, doc_id: str) -> Iterator[DocumentIn]:
    import trafilatura

    html = _decode(path, path.read_bytes())
    extracted = trafilatura.bare_extraction(html, with_metadata=True, include_comments=False)
    body = getattr(extracted, "text", None) if extracted is not None else None
    if not body:
        raise _corrupt(path, "no readable main text was found in the HTML")
    title = getattr(extracted, "title", None) or path.stem
    date = getattr(extracted, "date", None)
    yield DocumentIn(doc_id=doc_id, title=title, text=_normalise(body), source_path=str(path), published=date)


def read_pdf(path: Path, doc_id: str) -> Iterator[DocumentIn]:
    from pypdf import PdfReader
    from pypdf.errors import PdfReadError

    try:
        reader = PdfReader(io.BytesIO(path.read_bytes()), strict=False)
        pages = [page.extract_text() or "" for page in reader.pages]
        title = (reader.metadata.title if reader.metadata else None) or path.stem
    except (PdfReadError, ValueError, KeyError, TypeError, OSError) as exc:
        raise _corrupt(path, f"not a readable PDF ({exc})") from exc
    text = _require_text(path, _normalise("\n\n".join(pages)))
    yield DocumentIn(doc_id=doc_id, title=str(title), text=text, source_path=str(path))


def read_jsonl(path: Path, _doc_id: str) -> Iterator[DocumentIn]:
    """One ``{"_id"|"id", "title"?, "text"}`` object a line. Any bad line makes the whole file corrupt."""
    docs: list[DocumentIn] = []
    text = _decode(path, path.read_bytes())
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise _corrupt(path, f"line {number} is not JSON ({exc.msg})") from exc
        if not isinstance(obj, dict):
            raise _corrupt(path, f"line {number} is not a JSON object")
        raw_id = obj.get("_id", obj.get("id"))
        body = obj.get("text")
        if raw_id is None or str(raw_id).strip() == "" or not isinstance(body, str) or not body.strip():
            raise _corrupt(path, f'line {number} needs an "_id" or "id" and a non-empty "text"')
        docs.append(
            DocumentIn(
                doc_id=str(raw_id),
                title=str(obj.get("title") or ""),
                text=_normalise(body),
                url=obj.get("url") if isinstance(obj.get("url"), str) else None,
                source_path=str(path),
            )
        )
    if not docs:
        raise _corrupt(path, "it holds no documents")
    yield from docs


READERS = {
    ".md": read_text,
    ".markdown": read_text,
    ".txt": read_text,
    ".html": read_html,
    ".htm": read_html,
    ".pdf": read_pdf,
    ".jsonl": read_jsonl,
}


def read_file(path: Path, doc_id: str) -> list[DocumentIn]:
    reader = READERS.get(path.suffix.lower())
    if reader is None:
        raise IngestError(messages.INGEST_UNSUPPORTED.format(suffix=path.suffix or "(none)"))
    return list(reader(path, doc_id))
