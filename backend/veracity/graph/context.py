"""Dependencies of the nodes, passed as the graph's runtime context so tests can hand in fakes."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from veracity.compose.base import Composer, Reviewer
from veracity.guards.judge import GroundingJudge
from veracity.settings import LimitSettings
from veracity.specs.models import Spec

Emit = Callable[[str, dict[str, Any]], Awaitable[None]]
Audit = Callable[[str, int, dict[str, Any]], Awaitable[None]]
"""Record one audit-trail entry: (stage, attempt, payload)."""


async def _no_audit(_stage: str, _attempt: int, _payload: dict[str, Any]) -> None:
    return None


@dataclass(frozen=True)
class SearchHit:
    """One passage returned by a search provider. ``start``/``end`` locate ``text`` in the document."""

    doc_id: str
    title: str
    text: str
    start: int
    end: int
    score: float
    url: str | None = None
    published: str | None = None
    key: str = ""
    """Identity of the opened page/passage, used to open each one only once per run."""


class SearchProvider(Protocol):
    name: str

    async def search(self, *, query: str, corpus: str, k: int) -> list[SearchHit]: ...


@dataclass
class RetrievalCoordinator:
    """Shared by all retrieve branches of one run: a global page budget and the set of pages opened."""

    max_pages: int
    _opened: set[str] = field(default_factory=set)
    _lock: asyncio.Lock = field(default_factory=asyncio.Lock)

    async def claim(self, key: str) -> bool:
        """True if this branch may open ``key``: not opened by any branch yet and budget left."""
        async with self._lock:
            if key in self._opened or len(self._opened) >= self.max_pages:
                return False
            self._opened.add(key)
            return True

    @property
    def opened(self) -> int:
        return len(self._opened)


@dataclass
class Context:
    spec: Spec
    search: SearchProvider
    emit: Emit
    limits: LimitSettings
    coordinator: RetrievalCoordinator
    composer: Composer = field(default_factory=lambda: _default_composer())
    reviewer: Reviewer | None = None
    """A model reviewer; the rule-based one always runs, this one only on drafts that passed every check."""
    judge: GroundingJudge = field(default_factory=lambda: _default_judge())
    audit: Audit = _no_audit


def _default_composer() -> Composer:
    from veracity.compose.extractive import ExtractiveComposer

    return ExtractiveComposer()


def _default_judge() -> GroundingJudge:
    from veracity.guards.judge import make_judge

    return make_judge()
