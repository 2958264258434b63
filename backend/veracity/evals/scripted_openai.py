"""A scripted OpenAI-compatible chat completions server on 127.0.0.1, so tests exercise the real ``openai`` client
and real HTTP: recorded raw outputs are replayed per model name, in call order (the last one repeats, like a model
that keeps making the same mistake).

A step is a dict:
- ``{"content": "..."}`` — answer with this text. ``{E1}``, ``{E2}``… are replaced by the evidence ids in the order
  the request's prompt lists them (``[evidence:ID]``), as a model copies the ids it read; ``{Q1}``, ``{Q2}``… by
  the quotes the prompt gives for them (a faithful model's sentences); ``{E:some words}`` by the id of the listed
  evidence whose quote contains those words (whatever order relevance put it in); ``{EX}`` is an id never retrieved;
  ``{USER}`` is the request's user message itself (a rewrite that changes nothing).
- ``{"status": 429}`` (or 500, 503…) — fail with that HTTP status (the client retries with backoff);
  ``"retry_after_ms"`` adds that header.
- ``{"stall": 5.0, "content": "..."}`` — wait, then answer (a timeout when the client gives up first).
- ``{"judge": "echo"}`` — a grounding judge that quotes the claim back as supported (for end-to-end runs).
- ``"finish_reason": "length"`` on a step — the answer stopped at ``max_tokens`` (a real server's cut-off draft);
  ``"reasoning": "..."`` — the server's separate reasoning field (``reasoning_content``), as reasoning servers send.
- ``"match": "some words"`` on a step — the step only answers a request whose user message's first paragraph (the
  claim a judge is asked about, the question a composer is given) contains those words, case-insensitively: calls
  sent at once (the judge's) arrive in any order, so a script keyed by claim stays deterministic.

Steps are taken in order, each once, among those that match the request; when every matching step has been used,
the last one repeats. The script under ``"*"`` answers models that have none of their own. ``reject_json_schema``
plays a server without structured outputs (a ``json_schema`` response format gets a 400). ``requests`` records
every request body (model, messages, response_format, temperature, max_tokens); ``max_in_flight`` the most
requests answered at once.
"""

from __future__ import annotations

import json
import re
import time
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from veracity.checks import ANCHOR_RE
from veracity.evals.local_site import Instrument, LocalSite

_TOKEN = re.compile(r"\{([EQ])(\d+|X)\}")
_BY_WORDS = re.compile(r"\{E:([^}]+)\}")
_EVIDENCE_LINE = re.compile(r"^\[evidence:([A-Za-z0-9_-]+)\] (.*?)(?: \(source: [^)]*\))?$", re.M)


def _user_text(body: dict[str, Any]) -> str:
    return "\n".join(str(m.get("content", "")) for m in body.get("messages", []) if m.get("role") == "user")


def substitute(content: str, prompt: str) -> str:
    ids = list(dict.fromkeys(ANCHOR_RE.findall(prompt)))
    quoted = dict(_EVIDENCE_LINE.findall(prompt))

    def one(match: re.Match[str]) -> str:
        kind, which = match.groups()
        if which == "X":
            return "evneverseen0"
        index = int(which) - 1
        eid = ids[index] if 0 <= index < len(ids) else "evnotinprompt"
        return eid if kind == "E" else quoted.get(eid, "")

    def by_words(match: re.Match[str]) -> str:
        return next((eid for eid, quote in quoted.items() if match.group(1) in quote), "evnotinprompt")

    return _TOKEN.sub(one, _BY_WORDS.sub(by_words, content.replace("{USER}", prompt)))


def _echo_judgement(prompt: str) -> str:
    claim = prompt.split("Claim:\n", 1)[-1].split("\n\nSource passages:", 1)[0]
    claim = " ".join(ANCHOR_RE.sub("", claim).split()).rstrip(" .")
    first_id = re.search(r"source_id: (\S+)", prompt)
    source_id = first_id.group(1) if first_id else ""
    return json.dumps({"label": "supported", "quote": claim, "source_id": source_id, "reason": "quoted verbatim"})


