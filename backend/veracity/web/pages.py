"""HTML pages. Forms work without JavaScript; htmx and its SSE extension are layered on."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Form, Header, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from sse_starlette import EventSourceResponse

from veracity.accounts import Principal
from veracity.corpus.wiki import CORPUS as WIKI_CORPUS
from veracity.corpus.wiki import attribution_for
from veracity.db import corpora_repo, runs_repo
from veracity.errors import BadInput, Conflict, NotFound, TooMany
from veracity.events import TERMINAL_EVENTS
from veracity.runs.reducer import reduce_events
from veracity.specs.models import Spec
from veracity.specs.registry import SpecRegistry
from veracity.web.api import delete_run
from veracity.web.auth import CsrfDep, SignedInDep
from veracity.web.deps import (
    RegistryDep,
    ServiceDep,
    SessionDep,
    SessionmakerDep,
    SettingsDep,
    ShapeDep,
    TemplatesDep,
)
from veracity.web.errors import EVERY_ROUTE, REDIRECT, error_responses
from veracity.web.limits import StreamSlots, check_run_quota
from veracity.web.lookup import parse_last_event_id, run_address, run_or_404, version_or_404
from veracity.web.sse import page_stream
from veracity.web.thread_pages import thread_of
from veracity.web.topology import layout

router = APIRouter(responses=error_responses(*EVERY_ROUTE, 404, 422, 429, html=True))
PER_PAGE = 20


async def _home(
    request: Request,
    templates: TemplatesDep,
    registry: RegistryDep,
    settings: SettingsDep,
    session: SessionDep,
    who: Principal,
    *,
    error: str | None = None,
    form: dict[str, Any] | None = None,
    status_code: int = 200,
    query: str = "",
    page: int = 1,
) -> HTMLResponse:
    runs = await runs_repo.recent_runs(
        session=session, visible=who.visibility, query=query, offset=(page - 1) * PER_PAGE, limit=PER_PAGE + 1
    )
    corpora = await corpora_repo.usable_corpora(session=session, user_id=who.user_id, every=who.is_admin)
    return templates.TemplateResponse(
        request,
        "pages/home.html",
        {
            "specs": registry.all(),
            "runs": runs[:PER_PAGE],
            "more_runs": len(runs) > PER_PAGE,
            "query": query,
            "page": page,
            "corpora": corpora,
            "error": error,
            "form": form or {},
            # The default corpus is named on the template cards: its credit is owed here when it is loaded.
            "attribution": attribution_for(WIKI_CORPUS) if WIKI_CORPUS in corpora else None,
            "max_chars": settings.limits.max_question_chars,
        },
        status_code=status_code,
    )


@router.get("/", response_class=HTMLResponse)
async def home(
    request: Request,
    templates: TemplatesDep,
    registry: RegistryDep,
    settings: SettingsDep,
    session: SessionDep,
    who: SignedInDep,
    q: Annotated[str, Query(max_length=200)] = "",
    page: Annotated[int, Query(ge=1, le=100_000)] = 1,
) -> HTMLResponse:
    return await _home(request, templates, registry, settings, session, who, query=q.strip(), page=page)


@router.post("/runs", response_model=None, responses=REDIRECT, dependencies=[CsrfDep])
async def start_run(
    request: Request,
    templates: TemplatesDep,
    service: ServiceDep,
    registry: RegistryDep,
    settings: SettingsDep,
    session: SessionDep,
    sessionmaker: SessionmakerDep,
    who: SignedInDep,
    question: Annotated[str, Form()] = "",
    template: Annotated[str, Form()] = "answer",
    corpus: Annotated[str, Form()] = "",
) -> Response:
    form = {"question": question, "template": template, "corpus": corpus}
    try:
        await check_run_quota(sessionmaker, who, settings.limits)
        run_id = await service.start(
            question=question,
            template=template,
            corpus=corpus or None,
            user_id=who.user_id,
            reader=who.visibility,
        )
    except (BadInput, TooMany) as exc:
        response = await _home(
            request,
            templates,
            registry,
            settings,
            session,
            who,
            error=exc.message,
            form=form,
            status_code=exc.status_code,
        )
        if isinstance(exc, TooMany):
            response.headers["Retry-After"] = str(exc.retry_after)
        return response
    return RedirectResponse(f"/runs/{run_id}", status_code=303)


@router.get("/runs/open", response_model=None, responses=REDIRECT)
async def open_run(
    request: Request,
    templates: TemplatesDep,
    registry: RegistryDep,
    settings: SettingsDep,
    session: SessionDep,
    who: SignedInDep,
    run_id: str = "",
) -> Response:
    """The home page's "Open a run" form: a run ID, or a pasted address of a run's page (a permalink keeps its
    version), to that run's page; the home page with the reason otherwise."""
    try:
        found, version = run_address(run_id)
        await run_or_404(session, found, who.visibility)
    except NotFound as exc:
        return await _home(request, templates, registry, settings, session, who, error=exc.message, status_code=404)
    return RedirectResponse(f"/runs/{found}" + (f"?version={version}" if version else ""), status_code=303)


