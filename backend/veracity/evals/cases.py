"""``veracity eval``: every template's frozen eval cases, end to end, with the offline providers and the cases'
scripted model outputs, on a fresh throwaway SQLite database. Each case is graded on its outcome and on the
shape of what happened (which checks fired, how many attempts, the answer's language, and the invariants:
nothing shipped without anchors that resolve, nothing unsupported shipped, an escalation searched nothing and
called no model). Any miss is a regression: the command exits non-zero. Cases scripted ``via: openai`` run the
model-backed composer, judge and reviewer against the scripted OpenAI-compatible server on 127.0.0.1."""

from __future__ import annotations

import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from veracity.compose.extractive import ExtractiveComposer
from veracity.compose.scripted import ScriptedComposer, ScriptedReviewer
from veracity.db import runs_repo
from veracity.settings import Settings
from veracity.specs.models import EvalCase, Script, Spec
from veracity.specs.registry import SpecRegistry

if TYPE_CHECKING:
    from veracity.evals.scripted_openai import ScriptedOpenAI
    from veracity.runs.model_set import ModelSet
    from veracity.runs.providers import Providers


@dataclass
class CaseResult:
    spec: str
    case: str
    kind: str
    expected: str
    got: str
    checks: list[str]
    attempts: int
    problems: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def passed(self) -> bool:
        return not self.problems


def _case_spec(spec: Spec, case: EvalCase) -> Spec:
    if not case.composer_overrides:
        return spec
    composer = spec.composer.model_validate({**spec.composer.model_dump(), **case.composer_overrides})
    return spec.model_copy(update={"composer": composer})


def grade(
    case: EvalCase,
    *,
    spec: Spec,
    outcome: str,
    report: dict[str, Any] | None,
    events: list[str],
    audit: list[dict[str, Any]],
    composer_calls: int,
) -> tuple[list[str], list[str], int]:
    fired: set[str] = set()
    attempts = 0
    for entry in audit:
        attempts = max(attempts, entry["attempt"])
        payload = entry["payload"]
        if entry["stage"] == "checks":
            fired.update(v["check"] for v in payload.get("violations", []))
            if payload.get("filler_cut"):
                fired.add("filler_cut")
        if entry["stage"] == "gate":
            fired.update(p["check"] for p in payload["problems"])
        if entry["stage"] == "draft" and payload.get("malformed"):
            fired.add("truncated" if payload.get("truncated") else "malformed_output")
        if entry["stage"] == "draft" and payload.get("failure"):
            fired.add("model_error")
    problems: list[str] = []
    if outcome != case.expect_outcome:
        problems.append(f"outcome {outcome}, expected {case.expect_outcome}")
    missing = [c for c in case.expect_checks if c not in fired]
    if missing:
        problems.append(f"checks that did not fire: {', '.join(missing)}")
    if case.expect_attempts is not None and attempts != case.expect_attempts:
        problems.append(f"{attempts} drafting attempt(s), expected {case.expect_attempts}")
    if outcome in ("escalated", "crisis") and "retrieve_map_started" not in events:
        if composer_calls:
            problems.append(f"an escalation called the composer {composer_calls} time(s)")
    if outcome in ("escalated",) and "retrieve_map_started" in events:
        problems.append("an escalated run searched")
    if report is not None and outcome == "shipped":
        evidence = {e["id"] for e in report["evidence"]}
        for section in report["sections"]:
            for claim in section["claims"]:
                if not claim["evidence_ids"] or not set(claim["evidence_ids"]) <= evidence:
                    problems.append(f"shipped claim without resolving anchors: {claim['text'][:60]!r}")
                if claim.get("label") == "unsupported":
                    problems.append(f"shipped an unsupported claim: {claim['text'][:60]!r}")
        if spec.policy.disclaimer and not report.get("disclaimer"):
            problems.append("shipped without the disclaimer")
        shipped = [c["text"].lower() for s in report["sections"] for c in s["claims"]]
        problems += [f"no shipped claim says {p!r}" for p in case.expect_shipped if not _said(p, shipped)]
        problems += [f"a shipped claim says {p!r}" for p in case.forbid_shipped if _said(p, shipped)]
        labels = {c.get("label") for s in report["sections"] for c in s["claims"]}
        problems += [f"no shipped claim is labelled {label}" for label in case.expect_labels if label not in labels]
    if report is not None and case.expect_language and report.get("language") != case.expect_language:
        # A shipped answer's language, or the language the floor spoke.
        problems.append(f"answer language {report.get('language')}, expected {case.expect_language}")
    if report is not None and case.expect_statuses:
        statuses = {s["id"]: s.get("status") for s in report["sections"]}
        problems += [
            f"section {sid} is {statuses.get(sid)}, expected {status}"
            for sid, status in case.expect_statuses.items()
            if statuses.get(sid) != status
        ]
    return problems, sorted(fired), attempts


def _said(phrase: str, shipped: list[str]) -> bool:
    return any(phrase.lower() in text for text in shipped)


