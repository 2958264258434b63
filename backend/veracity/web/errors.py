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

from fastapi import Request
from fastapi.responses import JSONResponse, Response
from fastapi.templating import Jinja2Templates
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from veracity import messages
from veracity.db.failures import is_database_error

logger = logging.getLogger(__name__)

API_PREFIXES = ("/v1/", "/healthz")


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
