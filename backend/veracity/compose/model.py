"""The model composer: a model writes the draft from the per-section evidence, told the violations of the last
attempt. Its raw text goes through the same parsers and checks as any other composer's; the policy's disclaimer,
when the template has one, is added by code in the language of the draft (the checker and the drafter read the
same policy, and a small model need not copy a sentence verbatim)."""

from __future__ import annotations

import re
from typing import Any

from veracity.checks import render_draft
from veracity.compose.extractive import disclaimer_for
from veracity.compose.parse import parse_draft
from veracity.domain import Draft, Evidence
from veracity.errors import MalformedOutput
from veracity.guards.citations import statute_citations
from veracity.guards.supervisor import answer_language
from veracity.models.chat import ChatModel
from veracity.models.output import clean
from veracity.ports import ComposeRequest, feedback_lines
from veracity.prompts import load_prompt

MAX_EVIDENCE_PER_SECTION = 8
MAX_QUOTE_CHARS = 400

CONTRACT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "answer": {"type": "string", "maxLength": 2000},
        "citations": {"type": "array", "items": {"type": "string", "maxLength": 40}, "maxItems": 20},
        "confidence": {"type": "number", "minimum": 0, "maximum": 1},
        "needs_human": {"type": "boolean"},
    },
    "required": ["answer", "citations", "confidence", "needs_human"],
    "additionalProperties": False,
}


MAX_SENTENCE_CHARS = 400
MAX_SENTENCES = 6


def draft_schema(request: ComposeRequest) -> dict[str, Any]:
    """The sections draft as JSON whose anchors can only be the evidence ids the prompt lists (an enum: a server
    with structured outputs cannot even write a fabricated anchor; one without still has L1 behind it), with
    lengths capped so a small model cannot run off."""
    spec = request.spec
    shown = [
        eid for s in spec.evidence_sections for eid in request.section_evidence.get(s.id, [])[:MAX_EVIDENCE_PER_SECTION]
    ]
    ids = list(dict.fromkeys(shown)) or ["none"]
    sentence = {
        "type": "object",
        "properties": {
            "text": {"type": "string", "maxLength": MAX_SENTENCE_CHARS},
            "evidence_ids": {"type": "array", "items": {"type": "string", "enum": ids}, "minItems": 1, "maxItems": 3},
        },
        "required": ["text", "evidence_ids"],
        "additionalProperties": False,
    }
    section = {
        "type": "object",
        "properties": {
            "title": {"type": "string", "enum": [s.title for s in spec.sections]},
            "sentences": {"type": "array", "items": sentence, "maxItems": MAX_SENTENCES},
        },
        "required": ["title", "sentences"],
        "additionalProperties": False,
    }
    return {
        "type": "object",
        "properties": {"sections": {"type": "array", "items": section, "maxItems": len(spec.sections)}},
        "required": ["sections"],
        "additionalProperties": False,
    }


def evidence_lines(ids: list[str], by_id: dict[str, Evidence]) -> list[str]:
    lines = []
    for eid in ids[:MAX_EVIDENCE_PER_SECTION]:
        ev = by_id.get(eid)
        if ev is not None:
            quote = " ".join(ev.quote.split())[:MAX_QUOTE_CHARS]
            lines.append(f"[evidence:{ev.id}] {quote} (source: {ev.source.title})")
    return lines


_OPTIONAL_GROUP = re.compile(r"\(\?:[^()]*\)\?")
_GROUP = re.compile(r"\(\?:([^()|]*)(?:\|[^()]*)?\)")
_PLAIN = re.compile(r"[\w\s'’,.-]+")


def readable(pattern: str) -> str | None:
    """A policy phrase (a regular expression) as words a model can read: optional groups dropped, the first
    alternative of a group kept ("i (?:would )?(?:advise|recommend)" → "I advise"); None when it is not that
    simple."""
    text = _GROUP.sub(r"\1", _OPTIONAL_GROUP.sub("", pattern))
    text = " ".join(text.split())
    if not text or not _PLAIN.fullmatch(text):
        return None
    return re.sub(r"\bi\b", "I", text)


