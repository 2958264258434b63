"""The corpora pages: every corpus the reader may see with its size and dates, the upload form (several files,
drag and drop, no JavaScript needed), an upload's live progress, one corpus's documents, and removing a document
or a whole corpus (after a confirmation page)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, File, Form, Header, Query, Request, UploadFile
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from sse_starlette import EventSourceResponse

from veracity import messages
from veracity.accounts import Principal
from veracity.corpus.wiki import CORPUS as WIKI_CORPUS
from veracity.corpus.wiki import attribution_for
from veracity.db import corpora_repo, uploads_repo
from veracity.errors import BadInput
from veracity.web.auth import CsrfDep, SignedInDep, client_of
from veracity.web.deps import SessionDep, SessionmakerDep, SettingsDep, TemplatesDep
from veracity.web.errors import EVERY_ROUTE, REDIRECT, error_responses
from veracity.web.sse import upload_page_stream
from veracity.web.uploads import (
    Uploads,
    corpus_or_404,
    forbid_unless,
    may_change,
    open_stream,
    remove,
    stage,
    target_corpus,
    upload_or_404,
)

router = APIRouter(responses=error_responses(*EVERY_ROUTE, 404, 422, html=True))
DOCUMENTS_PER_PAGE = 50


async def _corpora_page(
    request: Request,
    templates: TemplatesDep,
    session: SessionDep,
    settings: SettingsDep,
    who: Principal,
    *,
    error: str | None = None,
    chosen: str = "",
    status_code: int = 200,
) -> HTMLResponse:
    corpora = await corpora_repo.list_corpora(session=session, user_id=who.user_id, every=who.is_admin)
    writable = [c for c in corpora if may_change(who, c.user_id, True)]
    return templates.TemplateResponse(
        request,
        "pages/corpora.html",
        {
            "corpora": corpora,
            "writable": writable,
            "who": who,
            "error": error,
            "chosen": chosen,
            "max_file_bytes": settings.corpus.max_file_bytes,
            "max_upload_bytes": settings.corpus.max_upload_bytes,
            "max_upload_files": settings.corpus.max_upload_files,
            "attribution": attribution_for(WIKI_CORPUS) if any(c.name == WIKI_CORPUS for c in corpora) else None,
        },
        status_code=status_code,
    )


@router.get("/corpora", response_class=HTMLResponse)
async def corpora_page(
    request: Request,
    templates: TemplatesDep,
    session: SessionDep,
    settings: SettingsDep,
    who: SignedInDep,
    into: Annotated[str, Query(max_length=64)] = "",
) -> HTMLResponse:
    return await _corpora_page(request, templates, session, settings, who, chosen=into)


@router.post(
    "/corpora/upload",
    response_class=HTMLResponse,
    responses={**REDIRECT, **error_responses(400, 413, html=True)},
    dependencies=[CsrfDep],
)
async def upload_page(
    request: Request,
    templates: TemplatesDep,
    session: SessionDep,
    settings: SettingsDep,
    who: SignedInDep,
    files: Annotated[list[UploadFile], File(description="The files (.md .txt .html .pdf .jsonl)")] = [],  # noqa: B006
    corpus: Annotated[str, Form(max_length=200)] = "",
    new_corpus: Annotated[str, Form(max_length=200)] = "",
) -> Response:
    """Stage the files and start ingesting them; the upload's page follows its progress."""
    name = new_corpus.strip() or corpus.strip()
    try:
        if not name:
            raise BadInput(messages.UPLOAD_CORPUS_NEEDED)
        name = await target_corpus(session, name, who)
        await session.close()
        staged = await stage(files, name, settings)
    except BadInput as exc:
        return await _corpora_page(
            request, templates, session, settings, who, error=exc.message, chosen=name, status_code=400
        )
    uploads: Uploads = request.app.state.uploads
    upload_id = await uploads.start(staged, who, client_of(request))
    return RedirectResponse(f"/uploads/{upload_id}", status_code=303)


