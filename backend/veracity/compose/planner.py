"""The model planner: sub-questions with target sections and queries, then a reflection pass that checks the plan
covers the template and adds what is missing. Code bounds both: section ids are an enum of the template's, the
subtask and query counts are the template's budgets, the user's own words always lead the queries, and required
sections are routed whatever the model says. Output that does not parse falls back to the heuristic plan, and the
reason is recorded."""

from __future__ import annotations

import logging
from typing import Any

from pydantic import BaseModel, Field

from veracity.domain import Subtask
from veracity.errors import MalformedOutput
from veracity.models.chat import ChatModel
from veracity.models.output import parse_as
from veracity.prompts import load_prompt
from veracity.specs.models import Spec
from veracity.text import content_terms

logger = logging.getLogger(__name__)

MAX_QUESTION_CHARS = 300
MAX_QUERY_CHARS = 120


class PlannedSubtask(BaseModel):
    question: str = Field(max_length=MAX_QUESTION_CHARS)
    target_sections: list[str]
    queries: list[str] = Field(default_factory=list)


class Plan(BaseModel):
    subtasks: list[PlannedSubtask]


class MissingSection(BaseModel):
    section: str
    question: str = Field(max_length=MAX_QUESTION_CHARS)
    queries: list[str] = Field(default_factory=list)


class Reflection(BaseModel):
    missing: list[MissingSection]


def _string(max_length: int) -> dict[str, Any]:
    return {"type": "string", "maxLength": max_length}


def plan_schema(spec: Spec) -> dict[str, Any]:
    ids = [s.id for s in spec.evidence_sections]
    subtask = {
        "type": "object",
        "properties": {
            "question": _string(MAX_QUESTION_CHARS),
            "target_sections": {"type": "array", "items": {"type": "string", "enum": ids}, "minItems": 1},
            "queries": {
                "type": "array",
                "items": _string(MAX_QUERY_CHARS),
                "maxItems": spec.budgets.queries_per_subtask,
            },
        },
        "required": ["question", "target_sections", "queries"],
        "additionalProperties": False,
    }
    return {
        "type": "object",
        "properties": {
            "subtasks": {"type": "array", "items": subtask, "minItems": 1, "maxItems": spec.budgets.max_subtasks}
        },
        "required": ["subtasks"],
        "additionalProperties": False,
    }


def reflection_schema(spec: Spec) -> dict[str, Any]:
    missing = {
        "type": "object",
        "properties": {
            "section": {"type": "string", "enum": [s.id for s in spec.evidence_sections]},
            "question": _string(MAX_QUESTION_CHARS),
            "queries": {
                "type": "array",
                "items": _string(MAX_QUERY_CHARS),
                "maxItems": spec.budgets.queries_per_subtask,
            },
        },
        "required": ["section", "question", "queries"],
        "additionalProperties": False,
    }
    return {
        "type": "object",
        "properties": {"missing": {"type": "array", "items": missing, "maxItems": len(spec.evidence_sections)}},
        "required": ["missing"],
        "additionalProperties": False,
    }


def _sections_text(spec: Spec) -> str:
    return "\n".join(
        f"- {s.id}: {s.title} — {s.description}{' (required)' if s.required else ''}" for s in spec.evidence_sections
    )


class ModelPlanner:
    def __init__(self, chat: ChatModel) -> None:
        self.chat = chat
        self.name = f"model:{chat.model}"

    async def plan(self, question: str, spec: Spec) -> tuple[list[Subtask], list[str]]:
        """Subtasks, and the sections the reflection added (for the event and the audit)."""
        user = (
            f"Question: {question.strip()}\n\nSections (id: title — what goes there):\n{_sections_text(spec)}\n\n"
            f"At most {spec.budgets.max_subtasks} subtasks, {spec.budgets.queries_per_subtask} queries each."
        )
        plan = parse_as(await self.chat.complete(load_prompt("planner"), user, schema=plan_schema(spec)), Plan)
        subtasks = self._subtasks(question, spec, [(p.question, p.target_sections, p.queries) for p in plan.subtasks])
        routed = {sid for t in subtasks for sid in t.target_sections}
        room = spec.budgets.max_subtasks - len(subtasks)
        if room <= 0 or routed >= {s.id for s in spec.evidence_sections}:
            # Nothing the reflection says could change the plan: no call spent on it.
            return subtasks, []
        listing = "\n".join(f"- {t.id}: {t.question} → {', '.join(t.target_sections)}" for t in subtasks)
        reflect_user = f"Question: {question.strip()}\n\nSections:\n{_sections_text(spec)}\n\nPlan:\n{listing}"
        reflection = parse_as(
            await self.chat.complete(load_prompt("plan_reflection"), reflect_user, schema=reflection_schema(spec)),
            Reflection,
        )
        added = [m for m in reflection.missing if m.section not in routed]
        subtasks += self._subtasks(
            question, spec, [(m.question, [m.section], m.queries) for m in added[:room]], start=len(subtasks)
        )
        return subtasks, [m.section for m in added[:room]]

    @staticmethod
    def _subtasks(
        question: str, spec: Spec, planned: list[tuple[str, list[str], list[str]]], start: int = 0
    ) -> list[Subtask]:
        focus = content_terms(question)
        known = {s.id for s in spec.evidence_sections}
        out: list[Subtask] = []
        for question_text, targets, queries in planned[: spec.budgets.max_subtasks]:
            targets = [t for t in dict.fromkeys(targets) if t in known]
            if not targets:
                continue
            # The user's own words always lead: a model's rephrasing may drift, the question does not.
            own = " ".join(focus) or question.strip()
            extra = [q.strip() for q in queries if q.strip() and q.strip().lower() != own.lower()]
            out.append(
                Subtask(
                    id=f"st{start + len(out) + 1}",
                    question=question_text.strip() or question.strip(),
                    queries=[own, *extra][: spec.budgets.queries_per_subtask],
                    target_sections=targets,
                    focus_terms=focus,
                )
            )
        if not out and start == 0:
            raise MalformedOutput(["the plan routes no subtask to a section of the template"])
        return out
