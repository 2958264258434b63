"""The offline grounding judge: labels, supporting spans and reasons on hand-written cases, and the WiCE harness
on a tiny file written here (no evaluation data is read)."""

from __future__ import annotations

import json
from pathlib import Path

from veracity.evals.wice import evaluate_wice, format_wice
from veracity.guards.judge import GroundingJudge, Judgement, LexicalJudge, Source, Span, make_judge

POLICY = Source(
    "policy",
    "Our shop sells handmade furniture. Refunds are available within 14 days of purchase. "
    "Delivery to the mainland takes 30 days.",
)
COMPANY = Source(
    "company",
    "Northwind Timber was founded in 1998 by Jane Smith in Portland. It employs 1,200 people across three sawmills.",
)

judge = LexicalJudge()


def span_text(span: Span, sources: list[Source]) -> str:
    return next(s.text for s in sources if s.id == span.source_id)[span.start : span.end]


async def test_verbatim_sentence_is_supported_with_exact_span() -> None:
    verdict = await judge.judge("Refunds are available within 14 days of purchase.", [POLICY])
    assert verdict.label == "supported"
    assert verdict.score == 1.0
    start = POLICY.text.index("Refunds")
    end = POLICY.text.index("purchase.") + len("purchase.")
    assert verdict.evidence == [Span("policy", start, end)]
    assert "100%" in verdict.reason


async def test_inflected_paraphrase_is_supported() -> None:
    # Same facts, different word forms and order: the stemmer ("refunded"/"Refunds", "purchases"/"purchase") and
    # the number both match, so every content word is found.
    verdict = await judge.judge("Purchases can be refunded within 14 days.", [POLICY])
    assert verdict.label == "supported"
    assert span_text(verdict.evidence[0], [POLICY]).startswith("Refunds are available")


async def test_reworded_paraphrase_is_partial() -> None:
    # Same facts, but "customers" and "buying" are synonyms a lexical judge cannot see: refund, 14 and days are
    # found (3 of 6 content words), which is between a third and two thirds, so the honest label is partial.
    verdict = await judge.judge("Within 14 days of buying, customers can get a refund.", [POLICY])
    assert verdict.label == "partial"
    assert verdict.evidence and span_text(verdict.evidence[0], [POLICY]).startswith("Refunds are available")
    assert "50%" in verdict.reason


async def test_number_formats_are_normalised() -> None:
    # "1200" matches "1,200" and "14-day" matches "14 days".
    assert (await judge.judge("Northwind Timber employs 1200 people.", [COMPANY])).label == "supported"
    verdict = await judge.judge("Refunds are available for a 14-day period after purchase.", [POLICY])
    assert verdict.label == "supported"


async def test_wrong_number_is_unsupported() -> None:
    verdict = await judge.judge("Refunds are available within 30 days.", [POLICY])
    assert verdict.label == "unsupported"
    assert verdict.score == 0.0
    assert "14" in verdict.reason and "30" in verdict.reason
    # The contradicting sentence is cited, not the delivery sentence that happens to contain "30 days".
    assert [span_text(s, [POLICY]) for s in verdict.evidence] == ["Refunds are available within 14 days of purchase."]


async def test_number_absent_from_sources_is_not_supported() -> None:
    verdict = await judge.judge(
        "Northwind Timber employs 1,200 people and was founded in 1998 with 250 staff.", [COMPANY]
    )
    assert verdict.label != "supported"
    assert "250" in verdict.reason


async def test_one_supported_and_one_unsupported_clause_is_partial() -> None:
    verdict = await judge.judge(
        "Refunds are available within 14 days of purchase, and the shop also repairs antique clocks for collectors.",
        [POLICY],
    )
    assert verdict.label == "partial"
    assert "1 of 2 parts" in verdict.reason and "clocks" in verdict.reason
    # Only the supported part is cited.
    assert [span_text(s, [POLICY]) for s in verdict.evidence] == ["Refunds are available within 14 days of purchase."]


async def test_absent_person_is_not_supported() -> None:
    verdict = await judge.judge("Northwind Timber was founded in 1998 by Robert Brown.", [COMPANY])
    assert verdict.label == "unsupported"
    assert "Robert Brown" in verdict.reason and "Jane Smith" in verdict.reason


async def test_absent_entity_without_rival_is_not_supported() -> None:
    verdict = await judge.judge("The shop sells handmade furniture made by Astrid Lindqvist.", [POLICY])
    assert verdict.label != "supported"
    assert "Astrid Lindqvist" in verdict.reason


async def test_negation_flip_is_unsupported() -> None:
    negated = await judge.judge("Refunds are not available within 14 days of purchase.", [POLICY])
    assert negated.label == "unsupported"
    assert "negated" in negated.reason
    source = Source("s", "The museum does not open on public holidays.")
    asserted = await judge.judge("The museum opens on public holidays.", [source])
    assert asserted.label == "unsupported"
    assert "negates" in asserted.reason


async def test_unrelated_claim_is_unsupported() -> None:
    verdict = await judge.judge("Volcanic eruptions cooled the northern hemisphere for two summers.", [POLICY, COMPANY])
    assert verdict.label == "unsupported"
    assert verdict.evidence == []


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
    assert {s.source_id for s in verdict.evidence} == {"policy", "company"}
    texts = {span_text(s, sources) for s in verdict.evidence}
    assert "Refunds are available within 14 days of purchase." in texts
    assert "Northwind Timber was founded in 1998 by Jane Smith in Portland." in texts


async def test_deterministic() -> None:
    claim = "Northwind Timber was founded in Portland, and it employs 1200 people in four sawmills."
    first = await judge.judge(claim, [POLICY, COMPANY])
    second = LexicalJudge().judge_sync(claim, [POLICY, COMPANY])
    assert first == second
    assert isinstance(first, Judgement)


def test_make_judge_returns_the_lexical_judge() -> None:
    made: GroundingJudge = make_judge()
    assert isinstance(made, LexicalJudge) and made.name == "lexical"


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

    result = evaluate_wice(path)

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
