"""One model behind any OpenAI-compatible chat completions endpoint (OpenAI, Ollama, vLLM, llama.cpp, the bundled
local model), used by every model-backed stage: planner, composer, judge, reviewer.

- Temperature 0. A JSON schema is sent as ``response_format`` where the stage wants structure; a server that
  rejects ``json_schema`` with a 400 is asked again with ``json_object`` and this instance keeps to that. A stage
  that wants free text sends no format. ``max_tokens`` caps every answer so a small model cannot run off.
- Retries with exponential backoff on 429, 5xx, timeouts and connection errors are the ``openai`` client's
  (``max_retries``); a :class:`~veracity.models.usage.Circuit` gives up cleanly on a server that keeps failing.
- Every call is counted against the run's budgets (``veracity.models.usage``) before it is sent, its usage
  (prompt and completion tokens, time, cost for known models) recorded after, and streamed.
- Failures surface as ``ModelError`` (unreachable, timeout, refused, budget) or ``MalformedOutput`` (empty,
  refused content): the run retries informed, then falls to the floor.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import openai
from openai.types.chat import ChatCompletionMessageParam

from veracity.compose.base import MalformedOutput, ModelError
from veracity.models.usage import Circuit, current_listener, current_meter

logger = logging.getLogger(__name__)

DEFAULT_MAX_TOKENS = 1024


def short(text: object, limit: int = 300) -> str:
    return " ".join(str(text).split())[:limit]


def client(base_url: str | None, api_key: str, timeout: float, max_retries: int) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url=base_url, api_key=api_key, timeout=timeout, max_retries=max_retries)


class ChatModel:
    def __init__(
        self,
        model: str,
        client: openai.AsyncOpenAI,
        schema_name: str = "",
        schema: dict[str, Any] | None = None,
        *,
        role: str = "model",
        max_tokens: int = DEFAULT_MAX_TOKENS,
        circuit: Circuit | None = None,
    ) -> None:
        self.model = model
        self.client = client
        self.schema_name = schema_name
        self.schema = schema
        self.role = role
        self.max_tokens = max_tokens
        self.circuit = circuit or Circuit()
        self.structured = True
        """False once the server has rejected a ``json_schema`` format: later calls send ``json_object``."""

    def _response_format(self, structured: bool, schema: dict[str, Any] | None) -> dict[str, Any] | None:
        if schema is None:
            return None
        if structured:
            return {
                "type": "json_schema",
                "json_schema": {"name": self.schema_name or "answer", "strict": True, "schema": schema},
            }
        return {"type": "json_object"}

    async def complete(self, system: str, user: str, *, schema: dict[str, Any] | None = None) -> str:
        """The raw text of the model's answer. ``schema`` replaces the instance's schema for this call (a schema
        built from the run, e.g. an enum of the evidence ids the model may cite)."""
        messages: list[ChatCompletionMessageParam] = [
            {"role": "system", "content": system},
            {"role": "user", "content": user},
        ]
        schema = schema if schema is not None else self.schema
        structured = self.structured and schema is not None
        try:
            return await self._create(messages, structured, schema)
        except openai.BadRequestError as exc:
            if not structured:
                raise ModelError(f"model {self.model} rejected the request: {short(exc.message)}") from exc
            first = exc
        try:
            raw = await self._create(messages, False, schema)
        except openai.BadRequestError as exc:
            raise ModelError(f"model {self.model} rejected the request: {short(first.message)}") from exc
        logger.warning(
            "model %s rejected the json_schema response format (%s); using json_object from now on",
            self.model,
            short(first.message, 200),
        )
        self.structured = False
        return raw

    async def _create(
        self, messages: list[ChatCompletionMessageParam], structured: bool, schema: dict[str, Any] | None
    ) -> str:
        meter = current_meter.get()
        if meter is not None:
            meter.before_call(self.role)
        self.circuit.check(self.model)
        options: dict[str, Any] = {}
        response_format = self._response_format(structured, schema)
        if response_format is not None:
            options["response_format"] = response_format
        remaining = meter.remaining_seconds() if meter is not None else None
        configured = self.client.timeout if isinstance(self.client.timeout, int | float) else float("inf")
        if remaining is not None and remaining < configured:
            options["timeout"] = max(remaining, 0.1)  # the run's wall-time budget is nearer than the client's own
        started = time.perf_counter()
        try:
            completion = await self.client.chat.completions.create(
                model=self.model, temperature=0, max_tokens=self.max_tokens, messages=messages, **options
            )
        except openai.BadRequestError:
            raise  # the caller decides: fall back to json_object, or fail
        except openai.OpenAIError as exc:
            self.circuit.failure()
            raise ModelError(f"model {self.model} {_failure(exc)}") from exc
        self.circuit.success()
        await self._record(completion, (time.perf_counter() - started) * 1000)
        return _content(completion)

    async def _record(self, completion: Any, ms: float) -> None:
        meter = current_meter.get()
        if meter is None:
            return
        usage = getattr(completion, "usage", None)
        row = meter.record(
            role=self.role,
            model=self.model,
            prompt_tokens=int(getattr(usage, "prompt_tokens", 0) or 0),
            completion_tokens=int(getattr(usage, "completion_tokens", 0) or 0),
            ms=ms,
        )
        listener = current_listener.get()
        if listener is not None:
            await listener(row)

    async def aclose(self) -> None:
        await self.client.close()


def _failure(exc: openai.OpenAIError) -> str:
    """What went wrong with a call, after "model NAME"."""
    if isinstance(exc, openai.APITimeoutError):  # a subclass of APIConnectionError: first
        return "timed out"
    if isinstance(exc, openai.APIConnectionError):
        return f"could not be reached: {short(exc.message)}"
    if isinstance(exc, openai.APIStatusError):
        return f"failed with HTTP {exc.status_code}: {short(exc.message)}"
    return f"failed: {short(exc)}"


def _content(completion: Any) -> str:
    try:
        message = completion.choices[0].message
        refusal = getattr(message, "refusal", None)
        content = message.content
    except (AttributeError, IndexError, TypeError):
        raise MalformedOutput(["the response carries no message"], short(completion, 2000)) from None
    if refusal:
        raise MalformedOutput([f"the model refused: {short(refusal)}"], str(refusal))
    if not isinstance(content, str) or not content.strip():
        raise MalformedOutput(["output is empty"], content or "")
    return content
