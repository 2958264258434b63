"""Pydantic models of a spec file. Unknown keys are refused so a typo in a YAML file fails loudly."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

_ID = re.compile(r"^[a-z][a-z0-9_]{0,63}$")


def _check_patterns(patterns: list[str]) -> list[str]:
    for pattern in patterns:
        try:
            re.compile(pattern)
        except re.error as exc:
            raise ValueError(f"pattern {pattern!r} is not a valid regular expression: {exc}") from exc
    return patterns


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class SectionSpec(Strict):
    id: str
    title: str
    description: str
    required: bool = False
    min_evidence: int = Field(default=1, ge=0, le=50)
    summary: bool = Field(default=False, description="Written after, and only from, the claims of the other sections.")
    answers: int = Field(
        default=0,
        ge=0,
        le=10,
        description="A direct answer: the section takes the run's N most relevant sentences first, whatever section "
        "their description fits.",
    )
    keywords: list[str] = Field(default_factory=list, description="Routing words for evidence → section.")
    query_hint: str = Field(
        default="{question}", description="How the heuristic planner phrases this section's sub-question."
    )

    @field_validator("id")
    @classmethod
    def _id(cls, value: str) -> str:
        if not _ID.match(value):
            raise ValueError("section ids are lower_snake_case")
        return value

    @field_validator("query_hint")
    @classmethod
    def _hint(cls, value: str) -> str:
        if "{question}" not in value:
            raise ValueError("query_hint must contain {question}")
        return value


class Budgets(Strict):
    max_subtasks: int = Field(default=6, ge=1, le=16)
    queries_per_subtask: int = Field(default=2, ge=1, le=8)
    max_pages: int = Field(default=32, ge=1, le=500)
    drafting_attempts: int = Field(default=2, ge=1, le=5)
    model_calls: int = Field(default=60, ge=0, description="Model calls one run may make (0 = no limit).")
    prompt_tokens: int = Field(default=200_000, ge=0, description="Prompt tokens one run may send (0 = no limit).")
    completion_tokens: int = Field(
        default=40_000, ge=0, description="Completion tokens one run may receive (0 = no limit)."
    )
    wall_seconds: float = Field(
        default=1800.0,
        ge=0,
        description=(
            "Wall time for a run's model calls, from its start (0 = no limit). The default leaves a 70B model on "
            "local hardware room for two drafts with their judge and reviewer calls."
        ),
    )


class ClassifierDomain(Strict):
    """What the router's classifier looks for behind the patterns: the words of one domain."""

    route: Literal["escalate", "crisis"]
    terms: list[str] = Field(description="Case-insensitive regular expressions matched at word boundaries.")

    @field_validator("terms")
    @classmethod
    def _compiles(cls, value: list[str]) -> list[str]:
        return _check_patterns(value)


class Policy(Strict):
    """The one policy source of a spec: the router, the composer, the checks and the floor all read it.

    Phrases and lexicon entries are case-insensitive regular expressions matched at word boundaries.
    ``packs`` names shared policy packs (``specs/packs/*.yaml``) merged in at load time; after loading,
    the lists hold the pack entries followed by the spec's own.
    """

    packs: list[str] = Field(default_factory=list)
    escalation_phrases: list[str] = Field(
        default_factory=list, description="A question about the asker's own situation: the run is escalated."
    )
    advice_phrases: list[str] = Field(
        default_factory=list, description="Advice-giving phrasing that must never appear in a written answer."
    )
    crisis_lexicon: list[str] = Field(default_factory=list, description="Language of crisis or self-harm.")
    classifier_domains: dict[str, ClassifierDomain] = Field(
        default_factory=dict, description="Pack id → the domain words the router's classifier scores."
    )
    disclaimer: dict[str, str] = Field(default_factory=dict, description="Disclaimer text per language code.")
    citation_pattern: str | None = Field(
        default=None, description="A citation the answer must contain (e.g. a statute section), when set."
    )
    forbidden_patterns: list[str] = Field(default_factory=list)
    escalation_answer: str = Field(
        default=(
            "This question asks about a personal situation, which this research desk does not advise on. "
            "Please speak to a qualified professional."
        ),
        description="The whole answer when the router escalates.",
    )
    crisis_answer: str = Field(
        default=(
            "It sounds like you may be going through something serious. Please contact local emergency "
            "services or a crisis line now; a real person can help."
        ),
        description="The whole answer when the router or reviewer detects a crisis.",
    )
    floor_note: str = Field(
        default=(
            "Veracity could not produce a report it can stand behind for this question, so it shows what it "
            "found instead."
        ),
        description="The honest first line of the floor answer.",
    )

    @field_validator("escalation_phrases", "advice_phrases", "crisis_lexicon", "forbidden_patterns")
    @classmethod
    def _compiles(cls, value: list[str]) -> list[str]:
        return _check_patterns(value)

    @field_validator("citation_pattern")
    @classmethod
    def _citation(cls, value: str | None) -> str | None:
        if value is not None:
            _check_patterns([value])
        return value


