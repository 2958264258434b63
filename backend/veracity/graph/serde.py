"""How the graph's checkpoints serialize its state. LangGraph's msgpack serializer stores a pydantic model as its
class's module and name plus its fields, and on load rebuilds it by importing that class — any class, with only a
warning, unless it is allow-listed. Here the allow-list is exactly the models the graph's state can hold, found by
walking the annotations of :class:`RunState` and the fan-out payloads (nested models included), so a model added to
the state is covered without a list to keep in step, and nothing else stored in a checkpoint is ever imported.

A model not on the list would come back as a plain dict and break the node that reads it only after a resume; the
round trip of a real run's state is a test (``tests/test_resume.py``)."""

from __future__ import annotations

import enum
import types
import typing
from typing import Any

from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from pydantic import BaseModel

from veracity.graph.state import RetrieveTask, RunInput, RunState, SynthesizeTask

STATE_TYPES: tuple[type, ...] = (RunState, RunInput, RetrieveTask, SynthesizeTask)
"""Everything a checkpoint holds: the state's channels and the payloads of pending ``Send``s."""


def _collect(annotation: Any, found: set[type], seen: set[int]) -> None:
    if id(annotation) in seen:
        return
    seen.add(id(annotation))
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        found.add(annotation)
        for field in annotation.model_fields.values():
            _collect(field.annotation, found, seen)
        return
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        found.add(annotation)
        return
    if typing.is_typeddict(annotation):
        for hint in typing.get_type_hints(annotation, include_extras=True).values():
            _collect(hint, found, seen)
        return
    if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is not None:
        for arg in typing.get_args(annotation):
            _collect(arg, found, seen)


def state_models() -> set[type]:
    """Every pydantic model (and enum) the graph's state and its fan-out payloads can hold."""
    found: set[type] = set()
    seen: set[int] = set()
    for holder in STATE_TYPES:
        _collect(holder, found, seen)
    return found


def state_serializer() -> JsonPlusSerializer:
    """The checkpoint serializer: LangGraph's, rebuilding only the state's own models (and its built-in safe types)."""
    allowed = sorted((t.__module__, t.__qualname__) for t in state_models())
    return JsonPlusSerializer(allowed_msgpack_modules=allowed)
