"""Whose words a claim speaks: the answer's own, or a source's that it quotes (issue 14).

The reviewer screens the answer for crisis language, and L3 reads it for advice and personal-situation phrasing.
Both must judge what the *answer* says to its reader, not what a source it quotes says about someone else: a news
sentence "... told reporters: I want to kill myself because ..." quoted in an answer about a cancelled tour is
neither a person in crisis talking to Veracity nor Veracity talking to one.

The rule, for one claim:

1. **Reported speech is the speaker's**: a passage in quotation marks, or what follows a reporting verb and a colon
   ("told reporters: ...", "said in a statement: ...", "The note read: ...").
2. **A claim that is a verbatim span of its cited evidence is the source's** (every extractive claim is one). Case,
   spacing, punctuation and quote marks do not count, and an ellipsis may join pieces that appear in order.
3. **Unless it addresses the reader.** Quoted words that speak to the reader — second person ("you", "your"), or an
   order opening the sentence or the clause after an "if ..." ("Take two tablets", "If it hurts, stop") — are
   passed on to the reader as advice, and are read as the answer's. For a rule-2 quote the question is asked of its
   own words with its reported speech set aside: the frame "The singer told reporters:" addresses no one.

What is left is the composer's own words. Who reads what:

- The reviewer's crisis screen (:func:`spoken`): rules 1-3. Rule 2 needs the claim's cited evidence.
- L3's advice and personal-situation rules (:func:`own_words`): rules 1 and 3, not 2. A sentence the answer ships
  whole as a claim is shipped in its name: advice phrasing in it is advice given, whoever wrote it first ("you
  should" addresses the reader anyway; "take 20 mg" and "I recommend buying" advise whoever says them), and the
  extractive composer never picks such a sentence for the same reason. Only a speaker's words *reported inside* a
  claim are the speaker's.
- L3's forbidden patterns, citation and disclaimer checks: everything shipped.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from veracity.guards.quotes import is_quote_of
from veracity.text import sentence_spans

QUOTED = re.compile(r"[“\"«„]([^“”\"«»„]{1,600})[”\"»“]|(?<!\w)['‘]([^'‘’]{1,600})['’](?!\w)")
"""A passage in quotation marks: double, curly, guillemets, or single quotes that are not apostrophes."""
_REPORTING = re.compile(
    r"\b(?:said|says|say|told|tells|wrote|writes|stated|states|added|adds|explained|explains|posted|tweeted"
    r"|replied|replies|recalled|recalls|announced|announces|declared|declares|admitted|admits|testified|confessed"
    r"|asked|asks|warned|warns|insisted|claimed|claims|read|reads|shouted|screamed|cried|whispered|texted"
    r"|messaged|noted|notes|continued|concluded|remarked|commented)\b(?:[ \t]+[^\s:;.!?]+){0,6}?[ \t]*:[ \t]*(?=\S)",
    re.I,
)
_SECOND_PERSON = re.compile(r"\b(?:you|your|yours|yourself|yourselves)\b", re.I)
_ORDER_VERBS = frozenset(
    """take stop start keep try call contact ask tell talk speak go get make give use avoid do don't dont never always
    please remember consider check see visit click tap choose select enter press follow put leave cut jump kill hurt
    harm eat drink swallow hide buy sell invest pay send wait find look seek reach bring hold add remove delete
    install download sleep breathe drive walk sit stand write share apply refuse accept wash dial stay pick throw
    overdose starve quit skip double halve increase reduce raise""".split()
)
"""Verbs that open an order ("Take two tablets"); not those that more often open a noun phrase ("Lower back pain",
"Rest of the world", "Sign language", "Think tanks")."""
_LEADING_CLAUSE = re.compile(
    r"^(?:if|when|whenever|before|after|once|while|unless|until|to|for|in case|as soon as)\b[^,;:]{0,160}[,;:]\s*",
    re.I,
)


def reported_speech(text: str) -> list[tuple[int, int]]:
    """Character spans of the reported speech in ``text`` (rule 1), in order, not overlapping."""
    spans: list[tuple[int, int]] = []
    for s, e in sentence_spans(text):
        sentence = text[s:e]
        reporting = _REPORTING.search(sentence)
        cut = reporting.end() if reporting else len(sentence)
        spans += [(s + m.start(), s + m.end()) for m in QUOTED.finditer(sentence) if m.start() < cut]
        if reporting:
            spans.append((s + cut, e))
    return spans


def _split(text: str) -> tuple[str, list[str]]:
    """``text`` as (its own words, with reported speech blanked out; the reported passages)."""
    spans = reported_speech(text)
    own, last = [], 0
    for s, e in spans:
        own.append(text[last:s])
        last = e
    own.append(text[last:])
    return " ".join(" ".join(own).split()), [text[s:e] for s, e in spans]


def _orders(sentence: str) -> bool:
    """An order: the sentence, or the clause after a leading "if ..."-clause, opens with a bare verb (and is not a
    title: "Die Hard is a 1988 film", "Take Five is a jazz standard")."""
    sentence = sentence.strip(" \t\n\"'“”‘’«»()[]*-–—")
    for clause in (sentence, _LEADING_CLAUSE.sub("", sentence, count=1)):
        tokens = clause.split()
        if not tokens or tokens[0].lower().replace("’", "'").strip(",.;:!?") not in _ORDER_VERBS:
            continue
        following = tokens[1] if len(tokens) > 1 else ""
        if not (following[:1].isupper() and following != "I"):
            return True
    return False


def addresses_reader(text: str) -> bool:
    """Whether ``text`` speaks to its reader (rule 3): second person, or an order."""
    if _SECOND_PERSON.search(text):
        return True
    return any(_orders(text[s:e]) for s, e in sentence_spans(text))


def own_words(text: str) -> str:
    """The words of a claim the answer says itself, without knowing its evidence (rules 1 and 3): reported speech
    set aside unless it addresses the reader."""
    own, reported = _split(text)
    return " ".join([own, *(r for r in reported if addresses_reader(r))]).strip()


def spoken(text: str, cited: Sequence[str]) -> str:
    """What a claim says to its reader in the answer's own name (rules 1-3), given the quotes of the evidence it
    cites: empty for a quote that addresses no one."""
    if not is_quote_of(text, cited):
        return own_words(text)
    frame, reported = _split(text)
    kept = [frame] if addresses_reader(frame) else []
    return " ".join(kept + [r for r in reported if addresses_reader(r)]).strip()
