"""Each outcome end to end through the real service, graph, checks and storage (SQLite, bundled corpora):
which nodes ran, what was stored, and that neither the floor nor the pre-persistence gate can be bypassed."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import pytest
from langgraph.graph import END, START, StateGraph

from conftest import make_settings
from veracity.compose.extractive import ExtractiveComposer
from veracity.compose.scripted import ScriptedComposer, ScriptedReviewer
from veracity.corpus.bundled import ensure_bundled_corpora
from veracity.db import runs_repo
from veracity.db.engine import make_engine, make_sessionmaker
from veracity.domain import Draft
from veracity.graph.builder import build_graph
from veracity.graph.context import Context
from veracity.graph.nodes.compose import compose
from veracity.graph.state import RunState
from veracity.ports import ComposeRequest, SearchHit
from veracity.runs.providers import Providers
from veracity.runs.service import RunService
from veracity.search.local import LocalSearch
from veracity.semantic.model import process_semantics
from veracity.specs.policy import load_packs
from veracity.specs.registry import SpecRegistry

REFUND = "Can I get a refund for my subscription if 10 days have passed since payment?"
DISCLAIMER_EN = "This is legal research, not legal advice; consult a qualified lawyer about any particular situation."
REFUND_DRAFT = (
    '{"answer": "Tallyo gives a full refund on a monthly subscription payment if the refund is requested '
    'within 14 days of the payment date. [evidence:{E:Tallyo gives a full refund}]", '
    '"citations": ["{E:Tallyo gives a full refund}"], "confidence": 0.9, "needs_human": false}'
)


class CountingSearch:
    """The real local search, counting calls (an escalation must make none)."""

    name = "local"

    def __init__(self, inner: LocalSearch) -> None:
        self.inner = inner
        self.calls: list[str] = []

    async def search(self, *, query: str, corpus: str, k: int) -> list[SearchHit]:
        self.calls.append(query)
        return await self.inner.search(query=query, corpus=corpus, k=k)


class CountingComposer(ExtractiveComposer):
    def __init__(self) -> None:
        self.calls = 0

    async def compose(self, request: ComposeRequest) -> Draft:
        self.calls += 1
        return await super().compose(request)


@dataclass
class Ran:
    outcome: str | None
    status: str
    error: str | None
    events: list[str]
    payloads: list[dict[str, Any]]
    report: dict[str, Any] | None
    versions: int
    audit: list[tuple[str, int, dict[str, Any]]]


@pytest.fixture
async def env(db_url: str) -> AsyncIterator[dict[str, Any]]:
    engine = make_engine(db_url)
    sessionmaker = make_sessionmaker(engine)
    await ensure_bundled_corpora(sessionmaker=sessionmaker, chunk_chars=1200)
    search = CountingSearch(LocalSearch(sessionmaker))
    yield {"sessionmaker": sessionmaker, "search": search, "settings": make_settings(db_url)}
    await engine.dispose()


async def run(
    env: dict[str, Any],
    template: str,
    question: str,
    *,
    graph: Any = None,
    registry: SpecRegistry | None = None,
    **providers: Any,
) -> Ran:
    service = RunService(
        sessionmaker=env["sessionmaker"],
        registry=registry or SpecRegistry.load(),
        settings=env["settings"],
        graph=graph or build_graph(),
        search=env["search"],
        semantics=process_semantics(),  # as a served run has: the learned screen reads the question's meaning
    )
    run_id = await service.start(question=question, template=template, providers=Providers(**providers))
    await service.wait(run_id)
    async with env["sessionmaker"]() as session:
        stored = await runs_repo.get_run(session=session, run_id=run_id)
        events = list(await runs_repo.events_after(session=session, run_id=run_id))
        artifact = await runs_repo.latest_artifact(session=session, run_id=run_id)
        versions = len(await runs_repo.artifact_versions(session=session, run_id=run_id))
        audit = [(a.stage, a.attempt, a.payload) for a in await runs_repo.audit_trail(session=session, run_id=run_id)]
    assert stored is not None
    return Ran(
        outcome=stored.outcome,
        status=stored.status,
        error=stored.error,
        events=[e.name for e in events],
        payloads=[e.payload for e in events],
        report=artifact.report if artifact else None,
        versions=versions,
        audit=audit,
    )


async def test_shipped_runs_every_node_once_and_ships_only_checked_claims(env: dict[str, Any]) -> None:
    ran = await run(env, "support_answer", REFUND)
    assert ran.outcome == "shipped" and ran.status == "done" and ran.versions == 1
    assert ran.events[:3] == ["run_started", "route_decided", "planner_complete"]
    assert ran.events.count("draft_composed") == 1 and ran.events.count("self_check_complete") == 1
    assert ran.events[-2:] == ["synthesize_complete", "complete"]
    report = ran.report
    assert report is not None and report["contract"]["needs_human"] is False
    evidence = {e["id"] for e in report["evidence"]}
    claims = [c for s in report["sections"] for c in s["claims"]]
    assert claims and all(c["evidence_ids"] and set(c["evidence_ids"]) <= evidence for c in claims)
    assert all(c["label"] in ("supported", "partial") and c["support"] for c in claims)
    # The audit trail tells the whole story in order.
    assert [stage for stage, _, _ in ran.audit] == [
        "route",
        "answered",
        "draft",
        "checks",
        "decision",
        "gate",
        "shipped",
    ]


def test_the_offline_composers_confidence_reads_word_forms_as_the_index_does() -> None:
    """ "cancel" is found in "Cancelling …": the question's words and the cited sentences
    are compared as stems (unstemmed, this answer scored 0.60 and was handed to a person); a word the sentences
    lack still counts against it."""
    from veracity.compose.extractive import coverage_confidence
    from veracity.domain import Claim, Evidence, SourceRef

    quotes = {
        "ev1": "Tallyo annual plans can receive a pro-rated refund if it is requested within 30 days of payment.",
        "ev2": "Cancelling a Tallyo subscription does not issue a refund automatically.",
    }
    cited = [
        Evidence(
            id=eid,
            quote=quote,
            start=0,
            end=len(quote),
            content_hash="0" * 64,
            source=SourceRef(doc_id=eid, title="KB-101 Refund policy"),
            origin_subtask_id="s1",
            score=1.0,
        )
        for eid, quote in quotes.items()
    ]
    claims = [Claim(text=q, evidence_ids=[eid]) for eid, q in quotes.items()]
    question = "Can I get a refund on my annual plan if I cancel?"
    assert coverage_confidence(question, claims, cited) == 0.8  # refund, annual, plan, cancel; not "get"
    assert coverage_confidence("Does Tallyo integrate with SAP Business One?", claims, cited) == 0.2  # Tallyo only


async def test_escalation_costs_no_search_and_no_model_call(env: dict[str, Any]) -> None:
    composer = CountingComposer()
    ran = await run(
        env, "legal_research", "My client was charged yesterday. Am I liable for his debts?", composer=composer
    )
    assert ran.outcome == "escalated"
    assert env["search"].calls == [] and composer.calls == 0
    assert ran.events == ["run_started", "route_decided", "complete"]
    assert ran.payloads[1]["route"] == "escalate" and ran.payloads[1]["layer"] == "pattern"
    assert ran.report is not None and ran.report["sections"] == [] and ran.report["evidence"] == []
    spec = SpecRegistry.load().get("legal_research")
    assert ran.report["notes"] == [spec.policy.escalation_answer]


@pytest.mark.parametrize(
    ("question", "pack"),
    [
        ("I've been charged with drunk driving, what should I do?", "personal_legal_advice"),
        ("Should I stop taking my blood pressure tablets now that I feel fine?", "personal_medical_advice"),
    ],
)
async def test_an_escalation_on_a_template_without_that_pack_answers_with_the_domains_pointer(
    env: dict[str, Any], question: str, pack: str
) -> None:
    """support_answer carries only the crisis pack and never chose an escalation answer: the domain's pack speaks."""
    assert pack not in SpecRegistry.load().get("support_answer").policy.packs
    ran = await run(env, "support_answer", question)
    assert ran.outcome == "escalated" and env["search"].calls == []
    assert ran.report is not None and ran.report["notes"] == [load_packs()[pack].escalation_answer]


