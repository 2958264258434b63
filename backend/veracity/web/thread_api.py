"""Follow-ups, refreshes and version changes under /v1 (the same acts as the run page's forms)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field

from veracity.web.auth import SignedInDep
from veracity.web.deps import ServiceDep, SessionDep, SessionmakerDep, SettingsDep
from veracity.web.errors import EVERY_ROUTE, error_responses
from veracity.web.limits import check_run_quota
from veracity.web.lookup import run_or_404
from veracity.web.thread_pages import version_changes

router = APIRouter(responses=error_responses(*EVERY_ROUTE))


class FollowUpRequest(BaseModel):
    question: str = Field(description="The follow-up question (1–2,000 characters).")


@router.post(
    "/v1/research/{run_id}/follow-up",
    status_code=201,
    summary="Ask a follow-up of a finished run: a new run linked to it (its parent); Location names it",
    responses=error_responses(400, 404, 409, 422, 429),
)
async def follow_up(
    run_id: str,
    body: FollowUpRequest,
    service: ServiceDep,
    session: SessionDep,
    sessionmaker: SessionmakerDep,
    settings: SettingsDep,
    who: SignedInDep,
) -> JSONResponse:
    await run_or_404(session, run_id, who.visibility)
    await session.close()
    await check_run_quota(sessionmaker, who, settings.limits)
    new_id = await service.follow_up(run_id, body.question, user_id=who.user_id, reader=who.visibility)
    return JSONResponse(
        {"run_id": new_id, "parent_id": run_id}, status_code=201, headers={"Location": f"/v1/research/{new_id}"}
    )


@router.post(
    "/v1/research/{run_id}/refresh",
    status_code=202,
    summary="Refresh a finished run against today's sources: its next artifact version, written when the refreshing "
    "run ends",
    responses=error_responses(404, 409, 422, 429),
)
async def refresh(
    run_id: str,
    service: ServiceDep,
    session: SessionDep,
    sessionmaker: SessionmakerDep,
    settings: SettingsDep,
    who: SignedInDep,
) -> JSONResponse:
    await run_or_404(session, run_id, who.visibility)
    await session.close()
    await check_run_quota(sessionmaker, who, settings.limits)
    new_id = await service.refresh(run_id)
    return JSONResponse(
        {"refresh_run_id": new_id, "run_id": run_id, "events_url": f"/v1/research/{new_id}/events"},
        status_code=202,
    )


@router.get(
    "/v1/research/{run_id}/changes",
    summary="What changed between two artifact versions (default: the latest and the one before)",
    responses=error_responses(404, 422),
)
async def changes(
    run_id: str,
    session: SessionDep,
    who: SignedInDep,
    before: Annotated[int | None, Query(alias="from", ge=1, le=1_000_000)] = None,
    after: Annotated[int | None, Query(alias="to", ge=1, le=1_000_000)] = None,
) -> dict[str, Any]:
    run = await run_or_404(session, run_id, who.visibility)
    _, diff = await version_changes(session, run, before, after)
    return {"run_id": run_id, **diff.as_dict()}
