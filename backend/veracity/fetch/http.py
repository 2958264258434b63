"""The real fetcher: one httpx client, redirects followed by hand so every hop passes the SSRF guard.

httpx's own redirect following is off because it would connect to a ``Location`` before we could check it.
One ``asyncio.timeout`` covers DNS, every hop, the headers and the streamed body, so a server that trickles
bytes forever is cut at ``policy.timeout_seconds`` (httpx's per-read timeout alone never fires on it).

For plain http the request goes to the address ``resolve_target`` just checked (Host header kept), so a name
cannot resolve to something else between the check and the connect; https keeps the name, because the
certificate check already ties the connection to it (see ``ssrf``). Environment proxies are ignored
(``trust_env=False``): behind a proxy the guard could not see where a request really goes.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from types import TracebackType

import httpx

from veracity.fetch.extract import Extracted, extract, is_supported
from veracity.fetch.ssrf import resolve_target
from veracity.fetch.types import FetchError, FetchPolicy, Page

logger = logging.getLogger(__name__)

REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})
ACCEPT = "text/html,application/xhtml+xml,application/pdf;q=0.9,text/plain;q=0.8,*/*;q=0.1"


@dataclass(frozen=True)
class _Body:
    """The last hop's answer, before extraction."""

    url: str
    status: int
    content_type: str
    etag: str | None
    last_modified: str | None
    raw: bytes