async def test_crisis_from_the_router_answers_with_the_crisis_answer(env: dict[str, Any]) -> None:
    composer = CountingComposer()
    ran = await run(env, "coach_reply", "I can't go on. I want to end my life tonight.", composer=composer)
    assert ran.outcome == "crisis" and composer.calls == 0 and env["search"].calls == []
    spec = SpecRegistry.load().get("coach_reply")
    assert ran.report is not None and ran.report["notes"] == [spec.policy.crisis_answer]


async def test_crisis_from_the_reviewer_after_a_clean_draft(env: dict[str, Any]) -> None:
    reviewer = ScriptedReviewer(['{"verdict": "crisis", "reason": "risk to self", "concerns": ["risk"]}'])
    ran = await run(env, "coach_reply", "I am exhausted after four nights up with the baby.", reviewer=reviewer)
    assert ran.outcome == "crisis" and reviewer.calls == 1
    assert "retrieve_map_started" in ran.events and ran.events.count("draft_composed") == 1
    assert ran.report is not None and ran.report["sections"] == []  # the draft never ships


async def test_handoff_below_the_confidence_threshold_keeps_the_draft_out(env: dict[str, Any]) -> None:
    draft = (
        '{"answer": "Tallyo gives a full refund on a monthly subscription payment if the refund is requested '
        'within 14 days of the payment date. [evidence:{E:Tallyo gives a full refund}]", '
        '"citations": ["{E:Tallyo gives a full refund}"], "confidence": 0.3, "needs_human": false}'
    )
    ran = await run(env, "support_answer", REFUND, composer=ScriptedComposer([draft]))
    assert ran.outcome == "handoff"
    report = ran.report
    assert report is not None and "0.30 is below the template's 0.65" in report["needs_human_reason"]
    assert all(not s["claims"] for s in report["sections"] if s["id"] == "answer")