def _error(code: int, message: str, retry_after_ms: int | None = None) -> Response:
    body = {"error": {"message": message, "type": "invalid_request_error", "param": None, "code": None}}
    headers = {"retry-after-ms": str(retry_after_ms)} if retry_after_ms is not None else None
    return JSONResponse(body, status_code=code, headers=headers)


class ScriptedOpenAI(LocalSite):
    def __init__(self, scripts: dict[str, list[dict[str, Any]]] | None = None) -> None:
        super().__init__()
        self.scripts: dict[str, list[dict[str, Any]]] = dict(scripts or {})
        self.requests: list[dict[str, Any]] = []
        self.calls: dict[str, int] = {}
        self.used: dict[str, set[int]] = {}
        self.in_flight = 0
        self.max_in_flight = 0
        """The most requests being answered at once (calls sent concurrently, e.g. the judge's)."""
        self.reject_json_schema = False
        app = Starlette(
            routes=[
                Route("/healthz", lambda request: PlainTextResponse("ok")),
                Route("/v1/models", self._models),
                Route("/v1/chat/completions", self._chat, methods=["POST"]),
            ]
        )
        self.app = Instrument(app, self)

    @property
    def base_url_v1(self) -> str:
        return self.url("/v1")

    def play(self, scripts: dict[str, list[dict[str, Any]]], *, reject_json_schema: bool = False) -> None:
        """Start over with these scripts: call counts and recorded requests cleared."""
        self.scripts = dict(scripts)
        self.calls.clear()
        self.used.clear()
        self.requests.clear()
        self.max_in_flight = 0
        self.reject_json_schema = reject_json_schema

    def requests_for(self, model: str) -> list[dict[str, Any]]:
        return [r for r in self.requests if r.get("model") == model]

    def _next_step(self, key: str, steps: list[dict[str, Any]], prompt: str) -> dict[str, Any] | None:
        """The first unused step that matches the request, else the last matching one again."""
        head = prompt.strip().split("\n\n", 1)[0].lower()
        matching = [i for i, step in enumerate(steps) if str(step.get("match", "")).lower() in head]
        if not matching:
            return None
        used = self.used.setdefault(key, set())
        index = next((i for i in matching if i not in used), matching[-1])
        used.add(index)
        return steps[index]

    async def _models(self, request: Request) -> Response:
        return JSONResponse({"object": "list", "data": [{"id": m, "object": "model"} for m in self.scripts]})

    async def _chat(self, request: Request) -> Response:
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            return await self._answer(request)
        finally:
            self.in_flight -= 1

    async def _answer(self, request: Request) -> Response:
        body = await request.json()
        self.requests.append(body)
        model = str(body.get("model", ""))
        if self.reject_json_schema and (body.get("response_format") or {}).get("type") == "json_schema":
            return _error(400, "response_format json_schema is not supported by this server")
        key = model if model in self.scripts else "*"
        steps = self.scripts.get(key)
        if not steps:
            return _error(404, f"no script for model {model}")
        self.calls[key] = self.calls.get(key, 0) + 1
        prompt = _user_text(body)
        step = self._next_step(key, steps, prompt)
        if step is None:
            return _error(404, f"no step of the script for model {model} matches this request")
        if "status" in step:
            ms = step.get("retry_after_ms")
            return _error(int(step["status"]), f"scripted HTTP {step['status']}", ms)
        if "stall" in step:
            await self.pause(float(step["stall"]))
        content = _echo_judgement(prompt) if step.get("judge") == "echo" else substitute(str(step["content"]), prompt)
        words = sum(len(str(m.get("content", "")).split()) for m in body.get("messages", []))
        message: dict[str, Any] = {"role": "assistant", "content": content}
        if step.get("reasoning"):
            message["reasoning_content"] = str(step["reasoning"])
        return JSONResponse(
            {
                "id": f"chatcmpl-{len(self.requests)}",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": model,
                "choices": [{"index": 0, "message": message, "finish_reason": str(step.get("finish_reason", "stop"))}],
                "usage": {
                    "prompt_tokens": words,
                    "completion_tokens": len(content.split()),
                    "total_tokens": words + len(content.split()),
                },
            }
        )
