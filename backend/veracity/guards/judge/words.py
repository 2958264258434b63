"""Words as the judge compares them: stemmed content words, numbers by value, negation words — judge logic over the
shared analyser's tokens (``veracity.text.fact_tokens``) and stems (``veracity.text.ANALYZER``, Porter, as the index
stems).

Numbers are compared by value, whatever their spelling: "1,200" and "1200", "twelve" and "12", "1.2 million" and
"1,200,000", and a count of weeks as days ("two weeks" is "14 days": a week is seven days by definition, so this
is a unit conversion, not a judgement call). Other units are left alone: a month is not a fixed number of days.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import Decimal
from functools import lru_cache

from veracity.text import ANALYZER, CLOCK_TIME, STOPWORDS, fact_tokens

CONTENT, NUMBER, NEGATION, STOP = 0, 1, 2, 3
Token = tuple[str, int]  # (key, kind): a stemmed word, a number's value, or "" for negation and stop words

# A negation word scopes over the next few words only ("not available", "never won an award").
NEGATION_WINDOW = 3

NUMERIC_RE = re.compile(r"\d+(?:\.\d+)?$")
TIME_RE = re.compile(rf"{CLOCK_TIME}$")
_ORDINAL_RE = re.compile(r"(\d+)(?:st|nd|rd|th)$")
_NEGATIONS = frozenset("not no never none nobody nothing neither nor without cannot".split())
_NUMBER_WORDS = {
    w: str(i)
    for i, w in enumerate(
        "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
        "seventeen eighteen nineteen twenty".split()
    )
    if i >= 2  # "one" is far more often a pronoun than a count
} | {w: str(10 * i) for i, w in enumerate("thirty forty fifty sixty seventy eighty ninety".split(), start=3)}
_MULTIPLIERS = {"hundred": 100, "thousand": 1000, "million": 10**6, "billion": 10**9, "trillion": 10**12}
_DOZEN = 12
_DAYS_PER = {"week": 7, "weeks": 7, "fortnight": 14, "fortnights": 14}
_ONE = frozenset({"a", "an", "one"})
# Function words missing from the shared STOPWORDS, and discourse or hedge words that carry no checkable fact.
_FILLER = frozenset(
    """within among amongst across toward towards upon via onto throughout despite per whose yet since already still
    even though although just ever well must shall might however thus therefore moreover furthermore meanwhile
    additionally subsequently later currently eventually whereas according respectively including particularly
    especially approximately several various""".split()
)
_MONTHS = {
    "jan": "january",
    "feb": "february",
    "mar": "march",
    "apr": "april",
    "jun": "june",
    "jul": "july",
    "aug": "august",
    "sep": "september",
    "sept": "september",
    "oct": "october",
    "nov": "november",
    "dec": "december",
}


@lru_cache(maxsize=65536)
def normalise(raw: str) -> Token:
    """(key, kind) of one raw token; numbers keep their value, words are stemmed (Porter, diacritics dropped)."""
    if raw == "may":  # the modal verb; "May" is the month
        return "", STOP
    word = raw.lower().replace("’", "'")
    if word in _NEGATIONS or word.endswith("n't"):
        return "", NEGATION
    if word == "%":
        return "percent", CONTENT
    ordinal = _ORDINAL_RE.match(word)
    if ordinal:
        word = ordinal.group(1)
    if NUMERIC_RE.match(word):
        return _value(Decimal(word)), NUMBER
    if TIME_RE.match(word):  # a clock time, kept as written: "4:12" is no count of 4 or 12
        hour, minute = word.split(":")
        return f"{int(hour)}:{minute}", NUMBER
    if word in _NUMBER_WORDS:
        return _NUMBER_WORDS[word], NUMBER
    if word.endswith("'s"):
        word = word[:-2]
    word = word.rstrip("'")
    if word in STOPWORDS or word in _FILLER or len(word) < 2:
        return "", STOP
    return ANALYZER.stem(_MONTHS.get(word, word)), CONTENT


def _value(number: Decimal) -> str:
    """A number's key: no exponent, no leading or trailing zeros ("007" → "7", "2.50" → "2.5")."""
    return format(number.normalize(), "f")


# A range of years whose end is written short, "1861–63" or "2022-23": the end is the year 1863, not the count 63.
# Not a date ("2004-05-12": May, not 2005), a phone number or a score run ("1861-63-70").
_SHORT_YEAR_RANGE_RE = re.compile(r"(?<![\d.,–—-])(1\d|20)(\d\d)(\s?[–—-]\s?)(\d\d)(?![\d.,]\d|%|\s?[–—-]\s?\d|T\d|\d)")


def _full_range(match: re.Match[str]) -> str:
    century, start, dash, end = match.groups()
    return match.group(0) if end <= start else f"{century}{start}{dash}{century}{end}"


def tokenize(text: str) -> tuple[list[Token], list[str]]:
    """The tokens of ``text`` and their raw spellings, with numbers folded to their values (see the docstring)."""
    raws = fact_tokens(_SHORT_YEAR_RANGE_RE.sub(_full_range, text))
    tokens = [normalise(raw) for raw in raws]
    out: list[Token] = []
    out_raws: list[str] = []
    i = 0
    while i < len(tokens):
        key, kind = tokens[i]
        nxt = raws[i + 1].lower() if i + 1 < len(raws) else ""
        if kind == NUMBER:
            value = None if ":" in key else Decimal(key)  # a clock time is multiplied by nothing
        else:
            value = Decimal(1) if raws[i].lower() in _ONE else None
        if value is not None and (nxt in _MULTIPLIERS or nxt == "dozen") and (kind == NUMBER or nxt == "dozen"):
            value *= _MULTIPLIERS.get(nxt, _DOZEN)
            out.append((_value(value), NUMBER))
            out_raws.append(f"{raws[i]} {raws[i + 1]}")
            i += 2
            continue
        if value is not None and nxt in _DAYS_PER and (kind == NUMBER or nxt.startswith("fortnight")):
            out += [(_value(value * _DAYS_PER[nxt]), NUMBER), ("day", CONTENT)]
            out_raws += [f"{raws[i]} {raws[i + 1]}", raws[i + 1]]
            i += 2
            continue
        out.append((key, kind))
        out_raws.append(raws[i])
        i += 1
    return out, out_raws


@lru_cache(maxsize=8192)
def tokens_of(text: str) -> list[Token]:
    return tokenize(text)[0]


def content_count(text: str) -> int:
    return len({k for k, kind in tokens_of(text) if kind == CONTENT})


@dataclass(frozen=True)
class Number:
    value: str
    raw: str
    year: bool
    unit: str  # key of the word right after the number ("day" in "14 days"), "" when none

    @property
    def time(self) -> bool:
        """A clock time ("4:12")."""
        return ":" in self.value


def numbers(tokens: list[Token], raws: list[str] | None = None) -> list[Number]:
    found: list[Number] = []
    for i, (key, kind) in enumerate(tokens):
        if kind != NUMBER:
            continue
        unit = tokens[i + 1][0] if i + 1 < len(tokens) and tokens[i + 1][1] == CONTENT else ""
        year = key.isdigit() and len(key) == 4 and 1000 <= int(key) <= 2100
        found.append(Number(key, raws[i] if raws else key, year, unit))
    return found


def negated(tokens: list[Token], targets: set[str]) -> bool:
    """Whether a negation word scopes over one of ``targets`` within the next few tokens."""
    for i, (_, kind) in enumerate(tokens):
        if kind == NEGATION and any(key in targets for key, _ in tokens[i + 1 : i + 1 + NEGATION_WINDOW]):
            return True
    return False
