"""Model-backed guards behind any OpenAI-compatible chat completions endpoint: the L2 grounding judge (seed 000)
and the reviewer (seed 003). Both call a separate model at temperature 0 with a short single-purpose prompt
(``veracity/prompts/*.md``) and a JSON schema response format.

Deterministic code bookends the model. The judge must quote the text that supports a claim, and a ``supported`` or
``partial`` label whose quote is not found in the cited sources is downgraded to ``unsupported``: a model can never
produce a pass the sources do not contain. The quote is looked up tolerantly — case, whitespace, curly or straight
quotation marks and dashes, an ellipsis standing for skipped words, a span from mid-sentence — but every word of it
must still lie, in order, in one cited text. Output that does not parse costs that claim or that review one retry,
told what was wrong; a second unreadable answer raises :class:`MalformedOutput`; a server that cannot be
reached, times out or fails after its retries (each one a recorded call: `veracity.models.chat`) raises
:class:`ModelError`.
"""

from __future__ import annotations

import logging
import re
from typing import Any

import openai
from pydantic import BaseModel, Field

from veracity.domain import ReviewVerdict
from veracity.errors import MalformedOutput
from veracity.guards.quotes import locate_all
from veracity.guards.reviewer import parse_verdict
from veracity.models.chat import DEFAULT_MAX_TOKENS, DEFAULT_TIMEOUT_SECONDS, ChatModel
from veracity.models.chat import client as _client
from veracity.models.chat import short as _short
from veracity.models.output import parse_as
from veracity.models.usage import Circuit
from veracity.ports import Judgement, Label, ReviewRequest, Source
from veracity.prompts import load_prompt
from veracity.settings import JUDGE_CONCURRENCY

logger = logging.getLogger(__name__)


MAX_QUOTE_CHARS = 600
MAX_REASON_CHARS = 300
MAX_SOURCE_ID_CHARS = 200
# Source text shown to the judge in one request, shared out between the passages; a quote is still looked up in
# the whole text of its source.
MAX_PROMPT_SOURCE_CHARS = 60_000
MIN_PASSAGE_CHARS = 2_000
# A quote of fewer words than this shows a shared word, not a supported fact.
MIN_QUOTE_WORDS = 2
SCORES: dict[Label, float] = {"supported": 1.0, "partial": 0.5, "unsupported": 0.0}

QUOTE_NOT_FOUND = "the judge's quote is not in the cited text"
QUOTE_TOO_SHORT = "the judge's quote is too short to support the claim"
NO_SOURCES = "no source text was cited"

GROUNDING_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "label": {"type": "string", "enum": ["supported", "partial", "unsupported"]},
        "quote": {"type": "string", "maxLength": MAX_QUOTE_CHARS},
        "source_id": {"type": "string"},
        "reason": {"type": "string", "maxLength": MAX_REASON_CHARS},
    },
    "required": ["label", "quote", "source_id", "reason"],
    "additionalProperties": False,
}

REVIEW_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "verdict": {"type": "string", "enum": ["ok", "revise", "crisis"]},
        "reason": {"type": "string"},
        "concerns": {"type": "array", "items": {"type": "string"}, "maxItems": 20},
    },
    "required": ["verdict", "reason", "concerns"],
    "additionalProperties": False,
}


# ---------------------------------------------------------------------------------------------------------------
# The judge


class GroundingAnswer(BaseModel):
    """What the judge model returns. Extra keys are ignored; ``quote`` and ``source_id`` may be empty."""

    label: Label
    quote: str = Field(default="", max_length=MAX_QUOTE_CHARS)
    source_id: str = Field(default="", max_length=MAX_SOURCE_ID_CHARS)
    reason: str = Field(min_length=1, max_length=MAX_REASON_CHARS)


def parse_grounding(raw: str) -> GroundingAnswer:
    return parse_as(raw, GroundingAnswer)


def retry_note(problems: list[str]) -> str:
    """What a retry is told about the answer it replaces (nothing on a first call)."""
    if not problems:
        return ""
    told = "; ".join(problems)[:500]
    return f"\n\nYour last answer could not be read ({told}). Answer with the one JSON object only, nothing else."


