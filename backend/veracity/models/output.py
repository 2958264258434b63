"""Reading what a model wrote: reasoning blocks (``<think>``, ``<thinking>``, ``<reasoning>``, or a bare ``</think>``
whose opening tag was in the prompt) and an enclosing code fence are stripped, and a JSON answer is validated into
its pydantic model. The composer's parsers (``veracity.compose.parse``), the model judge, reviewer and planner
all read model output through here."""

from __future__ import annotations

import re
from typing import TypeVar

from pydantic import BaseModel, ValidationError

from veracity.errors import MalformedOutput

_THINK = re.compile(r"<(think|thinking|reasoning)>.*?(?:</\1>|$)", re.S | re.I)
# A reasoning model whose chat template opens the block in the prompt writes only its closing tag.
_OPEN_ENDED_THINK = re.compile(r"^.*?</(?:think|thinking|reasoning)>", re.S | re.I)
_FENCE = re.compile(r"^\s*```[a-zA-Z0-9_-]*\s*\n(.*?)\n?```\s*$", re.S)
M = TypeVar("M", bound=BaseModel)


def only_thinking(raw: str) -> bool:
    """The text is reasoning and nothing else (a model cut off before it got to the answer)."""
    return bool(_THINK.search(raw) or _OPEN_ENDED_THINK.search(raw)) and not clean(raw)


def clean(raw: str) -> str:
    """Drop reasoning blocks (an unclosed one runs to the end) and an enclosing code fence."""
    text = _OPEN_ENDED_THINK.sub("", _THINK.sub("", raw)).strip()
    fenced = _FENCE.match(text)
    return fenced.group(1).strip() if fenced else text


def parse_as(raw: str, model: type[M]) -> M:
    """A model's JSON answer (after :func:`clean`) as ``model``, or a :class:`MalformedOutput` naming at most five
    problems as ``field.path: message`` (``output: ...`` for the whole answer, e.g. invalid JSON)."""
    try:
        return model.model_validate_json(clean(raw))
    except ValidationError as exc:
        problems = [f"{'.'.join(str(p) for p in e['loc']) or 'output'}: {e['msg']}" for e in exc.errors()[:5]]
        raise MalformedOutput(problems, raw) from None
