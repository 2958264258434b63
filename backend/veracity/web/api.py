"""The JSON and SSE API under /v1, and /healthz."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Header, Response
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field
from sse_starlette import EventSourceResponse

from veracity import messages
from veracity.db import runs_repo
from veracity.errors import MalformedOutput, ModelError, PipelineError
from veracity.guards.io import VerifyItem, verify_items
from veracity.web.deps import JudgeDep, RegistryDep, ServiceDep, SessionDep, SessionmakerDep, SettingsDep
from veracity.web.errors import error_responses
from veracity.web.health import health_report
from veracity.web.lookup import parse_last_event_id, run_or_404
from veracity.web.sse import json_stream

router = APIRouter()
MAX_VERIFY_ITEMS = 200


class ResearchRequest(BaseModel):
    question: str = Field(description="What to research (1–2,000 characters).")
    template: str = Field(default="answer", description="A spec id, e.g. answer or market_brief.")
    corpus: str | None = Field(default=None, description="Local corpus to search; the template's default if omitted.")


@router.post(
    "/v1/research/stream",
    summary="Start a run and stream its events (SSE)",
    response_class=EventSourceResponse,
    responses=error_responses(400, 422),
)
async def research_stream(body: ResearchRequest, service: ServiceDep, settings: SettingsDep) -> EventSourceResponse:
    run_id = await service.start(question=body.question, template=body.template, corpus=body.corpus)
    return EventSourceResponse(
        json_stream(service.tail(run_id)), ping=settings.limits.sse_ping_seconds, headers={"X-Run-Id": run_id}
    )


@router.get(
    "/v1/research/{run_id}/events",
    summary="Replay a run's stored events, then follow it live (SSE)",
    response_class=EventSourceResponse,
    responses=error_responses(404, 422),
)
async def research_events(
    run_id: str,
    service: ServiceDep,
    session: SessionDep,
    settings: SettingsDep,
    last_event_id: Annotated[str | None, Header(alias="Last-Event-ID")] = None,
) -> EventSourceResponse:
    cursor = parse_last_event_id(last_event_id)
    await run_or_404(session, run_id)
    await session.close()
    return EventSourceResponse(json_stream(service.tail(run_id, cursor)), ping=settings.limits.sse_ping_seconds)


@router.post(
    "/v1/research/{run_id}/cancel",
    status_code=202,
    summary="Ask a run to stop (409 once it has finished)",
    responses=error_responses(404, 409),
)
async def research_cancel(run_id: str, service: ServiceDep, session: SessionDep) -> dict[str, Any]:
    await run_or_404(session, run_id)
    await session.close()
    run = await service.cancel(run_id)
    # A queued run is ended at once ("failed"); a running one is stopped by its executor within seconds.
    return {"run_id": run_id, "status": run.status, "cancel_requested": True}


@router.post(
    "/v1/research/{run_id}/rerun",
    status_code=201,
    summary="Re-run a run: same question, template and corpus",
    responses=error_responses(404, 422),
)
async def research_rerun(run_id: str, service: ServiceDep, session: SessionDep, response: Response) -> dict[str, Any]:
    await run_or_404(session, run_id)
    await session.close()
    new_id = await service.rerun(run_id)
    response.headers["Location"] = f"/v1/research/{new_id}"
    return {"run_id": new_id, "rerun_of": run_id}


def _artifact_json(run: Any, artifact: Any) -> dict[str, Any]:
    return {
        "run_id": run.id,
        "status": run.status,
        "version": artifact.version,
        "created_at": artifact.created_at.isoformat(),
        "report": artifact.report,
        "markdown": artifact.markdown,
    }


@router.get("/v1/research/{run_id}", summary="The latest artifact version of a run", responses=error_responses(404))
async def research_get(run_id: str, session: SessionDep) -> JSONResponse:
    run = await run_or_404(session, run_id)
    artifact = await runs_repo.latest_artifact(session=session, run_id=run_id)
    if artifact is None:
        message = run.error or messages.NO_ARTIFACT.format(run_id=run_id, status=run.status)
        return JSONResponse(
            {"error": {"code": "no_artifact", "message": message}, "status": run.status}, status_code=404
        )
    return JSONResponse(_artifact_json(run, artifact))


@router.get("/v1/research/{run_id}/versions", summary="Every artifact version of a run", responses=error_responses(404))
async def research_versions(run_id: str, session: SessionDep) -> dict[str, Any]:
    run = await run_or_404(session, run_id)
    versions = await runs_repo.artifact_versions(session=session, run_id=run_id)
    return {
        "run_id": run.id,
        "status": run.status,
        "versions": [
            {"version": a.version, "created_at": a.created_at.isoformat(), "outcome": a.report.get("outcome")}
            for a in versions
        ],
    }


@router.get("/v1/research/{run_id}/audit", summary="The audit trail of a run", responses=error_responses(404))
async def research_audit(run_id: str, session: SessionDep) -> dict[str, Any]:
    run = await run_or_404(session, run_id)
    entries = await runs_repo.audit_trail(session=session, run_id=run_id)
    return {
        "run_id": run.id,
        "status": run.status,
        "outcome": run.outcome,
        "entries": [
            {
                "seq": e.seq,
                "stage": e.stage,
                "attempt": e.attempt,
                "at": e.created_at.isoformat(),
                "payload": e.payload,
            }
            for e in entries
        ],
    }


class VerifyRequest(BaseModel):
    items: list[VerifyItem] = Field(
        description="Claims to ground, each with its sources.", min_length=1, max_length=MAX_VERIFY_ITEMS
    )


@router.post(
    "/v1/verify",
    summary="Ground claims in sources, sentence by sentence: supported / partial / unsupported with spans",
    responses=error_responses(400, 422, 500),
)
async def verify(body: VerifyRequest, judge: JudgeDep) -> dict[str, Any]:
    # The judge runs use: the configured model judge when VERACITY_MODEL__PROVIDER=openai, else the offline one.
    try:
        return {"results": await verify_items(body.items, judge)}
    except (MalformedOutput, ModelError) as exc:
        raise PipelineError(f"the grounding judge failed: {exc}") from exc


@router.get("/v1/templates", summary="The research templates (specs)")
async def templates(registry: RegistryDep) -> list[dict[str, Any]]:
    return [spec.model_dump(exclude={"eval_cases"}) for spec in registry.all()]


@router.get(
    "/healthz",
    summary="Health: the database takes a write (else 503), runs queued and running, corpus sizes",
    responses={503: {"description": "The database cannot be written to or read; `failed` says which and why."}},
)
async def healthz(sessionmaker: SessionmakerDep, settings: SettingsDep) -> JSONResponse:
    status, body = await health_report(
        sessionmaker, settings.database.health_timeout_seconds, settings.limits.run_lease_seconds
    )
    return JSONResponse(body, status_code=status)
