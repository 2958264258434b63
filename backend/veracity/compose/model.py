"""The model composer: a model writes the draft from the per-section evidence, told the violations of the last
attempt. Its raw text goes through the same parsers and checks as any other composer's; the policy's disclaimer,
when the template has one, is added by code in the language of the draft (the checker and the drafter read the
same policy, and a small model need not copy a sentence verbatim)."""

from __future__ import annotations

import json
from typing import Any

from veracity.checks import anchored
from veracity.compose.base import ComposeRequest, MalformedOutput, feedback_lines
from veracity.compose.extractive import disclaimer_for
from veracity.compose.parse import clean, parse_draft
from veracity.domain import Draft, Evidence
from veracity.guards.model import load_prompt
from veracity.guards.supervisor import answer_language
from veracity.models.chat import ChatModel
from veracity.runs.report import render_draft

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


def sections_markdown(text: str) -> str:
    """A structured sections draft as the Markdown the parser reads (each sentence followed by its anchors);
    anything that is not such JSON is returned as it is (a model may answer in Markdown directly)."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        return text
    if not isinstance(data, dict) or not isinstance(data.get("sections"), list):
        return text
    lines: list[str] = []
    for section in data["sections"]:
        if not isinstance(section, dict):
            continue
        lines += [f"## {section.get('title', '')}", ""]
        for sentence in section.get("sentences") or []:
            if isinstance(sentence, dict):
                ids = [i for i in sentence.get("evidence_ids") or [] if isinstance(i, str)]
                lines.append(anchored(" ".join(str(sentence.get("text", "")).split()), ids).strip())
        lines.append("")
    return "\n".join(lines)


def evidence_lines(ids: list[str], by_id: dict[str, Evidence]) -> list[str]:
    lines = []
    for eid in ids[:MAX_EVIDENCE_PER_SECTION]:
        ev = by_id.get(eid)
        if ev is not None:
            quote = " ".join(ev.quote.split())[:MAX_QUOTE_CHARS]
            lines.append(f"[evidence:{ev.id}] {quote} (source: {ev.source.title})")
    return lines


def compose_prompt(request: ComposeRequest) -> str:
    """The user message: the question, each section with its evidence, and what failed last time."""
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
            raw = await self.contract.complete(load_prompt("composer_contract"), compose_prompt(request))
            text = clean(raw)
        else:
            raw = await self.prose.complete(
                load_prompt("composer"), compose_prompt(request), schema=draft_schema(request)
            )
            text = sections_markdown(clean(raw))
        try:
            draft = with_policy_disclaimer(parse_draft(text, request.spec), request)
        except MalformedOutput as exc:
            raise MalformedOutput(exc.problems, raw) from None
        if self.refine and not contract and any(sec.claims for sec in draft.sections):
            draft = await self._refined(draft, request)
        return draft

    async def _refined(self, draft: Draft, request: ComposeRequest) -> Draft:
        """The optional refine pass. The rewrite is kept only if every section cites exactly the evidence it
        cited before (a rewrite that drops or invents an anchor is rejected and the original kept)."""
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
