"""The fixed graph with fakes at the protocol seams: event order and multiplicity, Send routing, reducers,
the extractive composer and the deterministic check."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from veracity.compose.extractive import pick_claims
from veracity.domain import Claim, Evidence, SectionDraft, SourceRef, Subtask, Violation
from veracity.events import PIPELINE_EVENTS, Event
from veracity.graph import NODE_ORDER
from veracity.graph.builder import build_graph
from veracity.graph.context import Context, RetrievalCoordinator
from veracity.graph.fanout import fan_out_retrieve, fan_out_synthesize
from veracity.graph.nodes.plan import ensure_core_sections, heuristic_plan
from veracity.graph.state import GraphOutput, RunState
from veracity.guards.citations import citation_violations
from veracity.ports import ComposeRequest, SearchHit
from veracity.settings import LimitSettings
from veracity.specs.registry import SpecRegistry
from veracity.synthesis import SectionFit, route_shard

SPECS = SpecRegistry.load()

PASSAGES = {
    "coffee": "Coffee is a beverage brewed from roasted coffee beans. Coffee companies such as Nestle "
    "compete in a market worth 200 billion dollars. About 60 percent of coffee is grown in five countries.",
    "tea": "Tea is the most consumed beverage after water. Tea producers in India export 250 million "
    "kilograms every year.",
}


class FakeSearch:
    name = "fake"

    def __init__(self, fail_on: str | None = None) -> None:
        self.calls: list[str] = []
        self.fail_on = fail_on

    async def search(self, *, query: str, corpus: str, k: int) -> list[SearchHit]:
        self.calls.append(query)
        if self.fail_on and self.fail_on in query:
            raise OSError("index unavailable")
        return [
            SearchHit(doc_id=d, title=d.title(), text=t, start=0, end=len(t), score=2.0 - i, key=f"{corpus}:{d}")
            for i, (d, t) in enumerate(PASSAGES.items())
        ][:k]


class Recorder:
    def __init__(self) -> None:
        self.events: list[tuple[str, dict[str, Any]]] = []

    async def __call__(self, event: Event) -> None:
        self.events.append((event.name, event.payload()))  # as stored

    @property
    def names(self) -> list[str]:
        return [n for n, _ in self.events]


def graph_context(spec_id: str, recorder: Recorder, search: FakeSearch | None = None) -> Context:
    spec = SPECS.get(spec_id)
    return Context(
        spec=spec,
        search=search or FakeSearch(),
        emit=recorder,
        limits=LimitSettings(),
        coordinator=RetrievalCoordinator(max_pages=spec.budgets.max_pages),
    )


async def final_state(graph: Any, inputs: dict[str, Any], context: Context) -> dict[str, Any]:
    """The whole state at the end, internals included (``ainvoke`` returns only the graph's output schema)."""
    states = [state async for state in graph.astream(inputs, context=context, stream_mode="values")]
    return states[-1]


async def run_graph(spec_id: str = "market_brief", question: str = "coffee market", search: FakeSearch | None = None):
    recorder = Recorder()
    context = graph_context(spec_id, recorder, search)
    state = await final_state(build_graph(), {"run_id": "r" * 32, "question": question, "corpus": "c"}, context)
    return state, recorder


async def test_the_graph_hands_back_its_output_schema_and_keeps_the_rest_inside() -> None:
    recorder = Recorder()
    inputs = {"run_id": "r" * 32, "question": "coffee market", "corpus": "c"}
    output = await build_graph().ainvoke(inputs, context=graph_context("market_brief", recorder))
    assert set(output) <= set(GraphOutput.model_fields)
    assert "shards" not in output and "envelope" not in output and "evidences" not in output  # internals stay in
    parsed = GraphOutput.model_validate(output)
    assert parsed.decision == "ship" and parsed.route == "proceed" and parsed.attempt == 1
    assert len(parsed.subtasks) == 3 and parsed.evidence and parsed.section_evidence and parsed.draft
    assert parsed.model_fields_set == set(output)


def test_every_output_field_is_a_state_field() -> None:
    # A field the state lacks would become a channel no node writes: always its default, silently.
    assert set(GraphOutput.model_fields) <= set(RunState.__annotations__)


def test_a_routed_runs_output_takes_the_defaults_and_a_redraft_re_enters_with_what_was_written() -> None:
    written = {"run_id": "r" * 32, "question": "q", "corpus": "c", "route": "escalate", "route_reason": "legal"}
    output = GraphOutput.model_validate(written)
    assert (output.subtasks, output.evidence, output.attempt, output.decision, output.decision_reason) == (
        [],
        [],
        0,
        None,
        None,
    )
    violation = Violation(check="placeholder", layer="gate", detail="a placeholder")
    assert output.redraft_input([violation]) == {**written, "violations": [violation]}
    # A graph wired without the output schema hands back its whole state: what is outside the schema is dropped.
    assert GraphOutput.model_validate({**written, "shards": []}) == output


def test_compiled_graph_is_the_fixed_pipeline() -> None:
    drawable = build_graph().get_graph()
    assert [n for n in drawable.nodes if not n.startswith("__")] == list(NODE_ORDER)
    edges = {(e.source, e.target) for e in drawable.edges}
    assert ("decide", "compose") in edges and ("plan", "retrieve") in edges and ("route", "__end__") in edges


async def test_full_run_emits_design_events_in_order_with_one_delta_per_branch_state() -> None:
    state, rec = await run_graph()
    n = len(state["subtasks"])
    assert n == 3  # market_brief: three evidence sections, executive_summary is written from them
    names = rec.names
    # The graph emits everything but run_started/complete (the service's); collapse the per-branch deltas.
    pipeline = [x for x in names if x in PIPELINE_EVENTS]
    collapsed = [x for i, x in enumerate(pipeline) if i == 0 or x != pipeline[i - 1]]
    assert collapsed == list(PIPELINE_EVENTS[1:-1])
    # The guard events sit where their nodes run: the route first, each draft before its check.
    assert names[0] == "route_decided" and names.index("draft_composed") == names.index("self_check_complete") - 1
    for event in ("retrieve_map_progress", "synthesize_map_progress"):
        deltas = [p for name, p in rec.events if name == event]
        assert len(deltas) == 2 * n
        for st in state["subtasks"]:
            assert [d["status"] for d in deltas if d["subtask_id"] == st.id] == ["running", "done"]
    assert state["decision"] == "ship"


async def test_every_branch_result_reaches_the_merge_through_the_additive_reducer() -> None:
    state, _ = await run_graph()
    assert sorted(s.subtask_id for s in state["branch_stats"]) == ["st1", "st2", "st3"]
    assert sorted(s.subtask_id for s in state["shards"]) == ["st1", "st2", "st3"]
    # Each passage is opened once per run (the coordinator's doing) and read by every branch whose searches find
    # it, once each: what a branch reads does not depend on which branch ran first.
    assert [s.pages for s in sorted(state["branch_stats"], key=lambda s: s.subtask_id)] == [2, 2, 2]


class SlowFirst(FakeSearch):
    """The same hits; the first ``slow`` searches (whichever branches make them) are answered last: which branch
    reaches a passage first is decided by the schedule, not by the question."""

    def __init__(self, slow: int) -> None:
        super().__init__()
        self.slow = slow

    async def search(self, *, query: str, corpus: str, k: int) -> list[SearchHit]:
        late = len(self.calls) < self.slow
        hits = await super().search(query=query, corpus=corpus, k=k)
        await asyncio.sleep(0.05 if late else 0.0)
        return hits


async def test_what_a_run_reads_and_keeps_does_not_depend_on_which_branch_ran_first() -> None:
    """Two schedules of the same run (the first branch's searches slow, then another's): every branch reads the
    same passages, keeps the same evidence, and the run drafts the same report. Before, the branch scheduled first
    took a passage and the others skipped it, so a run's pools, and at times its report, changed from process to
    process."""
    runs = []
    for slow in (0, 2):
        state, _ = await run_graph(search=SlowFirst(slow))
        stats = sorted(state["branch_stats"], key=lambda s: s.subtask_id)
        runs.append(
            (
                [(s.subtask_id, s.pages, s.evidences) for s in stats],
                sorted((ev.id, ev.origin_subtask_id) for ev in state["evidences"]),
                [(c.text, c.evidence_ids) for sec in state["draft"] for c in sec.claims],
            )
        )
    assert runs[0] == runs[1]
    assert all(pages == 2 for _, pages, _ in runs[0][0])


async def test_extractive_draft_every_claim_anchored_and_resolving() -> None:
    # A question two of the coffee sentences answer, so that the summary has a claim to move.
    state, _ = await run_graph(question="coffee market and where coffee is grown")
    ids = {ev.id for ev in state["evidence"]}
    quotes = {ev.id: ev.quote for ev in state["evidence"]}
    claims = [c for s in state["draft"] for c in s.claims]
    assert claims
    for claim in claims:
        assert claim.evidence_ids and set(claim.evidence_ids) <= ids
        assert claim.text == quotes[claim.evidence_ids[0]]  # verbatim
        assert claim.label == "supported"
    # The summary is written from the other sections' best claims, moved rather than copied: a section gives one
    # only while it keeps its min_evidence (the summary never leaves it thin); only when no section can spare one
    # does the summary repeat a claim (one, the most relevant), and no sentence is in two other sections.
    spec = SpecRegistry.load().get("market_brief")
    summary = next(s for s in state["draft"] if s.id == "executive_summary")
    others = [s for s in state["draft"] if s.id != "executive_summary"]
    texts = [c.text for s in others for c in s.claims]
    assert summary.claims and texts and len(texts) == len(set(texts))
    # Here Key findings holds two sentences and asks for two, the rest none: nothing can be spared, so the summary
    # repeats the most relevant claim once (moving is shown in tests/test_relevance.py).
    assert [len(s.claims) for s in others] == [2, 0, 0]
    assert all(len(s.claims) <= max(1, spec.section(s.id).min_evidence) for s in others)
    assert len(summary.claims) == 1 and summary.claims[0].text in texts


async def test_evidence_offsets_point_at_the_quote_in_the_source() -> None:
    state, _ = await run_graph()
    for ev in state["evidence"]:
        assert PASSAGES[ev.source.doc_id][ev.start : ev.end] == ev.quote


async def test_failed_branch_is_recorded_and_the_run_goes_on() -> None:
    # st2's first query is the question words plus nothing else; make only the section-phrased query fail.
    search = FakeSearch(fail_on="industry")
    state, rec = await run_graph(search=search)
    failed = [s for s in state["branch_stats"] if s.status == "failed"]
    assert [s.subtask_id for s in failed] == ["st2"] and "index unavailable" in failed[0].error
    (progress,) = [p for name, p in rec.events if name == "retrieve_map_progress" and p["status"] == "failed"]
    assert {k: progress[k] for k in ("subtask_id", "queries", "pages", "evidences", "error")} == {
        "subtask_id": "st2",
        "queries": 1,
        "pages": 2,  # what its first query found, before the second failed
        "evidences": 0,
        "error": "OSError: index unavailable",
    }
    assert [s["kind"] for s in progress["sources"]] == ["local", "local"]
    assert state["decision"] == "ship"


async def test_nothing_found_goes_to_fail_safe() -> None:
    class Empty(FakeSearch):
        async def search(self, *, query: str, corpus: str, k: int) -> list[SearchHit]:
            return []

    state, rec = await run_graph(search=Empty())
    assert state["decision"] == "fail_safe"
    assert rec.events[-1] == (
        "synthesize_complete",
        {
            "decision": "fail_safe",
            "reason": "Nothing in corpus c answers this question",
            "attempts": 1,
            "confidence": 0.0,
            "sections": {
                "executive_summary": "not_found",
                "key_findings": "not_found",
                "market_landscape": "not_found",
                "data_notes": "not_found",
            },
        },
    )


def test_fan_out_sends_one_branch_per_subtask_with_its_own_slice() -> None:
    subtasks = [Subtask(id=f"st{i}", question="q", queries=["q"], target_sections=["key_findings"]) for i in (1, 2)]
    sends = fan_out_retrieve({"run_id": "r", "corpus": "c", "question": "q", "subtasks": subtasks})
    assert [(s.node, s.arg["subtask"].id) for s in sends] == [("retrieve", "st1"), ("retrieve", "st2")]
    ev = _evidence("e1", "st2")
    sends = fan_out_synthesize({"run_id": "r", "question": "q", "subtasks": subtasks, "evidence": [ev]})
    assert [(s.node, [e.id for e in s.arg["evidence"]]) for s in sends] == [
        ("synthesize", []),
        ("synthesize", ["e1"]),
    ]


def test_planner_routes_every_required_section_even_on_a_tight_budget() -> None:
    spec = SPECS.get("investment_memo").model_copy(
        update={"budgets": SPECS.get("investment_memo").budgets.model_copy(update={"max_subtasks": 1})}
    )
    subtasks = ensure_core_sections(heuristic_plan("solar power", spec), spec)
    assert len(subtasks) == 1
    routed = set(subtasks[0].target_sections)
    assert {"bull_base_bear", "risks"} <= routed  # required sections
    assert "thesis" not in routed  # a summary: written from the others, not routed


def _evidence(eid: str, subtask: str, quote: str = "Some quote that is long enough to be a fact.") -> Evidence:
    return Evidence(
        id=eid,
        quote=quote,
        start=0,
        end=len(quote),
        content_hash="h",
        source=SourceRef(doc_id="d", title="D"),
        origin_subtask_id=subtask,
        score=1.0,
    )


def test_shard_routing_by_keywords_and_orphans_round_robin() -> None:
    spec = SPECS.get("market_brief")
    targets = [spec.section("market_landscape"), spec.section("data_notes")]
    evs = [
        _evidence("m", "st1", "The industry has three companies."),
        _evidence("d", "st1", "It grew 12 percent per year."),
        _evidence("o1", "st1", "Nothing relevant here at all."),
        _evidence("o2", "st1", "Nor anything here either."),
    ]
    shard, orphans = route_shard(evs, targets, SectionFit(model=None, question="q"))
    assert shard == {"market_landscape": ["m", "o1"], "data_notes": ["d", "o2"]}
    assert orphans == 2


@pytest.mark.parametrize(
    ("claim", "check"),
    [
        (Claim(text="An uncited sentence.", evidence_ids=[]), "uncited_claim"),
        (Claim(text="Cites a ghost.", evidence_ids=["never_retrieved"]), "unknown_anchor"),
    ],
)
def test_citation_check_rejects_uncited_and_unretrieved(claim: Claim, check: str) -> None:
    draft = [SectionDraft(id="key_findings", title="K", claims=[claim])]
    violations = citation_violations(draft, [_evidence("e1", "st1")])
    assert [v.check for v in violations] == [check]


def test_composer_deduplicates_sentences_across_sections() -> None:
    spec = SPECS.get("market_brief")
    ev = _evidence("e1", "st1")
    picked = pick_claims(
        ComposeRequest(
            spec=spec,
            question="q",
            section_evidence={"key_findings": ["e1"], "market_landscape": ["e1"]},
            evidence=[ev],
            attempt=1,
            per_section=5,
        )
    )
    assert len(picked["key_findings"]) == 1 and picked["market_landscape"] == []


async def audited_run() -> tuple[dict[str, Any], Recorder, list[tuple[str, dict[str, Any]]]]:
    """A market_brief run of "coffee market" with its events and its audit entries (stage, payload) recorded."""
    audits: list[tuple[str, dict[str, Any]]] = []

    async def audit(stage: str, attempt: int, payload: dict[str, Any]) -> None:
        audits.append((stage, payload))

    recorder = Recorder()
    context = graph_context("market_brief", recorder)
    context.audit = audit
    state = await final_state(build_graph(), {"run_id": "r" * 32, "question": "coffee market", "corpus": "c"}, context)
    return state, recorder, audits


async def test_evidence_that_does_not_answer_the_question_as_a_whole_is_withheld(monkeypatch) -> None:
    """Sentences cleared the relevance cut-off, but the question-level judgement says the pool does not answer the
    question: no evidence goes on, the run says nothing answers it and why, the event and the audit carry the
    judgement, and the withheld sentences are what the floor shows as the closest passages."""
    from veracity.graph.nodes.decide import closest_of
    from veracity.semantic.relevance import Answered, RelevanceScorer

    judged: list[tuple[str, int]] = []

    def answered(self, question, pool, cutoff, read=True):  # the seam here; tests/test_relevance.py judges
        judged.append((question, len(pool)))
        return Answered(0.12, 0.5)

    monkeypatch.setattr(RelevanceScorer, "answered", answered)
    state, recorder, audits = await audited_run()

    assert judged and judged[0][0] == "coffee market" and judged[0][1] > 0
    (merge,) = [p for name, p in recorder.events if name == "retrieve_merge_complete"]
    assert merge["answered"] == 0.12 and merge["answered_cutoff"] == 0.5
    assert merge["withheld"] == merge["evidences_after"] > 0
    assert state["evidence"] == [] and len(state["withheld"]) == merge["withheld"]
    (retrieved,) = [p for name, p in recorder.events if name == "retrieve_complete"]
    assert retrieved["sources"] and all(src["evidences"] == 0 for src in retrieved["sources"])  # none goes on
    (entry,) = [p for stage, p in audits if stage == "answered"]
    assert entry["passed"] is False and entry["probability"] == 0.12 and entry["withheld"] == merge["withheld"]
    assert state["decision"] == "fail_safe"
    reason = state["decision_reason"]
    assert reason.startswith("Nothing in corpus c answers this question; closest passages: ")
    assert f"({merge['withheld']} sentence(s) cleared the relevance cut-off, but together" in reason
    assert all(not s.claims for s in state["draft"])
    # The floor's closest passages: the withheld sentences and the branches' own, most relevant first.
    shown = closest_of(state["branch_stats"], state["withheld"])
    assert {ev.id for ev in state["withheld"]} <= {ev.id for ev in shown}
    assert [ev.relevance or 0.0 for ev in shown] == sorted((ev.relevance or 0.0 for ev in shown), reverse=True)
    output = GraphOutput.model_validate({k: v for k, v in state.items() if k in GraphOutput.model_fields})
    assert [ev.id for ev in output.withheld] == [ev.id for ev in state["withheld"]]


async def test_evidence_that_answers_the_question_goes_on() -> None:
    state, _, audits = await audited_run()
    (entry,) = [p for stage, p in audits if stage == "answered"]
    assert entry["mode"] == "lexical" and entry["passed"] is True and entry["probability"] >= entry["cutoff"]
    assert state["evidence"] and state["withheld"] == [] and state["decision"] == "ship"


def test_the_judgement_reads_each_sentence_once_and_not_web_runs(monkeypatch) -> None:
    """Branches share passages, so their closest sentences repeat: the pool holds each once at its best relevance
    (as the fit's pools do), whatever the number of branches; a web run is not judged (never fitted on web pages)."""
    from veracity.domain import BranchStat
    from veracity.graph.nodes.retrieve_merge import answered
    from veracity.semantic.relevance import RelevanceScorer

    seen: list[list[tuple[float, str, str]]] = []
    reads: list[bool] = []
    real = RelevanceScorer.answered

    def spy(self, question, pool, cutoff, read=True):
        seen.append(pool)
        reads.append(read)
        return real(self, question, pool, cutoff, read)

    monkeypatch.setattr(RelevanceScorer, "answered", spy)
    kept = _evidence("k1", "st1", "Ines Marrow founded the Caldera shipyard in 1902.")
    kept = kept.model_copy(update={"relevance": 0.45})
    near = [
        _evidence("c1", "st1", "The shipyard later built ferries for the northern routes.").model_copy(
            update={"relevance": r}
        )
        for r in (0.30, 0.25, 0.28)
    ]
    other = _evidence("c2", "st1", "Caldera is a port town on the west coast.").model_copy(update={"relevance": 0.29})
    stats = [BranchStat(subtask_id=f"st{i}", status="done", closest_evidence=[near[i], other, kept]) for i in range(3)]
    context = graph_context("market_brief", Recorder())
    question = "Who founded the Caldera shipyard?"
    three = answered(context, question, [kept], stats)
    one = answered(context, question, [kept], stats[:1])
    assert three == one
    assert [(p, text) for p, text, _ in seen[0]] == [
        (0.45, kept.quote),
        (0.30, near[0].quote),  # once, at its best relevance over the branches
        (0.29, other.quote),
    ]
    # market_brief sets no cut-off of its own: its pool may be read with the question; a template that sets its own
    # (support_answer's curated help centre) is judged on relevances and words alone.
    assert reads == [True, True]
    answered(graph_context("support_answer", Recorder()), question, [kept], stats)
    assert reads[-1] is False
    context.fetcher = object()  # type: ignore[assignment]  # a web run
    assert answered(context, question, [kept], stats) is None


def test_a_failed_branch_beside_withheld_evidence_is_still_nothing_relevant() -> None:
    from veracity.domain import BranchStat
    from veracity.graph.nodes.decide import no_evidence_reason
    from veracity.runs.floor import fallback_kind, floor_report

    withheld = [_evidence("w1", "st1", "Kiss and Tell is a 1945 American comedy film.")]
    state = {
        "corpus": "c",
        "evidence": [],
        "withheld": withheld,
        "branch_stats": [
            BranchStat(subtask_id="st1", status="done"),
            BranchStat(subtask_id="st2", status="failed", error="OSError: index unavailable"),
        ],
    }
    reason = no_evidence_reason(state)  # type: ignore[arg-type]
    assert reason == (
        "Nothing in corpus c answers this question; closest passages: D (1 sentence(s) cleared the relevance "
        "cut-off, but together they do not answer the question: withheld)"
    )
    assert fallback_kind(reason) == "nothing_relevant"
    # The floor shows the withheld sentence as a closest passage, unlabelled, with its anchor.
    spec = SPECS.get("answer")
    report = floor_report(run_id="r", spec=spec, question="q", corpus="c", evidence=[], reason=reason, closest=withheld)
    (digest,) = [s for s in report.sections if s.closest_passages]
    assert [c.text for c in digest.claims] == [withheld[0].quote] and digest.claims[0].label is None
    assert digest.note and digest.note.startswith("Nothing retrieved answers the question.")
    # Without withheld evidence a failed branch is still the search's failure.
    assert no_evidence_reason({**state, "withheld": []}).startswith("the search failed on 1 of 2")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("answered", "after", "withheld", "kind", "says"),
    [
        (None, 3, 0, "info", "3 evidences after removing 1 duplicates"),
        (0.81, 3, 0, "info", "; together they answer the question (0.81, cut-off 0.56)"),
        (0.12, 3, 3, "guard", "; withheld: together they do not answer the question (0.12, cut-off 0.56)"),
        (0.05, 0, 0, "info", "; nothing reached the relevance cut-off (0.05, cut-off 0.56)"),
    ],
)
def test_the_timeline_says_what_the_judgement_decided(answered, after, withheld, kind, says) -> None:
    from datetime import UTC, datetime

    from veracity.events import RetrieveComplete, RetrieveMergeComplete
    from veracity.runs.describe import describe
    from veracity.runs.reducer import apply_event
    from veracity.runs.view import RunView
    from veracity.web.topology import _tone

    event = RetrieveMergeComplete(
        evidences_before=after + 1,
        evidences_after=after,
        duplicates_removed=1,
        answered=answered,
        answered_cutoff=None if answered is None else 0.56,
        withheld=withheld,
    )
    line = describe(RunView(run_id="r"), event)
    assert line.kind == kind and line.summary.endswith(says)
    assert ("withheld", withheld) in line.fields if withheld else all(k != "withheld" for k, _ in line.fields)
    # The pipeline's retrieve_merge node: its note says the evidence was withheld, in amber.
    view = RunView(run_id="r")
    now = datetime.now(UTC)
    apply_event(view, 1, event, now)
    apply_event(view, 2, RetrieveComplete(evidences=after), now)
    note = view.node_notes["retrieve_merge"]
    assert note == (f"{after} evidences withheld" if withheld else f"{after} evidences")
    assert _tone("retrieve_merge", note, None) == ("warn" if withheld else "")
