"""One model behind any OpenAI-compatible chat completions endpoint (OpenAI, Ollama, vLLM, llama.cpp, the bundled
local model), used by every model-backed stage: planner, composer, judge, reviewer.

- Temperature 0. A JSON schema is sent as ``response_format`` where the stage wants structure; a server that
  rejects ``json_schema`` with a 400 is asked again with ``json_object`` and this instance keeps to that. A stage
  that wants free text sends no format. ``max_tokens`` caps every answer so a small model cannot run off.
- Retries with exponential backoff on 429, 5xx, timeouts and connection errors are this class's, up to the
  client's ``max_retries`` (the client itself is used with none: a retry it made would be a call nobody counted or
  recorded); each attempt is a call of its own — counted, bounded by the run's time left, recorded with its error.
  A :class:`~veracity.models.usage.Circuit` gives up cleanly on a server that keeps failing.
- Every call is counted against the run's budgets (``veracity.models.usage``) when it is sent, and recorded when
  it ends — its usage (prompt and completion tokens, time, cost for known models), and its error when it failed,
  was rejected or timed out — and streamed (``model_call``): no call leaves no trace.
- ``finish_reason == "length"`` (the answer hit ``max_tokens``) is a :class:`TruncatedOutput`, never a quietly
  cut answer; a reasoning model cut off inside its ``<think>`` block is told so.
- Failures surface as ``ModelError`` (unreachable, timeout, refused, budget) or ``MalformedOutput`` (empty,
  refused content, truncated): the run retries informed, then falls to the floor.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import time
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any

import openai
from openai.types.chat import ChatCompletionMessageParam

from veracity.errors import MalformedOutput, ModelError, TruncatedOutput
from veracity.models.output import only_thinking
from veracity.models.usage import Circuit, current_listener, current_meter
from veracity.settings import MODEL_CONNECT_SECONDS, MODEL_TIMEOUT_SECONDS

logger = logging.getLogger(__name__)

DEFAULT_MAX_TOKENS = 1024
DEFAULT_TIMEOUT_SECONDS = MODEL_TIMEOUT_SECONDS
DEFAULT_CONNECT_SECONDS = MODEL_CONNECT_SECONDS


def short(text: object, limit: int = 300) -> str:
    return " ".join(str(text).split())[:limit]


def client(
    base_url: str | None,
    api_key: str,
    timeout: float = DEFAULT_TIMEOUT_SECONDS,
    max_retries: int = 2,
    *,
    connect_timeout: float = DEFAULT_CONNECT_SECONDS,
) -> openai.AsyncOpenAI:
    """One connection pool: ``timeout`` bounds the wait for an answer, ``connect_timeout`` reaching the server."""
    limits = openai.Timeout(timeout, connect=min(connect_timeout, timeout))
    return openai.AsyncOpenAI(base_url=base_url, api_key=api_key, timeout=limits, max_retries=max_retries)


def read_timeout(chat_client: openai.AsyncOpenAI) -> float:
    """The longest a call of this client waits for its answer (infinite when unset)."""
    timeout = chat_client.timeout
    if isinstance(timeout, int | float):
        return float(timeout)
    if isinstance(timeout, openai.Timeout) and timeout.read is not None:
        return float(timeout.read)
    return float("inf")


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
        self.retries = max(int(client.max_retries), 0)
        """Attempts after the first for a retryable failure (``_retryable``), each counted and recorded."""
        self.sender = client.with_options(max_retries=0) if client.max_retries else client
        """The client as requests are sent: the same connection pool, with no retries of its own."""
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
        """One answer, trying again after a retryable failure (backing off 0.5 s, 1 s, 2 s … at most 8 s, or as
        the server's ``Retry-After`` asks, never past the run's time left)."""
        for attempt in range(self.retries + 1):
            try:
                return await self._attempt(messages, structured, schema)
            except ModelError as exc:
                cause = exc.__cause__
                if not isinstance(cause, openai.OpenAIError):
                    raise  # the budget or an open circuit refused it: nothing was sent
                pause = _backoff(cause, attempt)
                meter = current_meter.get()
                remaining = meter.remaining_seconds() if meter is not None else None
                if attempt == self.retries or not _retryable(cause) or (remaining is not None and remaining <= pause):
                    self.circuit.failure()  # one failed call, however many attempts it took
                    raise
                logger.info("model %s %s; trying again in %.1f s", self.model, _failure(cause), pause)
                await asyncio.sleep(pause)
        raise AssertionError("unreachable")  # the loop returns or raises

    async def _attempt(
        self, messages: list[ChatCompletionMessageParam], structured: bool, schema: dict[str, Any] | None
    ) -> str:
        self.circuit.check(self.model)  # an open circuit sends nothing: no call to count
        meter = current_meter.get()
        if meter is not None:
            meter.before_call(self.role)  # refused (BudgetExceeded) or counted from here on
        options: dict[str, Any] = {}
        response_format = self._response_format(structured, schema)
        if response_format is not None:
            options["response_format"] = response_format
        remaining = meter.remaining_seconds() if meter is not None else None
        if remaining is not None and remaining < read_timeout(self.client):
            options["timeout"] = max(remaining, 0.1)  # the run's wall-time budget is nearer than the client's own
        started = time.perf_counter()
        try:
            completion = await self.sender.chat.completions.create(
                model=self.model, temperature=0, max_tokens=self.max_tokens, messages=messages, **options
            )
        except openai.BadRequestError as exc:
            await self._record(None, started, error=f"rejected the request: {short(exc.message, 200)}")
            raise  # the caller decides: fall back to json_object, or fail
        except openai.OpenAIError as exc:
            failure = _failure(exc)
            await self._record(None, started, error=failure)
            raise ModelError(f"model {self.model} {failure}") from exc
        except asyncio.CancelledError:
            # Abandoned (another claim's judge failed, or the run is stopping): still on record.
            with contextlib.suppress(Exception, asyncio.CancelledError):
                await asyncio.shield(self._record(None, started, error="cancelled"))
            raise
        self.circuit.success()
        finish = _finish_reason(completion)
        await self._record(completion, started, finish_reason=finish)
        if finish == "length":
            text = _text(completion)
            thinking = only_thinking(text) or (not text.strip() and bool(_reasoning(completion)))
            raise TruncatedOutput(self.max_tokens, text, thinking=thinking)
        return _content(completion)

    def _meter_row(
        self, completion: Any, started: float, *, error: str | None = None, finish_reason: str | None = None
    ) -> dict[str, Any] | None:
        meter = current_meter.get()
        if meter is None:
            return None
        usage = getattr(completion, "usage", None)
        return meter.record(
            role=self.role,
            model=self.model,
            prompt_tokens=int(getattr(usage, "prompt_tokens", 0) or 0),
            completion_tokens=int(getattr(usage, "completion_tokens", 0) or 0),
            ms=(time.perf_counter() - started) * 1000,
            error=error,
            finish_reason=finish_reason,
        )

    async def _record(
        self, completion: Any, started: float, *, error: str | None = None, finish_reason: str | None = None
    ) -> None:
        row = self._meter_row(completion, started, error=error, finish_reason=finish_reason)
        listener = current_listener.get()
        if row is not None and listener is not None:
            await listener(row)

    async def aclose(self) -> None:
        await self.client.close()


MAX_BACKOFF_SECONDS = 8.0


def _retryable(exc: openai.OpenAIError) -> bool:
    """What the ``openai`` client itself retries: no answer in time, no connection, 408, 409, 429 and 5xx."""
    if isinstance(exc, openai.APIConnectionError):  # timeouts included
        return True
    if isinstance(exc, openai.APIStatusError):
        return exc.status_code in (408, 409, 429) or exc.status_code >= 500
    return False


def _backoff(exc: openai.OpenAIError, attempt: int) -> float:
    """Seconds to wait before attempt ``attempt + 2``: what the server's ``Retry-After`` asks (seconds or an HTTP
    date) when it is readable, else 0.5 s doubled per attempt; never below 0 nor above ``MAX_BACKOFF_SECONDS``."""
    wait = 0.5 * 2**attempt
    response = getattr(exc, "response", None)
    asked: str | None = response.headers.get("retry-after") if response is not None else None
    if asked:
        try:
            wait = float(str(asked))
        except ValueError:
            with contextlib.suppress(TypeError, ValueError, IndexError, OverflowError):
                wait = (parsedate_to_datetime(asked) - datetime.now(UTC)).total_seconds()
    if not math.isfinite(wait):
        wait = 0.5 * 2**attempt
    return float(min(max(wait, 0.0), MAX_BACKOFF_SECONDS))


def _failure(exc: openai.OpenAIError) -> str:
    """What went wrong with a call, after "model NAME"."""
    if isinstance(exc, openai.APITimeoutError):  # a subclass of APIConnectionError: first
        return "timed out"
    if isinstance(exc, openai.APIConnectionError):
        return f"could not be reached: {short(exc.message)}"
    if isinstance(exc, openai.APIStatusError):
        return f"failed with HTTP {exc.status_code}: {short(exc.message)}"
    return f"failed: {short(exc)}"


def _finish_reason(completion: Any) -> str | None:
    try:
        finish = completion.choices[0].finish_reason
    except (AttributeError, IndexError, TypeError):
        return None
    return str(finish) if finish else None


def _text(completion: Any) -> str:
    try:
        content = completion.choices[0].message.content
    except (AttributeError, IndexError, TypeError):
        return ""
    return content if isinstance(content, str) else ""


def _reasoning(completion: Any) -> str:
    """The reasoning a server returned beside the answer (vLLM, Ollama, DeepSeek: ``reasoning_content`` or
    ``reasoning``), if any."""
    try:
        message = completion.choices[0].message
    except (AttributeError, IndexError, TypeError):
        return ""
    extra = getattr(message, "model_extra", None) or {}
    value = getattr(message, "reasoning_content", None) or extra.get("reasoning_content") or extra.get("reasoning")
    return value if isinstance(value, str) else ""


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
