"""Ingest files and folders into a corpus: idempotent by document id, one transaction per file.

A file is stored whole or not at all: a JSONL file whose 1,500th document cannot be stored leaves none of its
documents behind. A corrupt file, one that cannot be stored, or a link out of the folder is reported and
skipped; the files before and after it are still ingested, and the report says what became of each file.
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from veracity import messages
from veracity.corpus.readers import SUPPORTED, read_file
from veracity.db.corpora_repo import ensure_corpus
from veracity.db.corpus_repo import DocumentIn, upsert_documents
from veracity.db.failures import public_error
from veracity.db.models import DOC_ID_MAX
from veracity.domain import WEB_SOURCE
from veracity.errors import BadInput, IngestError
from veracity.inputs import unstorable

logger = logging.getLogger(__name__)

CORPUS_NAME_RE = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


def check_corpus_name(corpus: str) -> str:
    if not CORPUS_NAME_RE.match(corpus):
        raise BadInput(messages.CORPUS_NAME_INVALID.format(corpus=corpus))
    if corpus == WEB_SOURCE:
        raise BadInput(messages.CORPUS_RESERVED)
    return corpus


@dataclass(frozen=True)
class FileOutcome:
    """What became of one file: ``ingested`` (some document added or updated), ``unchanged`` (every document
    already stored as it is), or ``refused`` (nothing stored; ``reason`` says why)."""

    path: str
    outcome: str
    documents: int = 0
    reason: str | None = None


@dataclass
class IngestReport:
    added: int = 0
    updated: int = 0
    unchanged: int = 0
    files: int = 0
    errors: list[str] = field(default_factory=list)
    per_file: list[FileOutcome] = field(default_factory=list)

    def count(self, outcome: str) -> None:
        setattr(self, outcome, getattr(self, outcome) + 1)

    def merge(self, other: IngestReport) -> None:
        """Add a committed file's document counts."""
        self.added, self.updated = self.added + other.added, self.updated + other.updated
        self.unchanged += other.unchanged

    def refuse(self, path: Path, reason: str) -> None:
        self.errors.append(reason)
        self.per_file.append(FileOutcome(shown_path(path), "refused", 0, reason))

    def as_dict(self) -> dict[str, object]:
        return {
            "files": self.files,
            "added": self.added,
            "updated": self.updated,
            "unchanged": self.unchanged,
            "errors": self.errors,
            "per_file": [
                {"path": f.path, "outcome": f.outcome, "documents": f.documents}
                | ({"reason": f.reason} if f.reason else {})
                for f in self.per_file
            ],
        }


def shown_path(path: Path | str) -> str:
    """A path as a message shows it: a name that is not UTF-8 keeps its bytes as ``\\xNN`` escapes."""
    return os.fsencode(path).decode("utf-8", "backslashreplace")


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


def discover(path: Path) -> tuple[Path, list[Path], dict[Path, str]]:
    """(root, entries, refused) under ``path``: the supported files in path order, among them the entries that are
    refused with the reason (links out of the folder, folders that cannot be listed). A single file, or a link
    named on the command line, is its own root's only file."""
    if not path.exists() and not path.is_symlink():
        raise BadInput(messages.INGEST_PATH_MISSING.format(path=shown_path(path)))
    if not path.is_dir():
        return path.parent, [path], {}
    entries, refused = _walk(path)
    return path, sorted(entries), refused


def _walk(root: Path) -> tuple[list[Path], dict[Path, str]]:
    """Without recursion (a folder 1,500 levels deep exhausted ``rglob``'s), never into a linked folder: a link is
    listed to be refused when it leads out of ``root`` (or nowhere) and skipped when it leads to a folder inside,
    whose files are listed by their own path."""
    inside = root.resolve()
    entries: list[Path] = []
    refused: dict[Path, str] = {}
    folders = [root]
    while folders:
        folder = folders.pop()
        try:
            with os.scandir(folder) as listing:
                found = list(listing)
        except OSError as exc:
            refused[folder] = messages.INGEST_FOLDER_UNREADABLE.format(
                path=shown_path(folder), reason=exc.strerror or type(exc).__name__
            )
            entries.append(folder)
            continue
        for entry in found:
            item = Path(entry.path)
            wanted = item.suffix.lower() in SUPPORTED
            if entry.is_symlink():
                target = item.resolve()
                if not target.exists():
                    reason = messages.INGEST_LINK_BROKEN.format(path=shown_path(item), target=shown_path(target))
                elif not target.is_relative_to(inside):
                    reason = messages.INGEST_LINK_OUTSIDE.format(
                        path=shown_path(item), target=shown_path(target), root=shown_path(root)
                    )
                else:
                    if wanted and target.is_file():
                        entries.append(item)
                    continue
                if wanted or target.is_dir():
                    refused[item] = reason
                    entries.append(item)
            elif entry.is_dir(follow_symlinks=False):
                folders.append(item)
            elif wanted and entry.is_file(follow_symlinks=False):
                entries.append(item)
    return entries, refused


def doc_id_for(root: Path, path: Path) -> str:
    """Files are identified by their path relative to the ingested folder (stable across re-ingests)."""
    return path.relative_to(root).as_posix()


