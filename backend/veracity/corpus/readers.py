"""Turn one file into documents. Each reader raises ``IngestError`` with a reason a user can act on.

The HTML and PDF readers hand untrusted bytes to third-party parsers, which raise whatever they raise on a
malformed file (pypdf: ``KeyError``, ``IndexError``, ``RecursionError``, ...); there, and only there, any
exception is this file's problem and becomes its ``IngestError``, never the end of a folder's ingest."""

from __future__ import annotations

import io
import logging
import re
from collections.abc import Iterator
from pathlib import Path

from veracity import messages
from veracity.db.corpus_repo import DocumentIn
from veracity.db.models import DOC_ID_MAX
from veracity.errors import IngestError
from veracity.inputs import loads_json, unstorable

logger = logging.getLogger(__name__)

SUPPORTED = (".md", ".markdown", ".txt", ".html", ".htm", ".pdf", ".jsonl")


def _corrupt(path: Path, reason: str) -> IngestError:
    return IngestError(messages.INGEST_CORRUPT.format(path=path, reason=reason))


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise _corrupt(path, exc.strerror or type(exc).__name__) from exc


def _parser_failed(path: Path, kind: str, exc: Exception) -> IngestError:
    logger.debug("the %s parser failed on %s", kind, path, exc_info=True)
    return _corrupt(path, f"not a readable {kind} ({type(exc).__name__}: {str(exc)[:200]})")


def _decode(path: Path, raw: bytes) -> str:
    if b"\x00" in raw[:4096]:
        raise _corrupt(path, "it looks like a binary file, not text")
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise _corrupt(path, f"not UTF-8 text ({exc.reason} at byte {exc.start})") from exc
    if "\x00" in text:
        raise _corrupt(path, "it holds a NUL character, which no text can (is it a binary file?)")
    return text


def _normalise(text: str) -> str:
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    text = re.sub(r"[ \t]+", " ", text)
    return re.sub(r"\n{3,}", "\n\n", text).strip()


def _require_text(path: Path, text: str) -> str:
    if not text.strip():
        raise _corrupt(path, "it holds no text")
    return text


def read_text(path: Path, doc_id: str) -> Iterator[DocumentIn]:
    text = _require_text(path, _normalise(_decode(path, _read(path))))
    title = path.stem.replace("_", " ").replace("-", " ")
    if path.suffix.lower() in (".md", ".markdown"):
        heading = re.search(r"^#\s+(.+)$", text, re.MULTILINE)
        if heading:
            title = heading.group(1).strip()
    yield DocumentIn(doc_id=doc_id, title=title, text=text, source_path=str(path))


def read_html(path: Path, doc_id: str) -> Iterator[DocumentIn]:
    import trafilatura

    html = _decode(path, _read(path))
    try:
        extracted = trafilatura.bare_extraction(html, with_metadata=True, include_comments=False)
    except Exception as exc:  # untrusted bytes into a third-party parser: see the module docstring
        raise _parser_failed(path, "HTML page", exc) from exc
    body = getattr(extracted, "text", None) if extracted is not None else None
    if not body:
        raise _corrupt(path, "no readable main text was found in the HTML")
    title = getattr(extracted, "title", None) or path.stem
    date = getattr(extracted, "date", None)
    yield DocumentIn(doc_id=doc_id, title=title, text=_normalise(body), source_path=str(path), published=date)


def read_pdf(path: Path, doc_id: str) -> Iterator[DocumentIn]:
    from pypdf import PasswordType, PdfReader
    from pypdf.errors import DependencyError

    raw = _read(path)
    try:
        reader = PdfReader(io.BytesIO(raw), strict=False)  # tries the empty password of an encrypted file
        if reader.is_encrypted and reader.decrypt("") == PasswordType.NOT_DECRYPTED:
            raise _corrupt(path, messages.PDF_NEEDS_PASSWORD)
        pages = [page.extract_text() or "" for page in reader.pages]
        title = (reader.metadata.title if reader.metadata else None) or path.stem
    except IngestError:
        raise
    except DependencyError as exc:  # AES needs `cryptography`, a dependency; a broken install may lack it
        raise _corrupt(path, messages.PDF_NEEDS_CRYPTOGRAPHY) from exc
    except Exception as exc:  # untrusted bytes into a third-party parser: see the module docstring
        raise _parser_failed(path, "PDF", exc) from exc
    text = _require_text(path, _normalise("\n\n".join(pages)))
    yield DocumentIn(doc_id=doc_id, title=str(title), text=text, source_path=str(path))


def read_jsonl(path: Path, _doc_id: str) -> Iterator[DocumentIn]:
    """One ``{"_id"|"id", "title"?, "text"}`` object a line. Any bad line makes the whole file corrupt."""
    docs: list[DocumentIn] = []
    text = _decode(path, _read(path))
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            obj = loads_json(line)
        except ValueError as exc:
            raise _corrupt(path, f"line {number} is {exc}") from exc
        if not isinstance(obj, dict):
            raise _corrupt(path, f"line {number} is not a JSON object")
        raw_id = obj.get("_id", obj.get("id"))
        body = obj.get("text")
        if raw_id is None or str(raw_id).strip() == "" or not isinstance(body, str) or not body.strip():
            raise _corrupt(path, f'line {number} needs an "_id" or "id" and a non-empty "text"')
        if len(str(raw_id)) > DOC_ID_MAX:
            raise _corrupt(path, f"line {number}: its id is {len(str(raw_id))} characters long (at most {DOC_ID_MAX})")
        for name in ("_id", "id", "title", "text", "url"):
            value = obj.get(name)
            reason = unstorable(value if isinstance(value, str) else "")
            if reason:  # a JSON escape makes what no file's bytes can: a NUL, a lone surrogate
                raise _corrupt(path, f'line {number}: "{name}" cannot be stored: it holds {reason}')
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
