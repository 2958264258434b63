"""The contracts that cross packages: value types and protocols, and nothing of any layer's machinery.

Every package may import this module; it imports only the standard library, numpy's array type and the neutral
value modules (``veracity.domain``, ``veracity.specs.models``). What lives here:

- search: ``SearchHit``, ``SearchProvider``, ``HitRanker``, ``PageSource`` and the ``OpenedPage`` it returns;
- drafting: ``Planner``, ``Composer`` and ``ComposeRequest``, ``Reviewer`` and ``ReviewRequest``,
  ``feedback_lines`` (the informed part of a retry);
- grounding: ``Source``, ``Span``, ``Judgement``, ``Label`` and the ``GroundingJudge`` protocol;
- ``Encoder``: what a request needs of the semantic model (its ``encode``).

The layer rules these contracts make possible are stated and enforced in ``tests/test_layers.py``; the model
errors (``ModelError``, ``MalformedOutput``, ``TruncatedOutput``, ``BudgetExceeded``) are in ``veracity.errors``
under ``VeracityError``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from veracity.domain import Draft, Evidence, ReviewVerdict, Subtask, Violation
from veracity.specs.models import Spec

# ---------------------------------------------------------------------------------------------------------------
# Search and pages


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
    """Identity of the opened page/passage, used to open each one only once per run (a web page: its canonical
    URL's SHA-256)."""
    fetch: bool = False
    """A web result: ``text`` is only the search snippet and the page must be fetched to read it."""
    rank_terms: dict[str, float] = field(default_factory=dict, compare=False)
    """The ranker's terms behind ``score`` (empty until ranked)."""
    vector: Any = field(default=None, compare=False, repr=False)
    """The passage head's dense vector when the index has one (a signal of the relevance model)."""


class SearchProvider(Protocol):
    name: str

    async def search(self, *, query: str, corpus: str, k: int) -> list[SearchHit]: ...


class HitRanker(Protocol):
    def rank(self, query: str, hits: list[SearchHit]) -> list[SearchHit]: ...


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


class PageSource(Protocol):
    async def open(self, url: str) -> OpenedPage: ...


# ---------------------------------------------------------------------------------------------------------------
# Planning, drafting and review


class Encoder(Protocol):
    """The part of the semantic model a drafting request uses: L2-normalised rows, one per text."""

    def encode(self, texts: Sequence[str], *, max_tokens: int = ...) -> Any: ...


class Planner(Protocol):
    name: str

    async def plan(self, question: str, spec: Spec) -> tuple[list[Subtask], list[str]]:
        """The subtasks, and the sections a reflection on the first plan added (empty when none did)."""
        ...


@dataclass
class ComposeRequest:
    spec: Spec
    question: str
    section_evidence: dict[str, list[str]]
    evidence: list[Evidence]
    attempt: int
    per_section: int
    violations: list[Violation] = field(default_factory=list)
    """What failed in the previous attempt: which claim, which check, why. Empty on the first attempt."""
    semantic: Encoder | None = None
    """The semantic model, for near-duplicate claims (the extractive composer); None = by words."""


class Composer(Protocol):
    name: str

    async def compose(self, request: ComposeRequest) -> Draft: ...


@dataclass
class ReviewRequest:
    spec: Spec
    question: str
    draft_text: str
    violations: list[Violation]


class Reviewer(Protocol):
    name: str

    async def review(self, request: ReviewRequest) -> ReviewVerdict: ...


def feedback_lines(violations: list[Violation]) -> list[str]:
    """The violations as lines a drafter can act on (the informed part of the retry)."""
    lines = []
    for v in violations:
        where = f"section {v.section_id}" if v.section_id else "the answer"
        claim = f" claim {v.claim!r}" if v.claim else ""
        lines.append(f"[{v.layer}:{v.check}] {where}{claim}: {v.detail}")
    return lines


# ---------------------------------------------------------------------------------------------------------------
# Grounding

Label = Literal["supported", "partial", "unsupported"]
LABEL_ORDER: tuple[Label, ...] = ("supported", "partial", "unsupported")
"""Best to worst: an input of several claims takes its worst claim's label."""


@dataclass(frozen=True)
class Source:
    id: str
    text: str


@dataclass(frozen=True)
class Span:
    source_id: str
    start: int  # char offset into that Source.text
    end: int


@dataclass(frozen=True)
class Judgement:
    label: Label
    score: float  # 0..1, higher = better supported
    evidence: list[Span]  # the supporting source sentences: the smallest set found that covers the claim
    reason: str  # one short human sentence: why this label


class GroundingJudge(Protocol):
    name: str

    async def judge(self, claim: str, sources: list[Source]) -> Judgement: ...


@dataclass(frozen=True)
class Thread:
    """What a follow-up run knows of the run it follows: its question, its report's section titles, and the
    passages its report quoted (as hits a retrieve branch may read again, keyed ``parent:…``)."""

    parent_id: str
    question: str
    sections: tuple[str, ...] = ()
    passages: tuple[SearchHit, ...] = ()

    def about(self, question: str) -> str:
        """What a follow-up asks, as relevance is judged: its words, then the earlier question's ("and in which
        year?" is about the rooftop array's output)."""
        return f"{question} {self.question}"

    def framed(self, question: str) -> str:
        """The follow-up as a planner reads it: the question, then what it follows."""
        covered = "; ".join(self.sections)
        return f"{question}\n(Follow-up to the earlier question: {self.question}" + (
            f" — whose report covered: {covered})" if covered else ")"
        )
