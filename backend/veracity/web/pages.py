"""HTML pages. Forms work without JavaScript; htmx and its SSE extension are layered on."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Form, Header, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from sse_starlette import EventSourceResponse

from veracity import messages
from veracity.corpus.wiki import ATTRIBUTION
from veracity.db import corpus_repo, runs_repo
from veracity.errors import BadInput, NotFound
from veracity.runs.reducer import reduce_events
from veracity.runs.service import check_run_id, parse_last_event_id
from veracity.web.deps import ServiceDep, SessionDep, SettingsDep, ShapeDep, TemplatesDep
from veracity.web.sse import page_stream
from veracity.web.topology import layout

router = APIRouter()


async def _home(
    request: Request,
    templates: TemplatesDep,
    service: ServiceDep,
    session: SessionDep,
    *,
    error: str | None = None,
    form: dict[str, Any] | None = None,
    status_code: int = 200,
) -> HTMLResponse:
    runs = await runs_repo.recent_runs(session=session, limit=20)
    corpora = await corpus_repo.corpus_counts(session=session)
    return templates.TemplateResponse(
        request,
        "pages/home.html",
        {
            "specs": service.registry.all(),
            "runs": runs,
            "corpora": corpora,
            "error": error,
            "form": form or {},
            "attribution": ATTRIBUTION,
            "max_chars": service.settings.limits.max_question_chars,
        },
        status_code=status_code,
    )


@router.get("/", response_class=HTMLResponse)
async def home(request: Request, templates: TemplatesDep, service: ServiceDep, session: SessionDep) -> HTMLResponse:
    return await _home(request, templates, service, session)


@router.post("/runs", response_model=None)
async def start_run(
    request: Request,
    templates: TemplatesDep,
    service: ServiceDep,
    session: SessionDep,
    question: Annotated[str, Form()] = "",
    template: Annotated[str, Form()] = "market_brief",
    corpus: Annotated[str, Form()] = "",
) -> Response:
    try:
        run_id = await service.start(question=question, template=template, corpus=corpus or None)
    except BadInput as exc:
        form = {"question": question, "template": template, "corpus": corpus}
        return await _home(request, templates, service, session, error=exc.message, form=form, status_code=422)
    return RedirectResponse(f"/runs/{run_id}", status_code=303)


@router.get("/runs/open", response_model=None)
async def open_run(
    request: Request, templates: TemplatesDep, service: ServiceDep, session: SessionDep, run_id: str = ""
) -> Response:
    run_id = run_id.strip().lower()
    try:
        check_run_id(run_id)
        if await runs_repo.get_run(session=session, run_id=run_id) is None:
            raise NotFound(messages.RUN_UNKNOWN.format(run_id=run_id))
    except NotFound as exc:
        return await _home(request, templates, service, session, error=exc.message, status_code=404)
    return RedirectResponse(f"/runs/{run_id}", status_code=303)


@router.get("/runs/{run_id}", response_class=HTMLResponse)
async def run_page(
    request: Request, run_id: str, templates: TemplatesDep, session: SessionDep, shape: ShapeDep
) -> HTMLResponse:
    check_run_id(run_id)
    run = await runs_repo.get_run(session=session, run_id=run_id)
    if run is None:
        raise NotFound(messages.RUN_UNKNOWN.format(run_id=run_id))
    events = list(await runs_repo.events_after(session=session, run_id=run_id))
    view = reduce_events(run_id, events)
    if not events and run.status == "pending":
        view.template, view.question = run.template_id, run.question
    artifact = await runs_repo.latest_artifact(session=session, run_id=run_id)
    audit = await runs_repo.audit_trail(session=session, run_id=run_id)
    return templates.TemplateResponse(
        request,
        "pages/run.html",
        {
            "run": run,
            "view": view,
            "audit": audit,
            "topo": layout(shape, view),
            "version": artifact.version if artifact else None,
            "attribution": ATTRIBUTION,
        },
    )


@router.get("/runs/{run_id}/live")
async def run_live(
    run_id: str,
    service: ServiceDep,
    session: SessionDep,
    settings: SettingsDep,
    templates: TemplatesDep,
    shape: ShapeDep,
    after: str | None = None,
    last_event_id: Annotated[str | None, Header(alias="Last-Event-ID")] = None,
) -> EventSourceResponse:
    check_run_id(run_id)
    # The browser's own reconnect sends Last-Event-ID; the first connection names the page's last seq.
    cursor = parse_last_event_id(last_event_id if last_event_id is not None else after)
    if await runs_repo.get_run(session=session, run_id=run_id) is None:
        raise NotFound(messages.RUN_UNKNOWN.format(run_id=run_id))
    seen = [e for e in await runs_repo.events_after(session=session, run_id=run_id) if e.seq <= cursor]
    await session.close()
    view = reduce_events(run_id, seen)

    async def audit() -> list[Any]:
        async with service.sessionmaker() as audit_session:
            return list(await runs_repo.audit_trail(session=audit_session, run_id=run_id))

    return EventSourceResponse(
        page_stream(templates, shape, view, service.tail(run_id, cursor), audit),
        ping=settings.limits.sse_ping_seconds,
    )
