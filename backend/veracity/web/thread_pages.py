"""A report's next steps on its page: ask a follow-up (a new run linked to it), refresh it (its plan run again
against the sources as they are now, written as its next version), and see what changed between two versions."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated

from fastapi import APIRouter, Form, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from sqlalchemy.ext.asyncio import AsyncSession

from veracity import messages
from veracity.accounts import Principal
from veracity.corpus.wiki import attribution_for
from veracity.db import runs_repo
from veracity.db.models import ArtifactVersion, ResearchRun
from veracity.domain import Report
from veracity.errors import BadInput
from veracity.runs.diff import VersionDiff, diff_reports
from veracity.runs.thread import ancestors, follow_ups
from veracity.web.auth import CsrfDep, SignedInDep
from veracity.web.deps import ServiceDep, SessionDep, SessionmakerDep, SettingsDep, TemplatesDep
from veracity.web.errors import EVERY_ROUTE, REDIRECT, error_responses
from veracity.web.limits import check_run_quota
from veracity.web.lookup import run_or_404, version_or_404


@dataclass
class ThreadView:
    """What a run page shows of its thread: the runs it follows (oldest first), its follow-ups, its refreshes
    (newest first; an active one is under way), and, for a refresh, the run it refreshes."""

    ancestors: list[ResearchRun]
    follow_ups: list[ResearchRun]
    refreshes: list[ResearchRun]
    refreshing: ResearchRun | None


async def thread_of(session: AsyncSession, run: ResearchRun, who: Principal) -> ThreadView:
    visible = who.visibility.allows
    refreshing = None
    if run.refresh_of is not None:
        target = await runs_repo.get_run(session=session, run_id=run.refresh_of)
        refreshing = target if target is not None and visible(target) else None
    return ThreadView(
        ancestors=[r for r in await ancestors(session=session, run=run) if visible(r)],
        follow_ups=[r for r in await follow_ups(session=session, run_id=run.id) if visible(r)],
        refreshes=[r for r in await runs_repo.refreshes_of(session=session, run_id=run.id) if visible(r)],
        refreshing=refreshing,
    )


async def version_changes(
    session: AsyncSession, run: ResearchRun, before: int | None, after: int | None
) -> tuple[Sequence[ArtifactVersion], VersionDiff]:
    """The run's versions, and what changed from ``before`` to ``after`` (default: the latest and the one before
    it); 404 for a version it does not have, ``BadInput`` for the same version twice."""
    versions = await runs_repo.artifact_versions(session=session, run_id=run.id)
    newer = version_or_404(run, versions, after)
    older = version_or_404(run, versions, before if before is not None else max(1, newer.version - 1))
    if older.version == newer.version:
        raise BadInput(messages.VERSIONS_SAME)
    diff = diff_reports(
        Report.model_validate(older.report), Report.model_validate(newer.report), (older.version, newer.version)
    )
    return versions, diff


router = APIRouter(responses=error_responses(*EVERY_ROUTE, 404, 409, 422, 429, html=True))


@router.post("/runs/{run_id}/follow-up", response_model=None, responses=REDIRECT, dependencies=[CsrfDep])
async def follow_up_page(
    run_id: str,
    service: ServiceDep,
    session: SessionDep,
    sessionmaker: SessionmakerDep,
    settings: SettingsDep,
    who: SignedInDep,
    question: Annotated[str, Form(max_length=100_000)] = "",
) -> Response:
    """The report's follow-up box: a new run of the same template and corpus, linked to this one."""
    await run_or_404(session, run_id, who.visibility)
    await session.close()
    if not question.strip():
        raise BadInput(messages.FOLLOW_UP_EMPTY)
    await check_run_quota(sessionmaker, who, settings.limits)
    new_id = await service.follow_up(run_id, question, user_id=who.user_id, reader=who.visibility)
    return RedirectResponse(f"/runs/{new_id}", status_code=303)


@router.post("/runs/{run_id}/refresh", response_model=None, responses=REDIRECT, dependencies=[CsrfDep])
async def refresh_page(
    run_id: str,
    service: ServiceDep,
    session: SessionDep,
    sessionmaker: SessionmakerDep,
    settings: SettingsDep,
    who: SignedInDep,
) -> Response:
    """Refresh: to the refreshing run's page, which links back to the version it will write."""
    await run_or_404(session, run_id, who.visibility)
    await session.close()
    await check_run_quota(sessionmaker, who, settings.limits)
    new_id = await service.refresh(run_id)
    return RedirectResponse(f"/runs/{new_id}", status_code=303)


@router.get("/runs/{run_id}/changes", response_class=HTMLResponse)
async def changes_page(
    request: Request,
    run_id: str,
    templates: TemplatesDep,
    session: SessionDep,
    who: SignedInDep,
    before: Annotated[int | None, Query(alias="from", ge=1, le=1_000_000)] = None,
    after: Annotated[int | None, Query(alias="to", ge=1, le=1_000_000)] = None,
) -> HTMLResponse:
    """What changed between two versions (by default: the one before the latest, and the latest)."""
    run = await run_or_404(session, run_id, who.visibility)
    versions, diff = await version_changes(session, run, before, after)
    return templates.TemplateResponse(
        request,
        "pages/changes.html",
        {
            "run": run,
            "diff": diff,
            "versions": versions,
            "attribution": attribution_for(run.corpus),
        },
    )
