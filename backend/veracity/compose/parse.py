"""Parse a composer's raw text into sections of claims. Used for model output and the offline composer alike.

Three shapes: Markdown (``## Section title`` then sentences carrying ``[evidence:ID]`` anchors), the sections
JSON a model writes to the composer's schema (``{"sections": [{"title", "sentences": [{"text", "evidence_ids"}]}]}``,
one claim per item: an item is never re-split, so every sentence of it keeps the item's anchors), and the strict
JSON contract ``{"answer", "citations", "confidence", "needs_human"}`` (seed 001). Reasoning blocks (``<think>``,
``<thinking>``, ``<reasoning>``, or a bare ``</think>`` whose opening tag was in the prompt) and code fences are
stripped first; anything that does not parse is a :class:`MalformedOutput`.
"""

from __future__ import annotations

import json
import re

from veracity.checks import ANCHOR_RE, parse_claim
from veracity.domain import Claim, Draft, SectionDraft
from veracity.errors import MalformedOutput
from veracity.models.output import clean
from veracity.specs.models import Spec
from veracity.text import sentence_spans, words

_HEADING = re.compile(r"^\s{0,3}#{1,6}\s+(.+?)\s*#*\s*$")
# A list item's marker: a bullet, "1." or "1)", and a lettered or roman one ("a)", "(b)", "ii.", "(iv)") in lower
# case before a capital ("A. Smith" is an initial, "e. coli is …" and "c. 1850 the town …" are no items).
_BULLET = re.compile(r"^\s*(?:[-*+•·▪‣◦]|\d+[.)]|\(?(?:[ivx]{1,4}|[a-h])[.)](?=\s+[A-Z\"'“(]))\s+")
_ONLY_ANCHORS = re.compile(r"^[\s.,;:]*(?:\[evidence:[A-Za-z0-9_-]+\][\s.,;:]*)+$")
_DISCLAIMER_HEADINGS = {"disclaimer", "penafian", "note", "notice"}
CONTRACT_KEYS = ("answer", "citations", "confidence", "needs_human")
MAX_RAW_CHARS = 40_000


def _normal(text: str) -> str:
    return " ".join(words(text))


_AFTER_ANCHORS = re.compile(r"([.!?][\"'”’)]*\s*(?:\[evidence:[A-Za-z0-9_-]+\][\s.,;:]*)+)\s+(?=\S)")


def split_claims(text: str) -> list[str]:
    """Sentences of a text, one line at a time, with anchors written after a full stop kept on their
    sentence ("... in 1950. [evidence:ab] The next ...")."""
    pieces: list[str] = []
    for line in text.splitlines():
        line = _AFTER_ANCHORS.sub(lambda m: m.group(1).rstrip() + "\n", _BULLET.sub("", line.strip()))
        for part in line.split("\n"):
            for s, e in sentence_spans(part):
                sentence = _BULLET.sub("", part[s:e]).strip()
                if not sentence:
                    continue
                if pieces and _ONLY_ANCHORS.match(sentence):
                    pieces[-1] = f"{pieces[-1]} {sentence.strip(' .,;:')}"
                    continue
                pieces.append(sentence)
    return pieces


def _is_disclaimer(sentence: str, disclaimers: list[str]) -> bool:
    normal = _normal(sentence)
    return bool(normal) and any(
        normal in _normal(d) or _normal(d) in normal for d in disclaimers if d and len(normal) > 20
    )


def _titles(spec: Spec) -> dict[str, str]:
    """A section's normalised title (or id in words) → its id."""
    by_title = {}
    for section in spec.sections:
        by_title[_normal(section.title)] = section.id
        by_title[_normal(section.id.replace("_", " "))] = section.id
    return by_title


def sections_json(text: str) -> dict[str, object] | None:
    """The sections JSON of a draft (``{"sections": [...]}``), also after a line of preamble; None when the text is
    not that (Markdown, prose, the contract)."""
    start = text.find("{")
    if start < 0 or '"sections"' not in text:
        return None
    try:
        data = json.loads(text[start : text.rfind("}") + 1])
    except json.JSONDecodeError:
        return None
    return data if isinstance(data, dict) and isinstance(data.get("sections"), list) else None