def check_file(path: Path, doc_id: str) -> None:
    """``IngestError`` for a file whose id no database could store, or that is no regular file (a FIFO would block
    the read forever)."""
    if unstorable(str(path)):  # its id and its stored source path
        raise IngestError(messages.INGEST_NAME_UNDECODABLE.format(path=shown_path(path)))
    if len(doc_id) > DOC_ID_MAX:
        reason = f"its path in the folder is {len(doc_id)} characters long; a document id is at most {DOC_ID_MAX}"
        raise IngestError(messages.INGEST_CORRUPT.format(path=shown_path(path), reason=reason))
    if not path.is_file():
        raise IngestError(messages.INGEST_CORRUPT.format(path=shown_path(path), reason="it is not a regular file"))


async def ingest_documents(
    *,
    sessionmaker: async_sessionmaker[AsyncSession],
    corpus: str,
    docs: Iterable[DocumentIn],
    chunk_chars: int,
    report: IngestReport,
    batch: int = 1000,
    progress: Callable[[int], None] | None = None,
    owner: int | None = None,
) -> None:
    """Upsert documents in one transaction: all of them are stored or none (``report`` is counted only once they
    are). Written in batches, each flushed and then let go of, so a large file does not pile up in the session;
    ``progress`` hears each batch written (not yet committed). A corpus made here is ``owner``'s (None: shared)."""
    counted = IngestReport()
    pending: list[DocumentIn] = []
    async with sessionmaker() as session, session.begin():
        await ensure_corpus(session=session, name=corpus, user_id=owner)

        async def flush() -> None:
            for outcome in await upsert_documents(
                session=session, corpus=corpus, docs=pending, chunk_chars=chunk_chars
            ):
                counted.count(outcome)
            session.expunge_all()
            if progress:
                progress(len(pending))
            pending.clear()

        for doc in docs:
            pending.append(doc)
            if len(pending) >= batch:
                await flush()
        if pending:
            await flush()
    report.merge(counted)


async def ingest_path(
    *,
    sessionmaker: async_sessionmaker[AsyncSession],
    path: Path,
    corpus: str,
    chunk_chars: int,
    progress: IngestListener | None = None,
    max_file_bytes: int | None = None,
    max_documents: int | None = None,
    owner: int | None = None,
) -> IngestReport:
    """Ingest a file or every supported file under a folder; a file over ``max_file_bytes`` or holding more than
    ``max_documents`` documents is refused whole (the CLI passes ``VERACITY_CORPUS__``'s limits; None: no limit).
    ``progress`` hears the file count first (the folder is listed before anything is read), each batch of a file's
    documents stored, and each file done. A corpus made by it is ``owner``'s (None: shared, as the CLI makes)."""
    check_corpus_name(corpus)
    root, files, refused = discover(path)
    report = IngestReport()
    if progress:
        progress.files_found(len(files))

    def refuse(done: int, file: Path, reason: str) -> None:
        report.refuse(file, reason)
        if progress:  # the listener shows it; logging it too would say it twice
            progress.file_done(IngestStep(file, done, len(files), 0, reason, report))
        else:
            logger.warning("ingest skipped a file: %s", reason)

    for done, file in enumerate(files, 1):
        if file in refused:
            refuse(done, file, refused[file])
            continue
        try:
            doc_id = doc_id_for(root, file)
            check_file(file, doc_id)
            size = file.stat().st_size
            if max_file_bytes is not None and size > max_file_bytes:
                raise IngestError(
                    messages.INGEST_TOO_LARGE.format(path=shown_path(file), size=size, limit=max_file_bytes)
                )
            docs = await asyncio.to_thread(read_file, file, doc_id)  # parsing a PDF is CPU work: off the loop
            if max_documents is not None and len(docs) > max_documents:
                raise IngestError(
                    messages.INGEST_TOO_MANY.format(path=shown_path(file), count=len(docs), limit=max_documents)
                )
        except IngestError as exc:
            refuse(done, file, exc.message)
            continue
        stored = 0

        def stored_batch(count: int, file: Path = file, documents: int = len(docs)) -> None:
            nonlocal stored
            stored += count
            if progress:
                progress.documents_stored(file, stored, documents)

        before = (report.added, report.updated)
        try:
            await ingest_documents(
                sessionmaker=sessionmaker,
                corpus=corpus,
                docs=docs,
                chunk_chars=chunk_chars,
                report=report,
                progress=stored_batch if progress else None,
                owner=owner,
            )
        except (SQLAlchemyError, UnicodeError, ValueError) as exc:  # rolled back whole: the next file goes on
            reason = public_error(exc, where=f"ingest of {shown_path(file)}")
            refuse(done, file, messages.INGEST_NOT_STORED.format(path=shown_path(file), reason=reason))
            continue
        report.files += 1
        changed = (report.added, report.updated) != before
        report.per_file.append(FileOutcome(shown_path(file), "ingested" if changed else "unchanged", len(docs)))
        if progress:
            progress.file_done(IngestStep(file, done, len(files), len(docs), None, report))
    return report