async def run_eval_cases(*, settings: Settings, spec_id: str | None = None) -> list[CaseResult]:
    import asyncio

    from veracity.runs.model_set import ModelSet
    from veracity.runs.providers import Providers
    from veracity.runs.runtime import open_runtime

    registry = SpecRegistry.load()
    specs = [registry.get(spec_id)] if spec_id else registry.all()
    results: list[CaseResult] = []
    llm: ScriptedOpenAI | None = None  # started for the first case that runs `via: openai`
    with tempfile.TemporaryDirectory(prefix="veracity-eval-") as tmp:
        url = f"sqlite+aiosqlite:///{Path(tmp) / 'eval.db'}"
        settings = settings.model_copy(
            update={
                "database": settings.database.model_copy(update={"url": url}),
                "limits": settings.limits.model_copy(update={"event_delay_ms": 0}),
            }
        )
        # The production wiring (open_runtime: hybrid retrieval when the semantic model loads); each case brings
        # its own composer, reviewer or scripted models, so the settings' models are never built.
        try:
            async with open_runtime(settings, models=ModelSet()) as rt:
                for spec in specs:
                    for case in spec.eval_cases:
                        began = time.perf_counter()
                        case_spec = _case_spec(spec, case)
                        service = rt.service_for(registry=SpecRegistry({spec.id: case_spec}))
                        script = case.script
                        models: ModelSet | None = None
                        composer = reviewer = None
                        if script and script.via == "openai":
                            if llm is None:
                                from veracity.evals.scripted_openai import ScriptedOpenAI

                                llm = ScriptedOpenAI()
                                await asyncio.to_thread(llm.start)
                            models, providers = scripted_models(llm, settings, script)
                        else:
                            composer = (
                                ScriptedComposer(script.texts("composer")) if script and script.composer else None
                            )
                            reviewer = (
                                ScriptedReviewer(script.texts("reviewer")) if script and script.reviewer else None
                            )
                            providers = Providers(composer=composer or ExtractiveComposer(), reviewer=reviewer)
                        try:
                            run_id = await service.start(
                                question=case.question, template=spec.id, corpus=case.corpus, providers=providers
                            )
                            await service.wait(run_id)
                        finally:
                            if models is not None:
                                await models.aclose()
                        async with rt.sessionmaker() as session:
                            run = await runs_repo.get_run(session=session, run_id=run_id)
                            artifact = await runs_repo.latest_artifact(session=session, run_id=run_id)
                            events = [e.name for e in await runs_repo.events_after(session=session, run_id=run_id)]
                            audit = [
                                {"stage": a.stage, "attempt": a.attempt, "payload": a.payload}
                                for a in await runs_repo.audit_trail(session=session, run_id=run_id)
                            ]
                        assert run is not None
                        outcome = run.outcome or (run.error or "failed")
                        problems, fired, attempts = grade(
                            case,
                            spec=case_spec,
                            outcome=outcome,
                            report=artifact.report if artifact else None,
                            events=events,
                            audit=audit,
                            composer_calls=(
                                len(llm.requests_for("composer"))
                                if models is not None and llm is not None
                                else len(composer.feedback)
                                if composer
                                else 0
                            ),
                        )
                        results.append(
                            CaseResult(
                                spec=spec.id,
                                case=case.id,
                                kind=case.kind,
                                expected=case.expect_outcome,
                                got=outcome,
                                checks=fired,
                                attempts=attempts,
                                problems=problems,
                                seconds=round(time.perf_counter() - began, 2),
                            )
                        )
        finally:
            if llm is not None:
                await asyncio.to_thread(llm.stop)
    return results


def scripted_models(llm: ScriptedOpenAI, settings: Settings, script: Script) -> tuple[ModelSet, Providers]:
    """The model-backed composer (and judge and reviewer when the script has their steps) against the scripted
    server, playing this case's steps; the offline judge labels the claims when no judge step is given."""
    from veracity.guards.judge import make_judge
    from veracity.runs.model_set import build_models
    from veracity.runs.providers import Providers

    llm.play({role: script.steps(role) for role in ("composer", "judge", "reviewer") if getattr(script, role)})
    model = settings.model.model_copy(
        update={
            "provider": "openai",
            "base_url": llm.base_url_v1,
            "composer_model": "composer",
            "judge_model": "judge",
            "reviewer_model": "reviewer",
            "timeout_seconds": 10.0,
            "max_retries": 0,
        }
    )
    models = build_models(settings.model_copy(update={"model": model}))
    assert models.composer is not None and models.judge is not None
    providers = Providers(
        composer=models.composer,
        judge=models.judge if script.judge else make_judge(),
        reviewer=models.reviewer if script.reviewer else None,
    )
    return models, providers


def format_results(results: list[CaseResult]) -> str:
    rows = [("template", "case", "kind", "expected", "got", "attempts", "checks fired", "result")]
    for r in results:
        rows.append(
            (
                r.spec,
                r.case,
                r.kind,
                r.expected,
                r.got,
                str(r.attempts),
                ", ".join(r.checks) or "-",
                "pass" if r.passed else "FAIL: " + "; ".join(r.problems),
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
    lines = ["  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row[:-1])) + "  " + row[-1] for row in rows]
    passed = sum(1 for r in results if r.passed)
    lines.append(f"\n{passed}/{len(results)} cases pass")
    return "\n".join(lines)