def _item_claim(item: object) -> Claim | None:
    """One item of a JSON section as one claim: its text (anchors written inline kept too) with its evidence ids."""
    if isinstance(item, str):
        text, ids = item, []
    elif isinstance(item, dict):
        text = str(item.get("text", ""))
        ids = [i.strip() for i in item.get("evidence_ids") or [] if isinstance(i, str) and i.strip()]
    else:
        return None
    claim = parse_claim(_BULLET.sub("", " ".join(text.split())) + "".join(f" [evidence:{i}]" for i in ids))
    return claim if claim.text.strip(" .,;:") else None


def parse_sections_json(data: dict[str, object], raw: str, spec: Spec) -> Draft:
    """A sections JSON draft: each item one claim, whatever number of sentences it holds."""
    by_title = _titles(spec)
    disclaimers = list(spec.policy.disclaimer.values())
    claims: dict[str, list[Claim]] = {}
    disclaimer_parts: list[str] = []
    unknown: list[str] = []
    sections = data["sections"]
    assert isinstance(sections, list)
    single = spec.evidence_sections[0].id if len(spec.evidence_sections) == 1 else None
    for section in sections:
        if not isinstance(section, dict):
            continue
        title = _normal(str(section.get("title", "")))
        items = section.get("sentences")
        items = items if isinstance(items, list) else []
        section_id = by_title.get(title) or (single if not title else None)
        if title in _DISCLAIMER_HEADINGS:
            disclaimer_parts += [c.text for c in map(_item_claim, items) if c is not None]
            continue
        if section_id is None:
            unknown.append(str(section.get("title", ""))[:60])
            continue
        for item in items:
            claim = _item_claim(item)
            if claim is None:
                continue
            if _is_disclaimer(claim.text, disclaimers):
                disclaimer_parts.append(claim.text)
                continue
            claims.setdefault(section_id, []).append(claim)
    if not claims and unknown:
        problems = ["no section of the template was found (expected the section titles as given)"]
        raise MalformedOutput([*problems, f"unknown section titles: {', '.join(unknown[:5])}"], raw)
    drafted = [SectionDraft(id=s.id, title=s.title, claims=claims.get(s.id, [])) for s in spec.sections]
    return Draft(raw=raw, sections=drafted, disclaimer=" ".join(disclaimer_parts) or None)


def parse_sections(raw: str, spec: Spec) -> Draft:
    if len(raw) > MAX_RAW_CHARS:
        raise MalformedOutput([f"output is {len(raw)} characters; at most {MAX_RAW_CHARS} are read"], raw)
    text = clean(raw)
    if not text:
        raise MalformedOutput(["output is empty"], raw)
    data = sections_json(text)
    if data is not None:
        return parse_sections_json(data, raw, spec)
    by_title = _titles(spec)
    disclaimers = list(spec.policy.disclaimer.values())
    bodies: dict[str, list[str]] = {}
    disclaimer_parts: list[str] = []
    current: str | None = None
    unknown: list[str] = []
    known_headings = 0
    for line in text.splitlines():
        heading = _HEADING.match(line)
        if heading:
            title = _normal(heading.group(1))
            if title in _DISCLAIMER_HEADINGS:
                current = "__disclaimer__"
            elif title in by_title:
                current = by_title[title]
                known_headings += 1
            else:
                current = None
                unknown.append(heading.group(1))
            continue
        if line.strip():
            bodies.setdefault(current or "__none__", []).append(line.strip())
        elif current in bodies:
            bodies[current].append("")  # a paragraph break
    if not known_headings:
        if len(spec.evidence_sections) == 1 and "__none__" in bodies:
            # A one-section template: headings are optional.
            bodies[spec.evidence_sections[0].id] = bodies.pop("__none__")
        else:
            problems = ["no section of the template was found (expected '## <section title>' headings)"]
            if unknown:
                problems.append(f"unknown headings: {', '.join(unknown[:5])}")
            raise MalformedOutput(problems, raw)
    sections: list[SectionDraft] = []
    for section in spec.sections:
        claims: list[Claim] = []
        for paragraph, block in enumerate(_paragraphs(bodies.get(section.id, []))):
            for sentence in split_claims("\n".join(block)):
                if _is_disclaimer(sentence, disclaimers):
                    disclaimer_parts.append(ANCHOR_RE.sub("", sentence).strip())
                    continue
                claims.append(parse_claim(sentence).model_copy(update={"paragraph": paragraph}))
        sections.append(SectionDraft(id=section.id, title=section.title, claims=claims))
    for sentence in split_claims("\n".join(bodies.get("__disclaimer__", []) + bodies.get("__none__", []))):
        if _is_disclaimer(sentence, disclaimers) or "__disclaimer__" in bodies:
            disclaimer_parts.append(ANCHOR_RE.sub("", sentence).strip())
    return Draft(raw=raw, sections=sections, disclaimer=" ".join(disclaimer_parts) or None)


