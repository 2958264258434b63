"""The corpora and uploads under /v1: list what the reader may search, upload files into a corpus (202, then the
upload's events as SSE, the same shape as a run's), delete a document or a corpus."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, File, Header, Query, Request, UploadFile
from fastapi.responses import JSONResponse
from sse_starlette import EventSourceResponse

from veracity.db import corpora_repo, uploads_repo
from veracity.db.models import Upload
from veracity.web.auth import SignedInDep, client_of
from veracity.web.deps import SessionDep, SessionmakerDep, SettingsDep
from veracity.web.errors import EVERY_ROUTE, error_responses
from veracity.web.sse import upload_json_stream
from veracity.web.uploads import Uploads, corpus_or_404, open_stream, remove, stage, target_corpus, upload_or_404

router = APIRouter(responses=error_responses(*EVERY_ROUTE))


def _upload_json(upload: Upload) -> dict[str, Any]:
    return {
        "upload_id": upload.id,
        "corpus": upload.corpus,
        "status": upload.status,
        "report": upload.report,
        "created_at": upload.created_at.isoformat(),
        "events_url": f"/v1/uploads/{upload.id}/events",
    }


@router.get("/v1/corpora", summary="The corpora you may search, with their size and dates")
async def corpora_list(session: SessionDep, who: SignedInDep) -> dict[str, Any]:
    corpora = await corpora_repo.list_corpora(session=session, user_id=who.user_id, every=who.is_admin)
    return {
        "corpora": [
            {
                "name": c.name,
                "shared": c.user_id is None,
                "owner": c.owner,
                "documents": c.documents,
                "chars": c.chars,
                "created_at": c.created_at.isoformat() if c.created_at else None,
                "updated_at": c.updated_at.isoformat() if c.updated_at else None,
            }
            for c in corpora
        ]
    }


@router.post(
    "/v1/corpora/{corpus}/documents",
    status_code=202,
    summary="Upload files into a corpus (made yours if new); follow the upload at events_url",
    responses=error_responses(400, 403, 404, 422),
)
async def corpora_upload(
    request: Request,
    corpus: str,
    session: SessionDep,
    settings: SettingsDep,
    who: SignedInDep,
    files: Annotated[list[UploadFile], File(description="The files (.md .txt .html .pdf .jsonl)")],
) -> JSONResponse:
    name = await target_corpus(session, corpus, who)
    await session.close()
    staged = await stage(files, name, settings)
    uploads: Uploads = request.app.state.uploads
    upload_id = await uploads.start(staged, who, client_of(request))
    body = {
        "upload_id": upload_id,
        "corpus": name,
        "status": "pending",
        "events_url": f"/v1/uploads/{upload_id}/events",
    }
    return JSONResponse(body, status_code=202, headers={"Location": f"/v1/uploads/{upload_id}"})


@router.get("/v1/uploads/{upload_id}", summary="An upload's status and per-file report", responses=error_responses(404))
async def upload_get(upload_id: str, session: SessionDep, who: SignedInDep) -> dict[str, Any]:
    return _upload_json(await upload_or_404(session, upload_id, who))


@router.get(
    "/v1/uploads/{upload_id}/events",
    summary="An upload's progress as Server-Sent Events (resume with Last-Event-ID)",
    responses=error_responses(404),
)
async def upload_events(
    request: Request,
    upload_id: str,
    session: SessionDep,
    sessionmaker: SessionmakerDep,
    settings: SettingsDep,
    who: SignedInDep,
    after: str | None = None,
    last_event_id: Annotated[str | None, Header(alias="Last-Event-ID")] = None,
) -> EventSourceResponse:
    cursor = last_event_id if last_event_id is not None else after
    events = await open_stream(request, session, sessionmaker, who, upload_id, cursor)
    return EventSourceResponse(upload_json_stream(events), ping=settings.limits.sse_ping_seconds)


@router.delete(
    "/v1/corpora/{corpus}",
    summary="Delete a corpus and every document in it",
    responses=error_responses(403, 404, 409),
)
async def corpora_delete(
    request: Request, corpus: str, session: SessionDep, sessionmaker: SessionmakerDep, who: SignedInDep
) -> dict[str, Any]:
    gone = await remove(session, sessionmaker, who, corpus, client_of(request))
    return {"corpus": corpus, "deleted_documents": gone}


@router.delete(
    "/v1/corpora/{corpus}/documents/{document}",
    summary="Delete one document of a corpus (by the id the corpus page and GET /v1/corpora/{corpus} give)",
    responses=error_responses(403, 404),
)
async def document_delete(
    request: Request, corpus: str, document: int, session: SessionDep, sessionmaker: SessionmakerDep, who: SignedInDep
) -> dict[str, Any]:
    gone = await remove(session, sessionmaker, who, corpus, client_of(request), document)
    return {"corpus": corpus, "deleted_documents": gone}


@router.get(
    "/v1/corpora/{corpus}",
    summary="A corpus's documents (a page of 200, newest first)",
    responses=error_responses(404),
)
async def corpus_get(
    corpus: str, session: SessionDep, who: SignedInDep, page: Annotated[int, Query(ge=1, le=100_000)] = 1
) -> dict[str, Any]:
    info = await corpus_or_404(session, corpus, who)
    documents = await corpora_repo.corpus_documents(session=session, corpus=corpus, offset=(page - 1) * 200, limit=200)
    return {
        "corpus": info.name,
        "shared": info.user_id is None,
        "documents": [
            {
                "id": d.id,
                "doc_id": d.doc_id,
                "title": d.title,
                "chars": d.chars,
                "url": d.url,
                "published": d.published,
                "created_at": d.created_at.isoformat(),
            }
            for d in documents
        ],
        "uploads": [
            _upload_json(u)
            for u in await uploads_repo.recent_uploads(session=session, corpus=corpus)
            if who.is_admin or u.user_id == who.user_id
        ],
    }