def _passages(sources: list[Source]) -> str:
    budget = max(MIN_PASSAGE_CHARS, MAX_PROMPT_SOURCE_CHARS // max(1, len(sources)))
    parts = []
    for number, source in enumerate(sources, start=1):
        text = source.text.strip()
        if len(text) > budget:
            text = text[:budget] + " [… passage truncated]"
        parts.append(f"[{number}] source_id: {source.id}\n{text}")
    return "\n\n".join(parts)


class ModelJudge:
    """L2 with a model: one claim, its cited passages, a label, a verbatim quote and a one-sentence reason."""

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str = "not-needed",
        timeout: float = DEFAULT_TIMEOUT_SECONDS,
        max_retries: int = 2,
        client: openai.AsyncOpenAI | None = None,
        max_tokens: int = DEFAULT_MAX_TOKENS,
        circuit: Circuit | None = None,
        concurrency: int = JUDGE_CONCURRENCY,
    ) -> None:
        self.name = f"model:{model}"
        self.concurrency = concurrency
        """Claims judged at once in a run (``ground``); every call still counts against the run's budget."""
        self.chat = ChatModel(
            model,
            client or _client(base_url, api_key, timeout, max_retries),
            "grounding",
            GROUNDING_SCHEMA,
            role="judge",
            max_tokens=max_tokens,
            circuit=circuit,
        )

    async def judge(self, claim: str, sources: list[Source]) -> Judgement:
        """The judge's verdict; an answer that cannot be read costs one retry, told what was wrong with it (a
        second unreadable answer raises :class:`MalformedOutput`)."""
        try:
            return await self._judge(claim, sources, [])
        except MalformedOutput as first:
            return await self._judge(claim, sources, first.problems)

    async def _judge(self, claim: str, sources: list[Source], problems: list[str]) -> Judgement:
        if not any(source.text.strip() for source in sources):
            return Judgement("unsupported", 0.0, [], NO_SOURCES)
        user = f"Claim:\n{claim.strip()}\n\nSource passages:\n\n{_passages(sources)}{retry_note(problems)}"
        answer = parse_grounding(await self.chat.complete(load_prompt("judge"), user))
        reason = _short(answer.reason, MAX_REASON_CHARS)
        spans = locate_all(answer.quote, sources, self._source_id(answer.source_id, sources))
        if answer.label == "unsupported":
            return Judgement("unsupported", 0.0, spans, reason)
        if not spans:
            return Judgement("unsupported", 0.0, [], QUOTE_NOT_FOUND)
        if len(re.findall(r"\w+", answer.quote)) < MIN_QUOTE_WORDS:
            return Judgement("unsupported", 0.0, [], QUOTE_TOO_SHORT)
        return Judgement(answer.label, SCORES[answer.label], spans, reason)

    @staticmethod
    def _source_id(named: str, sources: list[Source]) -> str:
        """The id the model named, also when it named the passage by its number ("2", "[2]")."""
        named = named.strip()
        if any(source.id == named for source in sources):
            return named
        number = named.strip("[]# ").removeprefix("S")
        if number.isdigit() and 1 <= int(number) <= len(sources):
            return sources[int(number) - 1].id
        return named

    async def aclose(self) -> None:
        await self.chat.aclose()


# ---------------------------------------------------------------------------------------------------------------
# The reviewer


class ModelReviewer:
    """The reviewer with a model: the person's message and the drafted reply in, ok / revise / crisis out."""

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str = "not-needed",
        timeout: float = DEFAULT_TIMEOUT_SECONDS,
        max_retries: int = 2,
        client: openai.AsyncOpenAI | None = None,
        max_tokens: int = DEFAULT_MAX_TOKENS,
        circuit: Circuit | None = None,
    ) -> None:
        self.name = f"model:{model}"
        self.chat = ChatModel(
            model,
            client or _client(base_url, api_key, timeout, max_retries),
            "review",
            REVIEW_SCHEMA,
            role="reviewer",
            max_tokens=max_tokens,
            circuit=circuit,
        )

    async def review(self, request: ReviewRequest) -> ReviewVerdict:
        """The reviewer's verdict, with one informed retry after an answer that cannot be read (as the judge)."""
        try:
            return await self._review(request, [])
        except MalformedOutput as first:
            return await self._review(request, first.problems)

    async def _review(self, request: ReviewRequest, problems: list[str]) -> ReviewVerdict:
        user = f"The person's message:\n{request.question.strip()}\n\nThe drafted reply:\n{request.draft_text.strip()}"
        return parse_verdict(await self.chat.complete(load_prompt("reviewer"), user + retry_note(problems)))

    async def aclose(self) -> None:
        await self.chat.aclose()
