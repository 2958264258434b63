"""The offline composer: each claim is a verbatim evidence sentence with its ``[evidence:ID]`` anchor.

It reads the same policy the checks read: sentences carrying advice phrasing or personal-situation phrasing
are never picked, the disclaimer is the policy's own for the answer's language, and claims named by the last
attempt's violations are left out. It writes raw text in the template's shape, which is then parsed by the
same parser as a model's output.
"""

from __future__ import annotations

import json

from veracity.checks import anchored
from veracity.compose.parse import parse_draft
from veracity.domain import Claim, Draft, Evidence
from veracity.guards.language import detect
from veracity.guards.patterns import compiled
from veracity.ports import ComposeRequest
from veracity.semantic.relevance import lexical_share
from veracity.semantic.select import Similarity, paragraphs, summary_pick
from veracity.specs.models import Spec
from veracity.synthesis import reading_order
from veracity.text import content_terms, index_stems

SUMMARY_CLAIMS = 3


def pick_claims(request: ComposeRequest) -> dict[str, list[Claim]]:
    """Per section, its evidence as claims, most relevant first, near-duplicates (of any section) dropped, in
    short paragraphs; then each summary section from the most relevant claims of the others (maximal marginal
    relevance, one per section first), each taken out of its own section when that section keeps another."""
    spec = request.spec
    by_id = {ev.id: ev for ev in request.evidence}
    relevance = {ev.id: ev.relevance if ev.relevance is not None else ev.score for ev in request.evidence}
    order = reading_order(request.evidence)

    similar = Similarity(request.semantic, request.evidence)
    rejected = {(v.section_id, v.claim) for v in request.violations if v.claim}
    rejected_anywhere = {v.claim for v in request.violations if v.claim and v.section_id is None}
    banned = compiled(spec.policy.advice_phrases + spec.policy.escalation_phrases)
    used: list[str] = []
    picked: dict[str, list[Claim]] = {}
    # Told the report was too short: use more of the evidence, not more words per sentence.
    per_section = request.per_section * (2 if any(v.check == "too_short" for v in request.violations) else 1)
    for section in spec.evidence_sections:
        claims: list[Claim] = []
        ids = sorted(
            (i for i in request.section_evidence.get(section.id, []) if i in by_id), key=lambda i: order(by_id[i])
        )
        for eid in ids:
            ev = by_id.get(eid)
            if ev is None or (section.id, ev.quote) in rejected or ev.quote in rejected_anywhere:
                continue
            if banned and banned.search(ev.quote):
                continue
            if any(similar.duplicate(eid, other) for other in used):
                continue
            used.append(eid)
            # A quote may wrap lines (PDFs do); a claim is one line of the draft, so its spacing is normalised.
            claims.append(Claim(text=" ".join(ev.quote.split()), evidence_ids=[ev.id], relevance=ev.relevance))
            if len(claims) >= per_section:
                break
        picked[section.id] = claims
    for section in (s for s in spec.sections if s.summary):
        keep = {s.id: max(1, s.min_evidence) for s in spec.evidence_sections}
        picked[section.id] = _summary(section.id, picked, keep, relevance, similar, rejected)
    return {s.id: paragraphs(picked.get(s.id, []), by_id) for s in spec.sections}


def _summary(
    summary_id: str,
    picked: dict[str, list[Claim]],
    keep: dict[str, int],
    relevance: dict[str, float],
    similar: Similarity,
    rejected: set[tuple[str | None, str]],
) -> list[Claim]:
    """A summary section's claims, moved out of the sections that can spare one — each keeps its ``keep`` (its
    ``min_evidence``: a section the summary draws on is never left thin by it) — so no sentence is in two sections.
    Only a report with nothing to spare has its summary repeat one claim: its most relevant (a one-finding brief
    still says it first)."""
    allowed = {
        sid: [c for c in claims if (summary_id, c.text) not in rejected]
        for sid, claims in picked.items()
        if sid != summary_id
    }
    summary: list[Claim] = []
    given: set[str] = set()  # one claim per section until every section that can spare one has given one
    while len(summary) < SUMMARY_CLAIMS:
        spare = {
            sid: allowed[sid]
            for sid, claims in picked.items()
            if sid in keep and len(claims) > keep[sid] and allowed[sid]
        }
        chosen = summary_pick(
            {sid: c for sid, c in spare.items() if sid not in given} or spare, relevance, similar, summary
        )
        if chosen is None:
            break
        sid, claim = chosen
        given.add(sid)
        picked[sid] = [c for c in picked[sid] if c is not claim]
        allowed[sid] = [c for c in allowed[sid] if c is not claim]
        summary.append(claim.model_copy())
    if not summary and (lone := summary_pick(allowed, relevance, similar, [])) is not None:
        summary = [lone[1].model_copy()]
    return summary