class PolicyPack(Policy):
    """A shared policy pack: the same fields as a spec's policy plus an id and a description."""

    id: str
    description: str


class ComposerDirectives(Strict):
    output: Literal["sections", "json_contract"] = Field(
        default="sections",
        description="`json_contract`: the answer is the strict JSON {answer, citations, confidence, needs_human}.",
    )
    min_chars: int = Field(default=0, ge=0)
    max_chars: int = Field(default=20000, ge=1)
    forbidden_patterns: list[str] = Field(default_factory=list)

    @model_validator(mode="after")
    def _range(self) -> ComposerDirectives:
        if self.min_chars > self.max_chars:
            raise ValueError("min_chars is larger than max_chars")
        _check_patterns(self.forbidden_patterns)
        return self


class QaPolicy(Strict):
    min_supported_required: int = Field(
        default=1, ge=0, description="Required sections that must be `supported` for the report to ship."
    )
    min_confidence: float = Field(
        default=0.0, ge=0.0, le=1.0, description="Below this confidence the outcome is `handoff` to a human."
    )
    ship_partial: bool = Field(
        default=False,
        description=(
            "A claim the judge labels `partial` ships with that label shown instead of handing the answer off: the "
            "confidence threshold counts it as supported (the reported confidence does not)."
        ),
    )


class RelevancePolicy(Strict):
    """How relevant a sentence must be to the question to be evidence, and a claim to ship."""

    min_relevance: float | None = Field(
        default=None,
        ge=0.0,
        le=1.0,
        description="Probability cut-off of the relevance model; unset = the cut-off fitted with the model.",
    )


class DefaultSource(Strict):
    kind: Literal["local", "web"] = "local"
    corpus: str = "wiki"


class ScriptStep(Strict):
    """One answer of the scripted OpenAI-compatible server (``veracity.evals.scripted_openai``), for cases that
    run ``via: openai``."""

    content: str = ""
    match: str | None = Field(
        default=None, description="Answer only a request whose claim or question contains these words."
    )
    finish_reason: Literal["stop", "length"] = Field(
        default="stop", description="`length`: the answer stopped at the token cap (a cut-off draft)."
    )
    reasoning: str | None = Field(default=None, description="The server's separate reasoning field.")
    status: int | None = Field(default=None, ge=400, le=599, description="Fail with this HTTP status instead.")
    stall: float | None = Field(default=None, ge=0, le=60, description="Seconds to wait before answering.")


