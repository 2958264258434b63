"""Unhandled errors at the edge: any exception no handler took answers 500 with a sentence from ``messages`` —
JSON under ``/v1/`` and ``/healthz``, the error page for a browser — and never the exception's text, which for a
database failure holds the SQL and its parameters. The whole exception, traceback included, goes to the log.

A pure ASGI middleware rather than ``app.exception_handler(Exception)``: Starlette re-raises after such a
handler, so the server would log every failure a second time, and its response would skip the security headers
(this middleware sits inside ``SecurityHeaders``). An exception after the response started (a stream) cannot
change the status any more; it is logged and raised on.
"""

from __future__ import annotations

import logging
from typing import Any

from fastapi import Request
from fastapi.responses import JSONResponse, Response
from fastapi.templating import Jinja2Templates
from pydantic import BaseModel, Field
from starlette.exceptions import HTTPException
from starlette.routing import Match
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from veracity import messages
from veracity.db.failures import is_database_error

logger = logging.getLogger(__name__)

API_PREFIXES = ("/v1/", "/healthz")


class ErrorDetail(BaseModel):
    code: str = Field(description="What kind of error: bad_input, not_found, conflict, no_artifact, internal, ...")
    message: str = Field(description="A sentence a user can act on.")


class ErrorBody(BaseModel):
    """The body of every JSON error answer (4xx and 5xx)."""

    error: ErrorDetail


ERROR_DESCRIPTIONS = {
    400: "The request body could not be read (not JSON, or nested too deeply).",
    401: "Accounts are on and the request carries no valid sign-in or API token (`Authorization: Bearer`).",
    403: "Refused: an admin's act, or a state change a browser sent from another site or without the form's CSRF "
    "field.",
    404: "No such run, run version, report or route.",
    409: "The run is not in a state that allows this (it has finished).",
    413: "The request body is larger than `VERACITY_LIMITS__MAX_BODY_BYTES`.",
    422: "Bad input: the message says which field and why; nothing was stored.",
    429: "A per-user limit was reached (runs per minute, runs at once, live streams); `Retry-After` says when to "
    "try again.",
    431: "Too many or too large request headers.",
    500: "The server failed; the message says whether the database did (details in the server log).",
}


def error_responses(*statuses: int, html: bool = False) -> dict[int | str, dict[str, Any]]:
    """The OpenAPI ``responses=`` of a route for the error statuses it can answer, each an ``ErrorBody``; with
    ``html``, a page's: the error page for a browser (``wants_html``), else the ``ErrorBody``. (A page's model
    would be documented as HTML, the page's own media type, so its JSON is named by reference: the API's routes
    put ``ErrorBody`` among the schema's components.)"""
    if not html:
        return {status: {"model": ErrorBody, "description": ERROR_DESCRIPTIONS[status]} for status in statuses}
    content = {
        "application/json": {"schema": {"$ref": "#/components/schemas/ErrorBody"}},
        "text/html": {"schema": {"type": "string"}},
    }
    return {status: {"description": ERROR_DESCRIPTIONS[status], "content": content} for status in statuses}


EVERY_ROUTE = (401, 403, 413, 431)
"""What any route may answer before it runs: no sign-in (accounts on), a cross-site state change, size limits."""

REDIRECT: dict[int | str, dict[str, Any]] = {303: {"description": "Done: on to the page that shows it (`Location`)."}}


def http_error(request: Request, templates: Jinja2Templates, exc: HTTPException) -> Response:
    """The answer to an ``HTTPException`` Starlette or FastAPI raised itself (an unknown route, a method not
    allowed, a body that is not JSON): in the documented shape, not FastAPI's ``{"detail": ...}``; a 405's
    ``Allow`` names every method answered at the path."""
    path = request.url.path[:200]
    headers = dict(exc.headers or {})
    if exc.status_code == 404:
        code, message = "not_found", messages.ROUTE_NOT_FOUND.format(path=path)
    elif exc.status_code == 405:
        headers["Allow"] = allowed_methods(request) or headers.get("Allow", "")
        code = "method_not_allowed"
        message = messages.METHOD_NOT_ALLOWED.format(
            method=request.method, path=path, allowed=headers["Allow"] or "none"
        )
    elif exc.status_code == 400:  # FastAPI could not parse the body
        code, message = "bad_input", messages.BODY_UNREADABLE
    else:
        code, message = f"http_{exc.status_code}", messages.REQUEST_REFUSED.format(detail=exc.detail)
    response = error_response(request, templates, status=exc.status_code, code=code, message=message)
    response.headers.update(headers)
    return response


def allowed_methods(request: Request) -> str:
    """Every method some route answers at this path (Starlette's own ``Allow`` names only the first route that
    matched it, so ``GET`` alone where ``DELETE`` is answered too)."""
    methods = {
        method
        for method in ("DELETE", "GET", "PATCH", "POST", "PUT")
        for route in request.app.router.routes
        if route.matches({**request.scope, "method": method})[0] == Match.FULL
    }
    return ", ".join(sorted(methods))


def wants_html(request: Request) -> bool:
    """A browser page (not the API) whose client accepts HTML gets the error page; everything else JSON."""
    return not request.url.path.startswith(API_PREFIXES) and "text/html" in request.headers.get("accept", "")


def internal_message(exc: BaseException) -> str:
    """What a user is told of an unhandled exception: whether the database failed, never what it said."""
    reason = messages.DATABASE_FAILED if is_database_error(exc) else messages.UNEXPECTED_FAILURE
    return messages.REQUEST_FAILED.format(reason=reason)


def error_response(request: Request, templates: Jinja2Templates, *, status: int, code: str, message: str) -> Response:
    if wants_html(request):
        return templates.TemplateResponse(
            request, "pages/error.html", {"message": message, "status": status}, status_code=status
        )
    return JSONResponse({"error": {"code": code, "message": message}}, status_code=status)


class ServerErrors:
    def __init__(self, app: ASGIApp, templates: Jinja2Templates) -> None:
        self.app = app
        self.templates = templates

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def watch(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, receive, watch)
        except Exception as exc:
            logger.exception("unhandled error answering %s %s", scope.get("method"), scope.get("path"))
            if started:
                raise
            request = Request(scope)
            response = error_response(
                request, self.templates, status=500, code="internal", message=internal_message(exc)
            )
            await response(scope, receive, send)