def quoted(phrases: list[str], most: int = 6) -> str:
    return ", ".join(f'"{p}"' for p in phrases[:most])


def citation_example(request: ComposeRequest) -> str:
    """A citation in the form the template checks, taken from the evidence shown ("Section 90A of the Evidence
    Act 1950"), so the model copies a real one."""
    pattern = request.spec.policy.citation_pattern or ""
    for ev in request.evidence:
        for section, act in statute_citations(pattern, f"{ev.source.title}. {ev.quote}"):
            if act:
                return f"Section {section} of the {act.title()}"
    return "Section 12 of the Example Act 1999"


def template_rules(request: ComposeRequest, max_tokens: int | None = None) -> list[str]:
    """What the checks after the composer (L1, L3 and the gate) will enforce on this template, stated up front so
    a first draft can pass them: length bounds, required sections, the citation form, the advice and forbidden
    phrasing, the disclaimer, and the output cap."""
    spec = request.spec
    composer, policy = spec.composer, spec.policy
    bounds = f"at least {composer.min_chars} and " if composer.min_chars else ""
    rules = [
        f"Length: the sentences together (anchors not counted) are {bounds}at most {composer.max_chars} characters "
        "long."
    ]
    required = [s.title for s in spec.sections if s.required and s.min_evidence > 0]
    if required and composer.output != "json_contract":
        rules.append(f"Required sections, each with at least one sentence: {', '.join(required)}.")
    if policy.citation_pattern:
        rules.append(
            f'Name at least one statute section in the form "{citation_example(request)}", and only sections '
            "that the evidence itself names with their Act (a section no evidence contains is rejected)."
        )
    advice = [p for p in dict.fromkeys(filter(None, map(readable, policy.advice_phrases)))]
    if advice:
        rules.append(f"State what the sources say; never write advice phrasing such as {quoted(advice)}.")
    if policy.escalation_phrases:
        rules.append("Do not restate the person's own situation (their own case, client, health or money).")
    forbidden = [p for p in dict.fromkeys(filter(None, map(readable, composer.forbidden_patterns)))]
    forbidden += [p for p in dict.fromkeys(filter(None, map(readable, policy.forbidden_patterns)))]
    if forbidden:
        rules.append(f"Never write: {quoted(forbidden)}.")
    if policy.disclaimer:
        rules.append("Write no disclaimer: the template's own is added to your answer in its language.")
    if max_tokens:
        rules.append(
            f"The whole output must fit in {max_tokens} tokens (about {max_tokens * 2 // 3} words with the JSON); "
            "an answer that is cut off is rejected."
        )
    return rules


def compose_prompt(request: ComposeRequest, max_tokens: int | None = None) -> str:
    """The user message: the question, each section with its evidence, the template's rules, and what failed
    last time."""
    spec, by_id = request.spec, {ev.id: ev for ev in request.evidence}
    parts = [f"Question: {request.question.strip()}", ""]
    if spec.composer.output == "json_contract":
        ids = [eid for s in spec.evidence_sections for eid in request.section_evidence.get(s.id, [])]
        parts += ["Evidence:", *(evidence_lines(list(dict.fromkeys(ids)), by_id) or ["(none)"]), ""]
    else:
        parts.append("Sections, in order:")
        for section in spec.sections:
            parts += ["", f"## {section.title}", f"({section.description})"]
            if section.summary:
                parts.append("Summarise the other sections' sentences, with their anchors.")
                continue
            lines = evidence_lines(request.section_evidence.get(section.id, []), by_id)
            parts += ["Evidence for this section:", *(lines or ["(none: leave the section empty)"])]
        parts.append("")
    parts += [
        "Rules of this template (the checks enforce each):",
        *(f"- {r}" for r in template_rules(request, max_tokens)),
    ]
    parts.append("")
    told = feedback_lines(request.violations)
    if told:
        parts += ["What was wrong with your last draft (fix every point):", *(f"- {line}" for line in told), ""]
    return "\n".join(parts)


