"""What the corpora page and the corpora API share: who may see or change a corpus, staging the files of a
request, starting (and, at shutdown, waiting for) the upload that ingests them, and the upload's event stream.

Access: a shared corpus (no owner: made by the CLI, or bundled) is searched by everyone and changed only by an
admin; an owned one is seen, searched, added to and deleted by its owner and admins only — to anyone else it
answers the same 404 as a corpus that does not exist. In single-user mode the one user is the admin.
"""

from __future__ import annotations

import asyncio
import logging
import shutil
import tempfile
from collections.abc import AsyncIterator, Sequence
from pathlib import Path

from fastapi import Request
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker
from starlette.datastructures import UploadFile

from veracity import messages
from veracity.accounts import Principal
from veracity.corpus.ingest import check_corpus_name
from veracity.corpus.uploads import (
    Staged,
    UploadRun,
    clean_name,
    is_stale,
    name_refusal,
    new_upload_id,
    sweep_stale,
)
from veracity.db import accounts_repo, corpora_repo, uploads_repo
from veracity.db.models import Upload, UploadEvent
from veracity.db.write_gate import background_writes
from veracity.errors import BadInput, Conflict, Forbidden, NotFound, TooMany
from veracity.semantic.model import SemanticModel
from veracity.settings import Settings
from veracity.web.limits import StreamSlots
from veracity.web.lookup import parse_last_event_id

logger = logging.getLogger(__name__)

POLL_SECONDS = 0.25
"""How often a stream reads an active upload's new events (an upload writes one per file)."""


def may_see(who: Principal, owner: int | None) -> bool:
    return who.is_admin or owner is None or owner == who.user_id


def may_change(who: Principal, owner: int | None, exists: bool) -> bool:
    """A new corpus is made by whoever names it; an existing one is changed by its owner or an admin."""
    return who.is_admin or not exists or (owner is not None and owner == who.user_id)


async def corpus_or_404(session: AsyncSession, corpus: str, who: Principal) -> corpora_repo.CorpusInfo:
    """The corpus as the reader may see it, or the 404 of a corpus that does not exist."""
    info = await corpora_repo.corpus_info(session=session, name=corpus, user_id=who.user_id, every=who.is_admin)
    if info is None:
        raise NotFound(messages.CORPUS_GONE.format(corpus=corpus))
    return info


def check_target(who: Principal, corpus: str, existed: bool, owner: int | None) -> None:
    """``BadInput`` when the reader may not add to ``corpus`` (a name taken by a corpus they cannot see is refused
    without saying whose it is)."""
    if not may_change(who, owner, existed):
        taken = not may_see(who, owner)
        raise BadInput((messages.CORPUS_TAKEN if taken else messages.CORPUS_NOT_YOURS).format(corpus=corpus))


async def target_corpus(session: AsyncSession, corpus: str, who: Principal) -> str:
    """``corpus`` checked as an upload's target before its files are read: a valid name the reader may add to.
    (``Uploads.start`` checks again as it claims the name, in the transaction that records the upload.)"""
    check_corpus_name(corpus)
    owner = await corpora_repo.corpus_owner(session=session, name=corpus)
    existed = owner is not None or await corpora_repo.corpus_exists(session=session, name=corpus)
    check_target(who, corpus, existed, owner)
    return corpus


async def stage(files: Sequence[UploadFile], corpus: str, settings: Settings) -> Staged:
    """Write the sent files into a private folder, refusing by name (no name, unsupported type, sent twice) or
    size before any is read; ``BadInput`` when nothing was sent or too many files were."""
    sent = [f for f in files if f.filename or (f.size or 0) > 0]
    if not sent:
        raise BadInput(messages.UPLOAD_NO_FILES)
    limit = settings.corpus.max_upload_files
    if len(sent) > limit:
        raise BadInput(messages.UPLOAD_TOO_MANY_FILES.format(count=len(sent), limit=limit))
    staged = Staged(new_upload_id(), corpus, Path(tempfile.mkdtemp(prefix="veracity-upload-")))
    seen: set[str] = set()
    try:
        for part in sent:
            name = clean_name(part.filename)
            reason = name_refusal(name, seen)
            size = part.size or 0
            if reason is None and size > settings.corpus.max_file_bytes:
                reason = messages.INGEST_TOO_LARGE.format(path=name, size=size, limit=settings.corpus.max_file_bytes)
            if reason is not None:
                staged.refused.append((name or "(no name)", reason))
                continue
            seen.add(name)
            path = staged.folder / name
            await part.seek(0)
            with path.open("wb") as out:
                await asyncio.to_thread(shutil.copyfileobj, part.file, out)
            staged.files.append(path)
    except BaseException:
        shutil.rmtree(staged.folder, ignore_errors=True)
        raise
    return staged


