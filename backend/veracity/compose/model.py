"""The model composer: a model writes the draft from the per-section evidence, told the violations of the last
attempt. Its raw text goes through the same parsers and checks as any other composer's; the policy's disclaimer,
when the template has one, is added by code in the language of the draft (the checker and the drafter read the
same policy, and a small model need not copy a sentence verbatim)."""

from __future__ import annotations

import json
from typing import Any

from veracity.compose.base import ComposeRequest, MalformedOutput, feedback_lines
from veracity.compose.extractive import disclaimer_for
from veracity.compose.parse import clean, parse_draft
from veracity.domain import Draft, Evidence
from veracity.guards.model import load_prompt
from veracity.models.chat import ChatModel

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
    """``prose`` writes the Markdown sections (free text); ``contract`` the JSON contract (with its schema)."""

    def __init__(self, prose: ChatModel, contract: ChatModel) -> None:
        self.prose, self.contract = prose, contract
        self.name = f"model:{prose.model}"

    async def compose(self, request: ComposeRequest) -> Draft:
        contract = request.spec.composer.output == "json_contract"
        chat, prompt = (self.contract, "composer_contract") if contract else (self.prose, "composer")
        raw = await chat.complete(load_prompt(prompt), compose_prompt(request))
        text = clean(raw)
        disclaimer, _ = disclaimer_for(request.spec, text or request.question)
        if disclaimer:
            text = _with_disclaimer(text, disclaimer, contract)
        try:
            return parse_draft(text, request.spec)
        except MalformedOutput as exc:
            raise MalformedOutput(exc.problems, raw) from None


def _with_disclaimer(text: str, disclaimer: str, contract: bool) -> str:
    if not contract:
        return text if disclaimer in text else f"{text}\n\n## Disclaimer\n\n{disclaimer}\n"
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        return text  # the parser reports it
    if isinstance(data, dict) and "disclaimer" not in data:
        data["disclaimer"] = disclaimer
    return json.dumps(data, ensure_ascii=False)
