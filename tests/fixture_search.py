"""Search engines on the fixture site, answering in the formats Veracity's web providers parse: SearXNG's JSON API
(``GET /searxng/search?q=…&format=json``) and DuckDuckGo's HTML endpoint (``POST /ddg/html/``, the markup the
``ddgs`` package's engine reads). Results point at the site's own articles, so a web run is real end to end:
search, rank, fetch, extract, cite.

Each answer also carries what real engines return and a provider must cope with: the first article again with
tracking parameters and a fragment (one page, three spellings), a result that is not http(s), and extra
results that point at the site's traps (``extra=`` names them, e.g. ``extra=/status/404,/to-private``).
"""

from __future__ import annotations

from html import escape
from typing import TYPE_CHECKING

from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Route

from fixture_pages import article
from veracity.text import content_terms, words

if TYPE_CHECKING:
    from fixture_site import FixtureSite

MAX_RESULTS = 10


def matching_articles(site: FixtureSite, query: str) -> list[int]:
    """Article numbers whose title or text share the most content words with ``query`` (ties: lower number)."""
    terms = set(content_terms(query))
    scored = []
    for n in range(1, site.article_count + 1):
        a = article(n)
        overlap = len(terms & set(words(a.title + " " + " ".join(a.paragraphs))))
        if overlap:
            scored.append((-overlap, n))
    return [n for _, n in sorted(scored)[:MAX_RESULTS]]


def results(site: FixtureSite, query: str, extra: str) -> list[dict[str, str]]:
    out = []
    for n in matching_articles(site, query):
        a = article(n)
        out.append(
            {
                "url": site.url(f"/articles/{n}"),
                "title": a.title,
                "content": a.paragraphs[0][:220],
                "publishedDate": a.published.isoformat() + "T08:00:00",
            }
        )
    if out:
        first = out[0]
        out.insert(1, {**first, "url": first["url"] + "?utm_source=searx&utm_medium=web"})
        out.insert(2, {**first, "url": first["url"] + "?fbclid=abc123#comments"})
    out.append({"url": "javascript:alert(1)", "title": "Not a page", "content": "Should be dropped."})
    for path in [*filter(None, extra.split(",")), *site.search_traps]:
        out.insert(0, {"url": site.url(path), "title": f"Trap {path}", "content": f"A page at {path} about {query}."})
    return out


def search_routes(site: FixtureSite) -> list[Route]:
    async def searxng(request: Request) -> Response:
        if request.query_params.get("format") != "json":
            return HTMLResponse("<html>SearXNG HTML results</html>")
        query = request.query_params.get("q", "")
        found = results(site, query, request.query_params.get("extra", ""))
        return JSONResponse({"query": query, "number_of_results": len(found), "results": found})

    async def ddg_html(request: Request) -> Response:
        form = await request.form()
        query = str(form.get("q", ""))
        items = "".join(
            '<div class="result results_links results_links_deep web-result">'
            '<div class="links_main links_deep result__body">'
            f'<h2 class="result__title"><a rel="nofollow" class="result__a" href="{escape(r["url"])}">'
            f"{escape(r['title'])}</a></h2>"
            f'<a class="result__snippet" href="{escape(r["url"])}">{escape(r["content"])}</a>'
            "</div></div>"
            for r in results(site, query, request.query_params.get("extra", ""))
        )
        return HTMLResponse(f'<!DOCTYPE html><html><body><div class="serp__results">{items}</div></body></html>')

    async def searxng_without_json(request: Request) -> Response:
        # An instance whose JSON output is not enabled: a 200 with its HTML page, whatever format is asked for.
        return HTMLResponse("<!DOCTYPE html><html><body>SearXNG results page</body></html>")

    async def searxng_not_a_list(request: Request) -> Response:
        return JSONResponse({"query": request.query_params.get("q", ""), "results": "none"})

    return [
        Route("/searxng/search", searxng),
        Route("/searxng-html/search", searxng_without_json),
        Route("/searxng-odd/search", searxng_not_a_list),
        Route("/ddg/html/", ddg_html, methods=["POST"]),
    ]
