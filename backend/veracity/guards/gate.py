"""The pre-persistence gate: runs before any artifact version is written (seed 004). Three sources, in order:
placeholders, the composer directives (min/max chars, required sections, forbidden patterns), the qa policy.
A rejection is retryable — the run goes back to ``compose`` told what the gate found while the template's drafting
attempts last (the gate's redrafts count against the same bound as the checks'), else the floor is shown, or a
stricter floor is tried — and the third rejection in a run ends it with ``store_artifact_loop_abort``."""

from __future__ import annotations

import re

from veracity.domain import Report, Violation
from veracity.specs.models import Spec

MAX_REJECTIONS = 3
LOOP_ABORT = "store_artifact_loop_abort"
PLACEHOLDERS = (
    re.compile(r"\[\s*TODO", re.I),
    re.compile(r"\blorem ipsum\b", re.I),
    re.compile(r"\{\{.*?\}\}|\{%.*?%\}", re.S),
    re.compile(r"\bTBD\b"),
    re.compile(r"\[(?:insert|placeholder|citation needed)[^\]]*\]", re.I),
)


def _problem(check: str, detail: str, section_id: str | None = None, claim: str | None = None) -> Violation:
    return Violation(check=check, layer="gate", section_id=section_id, claim=claim, detail=detail)


def missing_required(spec: Spec, written: set[str]) -> list[str]:
    """Required sections that must carry a claim and do not. A required section whose ``min_evidence`` is 0
    ("Risks may honestly be empty") is present with its not-found ribbon and note, and does not count as missing.
    The decide node applies the same rule, so the graph never ships a draft this gate would reject for it."""
    return [s.id for s in spec.sections if s.required and s.min_evidence > 0 and s.id not in written]


def supported_shortfall(spec: Spec, supported: set[str]) -> tuple[int, int] | None:
    """The qa policy's ``min_supported_required``: ``(supported, needed)`` when fewer required sections are
    among ``supported`` (the ids of sections whose status is supported) than the policy needs (at most every
    required section), else None. The decide node applies the same rule as this gate."""
    required = [s.id for s in spec.sections if s.required]
    have = sum(1 for section_id in required if section_id in supported)
    needed = min(spec.qa_policy.min_supported_required, len(required))
    return (have, needed) if have < needed else None


def may_redraft(spec: Spec, attempt: int) -> bool:
    """Whether another draft may be made (after failed checks or a gate rejection): ``attempt`` drafts were made in
    the run so far, and the template's ``drafting_attempts`` bounds them all."""
    return attempt < spec.budgets.drafting_attempts


def exhausted_reason(attempt: int, problems: list[Violation]) -> str:
    """The floor's reason when the gate rejected the last draft the template allows."""
    checks = ", ".join(sorted({p.check for p in problems}))
    return f"drafting attempts exhausted ({attempt}); the pre-persistence gate rejected the last draft: {checks}"


def text_problems(text: str, spec: Spec) -> list[tuple[str, str]]:
    """What in one text stops a report holding it from being stored: (check, detail) per placeholder or forbidden
    pattern found (a floor leaves out a closest passage the gate would refuse, rather than lose them all)."""
    found = [("placeholder", f"placeholder text matches {p.pattern!r}") for p in PLACEHOLDERS if p.search(text)]
    forbidden = spec.composer.forbidden_patterns + spec.policy.forbidden_patterns
    return found + [("forbidden_pattern", f"forbidden pattern {f!r} present") for f in forbidden if re.search(f, text)]


def check(report: Report, spec: Spec) -> list[Violation]:
    """What stops this report from being stored (empty when it may be written). Each problem names the claim
    it found, so a redraft can drop exactly that sentence."""
    problems: list[Violation] = []
    texts: list[tuple[str | None, str]] = [(s.id, c.text) for s in report.sections for c in s.claims]
    texts += [(None, note) for note in report.notes]
    if report.disclaimer:
        texts.append((None, report.disclaimer))
    for section_id, text in texts:
        problems += [_problem(kind, detail, section_id, text) for kind, detail in text_problems(text, spec)]
    if report.outcome == "shipped":
        # Directives bound the written prose, not the evidence appendix.
        length = sum(len(c.text) for s in report.sections for c in s.claims)
        if length < spec.composer.min_chars:
            problems.append(
                _problem(
                    "too_short",
                    f"report prose is {length} characters; the template needs at least {spec.composer.min_chars}",
                )
            )
        if length > spec.composer.max_chars:
            problems.append(
                _problem(
                    "too_long",
                    f"report prose is {length} characters; the template allows at most {spec.composer.max_chars}",
                )
            )
        missing = missing_required(spec, {s.id for s in report.sections if s.claims})
        if missing:
            problems.append(_problem("required_section_missing", f"required sections empty: {', '.join(missing)}"))
        shortfall = supported_shortfall(spec, {s.id for s in report.sections if s.status == "supported"})
        if shortfall is not None:
            supported, needed = shortfall
            problems.append(
                _problem("qa_policy", f"{supported} required section(s) supported; the qa policy needs {needed}")
            )
    return problems