class Uploads:
    """The uploads this web process is ingesting (tasks kept alive here, awaited at shutdown)."""

    def __init__(self, sessionmaker: async_sessionmaker[AsyncSession], settings: Settings) -> None:
        self.sessionmaker = sessionmaker
        self.settings = settings
        self.model: SemanticModel | None = None
        self.tasks: set[asyncio.Task[None]] = set()

    async def start(self, staged: Staged, who: Principal, client: str) -> str:
        """Record the upload (and the act in the security log), then ingest it in the background."""
        try:
            async with self.sessionmaker() as session, session.begin():
                limit = self.settings.corpus.uploads_at_once
                if await uploads_repo.active_count(session=session, user_id=who.user_id) >= limit:
                    raise TooMany(messages.UPLOADS_AT_ONCE.format(limit=limit), 10)
                existed, owner = await corpora_repo.claim_corpus(
                    session=session, name=staged.corpus, user_id=who.user_id
                )
                check_target(who, staged.corpus, existed, owner)
                await uploads_repo.create_upload(
                    session=session, upload_id=staged.upload_id, corpus=staged.corpus, user_id=who.user_id
                )
                await accounts_repo.log(
                    session=session,
                    actor=who.name,
                    action="upload",
                    target=f"corpus {staged.corpus}",
                    client=client,
                    detail={"upload": staged.upload_id, "files": len(staged.files) + len(staged.refused)},
                )
        except BaseException:
            shutil.rmtree(staged.folder, ignore_errors=True)
            raise
        run = UploadRun(self.sessionmaker, self.settings, staged, who.user_id, self.model)

        async def ingest() -> None:
            background_writes()  # its writes wait behind any request's, as a run's do (SQLite: db/write_gate.py)
            await run()

        task = asyncio.create_task(ingest(), name=f"upload-{staged.upload_id}")
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)
        return staged.upload_id

    async def shutdown(self, timeout: float = 30.0) -> None:
        """Let uploads in progress finish (bounded); one cut off is ended by the next start's sweep."""
        if self.tasks:
            _, pending = await asyncio.wait(set(self.tasks), timeout=timeout)
            for task in pending:
                task.cancel()


async def upload_or_404(session: AsyncSession, upload_id: str, who: Principal) -> Upload:
    upload = await uploads_repo.get_upload(session=session, upload_id=upload_id)
    if upload is None or not (who.is_admin or upload.user_id == who.user_id):
        raise NotFound(messages.UPLOAD_UNKNOWN.format(upload_id=upload_id))
    return upload


async def follow(
    sessionmaker: async_sessionmaker[AsyncSession], upload_id: str, after: int = 0
) -> AsyncIterator[UploadEvent]:
    """The upload's events after ``after``, stored ones first, then new ones as they are stored, until its last
    (``upload_complete`` / ``upload_failed``), or until the upload is gone (deleted with its corpus)."""
    while True:
        async with sessionmaker() as session:
            upload = await uploads_repo.get_upload(session=session, upload_id=upload_id)
            if upload is None:
                return
            stale = upload.status in uploads_repo.ACTIVE and is_stale(upload.updated_at)
        if stale:  # its process died: end it, and the stream with the event that says so
            await sweep_stale(sessionmaker)
        async with sessionmaker() as session:
            events = await uploads_repo.events_after(session=session, upload_id=upload_id, after_seq=after)
        for event in events:
            after = event.seq
            yield event
            if event.name in uploads_repo.TERMINAL:
                return
        await asyncio.sleep(POLL_SECONDS)


def forbid_unless(allowed: bool, corpus: str) -> None:
    if not allowed:
        raise Forbidden(messages.CORPUS_NOT_YOURS.format(corpus=corpus))


async def remove(
    session: AsyncSession,
    sessionmaker: async_sessionmaker[AsyncSession],
    who: Principal,
    corpus: str,
    client: str,
    document: int | None = None,
) -> int:
    """Delete a corpus (or one of its documents) the reader may change, in the security log; the number of
    documents gone. 404 for a corpus (or document) the reader cannot see, 403 for a shared one (admins only)."""
    info = await corpus_or_404(session, corpus, who)
    forbid_unless(may_change(who, info.user_id, True), corpus)
    if document is None and await uploads_repo.active_upload(session=session, corpus=corpus):
        await session.rollback()
        await sweep_stale(sessionmaker)  # an upload whose process died does not hold its corpus
    if document is None and (busy := await uploads_repo.active_upload(session=session, corpus=corpus)):
        raise Conflict(messages.CORPUS_UPLOADING.format(corpus=corpus, upload=busy))
    await session.rollback()  # end the read: the delete and its log line are one transaction of their own
    async with session.begin():
        gone = await corpora_repo.delete_documents(session=session, corpus=corpus, document_id=document)
        if document is None:
            await uploads_repo.forget_uploads(session=session, corpus=corpus)
        if document is not None and gone == 0:
            raise NotFound(messages.DOCUMENT_GONE.format(document=document, corpus=corpus))
        await accounts_repo.log(
            session=session,
            actor=who.name,
            action="corpus_deleted" if document is None else "document_deleted",
            target=f"corpus {corpus}" + (f" document {document}" if document is not None else ""),
            client=client,
            detail={"documents": gone},
        )
    return gone


async def open_stream(
    request: Request,
    session: AsyncSession,
    sessionmaker: async_sessionmaker[AsyncSession],
    who: Principal,
    upload_id: str,
    cursor: str | None,
) -> AsyncIterator[UploadEvent]:
    """The events of an upload the reader may see after ``cursor`` (a Last-Event-ID or ``?after=``), counted
    among the reader's live streams as a run's are."""
    after = parse_last_event_id(cursor)
    await upload_or_404(session, upload_id, who)
    await session.close()
    slots: StreamSlots = request.app.state.streams
    return slots.follow(slots.take(who), follow(sessionmaker, upload_id, after))
