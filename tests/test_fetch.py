"""The web fetcher against a real fixture website on 127.0.0.1: extraction, the SSRF guard, deadlines, caps.

Most tests fetch with ``allow_loopback`` (the fixture site is on loopback) so that every other private target
stays refused; the SSRF tests use the default policy and assert the site was never asked.
"""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from fixture_pages import (
    FOOTER_TEXT,
    NAV_TEXT,
    PAYWALL_TEASER,
    PDF_AUTHOR,
    PDF_CREATED,
    PDF_PAGES,
    PDF_TITLE,
    RELATED_TEXT,
    article,
)
from fixture_site import FixtureSite
from veracity.fetch.extract import extract
from veracity.fetch.http import HttpFetcher
from veracity.fetch.ssrf import check_target, resolve_target
from veracity.fetch.types import FetchError, FetchPolicy, Page

LOOPBACK = FetchPolicy(timeout_seconds=3.0, max_bytes=2_000_000, allow_loopback=True)


@pytest.fixture(scope="module")
def site() -> Iterator[FixtureSite]:
    with FixtureSite() as running:
        yield running


@pytest.fixture(autouse=True)
def fresh_counters(site: FixtureSite) -> None:
    site.reset()
    site.latencies.clear()


@pytest.fixture
async def fetcher() -> AsyncIterator[HttpFetcher]:
    async with HttpFetcher(LOOPBACK) as fetcher:
        yield fetcher


async def fetch_error(fetcher: HttpFetcher, url: str) -> FetchError:
    with pytest.raises(FetchError) as caught:
        await fetcher.fetch(url)
    return caught.value


# --- extraction over HTTP ---------------------------------------------------------------------------------------


async def test_article_keeps_story_metadata_and_drops_boilerplate(site: FixtureSite, fetcher: HttpFetcher) -> None:
    expected = article(1)
    page = await fetcher.fetch(site.url("/articles/1"))
    assert (page.http_status, page.final_url, page.raw) == (200, site.url("/articles/1"), expected.html)
    assert page.content_type.startswith("text/html")
    assert page.title == expected.title
    assert page.author == expected.author
    assert page.published == expected.published.isoformat()
    for paragraph in expected.paragraphs:
        assert paragraph in page.text
    for boilerplate in (NAV_TEXT, FOOTER_TEXT, RELATED_TEXT, "Cookie settings", "Privacy policy"):
        assert boilerplate not in page.text
    assert not page.paywalled
    assert (page.etag, page.last_modified) == (expected.etag, expected.last_modified)


async def test_pdf_text_of_every_page_and_metadata(site: FixtureSite, fetcher: HttpFetcher) -> None:
    page = await fetcher.fetch(site.url("/report.pdf"))
    assert page.content_type == "application/pdf"
    assert page.raw.startswith(b"%PDF-")
    assert page.text == "\n\n".join("\n".join(lines) for lines in PDF_PAGES)
    assert (page.title, page.author, page.published) == (PDF_TITLE, PDF_AUTHOR, PDF_CREATED.isoformat())


@pytest.mark.parametrize("path", ["/paywalled", "/paywalled/teaser"])
async def test_paywalled_pages_are_flagged(site: FixtureSite, fetcher: HttpFetcher, path: str) -> None:
    page = await fetcher.fetch(site.url(path))
    assert page.paywalled
    assert PAYWALL_TEASER in page.text


def test_long_article_with_a_subscribe_box_is_not_paywalled() -> None:
    box = b'<div class="paywall-promo"><p>Already a subscriber? Subscribe to continue reading.</p></div>'
    more = "".join(f"<p>Paragraph {n} of the free story goes on. {'More detail. ' * 30}</p>" for n in range(4))
    raw = article(2).html.replace(b"</article>", box + more.encode() + b"</article>")
    found = extract(raw=raw, content_type="text/html", url="http://example.org/a")
    assert len(found.text) > 1500
    assert not found.paywalled


async def test_plain_text_passes_through(site: FixtureSite, fetcher: HttpFetcher) -> None:
    page = await fetcher.fetch(site.url("/notes.txt"))
    assert page.text == "Plain notes.\nThe fixture site also serves text/plain."


@pytest.mark.parametrize(("path", "kind"), [("/image.png", "unsupported_type"), ("/broken.pdf", "parse")])
async def test_unextractable_bodies_fail_with_their_kind(
    site: FixtureSite, fetcher: HttpFetcher, path: str, kind: str
) -> None:
    assert (await fetch_error(fetcher, site.url(path))).kind == kind


