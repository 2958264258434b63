"""Uploads: files sent from the browser or the API, staged in a private folder, then ingested one by one into a
corpus, each step stored as an upload event (the upload page and ``GET /v1/uploads/{id}/events`` stream them as
a run's page streams its events: stored first, then live, resumable by ``Last-Event-ID``).

A file is stored whole or not at all (``ingest_path``'s per-file transaction), so an upload cut off by a crash
leaves whole files behind and the sweep at the next start marks it failed, saying which files made it. The
staging folder is removed however the upload ends. Names are the files' own base names: sending ``notes.md``
again updates (or leaves unchanged) the document sent before under that name.
"""

from __future__ import annotations

import asyncio
import logging
import shutil
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from veracity import messages
from veracity.corpus.ingest import FileOutcome, IngestReport, ingest_path
from veracity.corpus.readers import SUPPORTED
from veracity.db import uploads_repo
from veracity.db.failures import public_error
from veracity.db.models import utcnow
from veracity.inputs import unstorable
from veracity.semantic.model import SemanticModel
from veracity.semantic.vectors import ensure_vectors
from veracity.settings import Settings

logger = logging.getLogger(__name__)

STALE_AFTER = timedelta(minutes=2)
"""An upload untouched this long is taken as cut off (its process died): every step and a heartbeat touch it."""
HEARTBEAT_SECONDS = 20.0


@dataclass
class Staged:
    """An upload's files on disk (``folder``), in the order sent, and the ones refused before any was read."""

    upload_id: str
    corpus: str
    folder: Path
    files: list[Path] = field(default_factory=list)
    refused: list[tuple[str, str]] = field(default_factory=list)

    @property
    def names(self) -> list[str]:
        return [p.name for p in self.files] + [name for name, _ in self.refused]


def new_upload_id() -> str:
    return uuid.uuid4().hex


def clean_name(raw: str | None) -> str:
    """A sent file's base name (a browser may send a path); '' when nothing usable is left."""
    name = (raw or "").replace("\\", "/").rsplit("/", 1)[-1].strip()
    return "" if name in (".", "..") or name.startswith(".") else name


def name_refusal(name: str, seen: set[str]) -> str | None:
    """Why a sent file is refused by its name alone (before it is read), or None."""
    if not name:
        return messages.UPLOAD_NO_NAME
    if unstorable(name) or len(name.encode("utf-8")) > 255:  # a file system's limit is in bytes
        return messages.UPLOAD_BAD_NAME.format(name=name[:80].encode("utf-8", "backslashreplace").decode())
    if Path(name).suffix.lower() not in SUPPORTED:
        return messages.INGEST_UNSUPPORTED.format(suffix=Path(name).suffix or "(none)")
    if name in seen:
        return messages.UPLOAD_DUPLICATE.format(name=name)
    return None


def _public(reason: str, folder: Path) -> str:
    """A reason as the uploader sees it: the staging folder is the server's business."""
    return reason.replace(f"{folder}/", "").replace(str(folder), "")


