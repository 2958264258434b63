"""Ingest files and folders into a corpus: idempotent by document id, one transaction per file.

A corrupt file is reported and skipped; the files before and after it are still ingested.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from veracity import messages
from veracity.corpus.readers import SUPPORTED, read_file
from veracity.db.corpus_repo import DocumentIn, upsert_document
from veracity.domain import WEB_SOURCE
from veracity.errors import BadInput, IngestError

logger = logging.getLogger(__name__)

CORPUS_NAME_RE = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


def check_corpus_name(corpus: str) -> str:
    if not CORPUS_NAME_RE.match(corpus):
        raise BadInput(messages.CORPUS_NAME_INVALID.format(corpus=corpus))
    if corpus == WEB_SOURCE:
        raise BadInput(messages.CORPUS_RESERVED)
    return corpus


@dataclass
class IngestReport:
    added: int = 0
    updated: int = 0
    unchanged: int = 0
    files: int = 0
    errors: list[str] = field(default_factory=list)

    def count(self, outcome: str) -> None:
        setattr(self, outcome, getattr(self, outcome) + 1)

    def as_dict(self) -> dict[str, object]:
        return {
            "files": self.files,
            "added": self.added,
            "updated": self.updated,
            "unchanged": self.unchanged,
            "errors": self.errors,
        }


@dataclass(frozen=True)
class IngestStep:
    """One file handled: the ``done``-th of ``total``, its documents (0 when it failed), the running report."""

    file: Path
    done: int
    total: int
    documents: int
    error: str | None
    report: IngestReport


class IngestListener(Protocol):
    """Follows an ingest (the CLI draws its progress from it); called in order, from the ingesting task."""

    def files_found(self, total: int) -> None: ...

    def documents_stored(self, file: Path, stored: int, documents: int) -> None: ...

    def file_done(self, step: IngestStep) -> None: ...


def discover(path: Path) -> tuple[Path, list[Path]]:
    """(root, files) under ``path``; a single file is its own root's only file."""
    if not path.exists():
        raise BadInput(messages.INGEST_PATH_MISSING.format(path=path))
    if path.is_file():
        return path.parent, [path]
    files = sorted(p for p in path.rglob("*") if p.is_file() and p.suffix.lower() in SUPPORTED)
    return path, files


def doc_id_for(root: Path, path: Path) -> str:
    """Files are identified by their path relative to the ingested folder (stable across re-ingests)."""
    return path.relative_to(root).as_posix()


async def ingest_documents(
    *,
    sessionmaker: async_sessionmaker[AsyncSession],
    corpus: str,
    docs: Iterable[DocumentIn],
    chunk_chars: int,
    report: IngestReport,
    batch: int = 1000,
    progress: Callable[[int], None] | None = None,
) -> None:
    """Upsert documents in batches, one transaction a batch."""
    pending: list[DocumentIn] = []

    async def flush() -> None:
        async with sessionmaker() as session, session.begin():
            for doc in pending:
                report.count(await upsert_document(session=session, corpus=corpus, doc=doc, chunk_chars=chunk_chars))
        if progress:
            progress(len(pending))
        pending.clear()

    for doc in docs:
        pending.append(doc)
        if len(pending) >= batch:
            await flush()
    if pending:
        await flush()


async def ingest_path(
    *,
    sessionmaker: async_sessionmaker[AsyncSession],
    path: Path,
    corpus: str,
    chunk_chars: int,
    progress: IngestListener | None = None,
) -> IngestReport:
    """Ingest a file or every supported file under a folder. ``progress`` hears the file count first (the
    folder is listed before anything is read), each batch of a file's documents stored, and each file done."""
    check_corpus_name(corpus)
    root, files = discover(path)
    report = IngestReport()
    if progress:
        progress.files_found(len(files))
    for done, file in enumerate(files, 1):
        try:
            docs = read_file(file, doc_id_for(root, file))
        except IngestError as exc:
            report.errors.append(exc.message)
            if progress:  # the listener shows it; logging it too would say it twice
                progress.file_done(IngestStep(file, done, len(files), 0, exc.message, report))
            else:
                logger.warning("ingest skipped a file: %s", exc.message)
            continue
        stored = 0

        def stored_batch(count: int, file: Path = file, documents: int = len(docs)) -> None:
            nonlocal stored
            stored += count
            if progress:
                progress.documents_stored(file, stored, documents)

        await ingest_documents(
            sessionmaker=sessionmaker,
            corpus=corpus,
            docs=docs,
            chunk_chars=chunk_chars,
            report=report,
            progress=stored_batch if progress else None,
        )
        report.files += 1
        if progress:
            progress.file_done(IngestStep(file, done, len(files), len(docs), None, report))
    return report
