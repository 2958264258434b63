"""The FastAPI application: long-lived objects built in ``lifespan``, errors translated at the edge."""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from urllib.parse import quote

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import RedirectResponse, Response
from fastapi.staticfiles import StaticFiles
from fastapi.templating import Jinja2Templates
from jinja2 import BytecodeCache
from jinja2.bccache import Bucket
from starlette.exceptions import HTTPException

from veracity import __version__, messages
from veracity.corpus.uploads import sweep_stale
from veracity.errors import TooMany, Unauthorized, VeracityError
from veracity.fetch.canonical import host_of, link_url
from veracity.runs.floor import fallback_kind
from veracity.runs.runtime import open_runtime
from veracity.settings import PACKAGE_DIR, Settings, get_settings
from veracity.web import (
    account_pages,
    api,
    corpora_api,
    corpora_pages,
    docs,
    exports,
    pages,
    thread_api,
    thread_pages,
)
from veracity.web.auth import SameOrigin, csrf_token
from veracity.web.errors import ServerErrors, error_response, http_error, wants_html
from veracity.web.limits import RequestLimits, StreamSlots
from veracity.web.security import SecurityHeaders
from veracity.web.topology import graph_shape
from veracity.web.uploads import Uploads
from veracity.web.view import (
    age,
    breakable,
    duration,
    fallback_cause,
    found_statement,
    report_reference_numbers,
    seconds_since,
    size,
)

logger = logging.getLogger(__name__)

FRONTEND = PACKAGE_DIR / "frontend"


class _CompiledPages(BytecodeCache):
    """The page templates' compiled code, shared by every app this process makes (a server makes one; the tests
    make hundreds): a template whose source changed is compiled again (Jinja checks the source's checksum)."""

    def __init__(self) -> None:
        self._code: dict[str, bytes] = {}

    def load_bytecode(self, bucket: Bucket) -> None:
        if (code := self._code.get(bucket.key)) is not None:
            bucket.bytecode_from_string(code)

    def dump_bytecode(self, bucket: Bucket) -> None:
        self._code[bucket.key] = bucket.bytecode_to_string()


COMPILED_PAGES = _CompiledPages()


def _warm_templates(templates: Jinja2Templates) -> None:
    """Compile every page and partial before serving (about 0.15 s), not in the first request of each page."""
    started = time.perf_counter()
    for name in templates.env.list_templates(extensions=["html"]):
        templates.env.get_template(name)
    logger.info("warmed the page templates in %.2f s", time.perf_counter() - started)


def create_app(settings: Settings | None = None, *, migrate: bool = True) -> FastAPI:
    settings = settings or get_settings()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async with open_runtime(settings, migrate=migrate, serve=True) as runtime:
            # What web/deps.py hands the handlers: each part from the runtime, the run service for runs alone.
            app.state.settings = settings
            app.state.sessionmaker = runtime.sessionmaker
            app.state.registry = runtime.registry
            app.state.providers = runtime.providers
            app.state.service = runtime.service
            # Every page says so when meaning cannot decide (the model did not load): never silently lexical.
            app.state.templates.env.globals["relevance_notice"] = runtime.semantics.notice
            app.state.graph_shape = graph_shape(runtime.graph)
            uploads = app.state.uploads = Uploads(runtime.sessionmaker, settings)
            uploads.model = runtime.semantics.model
            swept = await sweep_stale(runtime.sessionmaker)
            if swept:
                logger.warning("%d upload(s) cut off by an earlier stop were marked failed", swept)
            _warm_templates(templates)
            try:
                yield
            finally:
                await uploads.shutdown(settings.worker.shutdown_seconds)

    # The API's docs are routes of their own (web/docs.py): behind sign-in once there are accounts.
    app = FastAPI(
        title="Veracity", version=__version__, lifespan=lifespan, docs_url=None, redoc_url=None, openapi_url=None
    )
    app.state.streams = StreamSlots(settings.limits.streams_per_user)
    templates = Jinja2Templates(directory=str(FRONTEND / "templates"))
    templates.env.bytecode_cache = COMPILED_PAGES
    templates.env.filters["host"] = host_of
    templates.env.filters["refnumbers"] = report_reference_numbers
    templates.env.filters["age"] = age
    templates.env.filters["size"] = size
    templates.env.filters["link_url"] = link_url
    templates.env.filters["fallback_kind"] = fallback_kind
    templates.env.filters["fallback_cause"] = fallback_cause
    templates.env.filters["found_statement"] = found_statement
    templates.env.filters["seconds_since"] = seconds_since
    templates.env.filters["duration"] = duration
    templates.env.filters["breakable"] = breakable
    templates.env.filters["duration_ms"] = lambda ms: duration(ms / 1000, tenths=True)
    templates.env.globals["csrf_token"] = csrf_token
    templates.env.globals["accounts_on"] = settings.auth.enabled
    app.state.templates = templates
    # Outermost last: limits first, then the cross-site check (and the CSRF cookie), then headers, then 500s.
    app.add_middleware(ServerErrors, templates=templates)  # inside SecurityHeaders: a 500 page gets them too
    app.add_middleware(SecurityHeaders)
    app.add_middleware(SameOrigin, settings=settings)
    app.add_middleware(
        RequestLimits,
        limits=settings.limits,
        upload_bytes=settings.corpus.max_upload_bytes,
        accounts=settings.auth.enabled,
    )
    app.mount("/static", StaticFiles(directory=str(FRONTEND / "static")), name="static")
    app.include_router(api.router)
    app.include_router(pages.router)
    app.include_router(exports.router)
    app.include_router(thread_api.router)
    app.include_router(thread_pages.router)
    app.include_router(corpora_api.router)
    app.include_router(corpora_pages.router)
    app.include_router(account_pages.router)
    app.include_router(docs.router)

    @app.exception_handler(VeracityError)
    async def _veracity_error(request: Request, exc: VeracityError) -> Response:
        if isinstance(exc, Unauthorized) and wants_html(request):
            target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
            return RedirectResponse(f"/signin?next={quote(target, safe='')}", status_code=303)
        response = error_response(request, templates, status=exc.status_code, code=exc.code, message=exc.message)
        if isinstance(exc, TooMany):
            response.headers["Retry-After"] = str(exc.retry_after)
        if isinstance(exc, Unauthorized):
            response.headers["WWW-Authenticate"] = "Bearer"
        return response

    @app.exception_handler(HTTPException)
    async def _http_error(request: Request, exc: HTTPException) -> Response:
        return http_error(request, templates, exc)

    @app.exception_handler(RequestValidationError)
    async def _validation_error(request: Request, exc: RequestValidationError) -> Response:
        details = "; ".join(
            f"{'.'.join(str(p) for p in e.get('loc', ())[1:]) or 'body'}: {e.get('msg')}" for e in exc.errors()
        )
        message = messages.REQUEST_INVALID.format(details=details)
        return error_response(request, templates, status=422, code="bad_input", message=message)

    return app