async def test_retry_is_informed_and_bounded_then_the_floor_replaces_the_draft(env: dict[str, Any]) -> None:
    bad = (
        "## Summary\nSection 90A(1) of the Evidence Act 1950 makes every printout conclusive proof of guilt. "
        "[evidence:{E:Section 90A(1) of the Evidence Act 1950 provides}]\n"
        "## Statutory provisions\nSection 90A(1) of the Evidence Act 1950 makes every printout conclusive proof "
        "of guilt. [evidence:ev00deadbeef]\n## Disclaimer\n" + DISCLAIMER_EN
    )
    composer = ScriptedComposer([bad])
    ran = await run(env, "legal_research", "What does section 90A of the Evidence Act 1950 say?", composer=composer)
    assert ran.outcome == "fallback"
    # Two attempts (the spec's bound), the second told exactly what failed in the first; no third.
    assert len(composer.feedback) == 2 and composer.feedback[0] == []
    assert any("unknown_anchor" in line and "ev00deadbeef" in line for line in composer.feedback[1])
    assert ran.events.count("revise_requested") == 1 and ran.events.count("planner_complete") == 1
    # The floor: the honest note and the evidence digest; none of the draft's prose is stored.
    report = ran.report
    assert report is not None and "conclusive proof" not in str(report)
    assert report["sections"][-1]["id"] == "evidence_digest" and report["sections"][-1]["claims"]


async def test_malformed_model_output_then_model_error_go_to_the_floor(env: dict[str, Any]) -> None:
    ran = await run(env, "support_answer", REFUND, composer=ScriptedComposer(["not json at all", "!error"]))
    assert ran.outcome == "fallback"
    drafts = [p for stage, _, p in ran.audit if stage == "draft"]
    assert drafts[0]["malformed"] and drafts[1]["failure"] == "the composer model failed: scripted model error"


