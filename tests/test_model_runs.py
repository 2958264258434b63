"""Model providers end to end: the real ``openai`` client over real HTTP against a scripted OpenAI-compatible server
on 127.0.0.1 (``veracity.evals.scripted_openai``), through the real service, graph, checks and storage. Each
recorded output has the guard outcome a user must see: good drafts ship, fabricated anchors and uncited claims are
sent back then floored, malformed output is a recorded violation, a 429 is retried, a timeout falls to the floor,
``<think>`` blocks are stripped, a spent budget degrades to the floor with its reason."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from conftest import make_settings
from veracity.corpus.bundled import ensure_bundled_corpora
from veracity.db import runs_repo
from veracity.db.engine import make_engine, make_sessionmaker
from veracity.domain import Evidence
from veracity.evals.scripted_openai import ScriptedOpenAI
from veracity.graph.builder import build_graph
from veracity.guards.judge import make_judge
from veracity.runs.model_set import build_models
from veracity.runs.providers import Providers
from veracity.runs.service import RunService
from veracity.search.local import LocalSearch
from veracity.semantic.model import process_semantics
from veracity.settings import Settings
from veracity.specs.registry import SpecRegistry

QUESTION = "What does section 90A of the Evidence Act 1950 say about documents produced by computers?"
# A faithful model: the sentences of the evidence it was shown, each with that evidence's anchor.
GOOD = "## Summary\n{Q1} [evidence:{E1}]\n\n## Statutory provisions\n{Q1} [evidence:{E1}]\n{Q2} [evidence:{E2}]\n"
FABRICATED = "## Summary\n{Q1} [evidence:{EX}]\n\n## Statutory provisions\n{Q1} [evidence:{EX}]\n"
UNCITED = "## Summary\n{Q1}\n\n## Statutory provisions\n{Q1}\nComputers never fail in court.\n"
REVIEW_OK = '{"verdict": "ok", "reason": "grounded", "concerns": []}'


@pytest.fixture(scope="module")
def llm() -> Iterator[ScriptedOpenAI]:
    with ScriptedOpenAI() as server:
        yield server


@pytest.fixture
async def env(db_url: str, llm: ScriptedOpenAI) -> AsyncIterator[dict[str, Any]]:
    llm.play({})
    engine = make_engine(db_url)
    sessionmaker = make_sessionmaker(engine)
    await ensure_bundled_corpora(sessionmaker=sessionmaker, chunk_chars=1200)
    yield {"sessionmaker": sessionmaker, "db_url": db_url}
    await engine.dispose()


def settings_for(env: dict[str, Any], llm: ScriptedOpenAI, **model: Any) -> Settings:
    base = make_settings(env["db_url"])
    cfg = {
        "provider": "openai",
        "base_url": llm.base_url_v1,
        "composer_model": "composer",
        "judge_model": "judge",
        "reviewer_model": "reviewer",
        "timeout_seconds": 5.0,
        "max_retries": 0,
        **model,
    }
    return base.model_copy(update={"model": base.model.model_copy(update=cfg)})


async def run(
    env: dict[str, Any],
    settings: Settings,
    *,
    template: str = "legal_research",
    lexical_judge: bool = True,
    registry: SpecRegistry | None = None,
    with_planner: bool = False,
    question: str = QUESTION,
) -> dict[str, Any]:
    """One run with the model composer and reviewer (and the model judge unless ``lexical_judge``)."""
    models = build_models(settings)
    assert models.composer is not None and models.judge is not None
    providers = Providers(
        composer=models.composer,
        judge=make_judge() if lexical_judge else models.judge,
        reviewer=models.reviewer,
        planner=models.planner if with_planner else None,
    )
    try:
        service = RunService(
            sessionmaker=env["sessionmaker"],
            registry=registry or SpecRegistry.load(),
            settings=settings,
            graph=build_graph(),
            search=LocalSearch(env["sessionmaker"]),
            providers=lambda: providers,
            semantics=process_semantics(),  # as a served run has it: relevance, the screen
        )
        run_id = await service.start(question=question, template=template)
        await service.wait(run_id)
    finally:
        await models.aclose()
    async with env["sessionmaker"]() as session:
        events = [(e.name, e.payload) for e in await runs_repo.events_after(session=session, run_id=run_id)]
        artifact = await runs_repo.latest_artifact(session=session, run_id=run_id)
        audit = [(a.stage, a.payload) for a in await runs_repo.audit_trail(session=session, run_id=run_id)]
    assert artifact is not None, [n for n, _ in events]
    return {"report": artifact.report, "events": events, "audit": audit}


def fired(result: dict[str, Any]) -> set[str]:
    return {v["check"] for n, p in result["events"] if n == "self_check_complete" for v in p.get("violations", [])}


async def test_a_faithful_model_draft_ships_with_its_usage_counted_and_streamed(
    env: dict[str, Any], llm: ScriptedOpenAI
) -> None:
    llm.play({"composer": [{"content": GOOD}], "reviewer": [{"content": REVIEW_OK}], "judge": [{"judge": "echo"}]})
    result = await run(env, settings_for(env, llm), lexical_judge=False)
    report = result["report"]
    assert report["outcome"] == "shipped"
    claims = [c for s in report["sections"] for c in s["claims"]]
    assert claims and all(c["label"] == "supported" for c in claims)
    # The model wrote no disclaimer (GOOD has none); code added the policy's, in the draft's language.
    assert report["disclaimer"] == (
        "This is legal research, not legal advice; consult a qualified lawyer about any particular situation."
    )
    calls = [p for n, p in result["events"] if n == "model_call"]
    assert [c["role"] for c in calls].count("composer") == 1 and {"judge", "reviewer"} <= {c["role"] for c in calls}
    assert calls[-1]["totals"]["calls"] == len(calls) == len(llm.requests)
    assert report["metrics"]["model"]["calls"] == len(calls) and report["metrics"]["model"]["prompt_tokens"] > 0
    # The composer was asked at temperature 0 with a token cap and a schema whose anchors can only be the evidence
    # ids it was shown (this server answers in Markdown anyway, which the parser also reads); the judge likewise.
    composer_request = llm.requests_for("composer")[0]
    assert composer_request["temperature"] == 0 and composer_request["max_tokens"] == 1500
    schema = composer_request["response_format"]["json_schema"]["schema"]
    sentence = schema["properties"]["sections"]["items"]["properties"]["sentences"]["items"]
    allowed = sentence["properties"]["evidence_ids"]["items"]["enum"]
    shown = re.findall(r"\[evidence:([A-Za-z0-9_-]+)\]", composer_request["messages"][1]["content"])
    assert allowed == list(dict.fromkeys(shown)) and allowed
    assert llm.requests_for("judge")[0]["response_format"]["type"] == "json_schema"
    drafts = [p for stage, p in result["audit"] if stage == "draft"]
    assert drafts and "[evidence:ev" in drafts[0]["raw"]  # what the model wrote, kept in the audit trail


async def test_fabricated_anchors_are_sent_back_with_the_reason_then_floored(
    env: dict[str, Any], llm: ScriptedOpenAI
) -> None:
    llm.play({"composer": [{"content": FABRICATED}], "reviewer": [{"content": REVIEW_OK}]})
    result = await run(env, settings_for(env, llm))
    assert result["report"]["outcome"] == "fallback"
    assert "unknown_anchor" in fired(result)
    second = llm.requests_for("composer")[1]["messages"][1]["content"]
    assert "What was wrong with your last draft" in second and "evneverseen0" in second
    assert len(llm.requests_for("composer")) == 2  # the spec's two drafting attempts, no more


async def test_an_uncited_claim_is_retried_informed_and_the_fixed_draft_ships(
    env: dict[str, Any], llm: ScriptedOpenAI
) -> None:
    llm.play({"composer": [{"content": UNCITED}, {"content": GOOD}], "reviewer": [{"content": REVIEW_OK}]})
    result = await run(env, settings_for(env, llm))
    assert result["report"]["outcome"] == "shipped"
    assert "uncited_claim" in fired(result)
    assert "Computers never fail in court" not in str(result["report"]["sections"])
    assert "uncited_claim" in llm.requests_for("composer")[1]["messages"][1]["content"]


async def test_malformed_contract_json_is_a_violation_then_the_floor(env: dict[str, Any], llm: ScriptedOpenAI) -> None:
    llm.play({"composer": [{"content": '{"answer": "Reset your password [evidence:{E1}]", "citations": '}]})
    refund = "Can I get a refund for my subscription if 10 days have passed since payment?"  # evidence exists
    result = await run(env, settings_for(env, llm), template="support_answer", question=refund)
    assert result["report"]["outcome"] == "fallback"
    composed = [p for n, p in result["events"] if n == "draft_composed"]
    assert len(composed) == 2 and all(p["malformed"] for p in composed)
    assert llm.requests_for("composer")[0]["response_format"]["type"] == "json_schema"


async def test_a_429_is_retried_by_the_client_and_the_run_ships(env: dict[str, Any], llm: ScriptedOpenAI) -> None:
    llm.play({"composer": [{"status": 429}, {"content": GOOD}], "reviewer": [{"content": REVIEW_OK}]})
    result = await run(env, settings_for(env, llm, max_retries=2))
    assert result["report"]["outcome"] == "shipped"
    assert len(llm.requests_for("composer")) == 2


async def test_a_model_that_times_out_sends_the_run_to_the_floor_with_the_reason(
    env: dict[str, Any], llm: ScriptedOpenAI
) -> None:
    llm.play({"composer": [{"stall": 2.0, "content": GOOD}]})
    result = await run(env, settings_for(env, llm, timeout_seconds=0.5))
    report = result["report"]
    assert report["outcome"] == "fallback" and "timed out" in (report.get("outcome_reason") or "")


async def test_a_structured_json_draft_is_read_and_its_sentences_anchored(
    env: dict[str, Any], llm: ScriptedOpenAI
) -> None:
    draft = (
        '{"sections": [{"title": "Summary", "sentences": [{"text": "{Q1}", "evidence_ids": ["{E1}"]}]},'
        ' {"title": "Statutory provisions", "sentences": [{"text": "{Q2}", "evidence_ids": ["{E2}"]}]}]}'
    )
    llm.play({"composer": [{"content": draft}], "reviewer": [{"content": REVIEW_OK}]})
    result = await run(env, settings_for(env, llm))
    assert result["report"]["outcome"] == "shipped"
    sections = {s["id"]: s["claims"] for s in result["report"]["sections"]}
    assert sections["summary"] and sections["provisions"]
    assert all(c["evidence_ids"] for claims in sections.values() for c in claims)


async def test_think_blocks_are_stripped_before_parsing(env: dict[str, Any], llm: ScriptedOpenAI) -> None:
    thinking = "<think>The user wants section 90A. I could add that courts love printouts.</think>\n" + GOOD
    llm.play({"composer": [{"content": thinking}], "reviewer": [{"content": REVIEW_OK}]})
    result = await run(env, settings_for(env, llm))
    assert result["report"]["outcome"] == "shipped"
    assert "courts love printouts" not in str(result["report"])


async def test_a_spent_model_call_budget_degrades_to_the_floor_with_the_budget_named(
    env: dict[str, Any], llm: ScriptedOpenAI
) -> None:
    llm.play({"composer": [{"content": GOOD}], "reviewer": [{"content": REVIEW_OK}], "judge": [{"judge": "echo"}]})
    specs = SpecRegistry.load()
    spec = specs.get("legal_research")
    tight = spec.model_copy(update={"budgets": spec.budgets.model_copy(update={"model_calls": 2})})
    result = await run(
        env, settings_for(env, llm), lexical_judge=False, registry=SpecRegistry({"legal_research": tight})
    )
    report = result["report"]
    assert report["outcome"] == "fallback"
    assert "model call budget spent (2 calls)" in (report.get("outcome_reason") or "")
    assert len(llm.requests) == 2  # the third call was refused before it was sent


MS_QUESTION = "Apakah peruntukan seksyen 90A Akta Keterangan 1950 tentang dokumen komputer?"
EN_DISCLAIMER = "This is legal research, not legal advice; consult a qualified lawyer about any particular situation."
MS_DISCLAIMER = (
    "Ini ialah penyelidikan undang-undang, bukan nasihat undang-undang; rujuk peguam yang bertauliah untuk sebarang "
    "keadaan tertentu."
)
# A short Malay answer (verbatim from the bundled Malay note) under English headings, with the English disclaimer a
# small model copied from its instructions: the raw text reads as English, the answer is Malay.
CITED_90A4 = "Seksyen 90A(4) menganggap komputer itu berfungsi. [evidence:{E:Seksyen 90A(4) menganggap}]"
SHORT_MALAY = f"## Summary\n{CITED_90A4}\n\n## Statutory provisions\n{CITED_90A4}\n\n## Disclaimer\n{EN_DISCLAIMER}\n"


async def test_a_short_malay_answer_gets_the_malay_disclaimer_and_ships_without_a_revise(
    env: dict[str, Any], llm: ScriptedOpenAI
) -> None:
    llm.play(
        {"composer": [{"content": SHORT_MALAY}], "reviewer": [{"content": REVIEW_OK}], "judge": [{"judge": "echo"}]}
    )
    spec = SpecRegistry.load().get("legal_research")
    short = spec.model_copy(update={"composer": spec.composer.model_copy(update={"min_chars": 0})})
    result = await run(
        env,
        settings_for(env, llm),
        lexical_judge=False,
        registry=SpecRegistry({"legal_research": short}),
        question=MS_QUESTION,
    )
    report = result["report"]
    prompt = llm.requests_for("composer")[0]["messages"][1]["content"]
    listed = re.findall(r"^\[evidence:\w+\] (.*)$", prompt, re.M)
    assert any(q.startswith("Seksyen 90A(4) menganggap") for q in listed)  # the sentence the script cites
    assert not {"disclaimer_language", "disclaimer_missing"} & fired(result)
    assert report["outcome"] == "shipped" and report["disclaimer"] == MS_DISCLAIMER
    assert len(llm.requests_for("composer")) == 1  # no revise spent on the disclaimer


def test_the_circuit_opens_after_repeated_failures_and_lets_one_call_through_after_the_cooldown(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from veracity.errors import ModelError
    from veracity.models import usage

    now = [1000.0]
    monkeypatch.setattr(usage.time, "monotonic", lambda: now[0])
    circuit = usage.Circuit(threshold=3, cooldown_seconds=30.0)
    for _ in range(2):
        circuit.failure()
    circuit.check("m")  # two failures: still closed
    circuit.failure()
    with pytest.raises(ModelError, match="3 failed calls in a row"):
        circuit.check("m")
    now[0] += 29.0
    with pytest.raises(ModelError, match="3 failed calls in a row"):
        circuit.check("m")  # still cooling down
    now[0] += 1.0
    circuit.check("m")  # half-open: one call may try
    circuit.failure()  # ... and it failed: open again at once, for a whole cooldown
    with pytest.raises(ModelError, match="4 failed calls in a row"):
        circuit.check("m")
    now[0] += 30.0
    circuit.check("m")  # half-open again
    circuit.success()
    assert circuit.failures == 0 and circuit.opened_at is None
    circuit.check("m")


async def test_failures_counted_across_roles_open_the_one_circuit_for_every_role(
    env: dict[str, Any], llm: ScriptedOpenAI
) -> None:
    from veracity.compose.model import ModelComposer
    from veracity.compose.planner import ModelPlanner
    from veracity.errors import ModelError
    from veracity.guards.model import ModelJudge, ModelReviewer

    llm.play({"*": [{"status": 500}]})
    models = build_models(settings_for(env, llm, planner_model="planner"))
    try:
        composer, judge, reviewer, planner = models.composer, models.judge, models.reviewer, models.planner
        assert isinstance(composer, ModelComposer) and isinstance(judge, ModelJudge)
        assert isinstance(reviewer, ModelReviewer) and isinstance(planner, ModelPlanner)
        chats = [composer.prose, composer.contract, judge.chat, reviewer.chat, planner.chat]
        assert len({id(chat.circuit) for chat in chats}) == 1
        for chat in (composer.prose, judge.chat, reviewer.chat):  # one failure each: three in a row on the server
            with pytest.raises(ModelError, match="HTTP 500"):
                await chat.complete("system", "user")
        for chat in chats:
            with pytest.raises(ModelError, match="3 failed calls in a row"):
                await chat.complete("system", "user")
        assert len(llm.requests) == 3  # an open circuit sends nothing, whichever role calls
    finally:
        await models.aclose()


def test_the_usage_meter_refuses_calls_past_each_budget_and_prices_known_models() -> None:
    from veracity.errors import BudgetExceeded
    from veracity.models.usage import UsageMeter

    meter = UsageMeter(max_calls=0, max_prompt_tokens=1000, max_completion_tokens=0, max_seconds=0)
    meter.before_call("composer")
    row = meter.record(role="composer", model="gpt-4.1-mini", prompt_tokens=1000, completion_tokens=500, ms=10.0)
    assert row["cost_usd"] == pytest.approx((1000 * 0.40 + 500 * 1.60) / 1e6)
    with pytest.raises(BudgetExceeded, match="prompt token budget spent"):
        meter.before_call("judge")
    local = UsageMeter()
    local.record(role="judge", model="smollm2", prompt_tokens=10, completion_tokens=5, ms=1.0)
    assert local.totals()["cost_usd"] is None  # an unknown model's cost is not made up


PLAN = (
    '{"subtasks": [{"question": "What does section 90A provide?", "target_sections": ["provisions"],'
    ' "queries": ["section 90A computer document admissible"]}]}'
)


async def test_the_model_planner_plans_and_its_reflection_adds_the_uncovered_section(
    env: dict[str, Any], llm: ScriptedOpenAI
) -> None:
    reflection = (
        '{"missing": [{"section": "application", "question": "How do courts apply section 90A?",'
        ' "queries": ["section 90A certificate court"]}]}'
    )
    llm.play(
        {
            "planner": [{"content": PLAN}, {"content": reflection}],
            "composer": [{"content": GOOD}],
            "reviewer": [{"content": REVIEW_OK}],
        }
    )
    result = await run(env, settings_for(env, llm, planner_model="planner"), with_planner=True)
    planned = next(p for n, p in result["events"] if n == "planner_complete")
    assert planned["planner"] == "model:planner" and planned["reflection_added"] == ["application"]
    subtasks = planned["subtasks"]
    assert [t["target_sections"] for t in subtasks] == [["provisions"], ["application"]]
    # The user's own words lead every subtask's queries; the model's queries follow.
    assert all(t["queries"][0].startswith("section 90a evidence act 1950") for t in subtasks)
    assert subtasks[0]["queries"][1] == "section 90A computer document admissible"
    schema = llm.requests_for("planner")[0]["response_format"]["json_schema"]["schema"]
    ids = schema["properties"]["subtasks"]["items"]["properties"]["target_sections"]["items"]["enum"]
    assert ids == ["provisions", "application"]
    assert result["report"]["outcome"] == "shipped"


async def test_a_plan_that_routes_every_section_spends_no_reflection_call(
    env: dict[str, Any], llm: ScriptedOpenAI
) -> None:
    every = PLAN.replace('["provisions"]', '["provisions", "application"]')
    reflection = '{"missing": [{"section": "application", "question": "Anything else?", "queries": []}]}'
    llm.play(
        {
            "planner": [{"content": every}, {"content": reflection}],
            "composer": [{"content": GOOD}],
            "reviewer": [{"content": REVIEW_OK}],
        }
    )
    result = await run(env, settings_for(env, llm, planner_model="planner"), with_planner=True)
    planned = next(p for n, p in result["events"] if n == "planner_complete")
    assert planned["planner"] == "model:planner" and planned["reflection_added"] == []
    assert [t["target_sections"] for t in planned["subtasks"]] == [["provisions", "application"]]
    assert len(llm.requests_for("planner")) == 1  # the reflection could not have changed the plan
    assert result["report"]["outcome"] == "shipped"


async def test_a_planner_that_writes_nonsense_leaves_the_heuristic_plan_and_says_why(
    env: dict[str, Any], llm: ScriptedOpenAI
) -> None:
    llm.play(
        {
            "planner": [{"content": "Sure! Here is my plan: search the web."}],
            "composer": [{"content": GOOD}],
            "reviewer": [{"content": REVIEW_OK}],
        }
    )
    result = await run(env, settings_for(env, llm, planner_model="planner"), with_planner=True)
    planned = next(p for n, p in result["events"] if n == "planner_complete")
    assert planned["planner"].startswith("heuristic (the model planner failed: output: Invalid JSON")
    assert {sid for t in planned["subtasks"] for sid in t["target_sections"]} >= {"provisions"}
    assert result["report"]["outcome"] == "shipped"


def refined_audit(result: dict[str, Any]) -> list[str | None]:
    return [p.get("refine") for stage, p in result["audit"] if stage == "draft"]


async def test_a_refine_that_keeps_every_anchor_is_used(env: dict[str, Any], llm: ScriptedOpenAI) -> None:
    llm.play({"composer": [{"content": GOOD}, {"content": "{USER}"}], "reviewer": [{"content": REVIEW_OK}]})
    result = await run(env, settings_for(env, llm, refine=True))
    assert result["report"]["outcome"] == "shipped"
    assert refined_audit(result) == ["accepted"]
    assert len(llm.requests_for("composer")) == 2  # the draft, then the refine pass


PROVISIONS = "\n\n## Statutory provisions\nIt applies. [evidence:{E1}]\nIt is so. [evidence:{E2}]\n"
DROPPED = "## Summary\nSection 90A makes computer documents admissible." + PROVISIONS
INVENTED = "## Summary\nSection 90A applies. [evidence:{E1}] [evidence:{EX}]" + PROVISIONS


@pytest.mark.parametrize("rewrite", [DROPPED, INVENTED], ids=["dropped", "invented"])
async def test_a_refine_that_drops_or_invents_an_anchor_is_rejected_and_the_original_kept(
    env: dict[str, Any], llm: ScriptedOpenAI, rewrite: str
) -> None:
    llm.play({"composer": [{"content": GOOD}, {"content": rewrite}], "reviewer": [{"content": REVIEW_OK}]})
    result = await run(env, settings_for(env, llm, refine=True))
    assert result["report"]["outcome"] == "shipped"
    (note,) = refined_audit(result)
    assert note == "rejected: the rewrite changed the anchors of summary; original kept"
    texts = [c["text"] for s in result["report"]["sections"] for c in s["claims"]]
    assert not {"Section 90A makes computer documents admissible.", "It applies.", "Section 90A applies."} & set(texts)
    assert "evneverseen0" not in str(result["report"])


# ---- real model behaviour: paraphrases, mid-sentence quotes, cut-off drafts, reasoning blocks (issue 14) --------

SEC_90A1 = "{E:Section 90A(1) of the Evidence Act 1950 provides}"
SEC_90A2 = "{E:Section 90A(2) of the Evidence Act 1950 provides}"
SEC_90A4 = "{E:Under section 90A(4)}"
# A model's own words, not copies of the evidence; the first item holds two sentences under two anchors.
PARAPHRASED = json.dumps(
    {
        "sections": [
            {
                "title": "Summary",
                "sentences": [
                    {
                        "text": "Computer-generated records can be admitted in criminal and civil cases under Section "
                        "90A of the Evidence Act 1950. Their ordinary use may be shown by a certificate.",
                        "evidence_ids": [SEC_90A1, SEC_90A2],
                    }
                ],
            },
            {
                "title": "Statutory provisions",
                "sentences": [
                    {
                        "text": "Under Section 90A(1) of the Malaysian Evidence Act 1950, a computer printout can "
                        "prove any fact it states.",
                        "evidence_ids": [SEC_90A1],
                    },
                    {
                        "text": "Once such a certificate is produced, the law presumes the computer was working "
                        "properly.",
                        "evidence_ids": [SEC_90A4],
                    },
                ],
            },
        ]
    }
)


def judged(label: str, quote: str, source_id: str = "1", reason: str = "the passage states it") -> str:
    return json.dumps({"label": label, "quote": quote, "source_id": source_id, "reason": reason})


# The judge quotes as real models do: from mid-sentence, in another case, in curly quotes, with an ellipsis.
PARAPHRASE_JUDGE = [
    {
        "match": "computer-generated records",
        "content": judged(
            "supported", "a document produced by a computer, or a statement contained in it, is admissible"
        ),
    },
    {"match": "computer printout can prove", "content": judged("supported", "IS ADMISSIBLE AS EVIDENCE OF ANY FACT")},
    {
        "match": "presumes the computer",
        "content": judged(
            "supported", "“the computer is presumed to have been in good working order … operating properly”"
        ),
    },
]


async def test_a_paraphrased_json_draft_ships_each_item_whole_with_its_anchors_judged_on_tolerant_quotes(
    env: dict[str, Any], llm: ScriptedOpenAI
) -> None:
    llm.play({"composer": [{"content": PARAPHRASED}], "judge": PARAPHRASE_JUDGE, "reviewer": [{"content": REVIEW_OK}]})
    result = await run(env, settings_for(env, llm), lexical_judge=False)
    report = result["report"]
    assert report["outcome"] == "shipped", report.get("outcome_reason")
    assert not {"uncited_claim", "unknown_citation", "unsupported_claim"} & fired(result)
    sections = {s["id"]: s["claims"] for s in report["sections"]}
    # The two-sentence item is one claim that keeps both anchors (it was not re-split, losing the first's).
    (summary,) = sections["summary"]
    assert summary["text"].startswith("Computer-generated records") and summary["text"].endswith("certificate.")
    assert len(summary["evidence_ids"]) == 2
    claims = [c for claims in sections.values() for c in claims]
    assert len(claims) == 3 and all(c["label"] == "supported" and c["support"] for c in claims)
    # "the Malaysian Evidence Act 1950" is the retrieved Evidence Act 1950.
    assert "Malaysian Evidence Act 1950" in sections["provisions"][0]["text"]
    assert len(llm.requests_for("judge")) == 3  # one judge call per claim


def test_a_jurisdiction_before_an_acts_name_is_the_same_act() -> None:
    from veracity.domain import Claim, SectionDraft, SourceRef
    from veracity.guards.citations import citation_violations

    spec = SpecRegistry.load().get("legal_research")
    quote = "Section 90A(1) of the Evidence Act 1950 provides that a document produced by a computer is admissible."
    ev = Evidence(
        id="ev1", quote=quote, start=0, end=len(quote), content_hash="h", origin_subtask_id="t", score=1.0,
        source=SourceRef(doc_id="d", title="Evidence Act 1950, section 90A"),
    )  # fmt: skip
    for text in (
        "Section 90A of the Malaysian Evidence Act 1950 admits computer documents.",
        "Under Malaysia's Evidence Act 1950, section 90A admits computer documents.",
        "Section 90A of the Evidence Act 1950 admits computer documents.",
    ):
        draft = [SectionDraft(id="provisions", title="P", claims=[Claim(text=text, evidence_ids=["ev1"])])]
        assert citation_violations(draft, [ev], spec.policy.citation_pattern) == [], text
    other = [
        SectionDraft(
            id="p", title="P", claims=[Claim(text="Section 90A of the Contracts Act 1950.", evidence_ids=["ev1"])]
        )
    ]
    assert [v.check for v in citation_violations(other, [ev], spec.policy.citation_pattern)] == ["unknown_citation"]


CUT_JSON = '{"sections": [{"title": "Summary", "sentences": [{"text": "Section 90A(1) of the Evidence Act 1950 provides'
CUT_MARKDOWN = "## Summary\n{Q1} [evidence:{E1}]\n\n## Statutory provisions\n{Q1} [evidence:{E1}]\nSection 90A(2) of"


@pytest.mark.parametrize(
    ("cut", "told"),
    [
        ({"content": CUT_JSON}, "cut off at the 1500-token limit; write less"),
        ({"content": CUT_MARKDOWN}, "cut off at the 1500-token limit; write less"),  # parses, still cut off
        ({"content": "<think>The user asks about section 90A. First, which evidence"}, "while still thinking"),
        ({"content": "", "reasoning": "The user asks about section 90A. First, which"}, "while still thinking"),
    ],
    ids=["json", "markdown-that-parses", "think-block", "reasoning-field"],
)
async def test_a_draft_cut_at_max_tokens_is_a_recorded_truncated_violation_told_to_the_retry(
    env: dict[str, Any], llm: ScriptedOpenAI, cut: dict[str, Any], told: str
) -> None:
    llm.play(
        {"composer": [{**cut, "finish_reason": "length"}, {"content": GOOD}], "reviewer": [{"content": REVIEW_OK}]}
    )
    result = await run(env, settings_for(env, llm))
    assert "truncated" in fired(result)
    retry = llm.requests_for("composer")[1]["messages"][1]["content"]
    assert "[compose:truncated]" in retry and told in retry
    drafts = [p for stage, p in result["audit"] if stage == "draft"]
    assert drafts[0]["truncated"] and drafts[0]["claims"] == 0  # nothing of the cut draft was checked or kept
    composer_calls = [p for n, p in result["events"] if n == "model_call" and p["role"] == "composer"]
    assert composer_calls[0]["finish_reason"] == "length" and composer_calls[1]["finish_reason"] == "stop"
    assert result["report"]["outcome"] == "shipped"


@pytest.mark.parametrize(
    "step",
    [
        {"content": "<think>Section 90A. I could add that courts love printouts.</think>\n" + GOOD},
        {"content": "<thinking>I could add that courts love printouts.</thinking>\n\n" + GOOD},
        # A reasoning model whose chat template opened the block in the prompt writes only its end.
        {"content": "Okay, section 90A. I could add that courts love printouts.\n</think>\n\n" + GOOD},
        {"content": GOOD, "reasoning": "I could add that courts love printouts."},
        {"content": "<think>I could add that courts love printouts.</think>" + PARAPHRASED},
    ],
    ids=["think", "thinking", "unopened-think", "reasoning-field", "think-before-json"],
)
async def test_reasoning_in_every_form_servers_send_is_dropped_before_parsing(
    env: dict[str, Any], llm: ScriptedOpenAI, step: dict[str, Any]
) -> None:
    llm.play(
        {"composer": [step], "judge": PARAPHRASE_JUDGE + [{"judge": "echo"}], "reviewer": [{"content": REVIEW_OK}]}
    )
    result = await run(env, settings_for(env, llm), lexical_judge=False)
    assert result["report"]["outcome"] == "shipped", result["report"].get("outcome_reason")
    assert "courts love printouts" not in str(result["report"])
    assert len(llm.requests_for("composer")) == 1


async def test_the_composer_prompt_states_the_templates_l3_rules_and_length_bounds(
    env: dict[str, Any], llm: ScriptedOpenAI
) -> None:
    llm.play({"composer": [{"content": GOOD}], "reviewer": [{"content": REVIEW_OK}]})
    await run(env, settings_for(env, llm))
    prompt = llm.requests_for("composer")[0]["messages"][1]["content"]
    assert "Rules of this template (the checks enforce each):" in prompt
    assert "at least 120 and at most 6000 characters" in prompt  # the gate's min_chars / max_chars
    assert "Required sections, each with at least one sentence: Summary, Statutory provisions." in prompt
    assert 'in the form "Section 90A of the Evidence Act 1950"' in prompt  # L3 citation_missing, L1 unknown_citation
    assert '"you should"' in prompt and '"I advise"' in prompt  # L3 advice_phrase
    assert "Write no disclaimer" in prompt and "fit in 1500 tokens" in prompt
    assert "Follow the rules of this template" in llm.requests_for("composer")[0]["messages"][0]["content"]

    llm.play({"composer": [{"content": '{"answer": "x", "citations": [], "confidence": 0, "needs_human": true}'}]})
    refund = "Can I get a refund for my subscription if 10 days have passed since payment?"
    await run(env, settings_for(env, llm), template="support_answer", question=refund)
    contract = llm.requests_for("composer")[0]["messages"][1]["content"]
    assert "at least 40 and at most 1500 characters" in contract and "Required sections" not in contract


async def test_gate_rejections_count_against_the_drafting_bound(env: dict[str, Any], llm: ScriptedOpenAI) -> None:
    llm.play({"composer": [{"content": GOOD}], "reviewer": [{"content": REVIEW_OK}]})
    spec = SpecRegistry.load().get("legal_research")
    unmeetable = spec.model_copy(update={"composer": spec.composer.model_copy(update={"min_chars": 5000})})
    result = await run(env, settings_for(env, llm), registry=SpecRegistry({"legal_research": unmeetable}))
    report = result["report"]
    # Two drafts in all (the template's bound), the second told what the gate found; then the floor.
    assert len(llm.requests_for("composer")) == spec.budgets.drafting_attempts == 2
    assert "[gate:too_short]" in llm.requests_for("composer")[1]["messages"][1]["content"]
    assert report["outcome"] == "fallback"
    assert report["outcome_reason"] == (
        "drafting attempts exhausted (2); the pre-persistence gate rejected the last draft: too_short"
    )


async def test_one_unreadable_judge_answer_costs_that_claim_a_retry_not_the_run(
    env: dict[str, Any], llm: ScriptedOpenAI
) -> None:
    unreadable = {"match": "presumes the computer", "content": "Supported - the passage says so."}
    llm.play(
        {
            "composer": [{"content": PARAPHRASED}],
            "judge": [unreadable, *PARAPHRASE_JUDGE],
            "reviewer": [{"content": REVIEW_OK}],
        }
    )
    result = await run(env, settings_for(env, llm), lexical_judge=False)
    assert result["report"]["outcome"] == "shipped"
    judge = llm.requests_for("judge")
    assert len(judge) == 4  # three claims, one of them asked twice
    (retry,) = [r for r in judge if "Your last answer could not be read" in r["messages"][1]["content"]]
    assert "presumes the computer" in retry["messages"][1]["content"]
    assert len(llm.requests_for("composer")) == 1


async def test_judge_calls_run_concurrently_within_the_judges_limit_and_the_budget(llm: ScriptedOpenAI) -> None:
    import asyncio
    import time

    from veracity.domain import Claim, SectionDraft, SourceRef
    from veracity.errors import ModelError
    from veracity.guards.grounding import ground
    from veracity.guards.model import ModelJudge
    from veracity.models.usage import UsageMeter, current_meter

    def evidence(i: int) -> Evidence:
        quote = f"Fact number {i} is stated in this passage."
        return Evidence(
            id=f"ev{i}", quote=quote, start=0, end=len(quote), content_hash="h", origin_subtask_id="t", score=1.0,
            source=SourceRef(doc_id=f"d{i}", title=f"Doc {i}"),
        )  # fmt: skip

    evidences = [evidence(i) for i in range(8)]
    draft = [
        SectionDraft(
            id="s",
            title="S",
            claims=[Claim(text=f"Fact number {i} is stated", evidence_ids=[f"ev{i}"]) for i in range(8)],
        )
    ]
    llm.play({"judge": [{"stall": 0.4, "judge": "echo"}]})
    judge = ModelJudge("judge", base_url=llm.base_url_v1, max_retries=0, concurrency=4)
    try:
        started = time.monotonic()
        labelled, violations = await ground(judge, draft, evidences)
        elapsed = time.monotonic() - started
        assert violations == [] and all(c.label == "supported" for c in labelled[0].claims)
        assert llm.max_in_flight == 4 and elapsed < 8 * 0.4  # four at a time, not one after another

        # The budget counts a call when it is sent: three calls allowed and counted, the rest refused. The refusal
        # ends the grounding and cancels the three in flight, so how many of them reached the server before that is
        # a race (CI saw none): never more than the budget.
        llm.play({"judge": [{"stall": 0.2, "judge": "echo"}]})
        meter = UsageMeter(max_calls=3)

        async def within_budget() -> None:
            current_meter.set(meter)
            await ground(judge, draft, evidences)

        with pytest.raises(ModelError, match=r"model call budget spent \(3 calls\)"):
            await asyncio.create_task(within_budget())
        assert meter.calls == 3 and len(llm.requests) <= 3
        assert meter.by_role["judge"]["calls"] == 3  # each counted call is recorded, cancelled ones too
    finally:
        await judge.aclose()


PARTIAL_ANSWER = (
    '{"answer": "Tallyo refunds a monthly payment in full when you ask within two weeks of paying. '
    '[evidence:{E:Tallyo gives a full refund}]", "citations": ["{E:Tallyo gives a full refund}"], '
    '"confidence": 0.9, "needs_human": false}'
)


@pytest.mark.parametrize(("ship_partial", "outcome"), [(True, "shipped"), (False, "handoff")])
async def test_a_partial_support_answer_ships_labelled_when_the_qa_policy_allows_it(
    env: dict[str, Any], llm: ScriptedOpenAI, ship_partial: bool, outcome: str
) -> None:
    partial = judged("partial", "full refund on a monthly subscription payment", reason="the window is 14 days")
    llm.play(
        {
            "composer": [{"content": PARTIAL_ANSWER}],
            "judge": [{"content": partial}],
            "reviewer": [{"content": REVIEW_OK}],
        }
    )
    spec = SpecRegistry.load().get("support_answer")
    assert spec.qa_policy.ship_partial  # the bundled template allows it
    policy = spec.model_copy(update={"qa_policy": spec.qa_policy.model_copy(update={"ship_partial": ship_partial})})
    refund = "Can I get a refund for my subscription if 10 days have passed since payment?"
    result = await run(
        env,
        settings_for(env, llm),
        lexical_judge=False,
        template="support_answer",
        question=refund,
        registry=SpecRegistry({"support_answer": policy}),
    )
    report = result["report"]
    assert report["outcome"] == outcome, (report.get("outcome_reason"), fired(result))
    if ship_partial:
        (claim,) = [c for s in report["sections"] for c in s["claims"]]
        assert claim["label"] == "partial" and "two weeks" in claim["text"]
        assert report["confidence"] == 0.6  # the reported confidence still says partial
    else:
        assert "confidence 0.60 is below the template's 0.65" in report["needs_human_reason"]


async def test_the_floor_speaks_the_answers_language(env: dict[str, Any], llm: ScriptedOpenAI) -> None:
    llm.play({"composer": [{"content": "Maaf, saya tidak pasti."}]})
    result = await run(env, settings_for(env, llm), question=MS_QUESTION)
    report = result["report"]
    assert report["outcome"] == "fallback" and report["language"] == "ms"
    assert report["disclaimer"] == MS_DISCLAIMER
    (note,) = report["notes"]
    assert note.startswith("Veracity tidak dapat menghasilkan laporan") and " Sebab: " in note
    assert {s["note"] for s in report["sections"] if s["id"] != "evidence_digest"} == {
        "Tidak ditulis: draf tidak dapat disahkan."
    }
    assert report["sections"][-1]["title"] == "Ringkasan bukti"


async def test_every_model_call_failed_or_timed_out_is_recorded_and_counted(
    env: dict[str, Any], llm: ScriptedOpenAI
) -> None:
    llm.play({"composer": [{"stall": 2.0, "content": GOOD}]})
    result = await run(env, settings_for(env, llm, timeout_seconds=0.5))
    (call,) = [p for n, p in result["events"] if n == "model_call"]
    assert call["role"] == "composer" and call["error"] == "timed out" and call["ms"] >= 400
    assert call["totals"]["calls"] == 1 and call["totals"]["failed"] == 1
    assert result["report"]["metrics"]["model"]["by_role"]["composer"]["failed"] == 1

    llm.play({"composer": [{"status": 503}]})
    result = await run(env, settings_for(env, llm))
    (call,) = [p for n, p in result["events"] if n == "model_call"]
    assert call["error"].startswith("failed with HTTP 503")


async def test_each_retry_of_a_failed_call_is_a_call_of_its_own_counted_and_recorded(
    env: dict[str, Any], llm: ScriptedOpenAI
) -> None:
    # The openai client's own retries were invisible: three requests sent, one call counted and recorded.
    llm.play({"composer": [{"status": 503}, {"status": 429}, {"content": GOOD}], "reviewer": [{"content": REVIEW_OK}]})
    result = await run(env, settings_for(env, llm, max_retries=2))
    calls = [p for n, p in result["events"] if n == "model_call" and p["role"] == "composer"]
    assert [c.get("error", "")[:20] for c in calls] == [
        "failed with HTTP 503",
        "failed with HTTP 429",
        "",
    ]
    assert calls[-1]["totals"]["failed"] == 2 and calls[-1]["totals"]["calls"] >= 3
    assert result["report"]["outcome"] == "shipped"

    # A call's retries are one failure to the circuit (three in a row open it for every role), not one each.
    llm.play(
        {
            "composer": [{"status": 503}, {"status": 503}, {"status": 503}, {"content": GOOD}],
            "reviewer": [{"content": REVIEW_OK}],
        }
    )
    result = await run(env, settings_for(env, llm, max_retries=3))
    calls = [p for n, p in result["events"] if n == "model_call" and p["role"] == "composer"]
    assert len(calls) == 4 and "error" not in calls[-1]
    assert result["report"]["outcome"] == "shipped"


def test_only_failures_a_retry_can_mend_are_retried() -> None:
    import httpx
    import openai

    from veracity.models.chat import _backoff, _retryable

    request = httpx.Request("POST", "http://127.0.0.1:9/v1/chat/completions")

    def status(code: int, **headers: str) -> openai.APIStatusError:
        return openai.APIStatusError("x", response=httpx.Response(code, request=request, headers=headers), body=None)

    assert [code for code in (400, 401, 404, 408, 409, 422, 429, 500, 503) if _retryable(status(code))] == [
        408,
        409,
        429,
        500,
        503,
    ]
    assert _retryable(openai.APITimeoutError(request)) and _retryable(openai.APIConnectionError(request=request))
    assert [_backoff(status(503), k) for k in range(6)] == [0.5, 1.0, 2.0, 4.0, 8.0, 8.0]
    assert _backoff(status(429, **{"retry-after": "3"}), 0) == 3.0
    assert _backoff(status(429, **{"retry-after": "a day"}), 1) == 1.0
    assert _backoff(status(429, **{"retry-after": "nan"}), 2) == 2.0  # never a wait that cannot end
    assert _backoff(status(429, **{"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}), 0) == 0.0  # a date gone by
    from email.utils import format_datetime

    later = format_datetime(datetime.now(UTC) + timedelta(seconds=30), usegmt=True)
    assert _backoff(status(429, **{"retry-after": later}), 0) == 8.0  # a date ahead, capped


def test_model_timeouts_are_settings_whose_defaults_suit_a_local_70b_model() -> None:
    import openai

    from veracity.guards.model import ModelJudge

    cfg = Settings().model
    # A 70B model on local hardware writes about 10 tokens/s: a 1,500-token draft needs well over two minutes.
    assert cfg.timeout_seconds >= 150 and cfg.connect_timeout_seconds <= 30 and cfg.judge_concurrency > 1
    models = build_models(
        Settings().model_copy(update={"model": cfg.model_copy(update={"provider": "openai", "timeout_seconds": 900})})
    )
    judge = models.judge
    assert isinstance(judge, ModelJudge) and judge.concurrency == cfg.judge_concurrency
    timeout = judge.chat.client.timeout
    assert isinstance(timeout, openai.Timeout) and (timeout.read, timeout.connect) == (900, 10.0)


async def test_a_refine_that_splits_a_claim_from_its_anchors_is_rejected_and_the_original_kept(
    env: dict[str, Any], llm: ScriptedOpenAI
) -> None:
    # The rewrite changes nothing, but read back as Markdown the two-sentence claim is two sentences, the first
    # without the anchors the item gave both.
    llm.play(
        {
            "composer": [{"content": PARAPHRASED}, {"content": "{USER}"}],
            "judge": PARAPHRASE_JUDGE,
            "reviewer": [{"content": REVIEW_OK}],
        }
    )
    result = await run(env, settings_for(env, llm, refine=True), lexical_judge=False)
    assert refined_audit(result) == ["rejected: the rewrite left 1 sentence(s) without anchors; original kept"]
    assert result["report"]["outcome"] == "shipped"
    (summary,) = [s["claims"] for s in result["report"]["sections"] if s["id"] == "summary"]
    assert len(summary) == 1 and len(summary[0]["evidence_ids"]) == 2