class HttpFetcher:
    """Implements ``Fetcher`` over HTTP(S). Pass a client to share one; otherwise one is made on first use."""

    def __init__(self, policy: FetchPolicy | None = None, *, client: httpx.AsyncClient | None = None) -> None:
        self.policy = policy or FetchPolicy()
        self._client = client
        self._owns_client = client is None

    def _http(self) -> httpx.AsyncClient:
        if self._client is None:
            self._client = httpx.AsyncClient(
                follow_redirects=False, timeout=self.policy.timeout_seconds, trust_env=False
            )
        return self._client

    async def aclose(self) -> None:
        if self._client is not None and self._owns_client:
            await self._client.aclose()
            self._client = None

    async def __aenter__(self) -> HttpFetcher:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    async def fetch(self, url: str, *, etag: str | None = None, last_modified: str | None = None) -> Page:
        """Fetch and extract ``url``; a 304 to the conditional headers gives an empty Page with status 304."""
        headers = {"User-Agent": self.policy.user_agent, "Accept": ACCEPT}
        if etag:
            headers["If-None-Match"] = etag
        if last_modified:
            headers["If-Modified-Since"] = last_modified
        started = time.monotonic()
        body = await self._download(url, headers, conditional=bool(etag or last_modified))
        logger.debug("fetched %s -> %s %d in %.3fs", url[:200], body.url[:200], body.status, time.monotonic() - started)
        if body.status == 304:
            return _not_modified(url, body, etag=etag, last_modified=last_modified)
        # trafilatura and pypdf are CPU-bound: keep them off the event loop.
        found = await asyncio.to_thread(extract, raw=body.raw, content_type=body.content_type, url=body.url)
        return _page(url, body, found)

    async def _download(self, url: str, headers: dict[str, str], *, conditional: bool) -> _Body:
        """All hops under one deadline, with transport errors translated to FetchError kinds."""
        try:
            async with asyncio.timeout(self.policy.timeout_seconds):
                return await self._follow(url, headers, conditional=conditional)
        except (TimeoutError, httpx.TimeoutException) as exc:
            raise FetchError("timeout", f"no complete answer within {self.policy.timeout_seconds:g}s") from exc
        except (httpx.InvalidURL, httpx.UnsupportedProtocol) as exc:
            raise FetchError("refused", f"malformed URL: {url[:200]}") from exc
        except httpx.DecodingError as exc:
            raise FetchError("parse", f"the response body could not be decoded: {exc}") from exc
        except httpx.HTTPError as exc:
            raise FetchError("connect", f"{type(exc).__name__}: {exc}") from exc

    async def _follow(self, url: str, headers: dict[str, str], *, conditional: bool) -> _Body:
        current = str(httpx.URL(url.strip()).copy_with(fragment=None))
        seen = {current}
        for _ in range(self.policy.max_redirects + 1):
            async with self._open(current, headers) as response:
                if response.status_code not in REDIRECT_STATUSES or "location" not in response.headers:
                    return await self._body(current, response, conditional=conditional)
                target = httpx.URL(current).join(response.headers["location"]).copy_with(fragment=None)
            current = str(target)
            if current in seen:
                raise FetchError("redirects", f"redirect loop back to {current[:200]}")
            seen.add(current)
        raise FetchError("redirects", f"more than {self.policy.max_redirects} redirects")

    @asynccontextmanager
    async def _open(self, url: str, headers: dict[str, str]) -> AsyncIterator[httpx.Response]:
        """One streamed GET of ``url``, after the SSRF check; closed on exit whatever happened."""
        policy = self.policy
        addresses = await resolve_target(url, allow_private=policy.allow_private, allow_loopback=policy.allow_loopback)
        response = await self._send(httpx.URL(url), headers, addresses)
        try:
            yield response
        finally:
            await response.aclose()

    async def _send(self, target: httpx.URL, headers: dict[str, str], addresses: list[str]) -> httpx.Response:
        client = self._http()
        if target.scheme != "http" or not addresses:
            return await client.send(client.build_request("GET", target, headers=headers), stream=True)
        pinned_headers = {**headers, "Host": target.netloc.decode("ascii")}
        failure: httpx.ConnectError | None = None
        for address in addresses:  # resolver order; the next address only when one refuses the connection
            request = client.build_request("GET", target.copy_with(host=address), headers=pinned_headers)
            try:
                return await client.send(request, stream=True)
            except httpx.ConnectError as exc:
                failure = exc
        assert failure is not None  # addresses is not empty here, so the loop ran at least once
        raise failure

    async def _body(self, url: str, response: httpx.Response, *, conditional: bool) -> _Body:
        status = response.status_code
        content_type = response.headers.get("content-type", "")[:128]
        etag, modified = response.headers.get("etag"), response.headers.get("last-modified")
        if status == 304 and conditional:
            return _Body(url, status, content_type, etag, modified, b"")
        if not 200 <= status < 300:
            raise FetchError("http_status", f"HTTP {status} from {url[:200]}", http_status=status)
        if not is_supported(content_type):  # refuse before downloading a video or an archive
            raise FetchError("unsupported_type", f"cannot extract text from {content_type}")
        declared = response.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > self.policy.max_bytes:
            raise FetchError("too_large", f"{declared} bytes declared, the limit is {self.policy.max_bytes}")
        raw = bytearray()
        async for chunk in response.aiter_bytes():  # decoded bytes, so a compression bomb hits the cap too
            raw += chunk
            if len(raw) > self.policy.max_bytes:
                raise FetchError("too_large", f"more than {self.policy.max_bytes} bytes")
        return _Body(url, status, content_type, etag, modified, bytes(raw))


def _not_modified(url: str, body: _Body, *, etag: str | None, last_modified: str | None) -> Page:
    """A 304: no body, and the validators the server repeated (or the ones we sent)."""
    return Page(
        url=url,
        final_url=body.url,
        http_status=304,
        content_type=body.content_type,
        raw=b"",
        text="",
        title="",
        etag=body.etag or etag,
        last_modified=body.last_modified or last_modified,
    )


def _page(url: str, body: _Body, found: Extracted) -> Page:
    return Page(
        url=url,
        final_url=body.url,
        http_status=body.status,
        content_type=body.content_type,
        raw=body.raw,
        text=found.text,
        title=found.title,
        author=found.author,
        published=found.published,
        paywalled=found.paywalled,
        etag=body.etag,
        last_modified=body.last_modified,
    )
