"""What opening one web page produced, success or failure: the source inspector's row and the text to read."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

CacheState = Literal["hit", "miss", "revalidated", "none"]
"""``hit``: served from the cache with no request; ``revalidated``: a conditional GET answered 304;
``miss``: fetched in full (and stored); ``none``: nothing came back to cache (the fetch failed)."""


@dataclass(frozen=True)
class OpenedPage:
    url: str
    final_url: str
    ok: bool
    cache: CacheState
    http_status: int | None
    bytes: int
    content_type: str
    title: str
    text: str
    fetched_at: str
    """When the stored text was fetched from the server (ISO 8601, UTC) — for a cache hit, the original fetch."""
    published: str | None = None
    author: str | None = None
    paywalled: bool = False
    error_kind: str | None = None
    error: str | None = None
    elapsed_ms: float = 0.0

    def summary(self) -> dict[str, Any]:
        """The inspector row (no body text)."""
        return {
            "url": self.url,
            "final_url": self.final_url,
            "status": "ok" if self.ok else "failed",
            "cache": self.cache,
            "http_status": self.http_status,
            "bytes": self.bytes,
            "content_type": self.content_type,
            "title": self.title,
            "published": self.published,
            "paywalled": self.paywalled,
            "error_kind": self.error_kind,
            "error": self.error,
            "fetched_at": self.fetched_at,
            "elapsed_ms": round(self.elapsed_ms, 1),
        }