@router.get("/uploads/{upload_id}", response_class=HTMLResponse)
async def upload_view(
    request: Request, upload_id: str, templates: TemplatesDep, session: SessionDep, who: SignedInDep
) -> HTMLResponse:
    upload = await upload_or_404(session, upload_id, who)
    events = list(await uploads_repo.events_after(session=session, upload_id=upload_id))
    return templates.TemplateResponse(
        request,
        "pages/upload.html",
        {
            "upload": upload,
            "steps": [e.payload for e in events if e.name == "file_done"],
            "last": events[-1] if events else None,
            "finished": bool(events) and events[-1].name in uploads_repo.TERMINAL,
        },
    )


@router.get("/uploads/{upload_id}/live")
async def upload_live(
    request: Request,
    upload_id: str,
    templates: TemplatesDep,
    session: SessionDep,
    sessionmaker: SessionmakerDep,
    settings: SettingsDep,
    who: SignedInDep,
    after: str | None = None,
    last_event_id: Annotated[str | None, Header(alias="Last-Event-ID")] = None,
) -> EventSourceResponse:
    """The upload page's stream: a file row and the status line per step, then ``done``."""
    cursor = last_event_id if last_event_id is not None else after
    events = await open_stream(request, session, sessionmaker, who, upload_id, cursor)
    return EventSourceResponse(upload_page_stream(templates, events), ping=settings.limits.sse_ping_seconds)


@router.get("/corpora/{corpus}", response_class=HTMLResponse)
async def corpus_page(
    request: Request,
    corpus: str,
    templates: TemplatesDep,
    session: SessionDep,
    who: SignedInDep,
    page: Annotated[int, Query(ge=1, le=100_000)] = 1,
) -> HTMLResponse:
    info = await corpus_or_404(session, corpus, who)
    documents = await corpora_repo.corpus_documents(
        session=session, corpus=corpus, offset=(page - 1) * DOCUMENTS_PER_PAGE, limit=DOCUMENTS_PER_PAGE + 1
    )
    uploads = await uploads_repo.recent_uploads(session=session, corpus=corpus)
    return templates.TemplateResponse(
        request,
        "pages/corpus.html",
        {
            "corpus": info,
            "documents": documents[:DOCUMENTS_PER_PAGE],
            "more": len(documents) > DOCUMENTS_PER_PAGE,
            "page": page,
            "uploads": [u for u in uploads if who.is_admin or u.user_id == who.user_id],
            "can_change": may_change(who, info.user_id, True),
            "attribution": attribution_for(corpus),
        },
    )


@router.get("/corpora/{corpus}/delete", response_class=HTMLResponse)
async def corpus_delete_confirm(
    request: Request, corpus: str, templates: TemplatesDep, session: SessionDep, who: SignedInDep
) -> HTMLResponse:
    """Asks before deleting a corpus: its size, what goes with it, and the button that does it."""
    info = await corpus_or_404(session, corpus, who)
    forbid_unless(may_change(who, info.user_id, True), corpus)
    return templates.TemplateResponse(request, "pages/corpus_delete.html", {"corpus": info})


@router.post("/corpora/{corpus}/delete", response_model=None, responses=REDIRECT, dependencies=[CsrfDep])
async def corpus_delete(
    request: Request, corpus: str, session: SessionDep, sessionmaker: SessionmakerDep, who: SignedInDep
) -> Response:
    await remove(session, sessionmaker, who, corpus, client_of(request))
    return RedirectResponse("/corpora?deleted=1", status_code=303)


@router.post(
    "/corpora/{corpus}/documents/{document}/delete",
    response_model=None,
    responses=REDIRECT,
    dependencies=[CsrfDep],
)
async def document_delete(
    request: Request, corpus: str, document: int, session: SessionDep, sessionmaker: SessionmakerDep, who: SignedInDep
) -> Response:
    await remove(session, sessionmaker, who, corpus, client_of(request), document)
    return RedirectResponse(f"/corpora/{corpus}?removed={document}", status_code=303)
