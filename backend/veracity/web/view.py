"""Small presentation helpers the templates use as filters (kept out of the templates so they are tested)."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

from markupsafe import Markup, escape

from veracity import messages
from veracity.domain import Report, ReportSection
from veracity.runs.floor import FallbackKind, fallback_kind
from veracity.runs.report import reference_numbers


def report_reference_numbers(report: dict[str, Any]) -> dict[str, int]:
    """Evidence id → the reference number the exports give it, for a report as stored (JSON)."""
    return reference_numbers(Report.model_validate(report))


def age(when: datetime, now: datetime | None = None) -> str:
    """How long ago, in the largest whole unit: "just now", "5 min ago", "3 h ago", "2 days ago"."""
    now = now or datetime.now(UTC)
    if when.tzinfo is None:  # SQLite hands back naive datetimes; they are stored in UTC
        when = when.replace(tzinfo=UTC)
    seconds = max(0, int((now - when).total_seconds()))
    if seconds < 60:
        return "just now"
    if seconds < 3600:
        return f"{seconds // 60} min ago"
    if seconds < 86400:
        return f"{seconds // 3600} h ago"
    days = seconds // 86400
    return f"{days} day{'s' if days != 1 else ''} ago"


def size(chars: int) -> str:
    """A text's size for a listing: "840 characters", "12 k characters", "3.4 M characters"."""
    if chars < 10_000:
        return f"{chars:,} characters"
    if chars < 1_000_000:
        return f"{chars // 1000:,} k characters"
    return f"{chars / 1_000_000:.1f} M characters"


def seconds_since(when: datetime | None, now: datetime | None = None) -> float:
    """Seconds from ``when`` (naive means UTC, as SQLite hands it back) to now; 0 when there is no start yet."""
    if when is None:
        return 0.0
    now = now or datetime.now(UTC)
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (now - when).total_seconds())


def duration(seconds: float, *, tenths: bool = False) -> str:
    """How long a run has taken: "12 s" (with ``tenths``, "4.2 s") under a minute, "3 min 05 s" under an hour,
    "1 h 02 min" after. ``run.js`` ticks a running run's time in the same words."""
    if seconds < 60:
        return f"{seconds:.1f} s" if tenths else f"{int(seconds)} s"
    whole = int(seconds)
    if whole < 3600:
        return f"{whole // 60} min {whole % 60:02d} s"
    return f"{whole // 3600} h {whole % 3600 // 60:02d} min"


def counted(n: int, noun: str) -> str:
    """``3 sentences``, ``1 source``."""
    return f"{n:,} {noun}{'' if n == 1 else 's'}"


FALLBACK_CAUSES: dict[FallbackKind, str] = {
    "nothing_relevant": messages.FALLBACK_NOTHING_RELEVANT,
    "search_failed": messages.FALLBACK_SEARCH_UNREACHABLE,
    "model_failed": messages.FALLBACK_MODEL_FAILED,
    "not_verified": messages.FALLBACK_CHECKS_FAILED,
}


def fallback_cause(reason: str | None) -> str:
    """The run page's sentence for why a fallback has nothing written, one per cause (``floor.fallback_kind``)."""
    return FALLBACK_CAUSES[fallback_kind(reason)]


def found_statement(report: dict[str, Any]) -> str:
    """What a report that is not a written answer (a fallback, a handoff) shows instead: its evidence sentences
    and how many sources they come from, or that nothing was found."""
    evidence = report.get("evidence") or []
    if not evidence:
        return messages.FALLBACK_FOUND_NOTHING
    sources = {ev.get("doc_id") or ev.get("url") or ev.get("title") for ev in evidence}
    closest = any(ReportSection.model_validate(s).closest_passages for s in report.get("sections") or [])
    said = messages.FALLBACK_CLOSEST if closest else messages.FALLBACK_FOUND
    return said.format(sentences=counted(len(evidence), "sentence"), sources=counted(len(sources), "source"))


_BREAK_AFTER = re.compile(r"([/_?&=])(?=\w)")


def breakable(text: str) -> Markup:
    """``text`` escaped, with a line-break opportunity (``<wbr>``) after each ``/ _ ? & =`` that joins two words:
    event names, section ids and URLs may wrap there on a narrow screen and nowhere inside a word."""
    pieces: list[str] = []
    start = 0
    for match in _BREAK_AFTER.finditer(text):  # split the raw text: escaping first would put a <wbr> in "&amp;"
        pieces += [escape(text[start : match.end()]), Markup("<wbr>")]
        start = match.end()
    return Markup("").join([*pieces, escape(text[start:])])
