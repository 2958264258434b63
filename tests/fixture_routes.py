"""The fixture website's routes: ordinary pages with validators, and each trap a fetcher must survive.

Kept apart from the server harness (``fixture_site``) so the traps read as one list. Handlers only read the site
(for ``article_count`` and its stop event); counting and latency live in the harness's middleware.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from email.utils import parsedate_to_datetime
from typing import TYPE_CHECKING

from starlette.requests import Request
from starlette.responses import HTMLResponse, PlainTextResponse, RedirectResponse, Response, StreamingResponse
from starlette.routing import Route

from fixture_pages import SITE_NAME, article, paywalled_html, report_pdf
from fixture_search import search_routes

if TYPE_CHECKING:
    from fixture_site import FixtureSite

HUGE_BLOCK = (b"<p>" + b"Filler sentence about nothing in particular. " * 1500)[:65_531] + b"</p>\n"
HUGE_BLOCKS = 320
HUGE_BYTES = HUGE_BLOCKS * len(HUGE_BLOCK)  # 20 MiB
ENDLESS_CHUNK = b"<p>The stream goes on and on.</p>\n"
PRIVATE_TARGETS = {"/to-private": "http://169.254.169.254/latest/meta-data/", "/to-private-10": "http://10.0.0.1/"}
NOTES = "Plain notes.\nThe fixture site also serves text/plain.\n"
_REPORT_ETAG = '"report-v1"'
_REPORT_MODIFIED = "Thu, 29 Feb 2024 09:00:00 GMT"


def not_modified(request: Request, *, etag: str, last_modified: str) -> bool:
    """RFC 9110: If-None-Match (weak comparison) wins; If-Modified-Since counts only without it."""
    if_none_match = request.headers.get("if-none-match")
    if if_none_match is not None:
        tags = {tag.strip().removeprefix("W/") for tag in if_none_match.split(",")}
        return "*" in tags or etag.removeprefix("W/") in tags
    since = request.headers.get("if-modified-since")
    if not since:
        return False
    try:
        return parsedate_to_datetime(last_modified) <= parsedate_to_datetime(since)
    except (TypeError, ValueError):  # an unparseable date is ignored, as the RFC says
        return False


def conditional(request: Request, body: bytes, *, media_type: str, etag: str, last_modified: str) -> Response:
    headers = {"ETag": etag, "Last-Modified": last_modified, "Cache-Control": "max-age=60"}
    if not_modified(request, etag=etag, last_modified=last_modified):
        return Response(status_code=304, headers=headers)
    return Response(body, media_type=media_type, headers=headers)


def routes(site: FixtureSite) -> list[Route]:
    """Every route of the fixture site, bound to ``site``."""

    async def index(request: Request) -> Response:
        links = "".join(f'<li><a href="/articles/{n}">Report {n}</a></li>' for n in range(1, site.article_count + 1))
        return HTMLResponse(f"<!DOCTYPE html><html><head><title>{SITE_NAME}</title></head><ul>{links}</ul></html>")

    async def articles(request: Request) -> Response:
        number: int = request.path_params["number"]
        if not 1 <= number <= site.article_count:
            return PlainTextResponse("no such article", status_code=404)
        page = article(number)
        return conditional(
            request, page.html, media_type="text/html; charset=utf-8", etag=page.etag, last_modified=page.last_modified
        )

    async def endless(request: Request) -> Response:
        async def chunks() -> AsyncIterator[bytes]:
            while not site.stopping.is_set():
                yield ENDLESS_CHUNK
                await site.pause(0.1)

        return StreamingResponse(chunks(), media_type="text/html")

    async def huge(request: Request) -> Response:
        async def blocks() -> AsyncIterator[bytes]:
            for _ in range(HUGE_BLOCKS):
                if site.stopping.is_set():
                    return
                yield HUGE_BLOCK

        chunked = request.query_params.get("chunked") == "1"
        headers = {} if chunked else {"Content-Length": str(HUGE_BYTES)}
        return StreamingResponse(blocks(), media_type="text/html", headers=headers)

    async def slow(request: Request) -> Response:
        await site.pause(float(request.query_params.get("seconds", "2")))
        return HTMLResponse(article(1).html)

    return [
        Route("/", index),
        Route("/healthz", lambda request: PlainTextResponse("ok")),
        Route("/articles/{number:int}", articles),
        Route("/report.pdf", _report),
        Route("/broken.pdf", lambda request: Response(b"%PDF-1.4\nthis is not a PDF", media_type="application/pdf")),
        Route("/paywalled", lambda request: HTMLResponse(paywalled_html(json_ld=True))),
        Route("/paywalled/teaser", lambda request: HTMLResponse(paywalled_html(json_ld=False))),
        Route("/notes.txt", lambda request: PlainTextResponse(NOTES)),
        Route("/image.png", lambda request: Response(b"\x89PNG\r\n\x1a\n" + bytes(64), media_type="image/png")),
        Route("/huge", huge),
        Route("/endless", endless),
        Route("/slow", slow),
        Route("/loop/a", lambda request: RedirectResponse("/loop/b", status_code=302)),
        Route("/loop/b", lambda request: RedirectResponse("/loop/a", status_code=302)),
        Route("/chain/{hops:int}", _chain),
        Route("/moved", lambda request: RedirectResponse("/articles/2", status_code=301)),
        Route("/to-private", lambda request: RedirectResponse(PRIVATE_TARGETS["/to-private"], status_code=302)),
        Route("/to-private-10", lambda request: RedirectResponse(PRIVATE_TARGETS["/to-private-10"], status_code=302)),
        Route("/redirect", lambda request: RedirectResponse(request.query_params["to"], status_code=302)),
        Route("/status/{code:int}", _status),
        *search_routes(site),
    ]


async def _report(request: Request) -> Response:
    return conditional(
        request, report_pdf(), media_type="application/pdf", etag=_REPORT_ETAG, last_modified=_REPORT_MODIFIED
    )


async def _chain(request: Request) -> Response:
    hops: int = request.path_params["hops"]
    return RedirectResponse(f"/chain/{hops - 1}" if hops > 0 else "/articles/1", status_code=302)


async def _status(request: Request) -> Response:
    code: int = request.path_params["code"]
    return PlainTextResponse(f"status {code}", status_code=code)
