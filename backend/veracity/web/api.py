"""The JSON and SSE API under /v1, and /healthz."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Header, Path, Query, Request, Response
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field
from sqlalchemy.ext.asyncio import AsyncSession
from sse_starlette import EventSourceResponse

from veracity import accounts, messages
from veracity.accounts import Principal
from veracity.db import accounts_repo, runs_repo
from veracity.db.models import ApiToken
from veracity.errors import Conflict, MalformedOutput, ModelError, PipelineError
from veracity.guards.io import VerifyItem, verify_items
from veracity.web.auth import AdminDep, ReaderDep, SignedInDep, client_of
from veracity.web.deps import JudgeDep, RegistryDep, ServiceDep, SessionDep, SessionmakerDep, SettingsDep
from veracity.web.errors import EVERY_ROUTE, error_responses
from veracity.web.health import health_report
from veracity.web.limits import StreamSlots, check_run_quota
from veracity.web.lookup import parse_last_event_id, run_or_404
from veracity.web.sse import json_stream

router = APIRouter(responses=error_responses(*EVERY_ROUTE))


def streams(request: Request) -> StreamSlots:
    slots: StreamSlots = request.app.state.streams
    return slots


MAX_VERIFY_ITEMS = 200


class ResearchRequest(BaseModel):
    question: str = Field(description="What to research (1–2,000 characters).")
    template: str = Field(default="answer", description="A spec id, e.g. answer or market_brief.")
    corpus: str | None = Field(default=None, description="Local corpus to search; the template's default if omitted.")


@router.post(
    "/v1/research/stream",
    summary="Start a run and stream its events (SSE)",
    response_class=EventSourceResponse,
    responses=error_responses(400, 422, 429),
)
async def research_stream(
    request: Request,
    body: ResearchRequest,
    service: ServiceDep,
    settings: SettingsDep,
    sessionmaker: SessionmakerDep,
    who: SignedInDep,
) -> EventSourceResponse:
    await check_run_quota(sessionmaker, who, settings.limits)
    slot = streams(request).take(who)
    try:
        run_id = await service.start(
            question=body.question,
            template=body.template,
            corpus=body.corpus,
            user_id=who.user_id,
            reader=who.visibility,
        )
    except BaseException:
        streams(request).give(slot)
        raise
    return EventSourceResponse(
        streams(request).follow(slot, json_stream(service.tail(run_id))),
        ping=settings.limits.sse_ping_seconds,
        headers={"X-Run-Id": run_id},
    )


@router.get(
    "/v1/research/{run_id}/events",
    summary="Replay a run's stored events, then follow it live (SSE)",
    response_class=EventSourceResponse,
    responses=error_responses(404, 422, 429),
)
async def research_events(
    request: Request,
    run_id: str,
    service: ServiceDep,
    session: SessionDep,
    settings: SettingsDep,
    who: SignedInDep,
    last_event_id: Annotated[str | None, Header(alias="Last-Event-ID")] = None,
) -> EventSourceResponse:
    cursor = parse_last_event_id(last_event_id)
    await run_or_404(session, run_id, who.visibility)
    await session.close()
    slot = streams(request).take(who)
    return EventSourceResponse(
        streams(request).follow(slot, json_stream(service.tail(run_id, cursor))), ping=settings.limits.sse_ping_seconds
    )


@router.post(
    "/v1/research/{run_id}/cancel",
    status_code=202,
    summary="Ask a run to stop (409 once it has finished)",
    responses=error_responses(404, 409),
)
async def research_cancel(run_id: str, service: ServiceDep, session: SessionDep, who: SignedInDep) -> dict[str, Any]:
    await run_or_404(session, run_id, who.visibility)
    await session.close()
    run = await service.cancel(run_id)
    # A queued run is ended at once ("failed"); a running one is stopped by its executor within seconds.
    return {"run_id": run_id, "status": run.status, "cancel_requested": True}


@router.post(
    "/v1/research/{run_id}/rerun",
    status_code=201,
    summary="Re-run a run: same question, template and corpus",
    responses=error_responses(404, 422, 429),
)
async def research_rerun(
    run_id: str,
    service: ServiceDep,
    session: SessionDep,
    sessionmaker: SessionmakerDep,
    settings: SettingsDep,
    response: Response,
    who: SignedInDep,
) -> dict[str, Any]:
    await run_or_404(session, run_id, who.visibility)
    await session.close()
    await check_run_quota(sessionmaker, who, settings.limits)
    new_id = await service.rerun(run_id, user_id=who.user_id, reader=who.visibility)
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
async def research_get(run_id: str, session: SessionDep, who: SignedInDep) -> JSONResponse:
    run = await run_or_404(session, run_id, who.visibility)
    artifact = await runs_repo.latest_artifact(session=session, run_id=run_id)
    if artifact is None:
        message = run.error or messages.NO_ARTIFACT.format(run_id=run_id, status=run.status)
        return JSONResponse(
            {"error": {"code": "no_artifact", "message": message}, "status": run.status}, status_code=404
        )
    return JSONResponse(_artifact_json(run, artifact))


@router.get("/v1/research/{run_id}/versions", summary="Every artifact version of a run", responses=error_responses(404))
async def research_versions(run_id: str, session: SessionDep, who: SignedInDep) -> dict[str, Any]:
    run = await run_or_404(session, run_id, who.visibility)
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
async def research_audit(run_id: str, session: SessionDep, who: SignedInDep) -> dict[str, Any]:
    run = await run_or_404(session, run_id, who.visibility)
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
async def verify(body: VerifyRequest, judge: JudgeDep, who: SignedInDep) -> dict[str, Any]:
    # The judge runs use: the configured model judge when VERACITY_MODEL__PROVIDER=openai, else the offline one.
    try:
        return {"results": await verify_items(body.items, judge)}
    except (MalformedOutput, ModelError) as exc:
        raise PipelineError(f"the grounding judge failed: {exc}") from exc


@router.get("/v1/templates", summary="The research templates (specs)")
async def templates(registry: RegistryDep, who: SignedInDep) -> list[dict[str, Any]]:
    return [spec.model_dump(exclude={"eval_cases"}) for spec in registry.all()]


@router.get(
    "/healthz",
    summary="Health: the database takes a write (else 503), runs queued and running, corpus sizes",
    responses={503: {"description": "The database cannot be written to or read; `failed` says which and why."}},
)
async def healthz(sessionmaker: SessionmakerDep, settings: SettingsDep, who: ReaderDep) -> JSONResponse:
    status, body = await health_report(
        sessionmaker, settings.database.health_timeout_seconds, settings.limits.run_lease_seconds
    )
    if not who.is_admin:  # what is stored (corpus sizes) is for admins once there are accounts
        body.pop("corpora", None)
    return JSONResponse(body, status_code=status)


@router.get(
    "/v1/research", summary="Your runs, newest first (admins: everyone's), optionally those whose question has q"
)
async def research_list(
    session: SessionDep,
    who: SignedInDep,
    q: Annotated[str, Query(max_length=200, description="Words the question contains.")] = "",
    page: Annotated[int, Query(ge=1, le=100_000)] = 1,
    per_page: Annotated[int, Query(ge=1, le=100)] = 20,
) -> dict[str, Any]:
    runs = await runs_repo.recent_runs(
        session=session, visible=who.visibility, query=q.strip(), offset=(page - 1) * per_page, limit=per_page + 1
    )
    return {
        "page": page,
        "more": len(runs) > per_page,
        "runs": [
            {
                "run_id": r.id,
                "question": r.question,
                "template": r.template_id,
                "corpus": r.corpus,
                "status": r.status,
                "outcome": r.outcome,
                "created_at": r.created_at.isoformat(),
            }
            for r in runs[:per_page]
        ],
    }


@router.delete(
    "/v1/research/{run_id}",
    status_code=204,
    summary="Delete a finished run: its events, audit trail and reports",
    responses=error_responses(404, 409),
)
async def research_delete(request: Request, run_id: str, session: SessionDep, who: SignedInDep) -> Response:
    await delete_run(request, session, run_id, who)
    return Response(status_code=204)


async def delete_run(request: Request, session: AsyncSession, run_id: str, who: Principal) -> None:
    """Delete a run the reader may see (409 while it is active), and say so in the security log."""
    run = await run_or_404(session, run_id, who.visibility)
    status, question, owner = run.status, run.question, run.user_id
    await session.rollback()  # end the read: the delete and its log line are one transaction of their own
    async with session.begin():
        if not await runs_repo.delete_run(session=session, run_id=run_id):
            raise Conflict(messages.RUN_STILL_ACTIVE.format(run_id=run_id, status=status))
        await accounts_repo.log(
            session=session,
            actor=who.name,
            action="run_deleted",
            target=f"run {run_id}",
            client=client_of(request),
            detail={"question_chars": len(question), "by_admin_for_other": who.is_admin and owner != who.user_id},
        )


class TokenRequest(BaseModel):
    name: str = Field(min_length=1, max_length=64, description="What the token is for, e.g. the script using it.")


@router.post(
    "/v1/tokens",
    status_code=201,
    summary="Make an API token for yourself (its secret is shown only now)",
    responses=error_responses(400, 422),
)
async def token_create(request: Request, body: TokenRequest, session: SessionDep, who: SignedInDep) -> dict[str, Any]:
    async with session.begin():
        token, secret = await accounts.make_token(
            session=session, user=who, name=body.name, actor=who.name, client=client_of(request)
        )
    return {"id": token.id, "name": token.name, "token": secret, "prefix": token.prefix}


@router.get("/v1/tokens", summary="Your API tokens (never their secrets)")
async def token_list(session: SessionDep, who: SignedInDep) -> dict[str, Any]:
    if who.user_id is None:
        return {"tokens": []}
    tokens = await accounts_repo.tokens_of(session=session, user_id=who.user_id)
    return {"tokens": [token_json(t) for t in tokens]}


def token_json(token: ApiToken) -> dict[str, Any]:
    return {
        "id": token.id,
        "name": token.name,
        "prefix": token.prefix,
        "created_at": token.created_at.isoformat(),
        "last_used_at": token.last_used_at.isoformat() if token.last_used_at else None,
        "revoked": token.revoked_at is not None,
    }


@router.delete(
    "/v1/tokens/{token_id}", status_code=204, summary="Revoke an API token", responses=error_responses(404, 422)
)
async def token_revoke(
    request: Request,
    token_id: Annotated[int, Path(ge=1, le=2**63 - 1, description="The token's id (a database integer).")],
    session: SessionDep,
    who: SignedInDep,
) -> Response:
    async with session.begin():
        await accounts.revoke(session=session, token_id=token_id, by=who, client=client_of(request))
    return Response(status_code=204)


@router.get(
    "/v1/security-log",
    summary="Sign-ins, token use, deletions and admin acts, newest first (admins)",
    responses=error_responses(422),
)
async def security_log(
    session: SessionDep, who: AdminDep, limit: Annotated[int, Query(ge=1, le=1000)] = 100
) -> dict[str, Any]:
    entries = await accounts_repo.security_log(session=session, limit=limit)
    return {
        "entries": [
            {
                "at": e.at.isoformat(),
                "actor": e.actor,
                "action": e.action,
                "target": e.target,
                "client": e.client,
                "detail": e.detail,
            }
            for e in entries
        ]
    }