def disclaimer_for(spec: Spec, text: str) -> tuple[str | None, str | None]:
    """The policy's disclaimer in the language of ``text`` (and that language), if the policy has any."""
    if not spec.policy.disclaimer:
        return None, None
    language = detect(text, list(spec.policy.disclaimer))
    return spec.policy.disclaimer[language], language


def coverage_confidence(question: str, claims: list[Claim], evidence: list[Evidence]) -> float:
    """Share of the question's content words found in the evidence the answer cites, both read as the index reads
    them (Porter stems: "cancel" is found in "Cancelling"): the offline composer's stated confidence (a knowledge
    base that barely mentions the question should not answer it).

    The relevance model is not read here: on the curated support corpus it scores export sentences 0.31-0.41 for
    "Does Tallyo integrate with SAP Business One?" (which the corpus does not answer) and the true annual-plan
    refund sentence 0.31, so reading it would ship the first and still hand off the second."""
    by_id = {ev.id: ev for ev in evidence}
    cited = " ".join(
        by_id[eid].quote + " " + by_id[eid].source.title for c in claims for eid in c.evidence_ids if eid in by_id
    )
    return round(lexical_share(set(index_stems(content_terms(question))), cited, ""), 3)


def joined(claims: list[Claim]) -> str:
    """A paragraph's anchored claims, one a line: the parser reads each line on its own and keeps the paragraph
    (a blank line starts the next), so every claim comes back as itself with its own anchor. Joined by spaces, a
    note's records that end no sentence ("Bank holidays: 9am to 5pm", "Day pass: £9") came back as one claim
    carrying every anchor."""
    return "\n".join(anchored(c.text, c.evidence_ids) for c in claims)


def render_sections(spec: Spec, picked: dict[str, list[Claim]], disclaimer: str | None) -> str:
    """Markdown: a heading per section, a line per paragraph (its anchored sentences), a blank line between."""
    lines: list[str] = []
    for section in spec.sections:
        lines += [f"## {section.title}", ""]
        paragraphs_: dict[int, list[Claim]] = {}
        for c in picked[section.id]:
            paragraphs_.setdefault(c.paragraph, []).append(c)
        for claims in paragraphs_.values():
            lines += [joined(claims), ""]
    if disclaimer:
        lines += ["## Disclaimer", "", disclaimer, ""]
    return "\n".join(lines)


class ExtractiveComposer:
    name = "extractive"

    async def compose(self, request: ComposeRequest) -> Draft:
        spec = request.spec
        picked = pick_claims(request)
        prose = " ".join(c.text for claims in picked.values() for c in claims)
        disclaimer, _language = disclaimer_for(spec, prose or request.question)
        if spec.composer.output == "json_contract":
            claims = picked[spec.evidence_sections[0].id]
            answer = joined(claims)
            confidence = coverage_confidence(request.question, claims, request.evidence)
            raw = json.dumps(
                {
                    "answer": answer,
                    "citations": list(dict.fromkeys(eid for c in claims for eid in c.evidence_ids)),
                    "confidence": confidence,
                    "needs_human": not claims,
                    **({"disclaimer": disclaimer} if disclaimer else {}),
                },
                ensure_ascii=False,
            )
        else:
            raw = render_sections(spec, picked, disclaimer)
        return parse_draft(raw, spec)
