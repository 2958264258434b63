"""The API's interactive docs and its OpenAPI schema: open in single-user mode, for the signed-in once there are
accounts (they map every route a caller could try)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.openapi.utils import get_openapi
from fastapi.responses import HTMLResponse, JSONResponse

from veracity.web.auth import SignedInDep

router = APIRouter(include_in_schema=False)


def schema(request: Request) -> dict[str, Any]:
    app = request.app
    if app.openapi_schema is None:
        app.openapi_schema = get_openapi(title=app.title, version=app.version, routes=app.routes)
    found: dict[str, Any] = app.openapi_schema
    return found


@router.get("/openapi.json")
async def openapi(request: Request, who: SignedInDep) -> JSONResponse:
    return JSONResponse(schema(request))


@router.get("/docs")
async def swagger(who: SignedInDep) -> HTMLResponse:
    return get_swagger_ui_html(openapi_url="/openapi.json", title="Veracity API")
