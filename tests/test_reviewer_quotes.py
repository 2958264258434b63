"""The reviewer and L3 read the answer's own words, not quoted evidence (issue 14): whose words a claim speaks
(``guards/voice.py``), the rule reviewer's crisis screen, L3's phrase rules, and the quoted-crisis case end to end
on two templates over a corpus ingested here."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from conftest import service_with_docs
from veracity.checks import anchored
from veracity.db import runs_repo
from veracity.db.corpus_repo import DocumentIn
from veracity.domain import Claim, Draft, Evidence, SectionDraft, SourceRef, Violation
from veracity.guards.quotes import is_quote_of, locate_all
from veracity.guards.reviewer import RuleReviewer, answer_voice
from veracity.guards.supervisor import supervisor_violations
from veracity.guards.voice import addresses_reader, own_words, reported_speech, spoken
from veracity.ports import ReviewRequest, Source
from veracity.runs.service import RunService
from veracity.specs.models import Policy
from veracity.specs.registry import SpecRegistry

REGISTRY = SpecRegistry.load()
TOLD_REPORTERS = (
    "The band's singer, Mara Voss, told reporters: I want to kill myself because the tour collapsed after ten "
    "years of work."
)
FORUM = "I want to kill myself and nobody at the plant would notice."
TROLL = "You would be better off dead than working another night shift."
QUESTION = "Why did Harbour Lights cancel its 2024 European tour?"


# ---- whose words ------------------------------------------------------------------------------------------------


def test_reported_speech_is_quoted_passages_and_what_follows_a_reporting_colon() -> None:
    text = 'The mayor said "the bridge is safe" and later told the BBC on Monday: it will reopen in May.'
    assert [text[s:e] for s, e in reported_speech(text)] == ['"the bridge is safe"', "it will reopen in May."]
    assert reported_speech("The bridge reopened in May after repairs.") == []
    assert own_words(TOLD_REPORTERS) == "The band's singer, Mara Voss, told reporters:"


def test_a_claim_is_a_quote_of_its_evidence_whatever_its_case_spacing_quote_marks_or_ellipsis() -> None:
    assert is_quote_of(TOLD_REPORTERS.upper(), [TOLD_REPORTERS])
    assert is_quote_of("Mara Voss told reporters … the tour collapsed", [TOLD_REPORTERS])
    assert is_quote_of("“the tour collapsed after ten years”", ["Another quote.", TOLD_REPORTERS])
    assert not is_quote_of("the tour collapsed … Mara Voss", [TOLD_REPORTERS])  # pieces out of order
    assert not is_quote_of("The singer said the tour's collapse left her suicidal.", [TOLD_REPORTERS])
    assert not is_quote_of(TOLD_REPORTERS, [])


@pytest.mark.parametrize(
    ("claim", "expected"),
    [
        ("The council approved the budget . . . road repairs.", True),
        ("The council approved the budget [. . .] road repairs", True),
        ("the council, approved the budget", True),
        ("The council approved the bud", False),  # a quote ends on a word boundary
        ("The council rejected the budget", False),
    ],
)
def test_the_reviewer_and_the_model_judge_read_a_quote_alike(claim: str, expected: bool) -> None:
    source = "The council approved the budget on Monday, with 40% set aside for road repairs."
    assert is_quote_of(claim, [source]) is expected
    assert bool(locate_all(claim, [Source("s", source)])) is expected


@pytest.mark.parametrize(
    ("text", "addresses"),
    [
        ("You can file the form online.", True),
        ("Your deposit is returned within 14 days.", True),
        ("Take two tablets every four hours.", True),
        ("If the pain persists, see a doctor.", True),
        ("Don't leave the kettle switched on overnight.", True),
        ("Don’t leave the kettle switched on overnight.", True),
        ("Lower back pain is common in adults.", False),
        ("The kettle switches itself off when the water boils.", False),
        ("Die Hard is a 1988 American action film.", False),  # a title, not an order
        ("Take Five is a jazz standard composed by Paul Desmond.", False),
        ("Patients take the tablets with food.", False),
    ],
)
def test_addresses_reader_is_second_person_or_an_order(text: str, addresses: bool) -> None:
    assert addresses_reader(text) is addresses


def test_spoken_sets_aside_quotes_that_address_no_one_and_keeps_the_composers_own_words() -> None:
    # A quote of the cited evidence is the source's: its frame and its reported speech address no one.
    assert spoken(TOLD_REPORTERS, [TOLD_REPORTERS]) == ""
    assert spoken(FORUM, [FORUM]) == ""
    # A quote that speaks to the reader is passed on to them, so it is the answer's.
    assert spoken(TROLL, [TROLL]) == TROLL
    # Words not in the cited evidence are the composer's, reported speech inside them set aside.
    assert spoken(FORUM, ["Another sentence entirely."]) == FORUM
    paraphrase = 'At the hearing the worker said "I want to kill myself" about the night shifts.'
    assert spoken(paraphrase, [FORUM]) == "At the hearing the worker said about the night shifts."
    # Not knowing the evidence, no claim is known to be a quote: only reported speech is set aside.
    assert spoken(TOLD_REPORTERS, []) == "The band's singer, Mara Voss, told reporters:"
    assert spoken(FORUM, []) == FORUM


def test_answer_voice_reads_a_rendered_draft_one_claim_a_line() -> None:
    draft_text = "\n".join(["## Answer", anchored(TOLD_REPORTERS, ["ev1"]), anchored(TROLL, ["ev2"]), "## Details", ""])
    assert answer_voice(draft_text, {"ev1": TOLD_REPORTERS, "ev2": TROLL}) == [TROLL]
    assert answer_voice(draft_text, {}) == ["The band's singer, Mara Voss, told reporters:", TROLL]


# ---- the rule reviewer ----------------------------------------------------------------------------------------


def evidence(eid: str, quote: str) -> Evidence:
    return Evidence(
        id=eid,
        quote=quote,
        start=0,
        end=len(quote),
        content_hash="0" * 64,
        source=SourceRef(doc_id=f"doc-{eid}", title="A source"),
        origin_subtask_id="s1",
        score=1.0,
    )


def review_request(question: str, *claims: tuple[str, str], template: str = "answer") -> ReviewRequest:
    draft_text = "\n".join(["## Answer", *(anchored(text, [eid]) for eid, text in claims)])
    return ReviewRequest(spec=REGISTRY.get(template), question=question, draft_text=draft_text, violations=[])


@pytest.mark.parametrize("template", ["answer", "market_brief", "coach_reply"])
async def test_crisis_words_in_a_quote_do_not_make_a_crisis(template: str) -> None:
    reviewer = RuleReviewer([evidence("ev1", TOLD_REPORTERS), evidence("ev2", FORUM)])
    review = await reviewer.review(review_request(QUESTION, ("ev1", TOLD_REPORTERS), ("ev2", FORUM), template=template))
    assert review.verdict == "ok", review


async def test_crisis_in_the_persons_message_is_a_crisis_whatever_the_answer_quotes() -> None:
    reviewer = RuleReviewer([evidence("ev1", TOLD_REPORTERS)])
    review = await reviewer.review(
        review_request("I want to kill myself since the tour was cancelled.", ("ev1", TOLD_REPORTERS))
    )
    assert review.verdict == "crisis"
    assert review.reason.startswith("crisis language in the question: ")
    assert review.concerns == ["kill myself"]


async def test_a_quote_shipped_to_the_reader_as_advice_is_read_as_the_answers_words() -> None:
    reviewer = RuleReviewer([evidence("ev1", TROLL)])
    review = await reviewer.review(review_request("What do night-shift workers say about their jobs?", ("ev1", TROLL)))
    assert review.verdict == "crisis"
    assert review.reason.startswith("crisis language in the answer's own words: ")
    assert review.concerns == ["better off dead"]


async def test_the_composers_own_crisis_words_are_a_crisis() -> None:
    written = "Reading this, I want to kill myself too."  # not a span of the evidence it cites
    reviewer = RuleReviewer([evidence("ev1", FORUM)])
    review = await reviewer.review(review_request("What happened at the plant?", ("ev1", written)))
    assert review.verdict == "crisis" and review.concerns == ["kill myself"]
    assert review.reason.startswith("crisis language in the answer's own words")


async def test_without_the_runs_evidence_no_claim_is_known_to_be_a_quote() -> None:
    # The conservative reading: only reported speech is set aside, an unattributed first-person quote is read.
    assert (await RuleReviewer().review(review_request(QUESTION, ("ev1", TOLD_REPORTERS)))).verdict == "ok"
    assert (await RuleReviewer().review(review_request(QUESTION, ("ev2", FORUM)))).verdict == "crisis"


async def test_a_clean_answer_with_violations_is_sent_back() -> None:
    request = review_request(QUESTION, ("ev1", TOLD_REPORTERS))
    request.violations.append(Violation(check="unsupported", layer="l2", claim="x", detail="not in the source"))
    review = await RuleReviewer([evidence("ev1", TOLD_REPORTERS)]).review(request)
    assert review.verdict == "revise" and review.reason == "1 check(s) failed"


# ---- L3's phrase rules ----------------------------------------------------------------------------------------


def draft(*texts: str) -> Draft:
    claims = [Claim(text=t, evidence_ids=[f"ev{i}"]) for i, t in enumerate(texts)]
    return Draft(raw="", sections=[SectionDraft(id="answer", title="Answer", claims=claims)])


def phrase_checks(texts: tuple[str, ...], policy: Policy) -> list[tuple[str, str | None]]:
    return [
        (v.check, v.claim)
        for v in supervisor_violations(draft(*texts), policy)
        if v.check in ("advice_phrase", "echoed_personal_phrase", "forbidden_pattern")
    ]


def test_advice_phrasing_in_a_sentence_shipped_whole_is_advice_given() -> None:
    legal = REGISTRY.get("legal_research").policy
    assert phrase_checks(("If wages are withheld, you should write to the employer first.",), legal) == [
        ("advice_phrase", "you should")
    ]
    invest = REGISTRY.get("investment_memo").policy
    assert phrase_checks(("I recommend buying Norvik shares before the results.",), invest) == [
        ("advice_phrase", "I recommend buying")
    ]


def test_a_speakers_reported_words_are_the_speakers_unless_they_address_the_reader() -> None:
    invest = REGISTRY.get("investment_memo").policy
    assert phrase_checks(('Analyst Jo Lee said: "I recommend buying Norvik shares before the results."',), invest) == []
    coach = REGISTRY.get("coach_reply").policy
    # An order reported from a leaflet is passed on to the reader: still advice.
    assert phrase_checks(('The leaflet says: "take 20 mg twice a day with food."',), coach) == [
        ("advice_phrase", "take 20 mg")
    ]


def test_a_personal_situation_reported_from_a_hearing_is_not_echoed_back() -> None:
    legal = REGISTRY.get("legal_research").policy
    reported = 'The tribunal heard the claimant say: "I was dismissed without notice after ten years."'
    assert phrase_checks((reported,), legal) == []
    assert phrase_checks(("I was dismissed without notice after ten years.",), legal) == [
        ("echoed_personal_phrase", "I was dismissed")
    ]


def test_forbidden_patterns_read_everything_shipped_quotes_included() -> None:
    policy = Policy(forbidden_patterns=[r"https?://"])
    assert phrase_checks(('The notice read: "see https://example.org for details".',), policy) == [
        ("forbidden_pattern", None)
    ]


# ---- end to end: the quoted-crisis case ----------------------------------------------------------------------

DOCS = [
    DocumentIn(
        doc_id="harbour-lights",
        title="Harbour Lights (band)",
        text=(
            "Harbour Lights is an indie rock band formed in Bristol in 2011. The band cancelled its 2024 European "
            "tour in March after its record label, Northsound Records, went bankrupt. "
            f"{TOLD_REPORTERS} Harbour Lights released its fourth album, Tidewater, in 2023."
        ),
    ),
    DocumentIn(
        doc_id="northsound-records",
        title="Northsound Records",
        text=(
            "Northsound Records was an independent record label based in Bristol. Northsound Records filed for "
            "bankruptcy in February 2024, cancelling the tours and releases of its artists."
        ),
    ),
]


@pytest.fixture
async def service(db_url: str) -> AsyncIterator[tuple[RunService, Any]]:
    async with service_with_docs(db_url, "music", DOCS) as built:
        yield built


async def ask(service: tuple[RunService, Any], question: str, template: str) -> dict[str, Any]:
    runs, sessionmaker = service
    run_id = await runs.start(question=question, template=template, corpus="music")
    await runs.wait(run_id)
    async with sessionmaker() as session:
        run = await runs_repo.get_run(session=session, run_id=run_id)
        artifact = await runs_repo.latest_artifact(session=session, run_id=run_id)
        audit = [(a.stage, a.payload) for a in await runs_repo.audit_trail(session=session, run_id=run_id)]
    assert run is not None and artifact is not None
    return {"outcome": run.outcome, "report": artifact.report, "audit": audit}


@pytest.mark.parametrize("template", ["answer", "market_brief"])
async def test_a_quoted_crisis_sentence_ships_as_a_quote_on_an_unrelated_question(
    service: tuple[RunService, Any], template: str
) -> None:
    ran = await ask(service, QUESTION, template)
    assert ran["outcome"] == "shipped"
    claims = [c["text"] for s in ran["report"]["sections"] for c in s["claims"]]
    assert TOLD_REPORTERS in claims  # the quote shipped, cited, as what the source says
    checks = [payload for stage, payload in ran["audit"] if stage == "checks"]
    assert [c["verdict"] for c in checks][-1] == "ok"
    assert checks[-1]["checks"]["reviewer"] == {
        "verdict": "ok",
        "reason": "every claim is anchored, grounded and within policy",
        "concerns": [],
    }


async def test_crisis_in_the_users_message_still_routes_to_crisis(service: tuple[RunService, Any]) -> None:
    ran = await ask(service, "The tour is gone and I want to kill myself. Why did Harbour Lights cancel it?", "answer")
    assert ran["outcome"] == "crisis"
    assert ran["report"]["sections"] == [] and ran["report"]["evidence"] == []
    assert [stage for stage, _ in ran["audit"]][0] == "route"
    assert ran["audit"][0][1]["route"] == "crisis" and ran["audit"][0][1]["matched"] == ["kill myself"]