class ModelComposer:
    """``prose`` writes the sections (as JSON of a schema built per run, or Markdown from a server that ignores the
    format); ``contract`` the JSON contract (with its schema)."""

    def __init__(self, prose: ChatModel, contract: ChatModel, *, refine: bool = False) -> None:
        self.prose, self.contract = prose, contract
        self.refine = refine
        self.name = f"model:{prose.model}"

    async def compose(self, request: ComposeRequest) -> Draft:
        contract = request.spec.composer.output == "json_contract"
        if contract:
            raw = await self.contract.complete(
                load_prompt("composer_contract"), compose_prompt(request, self.contract.max_tokens)
            )
        else:
            raw = await self.prose.complete(
                load_prompt("composer"), compose_prompt(request, self.prose.max_tokens), schema=draft_schema(request)
            )
        # A sections JSON item is one claim with its anchors (never re-split into sentences); Markdown is read
        # sentence by sentence. Reasoning blocks and fences go first.
        draft = with_policy_disclaimer(parse_draft(raw, request.spec), request)
        if self.refine and not contract and any(sec.claims for sec in draft.sections):
            draft = await self._refined(draft, request)
        return draft

    async def _refined(self, draft: Draft, request: ComposeRequest) -> Draft:
        """The optional refine pass. The rewrite is kept only if every section cites exactly the evidence it
        cited before and no sentence of it lost its anchors (a rewrite that drops, moves or invents an anchor is
        rejected and the original kept)."""
        original = render_draft(draft.sections)
        try:
            raw = await self.prose.complete(load_prompt("refine"), original)
            rewrite = with_policy_disclaimer(parse_draft(clean(raw), request.spec), request)
        except MalformedOutput as exc:
            return draft.model_copy(
                update={"refine": f"rejected: the rewrite did not parse ({'; '.join(exc.problems)[:200]})"}
            )
        before, after = anchors_by_section(draft), anchors_by_section(rewrite)
        if before != after:
            changed = sorted(s for s in set(before) | set(after) if before.get(s) != after.get(s))
            return draft.model_copy(
                update={"refine": f"rejected: the rewrite changed the anchors of {', '.join(changed)}; original kept"}
            )
        unanchored = sum(1 for s in rewrite.sections for c in s.claims if not c.evidence_ids)
        if unanchored > sum(1 for s in draft.sections for c in s.claims if not c.evidence_ids):
            # e.g. a claim of two sentences read back as two, the first without the anchors it had
            return draft.model_copy(
                update={"refine": f"rejected: the rewrite left {unanchored} sentence(s) without anchors; original kept"}
            )
        return rewrite.model_copy(update={"raw": f"{draft.raw}\n\n[refined]\n{raw}", "refine": "accepted"})


def anchors_by_section(draft: Draft) -> dict[str, frozenset[str]]:
    return {s.id: frozenset(eid for c in s.claims for eid in c.evidence_ids) for s in draft.sections if s.claims}


def with_policy_disclaimer(draft: Draft, request: ComposeRequest) -> Draft:
    """The draft with the policy's disclaimer in the language of its claims (what the supervisor checks; the raw
    text's JSON keys, headings or a disclaimer the model copied in another language are not the answer), or of the
    question when it has no claims. A disclaimer the model wrote is kept when it already holds that one."""
    spec = request.spec
    if not spec.policy.disclaimer:
        return draft
    language = answer_language(draft, spec.policy)
    disclaimer = spec.policy.disclaimer[language] if language else disclaimer_for(spec, request.question)[0]
    if disclaimer is None or (draft.disclaimer and disclaimer in draft.disclaimer):
        return draft
    return draft.model_copy(update={"disclaimer": disclaimer})
