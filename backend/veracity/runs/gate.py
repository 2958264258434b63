"""The pre-persistence gate: runs before any artifact version is written. A rejection is retryable;
the run swaps in the floor and tries again, and gives up after three rejections."""

from __future__ import annotations

import re

from veracity.domain import Report
from veracity.specs.models import Spec

MAX_REJECTIONS = 3
PLACEHOLDERS = (
    re.compile(r"\[\s*TODO", re.I),
    re.compile(r"\blorem ipsum\b", re.I),
    re.compile(r"\{\{.*?\}\}|\{%.*?%\}", re.S),
    re.compile(r"\bTBD\b"),
)


class GateRejected(Exception):
    def __init__(self, problems: list[str]) -> None:
        super().__init__("; ".join(problems))
        self.problems = problems


def check(report: Report, spec: Spec) -> list[str]:
    """Problems that stop this report from being stored (empty when it may be written)."""
    problems: list[str] = []
    prose = "\n".join(c.text for s in report.sections for c in s.claims) + "\n" + "\n".join(report.notes)
    for pattern in PLACEHOLDERS:
        if pattern.search(prose):
            problems.append(f"placeholder text matches {pattern.pattern!r}")
    for forbidden in spec.composer.forbidden_patterns + spec.policy.forbidden_patterns:
        if re.search(forbidden, prose):
            problems.append(f"forbidden pattern {forbidden!r} present")
    if report.outcome == "shipped":
        # Directives bound the written prose, not the evidence appendix.
        length = sum(len(c.text) for s in report.sections for c in s.claims)
        if length < spec.composer.min_chars:
            problems.append(
                f"report prose is {length} characters; the template needs at least {spec.composer.min_chars}"
            )
        if length > spec.composer.max_chars:
            problems.append(
                f"report prose is {length} characters; the template allows at most {spec.composer.max_chars}"
            )
        present = {s.id for s in report.sections}
        missing = [s.id for s in spec.sections if s.required and s.id not in present]
        if missing:
            problems.append(f"required sections missing: {', '.join(missing)}")
    return problems
