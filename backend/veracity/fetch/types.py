"""What the fetcher takes and returns. The cache (``veracity.fetch.cache``) wraps any ``Fetcher``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Protocol

from veracity.errors import VeracityError

EXTRACT_SCHEMA_VERSION = 1
"""Bump when extraction changes what ``Page.text`` holds: cached rows of another version are re-fetched."""

FetchErrorKind = Literal[
    "refused", "timeout", "connect", "http_status", "too_large", "redirects", "unsupported_type", "parse"
]


class FetchError(VeracityError):
    """One page could not be fetched. ``kind`` says why; the branch records it and goes on."""

    status_code = 502
    code = "fetch_error"

    def __init__(self, kind: FetchErrorKind, message: str, *, http_status: int | None = None) -> None:
        super().__init__(message)
        self.kind: FetchErrorKind = kind
        self.http_status = http_status


@dataclass(frozen=True)
class FetchPolicy:
    timeout_seconds: float = 10.0
    """Deadline for one whole fetch (connect, redirects, headers and body), so a body that never ends is cut."""
    max_redirects: int = 5
    max_bytes: int = 5_000_000
    allow_private: bool = False
    """Fetch loopback/private/link-local addresses. Off for users (SSRF guard); tests opt in explicitly."""
    allow_loopback: bool = False
    """Fetch loopback addresses only (127.0.0.0/8, ::1), every other private target still refused: lets tests
    fetch a fixture site on 127.0.0.1 and still prove a redirect to 169.254.169.254 or 10.x is stopped."""
    user_agent: str = "Veracity/0.1 (+self-hosted research desk)"


@dataclass(frozen=True)
class Page:
    """A fetched page. A ``304`` answer to a conditional GET has ``http_status == 304`` and empty body/text."""

    url: str
    final_url: str
    http_status: int
    content_type: str
    raw: bytes
    text: str
    title: str
    author: str | None = None
    published: str | None = None
    """ISO date (YYYY-MM-DD) from htmldate for HTML, from the PDF metadata for PDFs, when known."""
    paywalled: bool = False
    etag: str | None = None
    last_modified: str | None = None


class Fetcher(Protocol):
    async def fetch(self, url: str, *, etag: str | None = None, last_modified: str | None = None) -> Page: ...
