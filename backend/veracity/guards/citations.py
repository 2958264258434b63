"""L1, the citation validator (code, no model): every anchor resolves to evidence retrieved in this run, every
claim carries an anchor, and every statute-style citation the draft names was in what was retrieved."""

from __future__ import annotations

import re
from typing import Any

from veracity.domain import Evidence, SectionDraft, Violation

_ACT = re.compile(r"\b((?:[A-Z][\w'()-]*\s+){0,6}?(?:Act|Code|Ordinance|Regulations?|Rules)(?:\s+(?:of\s+)?\d{4})?)")


MAX_CLAIM_CHARS = 1000

# A jurisdiction written before an act's name is not part of it: "the Malaysian Evidence Act 1950", "Malaysia's
# Evidence Act 1950" and "the Evidence Act 1950" name one act (sources rarely repeat the country; answers often
# add it). Nationality adjectives and country names (with or without "'s"), English and Malay.
JURISDICTIONS = (
    "malaysian", "malaysia", "singaporean", "singapore", "bruneian", "brunei", "indonesian", "indonesia", "thai",
    "thailand", "philippine", "filipino", "philippines", "indian", "india", "pakistani", "pakistan",
    "bangladeshi", "bangladesh", "sri lankan", "sri lanka", "hong kong", "chinese", "china", "japanese", "japan",
    "korean", "korea", "australian", "australia", "new zealand", "canadian", "canada", "american", "united states",
    "us", "u\\.s\\.", "british", "uk", "u\\.k\\.", "united kingdom", "english", "england", "scottish", "scotland",
    "welsh", "wales", "irish", "ireland", "nigerian", "nigeria", "kenyan", "kenya", "ghanaian", "ghana",
    "south african", "south africa", "ugandan", "uganda", "tanzanian", "tanzania", "jamaican", "jamaica",
)  # fmt: skip
_JURISDICTION = re.compile(r"^(?:(?:" + "|".join(JURISDICTIONS) + r")(?:['’]s)?\s+)+", re.I)


def _short(text: str) -> str:
    """The claim as violations name it: whole (the next draft drops exactly this sentence), within reason."""
    return text if len(text) <= MAX_CLAIM_CHARS else text[: MAX_CLAIM_CHARS - 3] + "..."


def statute_citations(pattern: str, text: str) -> list[tuple[str, str | None]]:
    """(section, act or None) for each citation of ``pattern`` in ``text``, in the forms models write:
    "Section 90A of the Evidence Act 1950", "Section 90A(1) states that...", "s. 90A", "under the Evidence Act
    1950, section 90A"... The act is the nearest act name in the same sentence, if any."""
    found: list[tuple[str, str | None]] = []
    acts = [(m.start(), _normal_act(m.group(1))) for m in _ACT.finditer(text)]
    for match in re.finditer(pattern, text, re.I):
        groups = match.groupdict()
        section = (groups.get("section") or match.group(0)).upper().replace(" ", "")
        act = groups.get("act")
        if act:
            found.append((section, _normal_act(act)))
            continue
        nearest = min(acts, key=lambda a: abs(a[0] - match.start()), default=None)
        found.append((section, nearest[1] if nearest else None))
    return found


def _normal_act(act: str) -> str:
    act = re.sub(r"^(?:the|under|of|in|by)\s+", "", act.strip(), flags=re.I)
    act = _JURISDICTION.sub("", act)
    act = re.sub(r"\s+of\s+(\d{4})$", r" \1", act, flags=re.I)  # "Act of 1950" is "Act 1950"
    return re.sub(r"\s+", " ", act).lower()


def _act_matches(cited: str | None, retrieved: str | None) -> bool:
    """An act named without its year matches the same act with one ("the Evidence Act" ~ "Evidence Act 1950")."""
    if cited is None:
        return True
    if retrieved is None:
        return False
    if cited == retrieved:
        return True
    cited_year = re.search(r"\d{4}$", cited)
    return not cited_year and re.sub(r"\s*\d{4}$", "", retrieved) == cited


def citation_violations(
    draft: list[SectionDraft], evidence: list[Evidence], citation_pattern: str | None = None
) -> list[Violation]:
    by_id = {ev.id: ev for ev in evidence}
    retrieved: set[tuple[str, str | None]] = set()
    if citation_pattern:
        for ev in evidence:
            for number, act in statute_citations(citation_pattern, f"{ev.source.title}. {ev.quote}"):
                retrieved.add((number, act))
                retrieved.add((number, None))
    violations: list[Violation] = []
    for section in draft:
        for index, claim in enumerate(section.claims):
            common: dict[str, Any] = {
                "layer": "l1",
                "section_id": section.id,
                "claim_index": index,
                "claim": _short(claim.text),
            }
            if not claim.evidence_ids:
                violations.append(
                    Violation(check="uncited_claim", detail="the claim carries no [evidence:ID] anchor", **common)
                )
            for eid in claim.evidence_ids:
                if eid not in by_id:
                    violations.append(
                        Violation(
                            check="unknown_anchor",
                            detail=f"anchor [evidence:{eid}] names evidence that was not retrieved in this run",
                            **common,
                        )
                    )
            if citation_pattern:
                for cited_section, act in statute_citations(citation_pattern, claim.text):
                    if not any(n == cited_section and _act_matches(act, a) for n, a in retrieved):
                        named = f"section {cited_section}" + (f" of the {act.title()}" if act else "")
                        violations.append(
                            Violation(
                                check="unknown_citation",
                                detail=f"{named} is cited but no retrieved evidence contains it",
                                **common,
                            )
                        )
    return violations
