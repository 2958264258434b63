"""Small presentation helpers the templates use as filters (kept out of the templates so they are tested)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from veracity.domain import Report
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