def _paragraphs(lines: list[str]) -> list[list[str]]:
    """Lines grouped into paragraphs at blank lines."""
    blocks: list[list[str]] = [[]]
    for line in lines:
        if line:
            blocks[-1].append(line)
        elif blocks[-1]:
            blocks.append([])
    return [b for b in blocks if b]


def parse_contract(raw: str, spec: Spec) -> Draft:
    """The strict JSON contract: every field present and typed, citations equal to the answer's anchors."""
    text = clean(raw)
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise MalformedOutput([f"invalid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})"], raw) from None
    if not isinstance(data, dict):
        raise MalformedOutput(["output must be a JSON object"], raw)
    problems: list[str] = []
    missing = [k for k in CONTRACT_KEYS if k not in data]
    if missing:
        problems.append(f"missing field(s): {', '.join(missing)}")
    extra = sorted(set(data) - set(CONTRACT_KEYS) - {"disclaimer"})
    if extra:
        problems.append(f"unexpected field(s): {', '.join(extra)}")
    answer, citations = data.get("answer"), data.get("citations")
    confidence, needs_human = data.get("confidence"), data.get("needs_human")
    if not isinstance(answer, str) or not answer.strip():
        problems.append("answer must be a non-empty string")
    if not isinstance(citations, list) or not all(isinstance(c, str) for c in citations):
        problems.append("citations must be a list of strings")
    if isinstance(confidence, bool) or not isinstance(confidence, int | float) or not 0 <= confidence <= 1:
        problems.append("confidence must be a number in [0, 1]")
    if not isinstance(needs_human, bool):
        problems.append("needs_human must be true or false")
    if problems:
        raise MalformedOutput(problems, raw)
    assert isinstance(answer, str) and isinstance(citations, list)
    anchors = set(ANCHOR_RE.findall(answer))
    if set(citations) != anchors:
        raise MalformedOutput(
            [
                "citations must list exactly the [evidence:ID] anchors of the answer "
                f"(citations {sorted(set(citations))}, anchors {sorted(anchors)})"
            ],
            raw,
        )
    draft = parse_sections(answer, spec.model_copy(update={"sections": spec.evidence_sections[:1]}))
    disclaimer = data.get("disclaimer") if isinstance(data.get("disclaimer"), str) else draft.disclaimer
    sections = draft.sections + [
        SectionDraft(id=s.id, title=s.title) for s in spec.sections if s.id != draft.sections[0].id
    ]
    return Draft(
        raw=raw,
        sections=sections,
        disclaimer=disclaimer,
        confidence=float(confidence),  # type: ignore[arg-type]
        needs_human=bool(needs_human),
        contract={k: data[k] for k in CONTRACT_KEYS},
    )


def parse_draft(raw: str, spec: Spec) -> Draft:
    if spec.composer.output == "json_contract":
        return parse_contract(raw, spec)
    return parse_sections(raw, spec)
