"""What changed between two artifact versions of a run: claims added, removed and re-labelled, sections whose
status changed, and sources cited in one version and not the other. A claim is the same claim when its text is
(whitespace and case aside); a source is the same when its link (or, for a passage, its document) is."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from veracity.domain import Report, ReportSection

_SPACE = re.compile(r"\s+")


@dataclass(frozen=True)
class ClaimChange:
    section: str
    text: str
    label: str | None = None
    before: str | None = None
    """The label in the earlier version (a re-labelled claim)."""


@dataclass(frozen=True)
class SourceChange:
    title: str
    link: str


@dataclass
class VersionDiff:
    before: int
    after: int
    outcome: tuple[str, str]
    added: list[ClaimChange] = field(default_factory=list)
    removed: list[ClaimChange] = field(default_factory=list)
    relabelled: list[ClaimChange] = field(default_factory=list)
    kept: int = 0
    sections: list[tuple[str, str, str]] = field(default_factory=list)
    """(title, status before, status after) of each section whose status changed."""
    sources_added: list[SourceChange] = field(default_factory=list)
    sources_gone: list[SourceChange] = field(default_factory=list)

    @property
    def unchanged(self) -> bool:
        changes = (self.added, self.removed, self.relabelled, self.sections, self.sources_added, self.sources_gone)
        return self.outcome[0] == self.outcome[1] and not any(changes)

    def as_dict(self) -> dict[str, object]:
        def claims(items: list[ClaimChange]) -> list[dict[str, object]]:
            rows: list[dict[str, object]] = []
            for c in items:
                row: dict[str, object] = {"section": c.section, "text": c.text, "label": c.label}
                if c.before is not None:
                    row["before"] = c.before
                rows.append(row)
            return rows

        return {
            "from": self.before,
            "to": self.after,
            "outcome": {"from": self.outcome[0], "to": self.outcome[1]},
            "claims_added": claims(self.added),
            "claims_removed": claims(self.removed),
            "claims_relabelled": claims(self.relabelled),
            "claims_kept": self.kept,
            "sections_changed": [{"title": t, "from": a, "to": b} for t, a, b in self.sections],
            "sources_added": [{"title": s.title, "link": s.link} for s in self.sources_added],
            "sources_gone": [{"title": s.title, "link": s.link} for s in self.sources_gone],
        }


def _key(text: str) -> str:
    return _SPACE.sub(" ", text).strip().lower()


def _answered(report: Report) -> list[ReportSection]:
    """The sections whose claims count: all but a fallback's closest passages."""
    return [s for s in report.sections if not s.closest_passages]


def _claims(report: Report) -> dict[str, ClaimChange]:
    out: dict[str, ClaimChange] = {}
    for section in _answered(report):
        for claim in section.claims:
            out.setdefault(_key(claim.text), ClaimChange(section.title, claim.text, claim.label))
    return out


def _sources(report: Report) -> dict[str, SourceChange]:
    """The sources the report's claims cite, by link (or document)."""
    cited = {eid for section in _answered(report) for claim in section.claims for eid in claim.evidence_ids}
    out: dict[str, SourceChange] = {}
    for ev in report.evidence:
        if ev.id in cited:
            link = ev.url or ev.doc_id
            out.setdefault(link, SourceChange(ev.title or link, link))
    return out


def diff_reports(before: Report, after: Report, numbers: tuple[int, int]) -> VersionDiff:
    """What changed from ``before`` (version ``numbers[0]``) to ``after`` (``numbers[1]``)."""
    diff = VersionDiff(before=numbers[0], after=numbers[1], outcome=(before.outcome, after.outcome))
    old, new = _claims(before), _claims(after)
    for key, claim in new.items():
        if key not in old:
            diff.added.append(claim)
        elif old[key].label != claim.label:
            diff.relabelled.append(ClaimChange(claim.section, claim.text, claim.label, old[key].label))
        else:
            diff.kept += 1
    diff.removed = [claim for key, claim in old.items() if key not in new]
    statuses = {s.title: s.status for s in before.sections}
    diff.sections = [
        (s.title, statuses[s.title], s.status)
        for s in after.sections
        if s.title in statuses and statuses[s.title] != s.status
    ]
    old_sources, new_sources = _sources(before), _sources(after)
    diff.sources_added = [s for link, s in new_sources.items() if link not in old_sources]
    diff.sources_gone = [s for link, s in old_sources.items() if link not in new_sources]
    return diff
