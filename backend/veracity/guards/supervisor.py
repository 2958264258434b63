"""L3, the supervisor rules (code, from the spec's one policy source): no advice phrasing, the required citation
present, the disclaimer present in the answer's own language, and none of the personal-situation phrases
echoed back.

The advice and personal-situation rules read the answer's own words (:func:`answer_words`), not a speaker's words
reported inside a claim: "The tribunal heard the claimant say: 'I was dismissed without notice'" echoes nobody's
situation. A claim the answer ships whole, quote of its evidence or not, is read in full — shipped, it is advice
given in the answer's name — and reported speech that addresses the reader is read too ('The leaflet says: "take
20 mg twice a day"' passes the order on). The rule and its reasons: ``guards/voice.py``. The forbidden patterns
(a template's directive on what its answers contain), the citation and the disclaimer read everything shipped."""

from __future__ import annotations

import re

from veracity.domain import Draft, Violation
from veracity.guards.language import detect
from veracity.guards.patterns import all_matches
from veracity.guards.voice import own_words
from veracity.specs.models import Policy
from veracity.text import words


def _normal(text: str) -> str:
    return " ".join(words(text))


def answer_text(draft: Draft) -> str:
    return " ".join(c.text for s in draft.sections for c in s.claims)


def answer_words(draft: Draft) -> str:
    """The answer's own words: every claim with the reported speech that does not address the reader set aside."""
    return " ".join(own_words(c.text) for s in draft.sections for c in s.claims)


def answer_language(draft: Draft, policy: Policy) -> str | None:
    prose = answer_text(draft)
    if not prose:
        return None
    return detect(prose, list(policy.disclaimer)) if policy.disclaimer else detect(prose)


def supervisor_violations(draft: Draft, policy: Policy) -> list[Violation]:
    prose, own = answer_text(draft), answer_words(draft)
    violations: list[Violation] = []
    for phrase in all_matches(policy.advice_phrases, own):
        violations.append(
            Violation(
                check="advice_phrase", layer="l3", claim=phrase, detail=f"advice phrasing {phrase!r} is not allowed"
            )
        )
    for phrase in all_matches(policy.escalation_phrases, own):
        violations.append(
            Violation(
                check="echoed_personal_phrase",
                layer="l3",
                claim=phrase,
                detail=f"the answer echoes the personal-situation phrase {phrase!r}; stay in research mode",
            )
        )
    for pattern in policy.forbidden_patterns:
        if re.search(pattern, prose):
            violations.append(Violation(check="forbidden_pattern", layer="l3", detail=f"forbidden pattern {pattern!r}"))
    if policy.citation_pattern and prose and not re.search(policy.citation_pattern, prose, re.I):
        violations.append(
            Violation(
                check="citation_missing",
                layer="l3",
                detail="the answer names no citation in the expected form (e.g. 'Section 90A of the Evidence Act')",
            )
        )
    if policy.disclaimer and prose:
        language = answer_language(draft, policy) or next(iter(policy.disclaimer))
        expected = policy.disclaimer[language]
        if not draft.disclaimer:
            violations.append(
                Violation(check="disclaimer_missing", layer="l3", detail=f"add the disclaimer ({language}): {expected}")
            )
        elif _normal(expected) not in _normal(draft.disclaimer):
            violations.append(
                Violation(
                    check="disclaimer_language",
                    layer="l3",
                    detail=f"the answer is in '{language}'; its disclaimer must be the '{language}' one: {expected}",
                )
            )
    return violations
