"""A real website on 127.0.0.1 for fetcher tests and ``make bench``: latency, ETags, PDFs, traps.

Real HTTP on purpose: redirects, streamed bodies, Content-Length, conditional GETs and deadlines are protocol
behaviour that an in-process transport fakes away. Pages (``fixture_pages``) are
deterministic, so ETags and asserted facts are stable.

    with FixtureSite(latency_ms=50, latencies={"/articles/3": 800}) as site:
        page = await fetcher.fetch(site.url("/articles/1"))
        assert site.hits["/articles/1"] == 1

Counters (per path, query ignored): ``hits`` every request, ``conditional_hits[(path, conditional)]`` split by
whether the request carried If-None-Match / If-Modified-Since, ``not_modified`` the 304s served.

Routes: ``/articles/{n}`` (1..article_count; ETag + Last-Modified), ``/report.pdf`` (ETag too), ``/broken.pdf``,
``/paywalled``, ``/paywalled/teaser``, ``/notes.txt``, ``/image.png``, ``/huge`` (20 MiB with Content-Length;
``?chunked=1`` without), ``/endless`` (a chunk every 100 ms, forever), ``/slow?seconds=2``, ``/loop/a`` <->
``/loop/b``, ``/chain/{n}`` (n redirects, then article 1), ``/moved`` (301 to ``/articles/2``), ``/to-private``
(-> 169.254.169.254), ``/to-private-10`` (-> 10.0.0.1), ``/redirect?to=URL``, ``/status/{code}``. Any path
takes ``?latency_ms=N``; tracking parameters and fragments are ignored like on a real site.
"""

from __future__ import annotations

from collections.abc import Mapping

from starlette.applications import Starlette

from fixture_routes import routes
from veracity.evals.local_site import Instrument, LocalSite


class FixtureSite(LocalSite):
    """The fixture website (``fixture_routes``) on a local server."""

    def __init__(
        self, *, latency_ms: int = 0, latencies: Mapping[str, int] | None = None, article_count: int = 50
    ) -> None:
        super().__init__(latency_ms=latency_ms, latencies=latencies)
        self.article_count = article_count
        self.search_traps: list[str] = []
        """Paths the fixture search engines put first in every answer (e.g. ``/status/404``); may be changed live."""
        self.app = Instrument(Starlette(routes=routes(self)), self)