@router.post("/runs/{run_id}/cancel", response_model=None, responses=REDIRECT, dependencies=[CsrfDep])
async def cancel_run(run_id: str, service: ServiceDep, session: SessionDep, who: SignedInDep) -> Response:
    """The run page's Cancel button (a plain form: no JavaScript needed); back to the page, which shows the run
    stopping (or, if it finished meanwhile, how it ended)."""
    await run_or_404(session, run_id, who.visibility)
    await session.close()
    try:
        await service.cancel(run_id)
    except Conflict:
        pass  # it finished before the click arrived: the page says how
    return RedirectResponse(f"/runs/{run_id}", status_code=303)


@router.post("/runs/{run_id}/rerun", response_model=None, responses=REDIRECT, dependencies=[CsrfDep])
async def rerun_run(
    run_id: str,
    service: ServiceDep,
    session: SessionDep,
    sessionmaker: SessionmakerDep,
    settings: SettingsDep,
    who: SignedInDep,
) -> Response:
    """The run page's Re-run button: a new run of the same question, template and corpus, linked to this one."""
    await run_or_404(session, run_id, who.visibility)
    await session.close()
    await check_run_quota(sessionmaker, who, settings.limits)
    return RedirectResponse(
        f"/runs/{await service.rerun(run_id, user_id=who.user_id, reader=who.visibility)}", status_code=303
    )


@router.get("/runs/{run_id}/delete", response_class=HTMLResponse)
async def delete_confirm(
    request: Request, run_id: str, templates: TemplatesDep, session: SessionDep, who: SignedInDep
) -> HTMLResponse:
    """Asks before deleting: the run's question, what goes with it, and the button that does it."""
    run = await run_or_404(session, run_id, who.visibility)
    return templates.TemplateResponse(request, "pages/delete.html", {"run": run})


@router.post(
    "/runs/{run_id}/delete",
    response_model=None,
    responses={**REDIRECT, **error_responses(409, html=True)},
    dependencies=[CsrfDep],
)
async def delete_run_page(request: Request, run_id: str, session: SessionDep, who: SignedInDep) -> Response:
    await delete_run(request, session, run_id, who)
    return RedirectResponse("/?deleted=1", status_code=303)