class Script(Strict):
    """Recorded raw model outputs replayed in call order, per role (``{E1}``… name the run's evidence ids).

    ``via: replay`` (the default) hands the composer's and reviewer's texts straight to the parsers. ``via:
    openai`` serves every role's steps from the scripted OpenAI-compatible server on 127.0.0.1 to the real
    model-backed composer, judge and reviewer through the ``openai`` client — prompts, token caps, finish
    reasons, the judge's quote lookup, retries and usage records all as with a live model (``{E1}``, ``{Q1}``,
    ``{E:words}`` then name what the prompt listed). Without ``judge`` steps the offline judge labels the claims."""

    via: Literal["replay", "openai"] = "replay"
    composer: list[str | ScriptStep] = Field(default_factory=list)
    reviewer: list[str | ScriptStep] = Field(default_factory=list)
    judge: list[str | ScriptStep] = Field(default_factory=list)

    @model_validator(mode="after")
    def _replayable(self) -> Script:
        if self.via == "replay":
            if self.judge:
                raise ValueError("judge steps need `via: openai` (the model judge answers them)")
            if any(not isinstance(step, str) for step in self.composer + self.reviewer):
                raise ValueError("steps with options (match, finish_reason…) need `via: openai`")
        return self

    def texts(self, role: Literal["composer", "reviewer"]) -> list[str]:
        """A role's replayed texts (``via: replay``)."""
        return [step for step in getattr(self, role) if isinstance(step, str)]

    def steps(self, role: Literal["composer", "reviewer", "judge"]) -> list[dict[str, object]]:
        """A role's steps as the scripted server plays them (``via: openai``)."""
        return [
            {"content": step} if isinstance(step, str) else step.model_dump(exclude_none=True)
            for step in getattr(self, role)
        ]


class EvalCase(Strict):
    id: str
    question: str
    kind: Literal["happy", "boundary"] = "happy"
    expect_outcome: Literal["shipped", "escalated", "crisis", "handoff", "fallback", "store_artifact_loop_abort"]
    expect_checks: list[str] = Field(default_factory=list, description="Checks that must fire in some attempt.")
    expect_attempts: int | None = None
    expect_language: str | None = None
    corpus: str | None = Field(default=None, description="Run on this corpus instead of the template's default.")
    expect_shipped: list[str] = Field(
        default_factory=list, description="Phrases each of which must appear in some shipped claim."
    )
    forbid_shipped: list[str] = Field(
        default_factory=list, description="Phrases no shipped claim may contain (homonyms, off-topic text)."
    )
    expect_labels: list[Literal["supported", "partial"]] = Field(
        default_factory=list, description="Labels each of which some shipped claim must carry."
    )
    expect_statuses: dict[str, str] = Field(
        default_factory=dict, description="Section id → the status it must end with (supported, thin_evidence…)."
    )
    script: Script | None = Field(default=None, description="Scripted model outputs; none = offline providers.")
    composer_overrides: dict[str, object] = Field(
        default_factory=dict, description="Composer directives replaced for this case (e.g. an unmeetable min_chars)."
    )


class Spec(Strict):
    id: str
    title: str
    description: str
    done_means: str = Field(description="What a finished report of this template looks like, for the picker.")
    sections: list[SectionSpec] = Field(min_length=1)
    budgets: Budgets = Field(default_factory=Budgets)
    policy: Policy = Field(default_factory=Policy)
    composer: ComposerDirectives = Field(default_factory=ComposerDirectives)
    qa_policy: QaPolicy = Field(default_factory=QaPolicy)
    default_source: DefaultSource = Field(default_factory=DefaultSource)
    relevance: RelevancePolicy = Field(default_factory=RelevancePolicy)
    stale_after_days: int | None = Field(
        default=None, ge=1, description="Evidence published longer ago than this makes a section `stale`."
    )
    state_gaps: bool = Field(
        default=False,
        description="A shipped report names the question's names and figures that no shipped claim mentions.",
    )
    eval_cases: list[EvalCase] = Field(default_factory=list)

    @field_validator("id")
    @classmethod
    def _id(cls, value: str) -> str:
        if not _ID.match(value):
            raise ValueError("spec ids are lower_snake_case")
        return value

    @model_validator(mode="after")
    def _sections(self) -> Spec:
        ids = [s.id for s in self.sections]
        if len(set(ids)) != len(ids):
            raise ValueError(f"duplicate section ids in spec {self.id}")
        if all(s.summary for s in self.sections):
            raise ValueError("a spec needs at least one section that is not a summary")
        if bad := [s.id for s in self.sections if s.summary and s.answers]:
            raise ValueError(f"summary section(s) {', '.join(bad)} take no evidence, so cannot set answers")
        return self

    def section(self, section_id: str) -> SectionSpec:
        for section in self.sections:
            if section.id == section_id:
                return section
        raise KeyError(section_id)

    @property
    def evidence_sections(self) -> list[SectionSpec]:
        """Sections that take evidence directly (summaries are written from the others)."""
        return [s for s in self.sections if not s.summary]