def test_htmldate_is_never_handed_a_url(monkeypatch: pytest.MonkeyPatch) -> None:
    """htmldate downloads a string that looks like a URL; the extractor gives it a parsed tree instead."""

    def no_network(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("htmldate tried to download")

    monkeypatch.setattr("htmldate.utils.fetch_url", no_network)
    with pytest.raises(FetchError) as caught:
        extract(raw=b"http://10.0.0.1/latest", content_type="text/html", url="http://example.org/")
    assert caught.value.kind == "parse"
    found = extract(raw=article(3).html, content_type="text/html", url="http://example.org/a")
    assert found.published == article(3).published.isoformat()


# --- tracking duplicates, redirects ------------------------------------------------------------------------------


async def test_tracking_variants_reach_the_same_article(site: FixtureSite, fetcher: HttpFetcher) -> None:
    plain = await fetcher.fetch(site.url("/articles/1"))
    for variant in ("/articles/1?utm_source=x&utm_medium=y", "/articles/1?fbclid=abc", "/articles/1#section"):
        page = await fetcher.fetch(site.url(variant))
        assert page.url == site.url(variant)
        assert (page.text, page.etag) == (plain.text, plain.etag)
    assert page.final_url == site.url("/articles/1")  # the fragment is never sent
    assert site.hits["/articles/1"] == 4


async def test_redirect_is_followed_and_final_url_reported(site: FixtureSite, fetcher: HttpFetcher) -> None:
    page = await fetcher.fetch(site.url("/moved"))
    assert (page.url, page.final_url) == (site.url("/moved"), site.url("/articles/2"))
    assert page.title == article(2).title


async def test_redirect_loop_is_cut_at_the_first_repeat(site: FixtureSite, fetcher: HttpFetcher) -> None:
    error = await fetch_error(fetcher, site.url("/loop/a"))
    assert error.kind == "redirects"
    assert (site.hits["/loop/a"], site.hits["/loop/b"]) == (1, 1)


@pytest.mark.parametrize(("hops", "ok"), [(5, True), (6, False)])
async def test_redirect_chain_is_limited_by_policy(
    site: FixtureSite, fetcher: HttpFetcher, hops: int, ok: bool
) -> None:
    # /chain/n answers n + 1 redirects before the article; LOOPBACK allows the default 5.
    if ok:
        assert (await fetcher.fetch(site.url(f"/chain/{hops - 1}"))).final_url == site.url("/articles/1")
    else:
        assert (await fetch_error(fetcher, site.url(f"/chain/{hops - 1}"))).kind == "redirects"
        assert site.hits["/articles/1"] == 0


@pytest.mark.parametrize(
    ("target", "address"),
    [
        ("/to-private", "169.254.169.254"),
        ("/to-private-10", "10.0.0.1"),
        ("/redirect?to=http://0x0a000001/", "10.0.0.1"),
        ("/redirect?to=http://[::ffff:192.168.0.1]/", "::ffff:c0a8:1"),
        ("/redirect?to=file:///etc/passwd", "file"),
        ("/redirect?to=gopher://127.0.0.1:6379/_INFO", "gopher"),
    ],
)
async def test_redirect_to_a_private_target_is_refused_even_with_loopback_allowed(
    site: FixtureSite, fetcher: HttpFetcher, target: str, address: str
) -> None:
    started = time.monotonic()
    error = await fetch_error(fetcher, site.url(target))
    assert error.kind == "refused"
    assert address in error.message
    assert time.monotonic() - started < 1.0  # refused, not a connection attempt left to time out


# --- size caps and deadlines -------------------------------------------------------------------------------------


@pytest.mark.parametrize("path", ["/huge", "/huge?chunked=1"])
async def test_huge_page_is_refused_quickly(site: FixtureSite, fetcher: HttpFetcher, path: str) -> None:
    started = time.monotonic()
    error = await fetch_error(fetcher, site.url(path))
    assert error.kind == "too_large"
    assert time.monotonic() - started < 1.5
    declared = "declared" in error.message
    assert declared == (path == "/huge")  # with a Content-Length it is refused before reading the body


async def test_endless_body_is_cut_at_the_deadline(site: FixtureSite) -> None:
    started = time.monotonic()
    async with HttpFetcher(FetchPolicy(timeout_seconds=0.5, allow_loopback=True)) as fetcher:
        error = await fetch_error(fetcher, site.url("/endless"))
    assert error.kind == "timeout"
    assert 0.45 < time.monotonic() - started < 1.5


async def test_latency_within_and_beyond_the_deadline(site: FixtureSite) -> None:
    site.latencies["/articles/2"] = 1200
    async with HttpFetcher(FetchPolicy(timeout_seconds=0.6, allow_loopback=True)) as fetcher:
        started = time.monotonic()
        page = await fetcher.fetch(site.url("/articles/1?latency_ms=250"))
        assert 0.25 <= time.monotonic() - started < 0.6
        assert page.title == article(1).title
        started = time.monotonic()
        assert (await fetch_error(fetcher, site.url("/articles/2"))).kind == "timeout"
        assert time.monotonic() - started < 1.0
        assert (await fetch_error(fetcher, site.url("/slow?seconds=5"))).kind == "timeout"


async def test_site_wide_latency_applies_to_every_page() -> None:
    async with FixtureSite(latency_ms=200) as slow_site, HttpFetcher(LOOPBACK) as fetcher:
        started = time.monotonic()
        await asyncio.gather(*(fetcher.fetch(slow_site.url(f"/articles/{n}")) for n in range(1, 6)))
        elapsed = time.monotonic() - started
    assert 0.2 <= elapsed < 0.9  # five pages in parallel, not one after another
    assert sum(slow_site.hits[f"/articles/{n}"] for n in range(1, 6)) == 5


# --- status codes and conditional GETs ---------------------------------------------------------------------------


@pytest.mark.parametrize(("path", "status"), [("/status/404", 404), ("/nowhere", 404), ("/articles/999", 404)])
async def test_error_status_is_reported(site: FixtureSite, fetcher: HttpFetcher, path: str, status: int) -> None:
    error = await fetch_error(fetcher, site.url(path))
    assert (error.kind, error.http_status) == ("http_status", status)


async def test_conditional_get_returns_304_when_etag_matches(site: FixtureSite, fetcher: HttpFetcher) -> None:
    first = await fetcher.fetch(site.url("/articles/4"))
    again = await fetcher.fetch(site.url("/articles/4"), etag=first.etag)
    assert again == Page(
        url=site.url("/articles/4"),
        final_url=site.url("/articles/4"),
        http_status=304,
        content_type="",
        raw=b"",
        text="",
        title="",
        etag=first.etag,
        last_modified=first.last_modified,
    )
    by_date = await fetcher.fetch(site.url("/articles/4"), last_modified=first.last_modified)
    assert by_date.http_status == 304
    changed = await fetcher.fetch(site.url("/articles/4"), etag='"an-older-version"')
    assert (changed.http_status, changed.text) == (200, first.text)
    assert site.conditional_hits[("/articles/4", False)] == 1
    assert site.conditional_hits[("/articles/4", True)] == 3
    assert site.not_modified["/articles/4"] == 2


# --- the SSRF guard ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "template",
    [
        "http://127.0.0.1:{port}/articles/1",
        "http://localhost:{port}/articles/1",
        "http://[::1]:{port}/articles/1",
        "http://0.0.0.0:{port}/articles/1",
        "http://2130706433:{port}/articles/1",
        "http://0177.0.0.1:{port}/articles/1",
        "http://0x7f.1:{port}/articles/1",
        "http://[::ffff:127.0.0.1]:{port}/articles/1",
        "http://169.254.169.254/latest/meta-data/",
        "http://10.0.0.1/",
        "http://192.168.1.1/",
        "http://100.64.0.1/",
        "http://[fe80::1]/",
        "http://224.0.0.1/",
        "file:///etc/passwd",
        "ftp://127.0.0.1:{port}/articles/1",
        "gopher://127.0.0.1:{port}/_GET",
        "http:///articles/1",
    ],
)
async def test_private_targets_are_refused_before_any_request(site: FixtureSite, template: str) -> None:
    url = template.format(port=site.port)
    async with HttpFetcher(FetchPolicy(timeout_seconds=2.0)) as fetcher:
        error = await fetch_error(fetcher, url)
    assert error.kind == "refused"
    assert sum(site.hits.values()) == 0