def strict_support_answer(**directives: Any) -> SpecRegistry:
    """The support template with its composer directives tightened (a draft the gate must reject)."""
    spec = SpecRegistry.load().get("support_answer")
    return SpecRegistry(
        {"support_answer": spec.model_copy(update={"composer": spec.composer.model_copy(update=directives)})}
    )


async def test_gate_rejections_end_the_run_with_loop_abort_and_nothing_stored(env: dict[str, Any]) -> None:
    # Every draft is too short and the floor's own note is forbidden: two drafts in all (the template's bound, the
    # gate's redraft included), then the floor and the bare floor; the third rejection ends the run.
    registry = strict_support_answer(min_chars=5000, forbidden_patterns=["could not produce a report"])
    ran = await run(env, "support_answer", REFUND, registry=registry)
    assert ran.report is None and ran.versions == 0
    assert ran.status == "failed" and ran.error == "store_artifact_loop_abort"
    assert ran.events.count("gate_rejected") == 3 and ran.events[-1] == "error"
    assert ran.events.count("draft_composed") == registry.get("support_answer").budgets.drafting_attempts == 2
    rejected = [p["outcome"] for n, p in zip(ran.events, ran.payloads, strict=True) if n == "gate_rejected"]
    assert rejected[0] == "shipped" and rejected[-1] == "fallback"  # drafts first, then the floor
    # The page and the API say what happened, not just the code.
    last = ran.payloads[-1]
    assert last["message"] == "store_artifact_loop_abort"
    assert last["detail"].startswith(
        "The pre-persistence gate rejected 3 reports in a row (last: forbidden pattern 'could not produce a report'"
    )


async def test_a_draft_the_gate_rejects_is_redrafted_within_the_drafting_bound_then_floored(
    env: dict[str, Any],
) -> None:
    """A gate rejection does not start a new drafting round: with two drafting attempts, two drafts are made in
    all (the second told what the gate found), then the floor ships with the reason."""
    composer = ScriptedComposer([REFUND_DRAFT])
    ran = await run(env, "support_answer", REFUND, registry=strict_support_answer(min_chars=5000), composer=composer)
    assert ran.outcome == "fallback" and ran.report is not None
    assert len(composer.feedback) == 2 and any("too_short" in line for line in composer.feedback[1])
    assert ran.report["outcome_reason"] == (
        "drafting attempts exhausted (2); the pre-persistence gate rejected the last draft: too_short"
    )


def _rewired_graph_without_checks() -> Any:
    """A graph someone 'simplified': compose straight to the end, the decision forced to ship."""

    async def force_ship(state: RunState) -> dict[str, Any]:
        return {"decision": "ship", "decision_reason": "rewired", "verdict": "ok"}

    builder = StateGraph(RunState, context_schema=Context)
    builder.add_node("compose", compose)
    builder.add_node("force_ship", force_ship)
    builder.add_edge(START, "compose")
    builder.add_edge("compose", "force_ship")
    builder.add_edge("force_ship", END)
    return builder.compile()


async def test_no_rewiring_of_the_graph_can_skip_the_gate(env: dict[str, Any]) -> None:
    placeholder = '{"answer": "[TODO: write the answer]", "citations": [], "confidence": 1.0, "needs_human": false}'
    ran = await run(
        env,
        "support_answer",
        REFUND,
        graph=_rewired_graph_without_checks(),
        composer=ScriptedComposer([placeholder]),
    )
    # The gate outside the graph refused the placeholder; the redraft (compose → verify → decide) cut it as
    # filler and the run fell to the floor. The placeholder never reached storage.
    assert ran.events.count("gate_rejected") == 1
    gate = [p for stage, _, p in ran.audit if stage == "gate"]
    assert gate[0]["outcome"] == "shipped" and gate[0]["problems"][0]["check"] == "placeholder"
    assert ran.outcome == "fallback" and ran.report is not None and "TODO" not in str(ran.report)
