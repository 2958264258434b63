"""The report's downloads: Markdown, JSON, PDF and Word, of the latest artifact version or of ``?version=N``.
Each is an attachment named ``veracity-<run id prefix>-v<version>.<suffix>``; a run the reader may not see is the
same 404 as a run that does not exist."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import JSONResponse, PlainTextResponse, Response
from sqlalchemy.ext.asyncio import AsyncSession
from starlette.concurrency import run_in_threadpool

from veracity.accounts import Principal
from veracity.db import runs_repo
from veracity.domain import Report
from veracity.runs import export_docx, export_pdf
from veracity.runs.report import export_json, render_markdown
from veracity.web.auth import SignedInDep
from veracity.web.deps import SessionDep
from veracity.web.errors import EVERY_ROUTE, error_responses
from veracity.web.lookup import run_or_404, version_or_404

router = APIRouter(responses=error_responses(*EVERY_ROUTE, 404, 422, 429, html=True))
VersionQuery = Annotated[int | None, Query(ge=1, description="An artifact version; the latest if omitted.")]
Renderer = Callable[..., bytes]


@dataclass(frozen=True)
class Export:
    """What every download needs: the report of the version asked for, its number and time, its permalink, and
    the attachment header."""

    report: Report
    version: int
    created: datetime
    permalink: str
    headers: dict[str, str]

    def render(self, renderer: Renderer) -> bytes:
        return renderer(self.report, version=self.version, created=self.created, permalink=self.permalink)


async def _export(
    request: Request, session: AsyncSession, run_id: str, version: int | None, suffix: str, who: Principal
) -> Export:
    run = await run_or_404(session, run_id, who.visibility)
    artifact = version_or_404(run, await runs_repo.artifact_versions(session=session, run_id=run_id), version)
    filename = f"veracity-{run_id[:12]}-v{artifact.version}.{suffix}"
    return Export(
        report=Report.model_validate(artifact.report),
        version=artifact.version,
        created=artifact.created_at,
        permalink=f"{request.base_url}runs/{run_id}?version={artifact.version}",
        headers={"Content-Disposition": f'attachment; filename="{filename}"'},
    )


async def _binary(
    request: Request, session: AsyncSession, run_id: str, version: int | None, who: Principal, *, suffix: str
) -> Response:
    found = await _export(request, session, run_id, version, suffix, who)
    await session.close()  # rendering takes a moment: not while holding a connection
    renderer, media_type = BINARY[suffix]
    # CPU-bound, so off the event loop, as the other requests and the live streams share it.
    body = await run_in_threadpool(found.render, renderer)
    return Response(body, media_type=media_type, headers=found.headers)


BINARY: dict[str, tuple[Renderer, str]] = {
    "pdf": (export_pdf.render_pdf, export_pdf.MEDIA_TYPE),
    "docx": (export_docx.render_docx, export_docx.MEDIA_TYPE),
}


def _documented(media_type: str, what: str) -> dict[int | str, dict[str, Any]]:
    return {200: {"description": what, "content": {media_type: {"schema": {"type": "string", "format": "binary"}}}}}


@router.get("/runs/{run_id}/report.md", response_class=PlainTextResponse)
async def export_markdown(
    request: Request, run_id: str, session: SessionDep, who: SignedInDep, version: VersionQuery = None
) -> PlainTextResponse:
    """The report as Markdown: a header (template, corpus, date, version), anchors resolved to numbered references
    with their quotes and links."""
    found = await _export(request, session, run_id, version, "md", who)
    body = render_markdown(found.report, version=found.version, created=found.created, permalink=found.permalink)
    return PlainTextResponse(body, media_type="text/markdown; charset=utf-8", headers=found.headers)


@router.get("/runs/{run_id}/report.json")
async def export_report_json(
    request: Request, run_id: str, session: SessionDep, who: SignedInDep, version: VersionQuery = None
) -> JSONResponse:
    """The report as JSON (its template, corpus, version and the version's ``created_at`` too), each claim with its
    reference numbers and the references resolved."""
    found = await _export(request, session, run_id, version, "json", who)
    body = export_json(found.report, version=found.version, permalink=found.permalink, created=found.created)
    return JSONResponse(body, headers=found.headers)


@router.get(
    "/runs/{run_id}/report.pdf",
    response_class=Response,
    responses=_documented(export_pdf.MEDIA_TYPE, "The report as a PDF."),
)
async def export_report_pdf(
    request: Request, run_id: str, session: SessionDep, who: SignedInDep, version: VersionQuery = None
) -> Response:
    """The report as a PDF: the header, each section with its status, each claim with its numbered references
    (linked to the References), and the References with each quote, its source link and offsets."""
    return await _binary(request, session, run_id, version, who, suffix="pdf")


@router.get(
    "/runs/{run_id}/report.docx",
    response_class=Response,
    responses=_documented(export_docx.MEDIA_TYPE, "The report as a Word (DOCX) file."),
)
async def export_report_docx(
    request: Request, run_id: str, session: SessionDep, who: SignedInDep, version: VersionQuery = None
) -> Response:
    """The report as a Word file, with the same content as the PDF: links to the sources, and each reference
    number a link to its entry."""
    return await _binary(request, session, run_id, version, who, suffix="docx")