async def test_guard_admits_public_addresses_and_honours_the_opt_ins() -> None:
    await check_target("http://8.8.8.8/", allow_private=False)
    await check_target("https://[2001:4860:4860::8888]/x", allow_private=False)
    await check_target("http://10.0.0.1/", allow_private=True)
    await check_target("http://127.0.0.1/", allow_private=False, allow_loopback=True)
    for url in ("http://10.0.0.1/", "http://169.254.169.254/", "http://[::ffff:10.0.0.1]/"):
        with pytest.raises(FetchError, match="not fetched"):
            await check_target(url, allow_private=False, allow_loopback=True)
    with pytest.raises(FetchError, match="only http and https"):
        await check_target("file:///etc/passwd", allow_private=True)


async def test_unresolvable_host_is_a_connect_error(fetcher: HttpFetcher) -> None:
    assert (await fetch_error(fetcher, "http://no-such-host.invalid/")).kind == "connect"


async def test_allow_private_opens_the_loopback_site(site: FixtureSite) -> None:
    async with HttpFetcher(FetchPolicy(allow_private=True)) as fetcher:
        assert (await fetcher.fetch(site.url("/articles/5"))).title == article(5).title


async def test_plain_http_connects_to_the_address_that_was_checked(
    site: FixtureSite, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A name the system resolver does not know is fetched only if the checked address is the one dialled."""
    port = site.port
    answers = [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("127.0.0.1", port))]
    loop = asyncio.get_running_loop()

    async def fake_getaddrinfo(host: str, *args: Any, **kwargs: Any) -> list[Any]:
        assert host == "pinned.test"
        return answers

    monkeypatch.setattr(loop, "getaddrinfo", fake_getaddrinfo)
    assert await resolve_target(f"http://pinned.test:{port}/", allow_private=False, allow_loopback=True) == [
        "127.0.0.1"
    ]
    async with HttpFetcher(LOOPBACK) as fetcher:
        page = await fetcher.fetch(f"http://pinned.test:{port}/articles/6")
    assert (page.final_url, page.title) == (f"http://pinned.test:{port}/articles/6", article(6).title)