@router.get("/runs/{run_id}", response_class=HTMLResponse)
async def run_page(
    request: Request,
    run_id: str,
    templates: TemplatesDep,
    session: SessionDep,
    shape: ShapeDep,
    registry: RegistryDep,
    settings: SettingsDep,
    who: SignedInDep,
    version: Annotated[int | None, Query(ge=1, description="An artifact version; the latest if omitted.")] = None,
) -> HTMLResponse:
    run = await run_or_404(session, run_id, who.visibility)
    events = list(await runs_repo.events_after(session=session, run_id=run_id))
    view = reduce_events(run_id, events)
    if not events and run.status == "pending":
        view.template, view.question = run.template_id, run.question
    # The `complete` event names the version it wrote, in the same transaction: the latest one. Only a page asked
    # for another version reads the stored artifacts.
    latest_version = view.version
    if view.finished and version is None:
        # A refresh writes later versions of this run after its `complete` event: show the newest.
        newest = await runs_repo.latest_version_number(session=session, run_id=run_id)
        version = newest if newest and newest != view.version else None
    if version is not None:
        versions = await runs_repo.artifact_versions(session=session, run_id=run_id)
        chosen = version_or_404(run, versions, version)
        view.report, view.version, latest_version = chosen.report, chosen.version, versions[-1].version
    audit = await runs_repo.audit_trail(session=session, run_id=run_id)
    spec = _spec_or_none(registry, run.template_id)
    same_question = [
        r
        for r in await runs_repo.runs_of_question(
            session=session, question=run.question, template_id=run.template_id, exclude=run_id, limit=10
        )
        if who.visibility.allows(r)
    ]
    return templates.TemplateResponse(
        request,
        "pages/run.html",
        {
            "run": run,
            "view": view,
            "audit": audit,
            "topo": layout(shape, view),
            "latest_version": latest_version,
            "base_url": str(request.base_url),
            "sections": spec.sections if spec else [],
            "same_question": same_question,
            "thread": await thread_of(session, run, who),
            "max_chars": settings.limits.max_question_chars,
            "attribution": attribution_for(run.corpus),
            "mismatch": corpus_mismatch(registry.all(), spec, run.corpus, settings.corpus.default),
        },
    )


def corpus_mismatch(specs: list[Any], spec: Any, corpus: str, general: str) -> str | None:
    """What the run page says when a run's template and corpus do not belong together: a template written for a
    corpus of its own run on another, or a general template run on another template's own corpus. Any
    template may run on any corpus; this only says what the page can tell. ``general``: the default corpus,
    which belongs to no template."""
    if spec is None or spec.default_source.kind != "local" or corpus == spec.default_source.corpus:
        return None
    own = spec.default_source.corpus
    if own != general:
        return (
            f"Template {spec.id} is written for corpus {own}; this run searched {corpus}, which it was not built "
            "for, so its sections may not fit what was found."
        )
    owner = next((s for s in specs if s.default_source.kind == "local" and s.default_source.corpus == corpus), None)
    if owner is not None and corpus != general:
        return (
            f"Corpus {corpus} holds the sources of template {owner.id}; template {spec.id} may find little in it "
            "that fits its sections."
        )
    return None


def _spec_or_none(registry: SpecRegistry, template_id: str) -> Spec | None:
    try:
        return registry.get(template_id)
    except BadInput:  # a run of a template since removed still opens; its filter just lists no sections
        return None


@router.get("/runs/{run_id}/live")
async def run_live(
    request: Request,
    run_id: str,
    service: ServiceDep,
    session: SessionDep,
    sessionmaker: SessionmakerDep,
    settings: SettingsDep,
    templates: TemplatesDep,
    shape: ShapeDep,
    who: SignedInDep,
    after: str | None = None,
    last_event_id: Annotated[str | None, Header(alias="Last-Event-ID")] = None,
) -> EventSourceResponse:
    # The browser's own reconnect sends Last-Event-ID; the first connection names the page's last seq.
    cursor = parse_last_event_id(last_event_id if last_event_id is not None else after)
    await run_or_404(session, run_id, who.visibility)
    stored = list(await runs_repo.events_after(session=session, run_id=run_id))
    await session.close()
    if stored and stored[-1].name in TERMINAL_EVENTS and cursor >= stored[-1].seq:
        # The page saw the terminal event's first message (its timeline row) but the connection dropped before
        # its report and `done`: send that event's messages again. The page drops what it already applied.
        cursor = stored[-1].seq - 1
    seen = [e for e in stored if e.seq <= cursor]
    view = reduce_events(run_id, seen)

    async def audit() -> list[Any]:
        async with sessionmaker() as audit_session:
            return list(await runs_repo.audit_trail(session=audit_session, run_id=run_id))

    slots: StreamSlots = request.app.state.streams
    slot = slots.take(who)
    return EventSourceResponse(
        slots.follow(
            slot,
            page_stream(templates, shape, view, service.tail(run_id, cursor), audit, base_url=str(request.base_url)),
        ),
        ping=settings.limits.sse_ping_seconds,
    )