class UploadRun:
    """Ingest one staged upload, storing each step as an event; never raises (a failure is the upload's end)."""

    def __init__(
        self,
        sessionmaker: async_sessionmaker[AsyncSession],
        settings: Settings,
        staged: Staged,
        owner: int | None,
        model: SemanticModel | None,
    ) -> None:
        self.sessionmaker = sessionmaker
        self.settings = settings
        self.staged = staged
        self.owner = owner
        self.model = model
        self.report = IngestReport()

    async def emit(self, name: str, payload: dict[str, Any], status: str | None = None) -> None:
        """Store one step; ``UploadEnded`` when the upload has been ended meanwhile (swept as cut off)."""
        async with self.sessionmaker() as session, session.begin():
            upload = await uploads_repo.get_upload(session=session, upload_id=self.staged.upload_id)
            if upload is None or upload.status not in uploads_repo.ACTIVE:
                raise UploadEnded(self.staged.upload_id)
            await uploads_repo.append_event(
                session=session, upload_id=self.staged.upload_id, name=name, payload=payload
            )
            await uploads_repo.set_status(
                session=session,
                upload_id=self.staged.upload_id,
                status=status or "running",
                report=self.report.as_dict(),
            )

    async def __call__(self) -> None:
        staged = self.staged
        beat = asyncio.create_task(self._heartbeat())
        try:
            await self._ingest()
        except UploadEnded:
            logger.warning("upload %s was ended while it ran (swept as cut off)", staged.upload_id)
        except asyncio.CancelledError:  # the server is stopping: say so, then let the cancellation go on
            await asyncio.shield(self._fail(messages.UPLOAD_INTERRUPTED))
            raise
        except Exception as exc:  # the upload's edge: any failure is its stored end, never a hung upload
            logger.exception("upload %s failed", staged.upload_id)
            await self._fail(messages.UPLOAD_FAILED.format(reason=_public(public_error(exc), staged.folder)))
        finally:
            beat.cancel()
            shutil.rmtree(staged.folder, ignore_errors=True)

    async def _ingest(self) -> None:
        staged = self.staged
        total = len(staged.files) + len(staged.refused)
        await self.emit("upload_started", {"corpus": staged.corpus, "files": staged.names, "total": total})
        done = 0
        for name, reason in staged.refused:
            done += 1
            await self._record(done, total, FileOutcome(name, "refused", 0, reason))
        for path in staged.files:
            done += 1
            await self._record(done, total, await self._one(path))
        vectors = 0
        if self.model is not None and (self.report.added or self.report.updated):
            await self.emit("embedding", {"corpus": staged.corpus})
            vectors = await ensure_vectors(sessionmaker=self.sessionmaker, model=self.model, corpus=staged.corpus)
        await self.emit(
            "upload_complete", self.report.as_dict() | {"vectors": vectors, "corpus": staged.corpus}, "done"
        )
        logger.info(
            "upload %s into corpus %s: %d added, %d updated, %d unchanged, %d refused",
            staged.upload_id,
            staged.corpus,
            self.report.added,
            self.report.updated,
            self.report.unchanged,
            len(self.report.errors),
        )

    async def _one(self, path: Path) -> FileOutcome:
        """Ingest one staged file; what became of it (a failure of this file alone refuses it, the rest go on)."""
        try:
            one = await ingest_path(
                sessionmaker=self.sessionmaker,
                path=path,
                corpus=self.staged.corpus,
                chunk_chars=self.settings.corpus.chunk_chars,
                max_file_bytes=self.settings.corpus.max_file_bytes,
                max_documents=self.settings.corpus.max_documents_per_file,
                owner=self.owner,
            )
        except Exception as exc:  # a reader's own failure (an OSError, a PDF library's error): this file's end
            logger.exception("upload %s: %s failed", self.staged.upload_id, path.name)
            reason = messages.INGEST_CORRUPT.format(path=path.name, reason=public_error(exc))
            return FileOutcome(path.name, "refused", 0, _public(reason, self.staged.folder))
        self.report.merge(one)
        self.report.files += one.files
        if not one.per_file:
            return FileOutcome(path.name, "refused", 0, messages.UPLOAD_NO_NAME)
        outcome = one.per_file[0]
        why = _public(outcome.reason, self.staged.folder) if outcome.reason else None
        return FileOutcome(path.name, outcome.outcome, outcome.documents, why)

    async def _record(self, done: int, total: int, outcome: FileOutcome) -> None:
        self.report.per_file.append(outcome)
        if outcome.reason:
            self.report.errors.append(outcome.reason)
        step = {"done": done, "total": total, "name": outcome.path, "outcome": outcome.outcome}
        step |= {"documents": outcome.documents} | ({"reason": outcome.reason} if outcome.reason else {})
        await self.emit("file_done", step)

    async def _fail(self, message: str) -> None:
        try:
            await self.emit("upload_failed", {"message": message}, "failed")
        except Exception:  # ended meanwhile, or the database itself is why: the sweep ends it
            logger.exception("upload %s: could not record its end", self.staged.upload_id)

    async def _heartbeat(self) -> None:
        """Touch the upload while a long step (a large PDF, embedding) runs, so no sweep takes it as cut off."""
        while True:
            await asyncio.sleep(HEARTBEAT_SECONDS)
            try:
                async with self.sessionmaker() as session, session.begin():
                    await uploads_repo.touch(session=session, upload_id=self.staged.upload_id)
            except Exception:  # the next beat tries again; a database down for long ends the upload anyway
                logger.warning("upload %s: heartbeat failed", self.staged.upload_id, exc_info=True)


def is_stale(updated_at: datetime) -> bool:
    when = updated_at if updated_at.tzinfo else updated_at.replace(tzinfo=UTC)
    return utcnow() - when > STALE_AFTER


class UploadEnded(Exception):
    """The upload was ended (swept) while its process still ran it: nothing more is written."""


async def sweep_stale(sessionmaker: async_sessionmaker[AsyncSession]) -> int:
    """End the uploads whose process died mid-way (untouched for ``STALE_AFTER``) as failed, naming what was
    stored; returns how many."""
    async with sessionmaker() as session, session.begin():
        stale = await uploads_repo.stale_uploads(session=session, before=utcnow() - STALE_AFTER)
        for upload in stale:
            stored = [f["path"] for f in upload.report.get("per_file", []) if f.get("outcome") != "refused"]
            message = messages.UPLOAD_CUT_OFF.format(stored=", ".join(stored) or "none")
            await uploads_repo.append_event(
                session=session, upload_id=upload.id, name="upload_failed", payload={"message": message}
            )
            await uploads_repo.set_status(session=session, upload_id=upload.id, status="failed")
    return len(stale)
