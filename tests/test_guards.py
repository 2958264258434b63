"""The guards, one check at a time: L1 citations (with statute citations), L3 supervisor rules, the filler cut,
section status and confidence, the pre-persistence gate, the output parsers, the reviewer verdict, the scripted
and extractive composers and the verify/screen line format. Each test asserts which check fired and why."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from veracity.compose.extractive import ExtractiveComposer
from veracity.compose.parse import parse_contract, parse_sections
from veracity.compose.scripted import ScriptedComposer, substitute
from veracity.domain import (
    Claim,
    Draft,
    Evidence,
    Report,
    ReportSection,
    SectionDraft,
    SourceRef,
    Violation,
)
from veracity.errors import BadInput, MalformedOutput, ModelError
from veracity.guards.citations import citation_violations, statute_citations
from veracity.guards.filler import cut_filler
from veracity.guards.gate import check, missing_required, supported_shortfall
from veracity.guards.grounding import ground
from veracity.guards.io import ScreenItem, VerifyItem, parse_lines
from veracity.guards.reviewer import parse_verdict
from veracity.guards.status import confidence, section_status, section_support, with_status
from veracity.guards.supervisor import supervisor_violations
from veracity.ports import ComposeRequest, Judgement, Source
from veracity.specs.models import Spec
from veracity.specs.registry import SpecRegistry

REGISTRY = SpecRegistry.load()
LEGAL = REGISTRY.get("legal_research")
SUPPORT = REGISTRY.get("support_answer")
PATTERN = LEGAL.policy.citation_pattern
assert PATTERN is not None
EN = LEGAL.policy.disclaimer["en"]
MS = LEGAL.policy.disclaimer["ms"]


def ev(
    eid: str,
    quote: str,
    *,
    title: str = "Source",
    published: str | None = None,
    start: int = 0,
    score: float = 1.0,
) -> Evidence:
    return Evidence(
        id=eid,
        quote=quote,
        start=start,
        end=start + len(quote),
        content_hash=f"hash-{eid}",
        source=SourceRef(doc_id=f"doc-{eid}", title=title, published=published),
        origin_subtask_id="s1",
        score=score,
    )


def section(sid: str, *claims: Claim, title: str | None = None) -> SectionDraft:
    return SectionDraft(id=sid, title=title or sid.title(), claims=list(claims))


# The real wording of the bundled legal corpus (evidence_act_1950_s90a.md and its Malay counterpart).
S90A_TITLE = "Evidence Act 1950, section 90A: admissibility of computer-produced documents"
S90A_1 = (
    "Section 90A(1) of the Evidence Act 1950 provides that, in criminal or civil proceedings, a document produced "
    "by a computer, or a statement contained in it, is admissible as evidence of any fact stated in it."
)
S90A_4 = (
    "Under section 90A(4) of the Evidence Act 1950, where such a certificate is given, the computer is presumed "
    "to have been in good working order and operating properly throughout the material period."
)
MS_90A = (
    "Seksyen 90A Akta Keterangan 1950 memperuntukkan bahawa dokumen yang dikeluarkan oleh komputer boleh "
    "diterima sebagai keterangan dalam prosiding jenayah dan sivil."
)
MS_90A_2 = (
    "Di bawah seksyen 90A(2), dokumen itu boleh dibuktikan melalui perakuan yang ditandatangani oleh orang yang "
    "bertanggungjawab ke atas pengendalian komputer tersebut."
)
S90A_EVIDENCE = [ev("ev90a1", S90A_1, title=S90A_TITLE), ev("ev90a4", S90A_4, title=S90A_TITLE)]


# ---- L1: citations ----------------------------------------------------------------------------------------------


def test_uncited_claim_is_flagged_with_its_section_and_index() -> None:
    draft = [
        section(
            "provisions",
            Claim(text=S90A_1, evidence_ids=["ev90a1"]),
            Claim(text="Section 90A(4) presumes the computer worked properly.", evidence_ids=[]),
        )
    ]
    violations = citation_violations(draft, S90A_EVIDENCE)
    assert [(v.check, v.layer, v.section_id, v.claim_index) for v in violations] == [
        ("uncited_claim", "l1", "provisions", 1)
    ]
    assert violations[0].claim == "Section 90A(4) presumes the computer worked properly."
    assert violations[0].detail == "the claim carries no [evidence:ID] anchor"


def test_anchor_to_evidence_not_retrieved_is_unknown_anchor() -> None:
    draft = [section("provisions", Claim(text=S90A_1, evidence_ids=["ev90a1", "ev00deadbeef"]))]
    violations = citation_violations(draft, S90A_EVIDENCE)
    assert [(v.check, v.section_id, v.claim_index) for v in violations] == [("unknown_anchor", "provisions", 0)]
    assert "[evidence:ev00deadbeef]" in violations[0].detail
    assert "not retrieved" in violations[0].detail
    # The claim is named whole, so the next draft can drop exactly that sentence.
    assert violations[0].claim == S90A_1


def test_clean_draft_has_no_l1_violation() -> None:
    draft = [
        section("summary", Claim(text=S90A_1, evidence_ids=["ev90a1"])),
        section("provisions", Claim(text=S90A_4, evidence_ids=["ev90a4"])),
    ]
    assert citation_violations(draft, S90A_EVIDENCE, PATTERN) == []


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "Section 90A of the Evidence Act 1950 provides that a computer document is admissible.",
            [("90A", "evidence act 1950")],
        ),
        ("Section 90A(1) states that a document produced by a computer is admissible.", [("90A", None)]),
        ("Under s. 90A a certificate is sufficient evidence of ordinary use.", [("90A", None)]),
        ("Under the Evidence Act 1950, section 90A applies to computer printouts.", [("90A", "evidence act 1950")]),
        ("Seksyen 90A memperuntukkan bahawa dokumen komputer boleh diterima.", [("90A", None)]),
        ("The court weighed the printout as ordinary documentary evidence.", []),
    ],
)
def test_statute_citations_recognise_the_forms_models_write(text: str, expected: list[tuple[str, str | None]]) -> None:
    assert statute_citations(PATTERN, text) == expected


def test_section_not_retrieved_is_unknown_citation() -> None:
    claim = "Section 65 provides that a computer document is admissible as evidence."
    draft = [section("provisions", Claim(text=claim, evidence_ids=["ev90a1"]))]
    violations = citation_violations(draft, S90A_EVIDENCE, PATTERN)
    assert [(v.check, v.section_id, v.claim_index) for v in violations] == [("unknown_citation", "provisions", 0)]
    assert violations[0].detail == "section 65 is cited but no retrieved evidence contains it"
    # Without the spec's pattern, statute citations are not checked at all.
    assert citation_violations(draft, S90A_EVIDENCE) == []


@pytest.mark.parametrize(
    "claim",
    [
        "Section 90A of the Evidence Act 1950 provides that a computer document is admissible.",
        "Section 90A(1) states that a document produced by a computer is admissible.",
        "Under s. 90A a document produced by a computer is admissible.",
    ],
)
def test_citing_the_retrieved_section_of_the_same_act_passes(claim: str) -> None:
    draft = [section("provisions", Claim(text=claim, evidence_ids=["ev90a1"]))]
    assert citation_violations(draft, S90A_EVIDENCE, PATTERN) == []


@pytest.mark.parametrize(
    "claim",
    [
        # The act named without its year is still the act the evidence names.
        "Section 90A of the Evidence Act provides that a computer document is admissible.",
        # "Act of 1950" is a form the act pattern itself accepts.
        "Section 90A of the Evidence Act of 1950 provides that a computer document is admissible.",
    ],
)
def test_citing_the_retrieved_act_in_another_accepted_form_passes(claim: str) -> None:
    draft = [section("provisions", Claim(text=claim, evidence_ids=["ev90a1"]))]
    assert citation_violations(draft, S90A_EVIDENCE, PATTERN) == []


def test_same_section_number_of_a_different_act_is_unknown_citation() -> None:
    claim = "Section 90A of the Contracts Act 1950 provides that a computer document is admissible."
    draft = [section("provisions", Claim(text=claim, evidence_ids=["ev90a1"]))]
    violations = citation_violations(draft, S90A_EVIDENCE, PATTERN)
    assert [(v.check, v.claim_index) for v in violations] == [("unknown_citation", 0)]
    assert (
        violations[0].detail == "section 90A of the Contracts Act 1950 is cited but no retrieved evidence contains it"
    )


# ---- L3: supervisor -----------------------------------------------------------------------------------------------


def legal_draft(texts: list[str], disclaimer: str | None) -> Draft:
    claims = [Claim(text=t, evidence_ids=["ev90a1"]) for t in texts]
    return Draft(raw="", sections=[section("provisions", *claims, title="Statutory provisions")], disclaimer=disclaimer)


def checks_of(violations: list[Violation]) -> list[str]:
    return [v.check for v in violations]


def test_clean_english_answer_with_english_disclaimer_passes_l3() -> None:
    assert supervisor_violations(legal_draft([S90A_1, S90A_4], EN), LEGAL.policy) == []


def test_advice_phrase_is_flagged_with_the_phrase() -> None:
    draft = legal_draft([S90A_1, "So you should tender the printout under section 90A."], EN)
    violations = supervisor_violations(draft, LEGAL.policy)
    assert [(v.check, v.layer, v.claim) for v in violations] == [("advice_phrase", "l3", "you should")]
    assert "'you should'" in violations[0].detail


def test_echoed_personal_phrase_is_flagged() -> None:
    draft = legal_draft(
        ["In my client's case the printout was admitted under section 90A of the Evidence Act 1950."], EN
    )
    violations = supervisor_violations(draft, LEGAL.policy)
    assert [v.check for v in violations] == ["echoed_personal_phrase"]
    assert violations[0].claim is not None and violations[0].claim.startswith("my client's")
    assert "stay in research mode" in violations[0].detail


def test_answer_without_any_section_citation_is_citation_missing() -> None:
    draft = legal_draft(["A document produced by a computer is admissible as evidence of any fact stated in it."], EN)
    assert checks_of(supervisor_violations(draft, LEGAL.policy)) == ["citation_missing"]


def test_answer_without_disclaimer_is_disclaimer_missing_in_its_language() -> None:
    violations = supervisor_violations(legal_draft([S90A_1], None), LEGAL.policy)
    assert checks_of(violations) == ["disclaimer_missing"]
    assert violations[0].detail == f"add the disclaimer (en): {EN}"


def test_english_answer_with_malay_disclaimer_is_disclaimer_language() -> None:
    violations = supervisor_violations(legal_draft([S90A_1, S90A_4], MS), LEGAL.policy)
    assert checks_of(violations) == ["disclaimer_language"]
    assert "'en'" in violations[0].detail and EN in violations[0].detail


def test_malay_answer_with_malay_disclaimer_passes() -> None:
    assert supervisor_violations(legal_draft([MS_90A, MS_90A_2], MS), LEGAL.policy) == []
    # ... and with the English disclaimer it is the language check that fires, naming 'ms'.
    violations = supervisor_violations(legal_draft([MS_90A, MS_90A_2], EN), LEGAL.policy)
    assert checks_of(violations) == ["disclaimer_language"] and "'ms'" in violations[0].detail


# ---- filler ---------------------------------------------------------------------------------------------------------

FILLER_EVIDENCE = [
    ev("ev1", "Refunds are available within 14 days of purchase."),
    ev("ev2", "Delivery to the mainland takes 30 days."),
]


def test_unanchored_empty_sentence_is_cut_with_a_note() -> None:
    kept = Claim(text="Refunds are available within 14 days of purchase.", evidence_ids=["ev1"])
    filler = Claim(text="This is a very important topic for everyone.", evidence_ids=[])
    one_word = Claim(text="Many people care about refunds a lot.", evidence_ids=[])  # shares one word: "refunds"
    [out] = cut_filler([section("findings", kept, filler, one_word)], FILLER_EVIDENCE)
    assert out.claims == [kept]
    assert out.filler_cut == [filler.text, one_word.text]
    assert out.note == "2 sentence(s) of prose no evidence supports were cut."


@pytest.mark.parametrize(
    "text",
    [
        "Refunds take 14 days.",  # a figure
        "The policy was written by Jane in Portland.",  # a name
        "Delivery of refunds is fine.",  # two evidence words
        "Refunds are available after purchase.",  # several evidence words
    ],
)
def test_unanchored_factual_sentence_is_kept_for_l1(text: str) -> None:
    [out] = cut_filler([section("findings", Claim(text=text, evidence_ids=[]))], FILLER_EVIDENCE)
    assert [c.text for c in out.claims] == [text] and out.filler_cut == [] and out.note is None
    assert checks_of(citation_violations([out], FILLER_EVIDENCE)) == ["uncited_claim"]


def test_anchored_claims_are_never_cut() -> None:
    claim = Claim(text="This is a very important topic for everyone.", evidence_ids=["ev1"])
    [out] = cut_filler([section("findings", claim)], FILLER_EVIDENCE)
    assert out.claims == [claim] and out.filler_cut == [] and out.note is None


# ---- status and confidence ------------------------------------------------------------------------------------------


def status_spec(**extra: object) -> Spec:
    return Spec.model_validate(
        {
            "id": "status_demo",
            "title": "Status demo",
            "description": "d",
            "done_means": "d",
            "sections": [
                {"id": "findings", "title": "Findings", "description": "d", "required": True, "min_evidence": 2},
                {"id": "context", "title": "Context", "description": "d", "required": True, "min_evidence": 1},
                {"id": "extra", "title": "Extra", "description": "d", "required": False},
            ],
            **extra,
        }
    )


NOW = datetime(2025, 6, 1, tzinfo=UTC)


def labelled(label: str | None, *ids: str) -> Claim:
    return Claim(text=f"A {label} claim.", evidence_ids=list(ids), label=label)  # type: ignore[arg-type]


def test_section_without_supported_or_partial_claims_is_not_found() -> None:
    spec = status_spec()
    by_id = {e.id: e for e in [ev("a", "q"), ev("b", "q")]}
    assert section_status(spec, section("findings"), by_id, NOW) == "not_found"
    only_unsupported = section("findings", labelled("unsupported", "a"), labelled("unsupported", "b"))
    assert section_status(spec, only_unsupported, by_id, NOW) == "not_found"
    unknown_ids = section("findings", labelled("supported", "zz1"), labelled("supported", "zz2"))
    assert section_status(spec, unknown_ids, by_id, NOW) == "not_found"


def test_fewer_cited_evidences_than_min_evidence_is_thin() -> None:
    spec = status_spec()
    by_id = {e.id: e for e in [ev("a", "q"), ev("b", "q")]}
    # Two claims citing the same one evidence: one distinct evidence, the section needs two.
    thin = section("findings", labelled("supported", "a"), labelled("partial", "a"))
    assert section_status(spec, thin, by_id, NOW) == "thin_evidence"
    enough = section("findings", labelled("supported", "a"), labelled("partial", "b"))
    assert section_status(spec, enough, by_id, NOW) == "supported"
    # The unsupported claim's evidence does not count.
    half = section("findings", labelled("supported", "a"), labelled("unsupported", "b"))
    assert section_status(spec, half, by_id, NOW) == "thin_evidence"


def test_stale_when_every_cited_evidence_is_older_than_the_limit() -> None:
    spec = status_spec(stale_after_days=30)
    old = (NOW - timedelta(days=31)).date().isoformat()
    boundary = (NOW - timedelta(days=30)).date().isoformat()
    fresh = (NOW - timedelta(days=2)).isoformat()
    by_id = {
        "old1": ev("old1", "q", published=old),
        "old2": ev("old2", "q", published=old + "T10:00:00Z"),
        "edge": ev("edge", "q", published=boundary),
        "new": ev("new", "q", published=fresh),
        "undated": ev("undated", "q"),
    }
    claims = section("findings", labelled("supported", "old1"), labelled("supported", "old2"))
    assert section_status(spec, claims, by_id, NOW) == "stale"
    # One fresh (or undated) evidence keeps the section current; exactly the limit is not older than it.
    mixed = section("findings", labelled("supported", "old1"), labelled("supported", "new"))
    assert section_status(spec, mixed, by_id, NOW) == "supported"
    undated = section("findings", labelled("supported", "old1"), labelled("supported", "undated"))
    assert section_status(spec, undated, by_id, NOW) == "supported"
    edge = section("findings", labelled("supported", "edge"), labelled("supported", "old1"))
    assert section_status(spec, edge, by_id, NOW) == "supported"
    # Without stale_after_days the same old evidence is simply supported.
    assert section_status(status_spec(), claims, by_id, NOW) == "supported"


def test_with_status_sets_every_section() -> None:
    spec = status_spec()
    evidence = [ev("a", "q"), ev("b", "q")]
    draft = [
        section("findings", labelled("supported", "a"), labelled("supported", "b")),
        section("context", labelled("supported", "a")),
        section("extra"),
    ]
    assert [s.status for s in with_status(spec, draft, evidence)] == ["supported", "supported", "not_found"]


def test_confidence_is_mean_label_weight_times_required_support() -> None:
    spec = status_spec()
    draft = [
        section("findings", labelled("supported", "a"), labelled("partial", "a")).model_copy(
            update={"status": "thin_evidence"}
        ),
        section("context", labelled("supported", "b"), labelled("unsupported", "b")).model_copy(
            update={"status": "supported"}
        ),
        section("extra").model_copy(update={"status": "not_found"}),
    ]
    # mean (1 + 0.6 + 1 + 0) / 4 = 0.65; of the two required sections, "context" is supported and "findings" is
    # thin, citing one of the two evidences it needs (half supported): 0.65 * (1 + 0.5) / 2
    assert confidence(spec, draft) == pytest.approx(0.4875, abs=1e-3)
    assert confidence(spec, draft, stated=0.2) == 0.2  # capped by what the composer stated
    assert confidence(spec, draft, stated=0.9) == pytest.approx(0.4875, abs=1e-3)  # never raised by it
    nothing_found = [draft[0].model_copy(update={"status": "not_found"}), *draft[1:]]
    assert confidence(spec, nothing_found) == 0.325  # a section with nothing found counts zero
    all_supported = [s.model_copy(update={"status": "supported"}) for s in draft]
    assert confidence(spec, all_supported) == 0.65
    assert confidence(spec, [section("findings"), section("context")]) == 0.0  # no claims


def test_a_thin_section_counts_the_share_of_the_evidence_it_needs_that_it_cites() -> None:
    """A one-sentence answer where two sources were asked for ships thin: half supported, not a confidence of 0
    beside every sentence marked supported."""
    spec = status_spec()
    one_of_two = section("findings", labelled("supported", "a")).model_copy(update={"status": "thin_evidence"})
    assert section_support(spec, one_of_two) == 0.5
    assert (
        confidence(
            spec,
            [one_of_two, section("context", labelled("supported", "b")).model_copy(update={"status": "supported"})],
        )
        == 0.75
    )
    unsupported_only = one_of_two.model_copy(update={"claims": [labelled("unsupported", "a")]})
    assert section_support(spec, unsupported_only) == 0.0  # an unsupported claim cites nothing
    three = status_spec(
        sections=[{"id": "findings", "title": "F", "description": "d", "required": True, "min_evidence": 3}]
    )
    two_of_three = section("findings", labelled("supported", "a"), labelled("partial", "b"), labelled("supported", "a"))
    assert section_support(three, two_of_three.model_copy(update={"status": "thin_evidence"})) == pytest.approx(2 / 3)
    assert section_support(three, two_of_three.model_copy(update={"status": "not_found"})) == 0.0
    assert section_support(three, two_of_three.model_copy(update={"status": "supported"})) == 1.0
    assert section_support(three, two_of_three.model_copy(update={"status": "stale"})) == 0.0
    same_twice = section("findings", labelled("supported", "a"), labelled("partial", "a"))
    assert section_support(three, same_twice.model_copy(update={"status": "thin_evidence"})) == pytest.approx(1 / 3)


def test_confidence_counts_claims_cut_as_off_topic_as_zero() -> None:
    spec = status_spec()
    kept = [labelled("supported", "a"), labelled("supported", "b")]
    on_topic = [
        section("findings", *kept).model_copy(update={"status": "supported"}),
        section("context", kept[0]).model_copy(update={"status": "supported"}),
    ]
    assert confidence(spec, on_topic) == 1.0
    # The same kept claims, but the composer also drafted three the relevance check cut: 3 of 6 drafted count.
    half_off = [on_topic[0].model_copy(update={"off_topic_cut": ["x", "y", "z"]}), on_topic[1]]
    assert confidence(spec, half_off) == 0.5
    assert confidence(spec, [section("findings").model_copy(update={"off_topic_cut": ["x"]})]) == 0.0


# ---- the pre-persistence gate -----------------------------------------------------------------------------------

SUMMARY_TEXT = "Section 90A(1) of the Evidence Act 1950 makes a computer-produced document admissible as evidence."
PROVISION_TEXT = "Under section 90A(4) the computer is presumed to have been in good working order."


def report(
    texts: dict[str, list[str]],
    *,
    outcome: str = "shipped",
    disclaimer: str | None = EN,
    notes: tuple[str, ...] = (),
    spec: Spec = LEGAL,
) -> Report:
    sections = [
        ReportSection(
            id=s.id,
            title=s.title,
            required=s.required,
            status="supported" if texts.get(s.id) else "not_found",
            claims=[Claim(text=t, evidence_ids=["ev90a1"], label="supported") for t in texts.get(s.id, [])],
        )
        for s in spec.sections
    ]
    return Report(
        run_id="run1",
        template=spec.id,
        question="What does section 90A say?",
        corpus="legal_research",
        outcome=outcome,  # type: ignore[arg-type]
        sections=sections,
        evidence=[],
        disclaimer=disclaimer,
        notes=list(notes),
    )


def with_composer(spec: Spec, **directives: object) -> Spec:
    return spec.model_copy(update={"composer": spec.composer.model_copy(update=directives)})


def test_a_required_section_that_may_honestly_be_empty_is_not_missing() -> None:
    memo = REGISTRY.get("investment_memo")
    risks = memo.section("risks")
    assert risks.required and risks.min_evidence == 0  # the template: "Risks may honestly be empty"
    assert missing_required(memo, {"thesis", "bull_base_bear"}) == []
    assert missing_required(memo, {"bull_base_bear"}) == ["thesis"]
    strict = memo.model_copy(
        update={"sections": [s.model_copy(update={"min_evidence": 1}) if s.id == "risks" else s for s in memo.sections]}
    )
    assert missing_required(strict, {"thesis", "bull_base_bear"}) == ["risks"]


def test_gate_passes_a_clean_report() -> None:
    assert check(report({"summary": [SUMMARY_TEXT], "provisions": [PROVISION_TEXT]}), LEGAL) == []


@pytest.mark.parametrize(
    "bad",
    [
        f"{PROVISION_TEXT[:-1]} [TODO: x].",
        f"Lorem ipsum dolor sit amet. {PROVISION_TEXT}",
        f"Dear {{{{ name }}}}, {PROVISION_TEXT}",
    ],
)
def test_gate_placeholder_names_the_claim(bad: str) -> None:
    problems = check(report({"summary": [SUMMARY_TEXT], "provisions": [bad]}), LEGAL)
    assert [(p.check, p.layer, p.section_id, p.claim) for p in problems] == [("placeholder", "gate", "provisions", bad)]
    assert problems[0].detail.startswith("placeholder text matches")


def test_gate_placeholder_in_the_disclaimer_is_caught_too() -> None:
    problems = check(report({"summary": [SUMMARY_TEXT], "provisions": [PROVISION_TEXT]}, disclaimer="TBD"), LEGAL)
    assert [(p.check, p.section_id, p.claim) for p in problems] == [("placeholder", None, "TBD")]


def test_gate_forbidden_pattern_from_composer_and_policy() -> None:
    forbidden = r"\bguaranteed?\b"
    spec = with_composer(LEGAL, forbidden_patterns=[forbidden])
    bad = "Section 90A guarantees the printout is admitted."
    problems = check(report({"summary": [SUMMARY_TEXT], "provisions": [bad]}), spec)
    assert problems == []  # "guarantees" is not the forbidden word
    bad = "Under section 90A the printout is guaranteed to be admitted."
    problems = check(report({"summary": [SUMMARY_TEXT], "provisions": [bad]}), spec)
    assert [(p.check, p.section_id, p.claim) for p in problems] == [("forbidden_pattern", "provisions", bad)]
    assert problems[0].detail == f"forbidden pattern {forbidden!r} present"
    policy_spec = LEGAL.model_copy(
        update={"policy": LEGAL.policy.model_copy(update={"forbidden_patterns": [r"(?i)\bprintout\b"]})}
    )
    problems = check(report({"summary": [SUMMARY_TEXT], "provisions": [bad]}), policy_spec)
    assert [(p.check, p.claim) for p in problems] == [("forbidden_pattern", bad)]


def test_gate_min_chars_boundary() -> None:
    texts = {"summary": [SUMMARY_TEXT], "provisions": [PROVISION_TEXT]}
    length = len(SUMMARY_TEXT) + len(PROVISION_TEXT)
    problems = check(report(texts), with_composer(LEGAL, min_chars=length + 1))
    assert [p.check for p in problems] == ["too_short"]
    assert problems[0].detail == f"report prose is {length} characters; the template needs at least {length + 1}"
    assert check(report(texts), with_composer(LEGAL, min_chars=length)) == []


def test_gate_max_chars_boundary() -> None:
    texts = {"summary": [SUMMARY_TEXT], "provisions": [PROVISION_TEXT]}
    length = len(SUMMARY_TEXT) + len(PROVISION_TEXT)
    problems = check(report(texts), with_composer(LEGAL, max_chars=length - 1))
    assert [p.check for p in problems] == ["too_long"]
    assert f"report prose is {length} characters" in problems[0].detail
    assert check(report(texts), with_composer(LEGAL, max_chars=length)) == []


def test_gate_required_section_empty() -> None:
    problems = check(report({"summary": [SUMMARY_TEXT, PROVISION_TEXT]}), LEGAL)
    assert [p.check for p in problems] == ["required_section_missing"]
    assert problems[0].detail == "required sections empty: provisions"


def test_gate_qa_policy_counts_supported_required_sections() -> None:
    """One rule for the gate and the decide node: required sections whose status is supported, against
    ``min_supported_required`` (never more than there are required sections)."""
    strict = LEGAL.model_copy(update={"qa_policy": LEGAL.qa_policy.model_copy(update={"min_supported_required": 2})})
    assert supported_shortfall(strict, {"summary", "provisions"}) is None
    assert supported_shortfall(strict, {"summary", "application"}) == (1, 2)  # application is not required
    every = LEGAL.model_copy(update={"qa_policy": LEGAL.qa_policy.model_copy(update={"min_supported_required": 9})})
    assert supported_shortfall(every, {"summary"}) == (1, 2)
    thin = report({"summary": [SUMMARY_TEXT], "provisions": [PROVISION_TEXT]})
    thin.sections[1].status = "thin_evidence"
    assert check(thin, LEGAL) == []
    problems = check(thin, strict)
    assert [p.check for p in problems] == ["qa_policy"]
    assert problems[0].detail == "1 required section(s) supported; the qa policy needs 2"


def test_gate_fallback_report_is_not_held_to_the_directives() -> None:
    spec = with_composer(LEGAL, min_chars=5000)
    assert check(report({}, outcome="fallback", notes=("Veracity could not produce a report.",)), spec) == []
    # ... but a placeholder is still caught in a fallback's notes.
    problems = check(report({}, outcome="fallback", notes=("[TODO: explain]",)), spec)
    assert [(p.check, p.claim) for p in problems] == [("placeholder", "[TODO: explain]")]


# ---- parsers ------------------------------------------------------------------------------------------------------


def claims_by_section(draft: Draft) -> dict[str, list[tuple[str, list[str]]]]:
    return {s.id: [(c.text, c.evidence_ids) for c in s.claims] for s in draft.sections}


def test_parse_sections_maps_headings_by_title_or_id_case_insensitively() -> None:
    raw = (
        "## SUMMARY\n"
        "Section 90A(1) makes a computer document admissible. [evidence:ev1]\n"
        "## statutory provisions ##\n"
        "- Section 90A(2) makes a certificate sufficient. [evidence:ev2]\n"
        "### Application\n"
        "Courts accept printouts under section 90A. [evidence:ev3]\n"
    )
    draft = parse_sections(raw, LEGAL)
    assert claims_by_section(draft) == {
        "summary": [("Section 90A(1) makes a computer document admissible.", ["ev1"])],
        "provisions": [("Section 90A(2) makes a certificate sufficient.", ["ev2"])],
        "application": [("Courts accept printouts under section 90A.", ["ev3"])],
    }
    assert [s.title for s in draft.sections] == ["Summary", "Statutory provisions", "How it is applied"]
    assert draft.raw == raw and draft.disclaimer is None


def test_parse_sections_keeps_anchors_written_after_the_full_stop_on_their_sentence() -> None:
    raw = (
        "## Statutory provisions\n"
        "Section 90A(1) makes a document admissible. [evidence:ev1] Section 90A(4) presumes it worked. "
        "[evidence:ev2][evidence:ev1] Under s. 90A a certificate suffices. [evidence:ev3]\n"
        "Section 90A(6) covers documents produced later.\n"
        "[evidence:ev4]\n"
    )
    assert claims_by_section(parse_sections(raw, LEGAL))["provisions"] == [
        ("Section 90A(1) makes a document admissible.", ["ev1"]),
        ("Section 90A(4) presumes it worked.", ["ev2", "ev1"]),
        ("Under s. 90A a certificate suffices.", ["ev3"]),
        ("Section 90A(6) covers documents produced later.", ["ev4"]),
    ]


def test_parse_sections_keeps_the_ss_abbreviation_on_its_sentence() -> None:
    # The spec names "ss. 90A" as a citation form; it must not end the sentence.
    sentence = "Under ss. 90A and 90B of the Evidence Act 1950, printouts are admissible."
    raw = f"## Statutory provisions\n{sentence} [evidence:ev1]\n"
    assert claims_by_section(parse_sections(raw, LEGAL))["provisions"] == [(sentence, ["ev1"])]


@pytest.mark.parametrize(
    ("raw", "language"),
    [
        (f"## Summary\nSection 90A(1) applies. [evidence:ev1]\n## Disclaimer\n{EN}\n", "en"),
        (f"## Summary\nSection 90A(1) applies. [evidence:ev1]\n## Penafian\n{MS}\n", "ms"),
        (f"## Summary\nSection 90A(1) applies. [evidence:ev1] {EN}\n", "en"),  # inside a section
        (f"{MS}\n## Summary\nSection 90A(1) applies. [evidence:ev1]\n", "ms"),  # before any heading
    ],
)
def test_parse_sections_extracts_the_policy_disclaimer_out_of_the_claims(raw: str, language: str) -> None:
    draft = parse_sections(raw, LEGAL)
    assert claims_by_section(draft)["summary"] == [("Section 90A(1) applies.", ["ev1"])]
    assert draft.disclaimer == LEGAL.policy.disclaimer[language]


@pytest.mark.parametrize(
    ("raw", "problems"),
    [
        ("", ["output is empty"]),
        ("   \n\t", ["output is empty"]),
        ("<think>I will cite section 90A.</think>", ["output is empty"]),
        (
            "Section 90A(1) makes a document admissible. [evidence:ev1]",
            ["no section of the template was found (expected '## <section title>' headings)"],
        ),
        (
            "## Background\nSection 90A(1) makes a document admissible. [evidence:ev1]",
            [
                "no section of the template was found (expected '## <section title>' headings)",
                "unknown headings: Background",
            ],
        ),
    ],
)
def test_parse_sections_rejects_empty_or_headless_output(raw: str, problems: list[str]) -> None:
    with pytest.raises(MalformedOutput) as info:
        parse_sections(raw, LEGAL)
    assert info.value.problems == problems and info.value.raw == raw


def test_parse_sections_headings_optional_for_a_one_section_template() -> None:
    draft = parse_sections("Tallyo refunds within 14 days. [evidence:ev1]", SUPPORT)
    assert claims_by_section(draft) == {"answer": [("Tallyo refunds within 14 days.", ["ev1"])]}


def test_parse_sections_strips_think_blocks_and_code_fences() -> None:
    raw = (
        "<think>The user asks about 90A; ## Summary is the heading.</think>\n"
        "```markdown\n## Summary\nSection 90A(1) applies. [evidence:ev1]\n```"
    )
    assert claims_by_section(parse_sections(raw, LEGAL))["summary"] == [("Section 90A(1) applies.", ["ev1"])]


ANSWER = "Tallyo gives a full refund within 14 days of the payment date. [evidence:evkb101]"
GOOD_CONTRACT = {"answer": ANSWER, "citations": ["evkb101"], "confidence": 0.8, "needs_human": False}


def test_parse_contract_valid_json_is_one_answer_section() -> None:
    raw = "<think>KB-101 has it.</think>\n```json\n" + json.dumps(GOOD_CONTRACT) + "\n```"
    draft = parse_contract(raw, SUPPORT)
    assert claims_by_section(draft) == {
        "answer": [("Tallyo gives a full refund within 14 days of the payment date.", ["evkb101"])]
    }
    assert draft.confidence == 0.8 and draft.needs_human is False
    assert draft.contract == GOOD_CONTRACT and draft.raw == raw


@pytest.mark.parametrize(
    ("raw", "fragment"),
    [
        ('{"answer": "Refunds within 14 days." "citations": ["KB-101"]', "invalid JSON (Expecting ',' delimiter"),
        (json.dumps({k: v for k, v in GOOD_CONTRACT.items() if k != "needs_human"}), "missing field(s): needs_human"),
        (json.dumps({**GOOD_CONTRACT, "confidence": 1.5}), "confidence must be a number in [0, 1]"),
        (json.dumps({**GOOD_CONTRACT, "confidence": True}), "confidence must be a number in [0, 1]"),
        (json.dumps({**GOOD_CONTRACT, "needs_human": "no"}), "needs_human must be true or false"),
        (json.dumps({**GOOD_CONTRACT, "citations": ["KB-101"]}), "citations must list exactly the [evidence:ID]"),
        (json.dumps({**GOOD_CONTRACT, "citations": []}), "citations must list exactly the [evidence:ID]"),
        (json.dumps({**GOOD_CONTRACT, "answer": "  "}), "answer must be a non-empty string"),
        (json.dumps({**GOOD_CONTRACT, "sources": []}), "unexpected field(s): sources"),
        (json.dumps([GOOD_CONTRACT]), "output must be a JSON object"),
    ],
)
def test_parse_contract_rejects_what_breaks_the_contract(raw: str, fragment: str) -> None:
    with pytest.raises(MalformedOutput) as info:
        parse_contract(raw, SUPPORT)
    assert any(fragment in p for p in info.value.problems), info.value.problems


def test_parse_contract_confidence_bounds_are_inclusive() -> None:
    assert parse_contract(json.dumps({**GOOD_CONTRACT, "confidence": 0}), SUPPORT).confidence == 0.0
    assert parse_contract(json.dumps({**GOOD_CONTRACT, "confidence": 1}), SUPPORT).confidence == 1.0


# ---- reviewer verdict ---------------------------------------------------------------------------------------------


def test_parse_verdict_accepts_the_three_states() -> None:
    assert parse_verdict('{"verdict": "ok", "reason": "grounded"}').verdict == "ok"
    revise = parse_verdict('```json\n{"verdict": "revise", "reason": "r", "concerns": ["claim 2 is uncited"]}\n```')
    assert (revise.verdict, revise.concerns) == ("revise", ["claim 2 is uncited"])
    crisis = parse_verdict('<think>hmm</think>{"verdict": "crisis", "reason": "self-harm language"}')
    assert (crisis.verdict, crisis.reason) == ("crisis", "self-harm language")


@pytest.mark.parametrize(
    ("raw", "fragment"),
    [
        ('{"verdict": "revise", "reason": "needs work"}', "must name at least one concrete concern"),
        ('{"verdict": "revise", "reason": "needs work", "concerns": []}', "must name at least one concrete concern"),
        ('{"verdict": "maybe", "reason": "unsure"}', "verdict:"),
        ("Looks fine", "output: Invalid JSON"),
    ],
)
def test_parse_verdict_rejects_malformed_output(raw: str, fragment: str) -> None:
    with pytest.raises(MalformedOutput) as info:
        parse_verdict(raw)
    assert any(fragment in p for p in info.value.problems), info.value.problems
    assert info.value.raw == raw


# ---- scripted composer ------------------------------------------------------------------------------------------

SCRIPT_EVIDENCE = [
    ev("evaaa", "Section 90A(1) of the Evidence Act 1950 provides that a document is admissible."),
    ev("evbbb", "Under section 90A(4)   of the Evidence Act 1950,\nthe computer is presumed to work."),
]


def test_substitute_resolves_evidence_by_words_and_by_rank() -> None:
    raw = "{E:UNDER section 90a(4) of the  evidence act 1950, the computer} {E:no such words} {E2} {E1} {E5} {E0}"
    assert substitute(raw, SCRIPT_EVIDENCE) == "evbbb evnotretrieved evbbb evaaa evmissing0005 evmissing0000"


def compose_request(
    spec: Spec,
    evidence: list[Evidence],
    section_evidence: dict[str, list[str]],
    *,
    question: str = "What does section 90A of the Evidence Act 1950 say?",
    attempt: int = 1,
    violations: list[Violation] | None = None,
) -> ComposeRequest:
    return ComposeRequest(
        spec=spec,
        question=question,
        section_evidence=section_evidence,
        evidence=evidence,
        attempt=attempt,
        per_section=3,
        violations=violations or [],
    )


async def test_scripted_composer_records_feedback_and_repeats_its_last_output() -> None:
    first = "## Summary\nSection 90A(1) applies. [evidence:{E1}]\n## Statutory provisions\nIt applies.\n"
    last = "## Summary\nSection 90A(1) applies. [evidence:{E:section 90A(1)}]\n"
    composer = ScriptedComposer([first, last])
    violation = Violation(
        check="uncited_claim", section_id="provisions", claim="It applies.", detail="the claim carries no anchor"
    )
    draft1 = await composer.compose(compose_request(LEGAL, SCRIPT_EVIDENCE, {}))
    draft2 = await composer.compose(compose_request(LEGAL, SCRIPT_EVIDENCE, {}, attempt=2, violations=[violation]))
    draft3 = await composer.compose(compose_request(LEGAL, SCRIPT_EVIDENCE, {}, attempt=3))
    assert claims_by_section(draft1)["provisions"] == [("It applies.", [])]
    assert claims_by_section(draft1)["summary"] == [("Section 90A(1) applies.", ["evaaa"])]
    assert claims_by_section(draft2)["provisions"] == []
    assert draft3.raw == draft2.raw == last.replace("{E:section 90A(1)}", "evaaa")
    assert composer.feedback == [
        [],
        ["[l1:uncited_claim] section provisions claim 'It applies.': the claim carries no anchor"],
        [],
    ]


async def test_scripted_timeout_raises_model_error() -> None:
    composer = ScriptedComposer(["!timeout"])
    with pytest.raises(ModelError, match="scripted model timeout"):
        await composer.compose(compose_request(LEGAL, SCRIPT_EVIDENCE, {}))
    with pytest.raises(ModelError):
        await composer.compose(compose_request(LEGAL, SCRIPT_EVIDENCE, {}, attempt=2))
    assert len(composer.feedback) == 2


# ---- extractive composer ------------------------------------------------------------------------------------------

ADVICE = "In practice you should always tender the section 90A certificate with the printout."
ECHO = "In my client's case the printout was admitted under section 90A of the Evidence Act 1950."
EXTRACTIVE_EVIDENCE = [
    ev("evadvice", ADVICE),
    ev("ev1", S90A_1, title=S90A_TITLE),
    ev("evecho", ECHO),
    ev("ev4", S90A_4, title=S90A_TITLE),
]


async def test_extractive_composer_never_picks_advice_or_personal_phrasing() -> None:
    request = compose_request(
        LEGAL,
        EXTRACTIVE_EVIDENCE,
        {"provisions": ["evadvice", "ev1", "evecho"], "application": ["evecho", "evadvice", "ev4"]},
    )
    draft = await ExtractiveComposer().compose(request)
    # Each section holds one claim, so none can spare one: the summary repeats the most relevant, once.
    assert claims_by_section(draft) == {
        "summary": [(S90A_1, ["ev1"])],
        "provisions": [(S90A_1, ["ev1"])],
        "application": [(S90A_4, ["ev4"])],
    }
    assert supervisor_violations(draft, LEGAL.policy) == []


async def test_extractive_composer_adds_the_disclaimer_in_the_answers_language() -> None:
    english = await ExtractiveComposer().compose(compose_request(LEGAL, EXTRACTIVE_EVIDENCE, {"provisions": ["ev1"]}))
    assert english.disclaimer == EN
    malay_evidence = [ev("evms1", MS_90A), ev("evms2", MS_90A_2)]
    malay = await ExtractiveComposer().compose(
        compose_request(
            LEGAL, malay_evidence, {"provisions": ["evms1", "evms2"]}, question="Apakah peruntukan seksyen 90A?"
        )
    )
    assert malay.disclaimer == MS
    assert supervisor_violations(malay, LEGAL.policy) == []


async def test_extractive_composer_drops_a_claim_named_by_the_last_violations() -> None:
    short_a = "Section 90A(2) makes a signed certificate sufficient evidence of ordinary use."
    short_b = "Section 90A(6) covers documents produced after proceedings began."
    evidence = [ev("eva", short_a), ev("evb", short_b)]
    told = Violation(check="placeholder", layer="gate", section_id="provisions", claim=short_a, detail="x")
    request = compose_request(LEGAL, evidence, {"provisions": ["eva", "evb"]}, attempt=2, violations=[told])
    draft = await ExtractiveComposer().compose(request)
    assert claims_by_section(draft)["provisions"] == [(short_b, ["evb"])]


class DisagreeingJudge:
    """A model judge that finds a claim unsupported (a model may disagree with a verbatim quote)."""

    name = "disagreeing"

    async def judge(self, claim: str, sources: list[Source]) -> Judgement:
        return Judgement(label="unsupported", score=0.0, evidence=[], reason="the model judge disagrees")


async def test_extractive_composer_drops_a_long_claim_as_the_checks_name_it() -> None:
    # L2 (and L1) name a claim by its text shortened to 100 characters; the bundled sentences are longer than that.
    first = await ExtractiveComposer().compose(compose_request(LEGAL, EXTRACTIVE_EVIDENCE, {"provisions": ["ev1"]}))
    provisions = [s for s in first.sections if s.id == "provisions"]
    _, violations = await ground(DisagreeingJudge(), provisions, EXTRACTIVE_EVIDENCE)
    assert [(v.check, v.section_id) for v in violations] == [("unsupported_claim", "provisions")]
    request = compose_request(
        LEGAL, EXTRACTIVE_EVIDENCE, {"provisions": ["ev1", "ev4"]}, attempt=2, violations=violations
    )
    composed = await ExtractiveComposer().compose(request)
    assert claims_by_section(composed)["provisions"] == [(S90A_4, ["ev4"])]


# ---- io: the verify / screen line formats -------------------------------------------------------------------------

VERIFY_LINE = json.dumps({"id": "c1", "claim": "Refunds take 14 days.", "sources": [{"id": "s", "text": "t"}]})


@pytest.mark.parametrize(
    ("bad", "reason"),
    [
        ("{not json", "not JSON ("),
        (json.dumps({"id": "c2", "sources": []}), "claim: Field required"),
        (json.dumps({"id": "c2", "claim": "x", "sources": [], "extra": 1}), "extra: Extra inputs are not permitted"),
    ],
)
def test_parse_lines_rejects_the_whole_input_naming_the_line(bad: str, reason: str) -> None:
    with pytest.raises(BadInput) as info:
        parse_lines([VERIFY_LINE, "", bad, VERIFY_LINE], VerifyItem, "claims.jsonl")
    assert info.value.message.startswith(f"claims.jsonl:3: {reason}"), info.value.message


def test_parse_lines_skips_blank_lines() -> None:
    items = parse_lines(["", VERIFY_LINE, "   ", VERIFY_LINE, ""], VerifyItem, "claims.jsonl")
    assert [(i.id, i.claim, i.sources[0].id) for i in items] == [("c1", "Refunds take 14 days.", "s")] * 2
    screen = parse_lines(['{"id": "m1", "text": "hello"}'], ScreenItem, "<stdin>")
    assert [(i.id, i.text) for i in screen] == [("m1", "hello")]
    with pytest.raises(BadInput, match=r"^<stdin>:1: text: Field required"):
        parse_lines(['{"id": "m1"}'], ScreenItem, "<stdin>")


def test_parse_sections_drops_lettered_and_roman_item_markers_but_keeps_an_initial() -> None:
    raw = (
        "## Statutory provisions\n"
        "i. Section 90A(1) makes a document admissible. [evidence:ev1]\n"
        "(ii) Section 90A(4) presumes it worked. [evidence:ev2]\n"
        "b) Under s. 90A a certificate suffices. [evidence:ev3]\n"
        "A. Rahman J held that section 90A applies. [evidence:ev4]\n"
    )
    assert claims_by_section(parse_sections(raw, LEGAL))["provisions"] == [
        ("Section 90A(1) makes a document admissible.", ["ev1"]),
        ("Section 90A(4) presumes it worked.", ["ev2"]),
        ("Under s. 90A a certificate suffices.", ["ev3"]),
        ("A. Rahman J held that section 90A applies.", ["ev4"]),
    ]
