"""The second hop of a question about something the first passages name.

"What government position was held by the woman who portrayed Corliss Archer in the film Kiss and Tell?": the
search finds the film's article, whose sentence names Shirley Temple; the answer is in her article, which the
question's own words do not find. ``hop_names`` reads the names (runs of capitalised words) in the sentences most
like the question, leaving out what the question already says and passages already opened; each is searched on
its own (``HOP_K`` passages). ``retrieve`` and the relevance fit (``evals/relevance_fit.py``) both use it, so the
model is fitted on the pools runs see.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from veracity.semantic.relevance import title_name

HOP_SENTENCES = 3
"""Sentences read for names: the ones most like the question."""
HOP_NAMES = 2
"""Names searched at most, per branch."""
HOP_K = 2
"""Passages opened per name."""
_TOKEN = re.compile(r"[^\W\d_][\w'’.\-&]*|\S")
_JOINERS = frozenset({"of", "the", "de", "del", "da", "van", "von", "der", "&"})
_LEADING = frozenset(
    "in on at after before during since when while as by for from with however although though but and then thus "
    "later today also this that these those his her its their our my a an".split()
)
"""Capitalised words that open a sentence or clause without being part of a name ("After Shirley Temple retired",
"In Paris"); "The" is kept ("The Harwick Bridge")."""
_POSSESSIVE = re.compile(r"['’]s$")
_LOWER_WORDS = re.compile(r"[\w'’]+")
MIN_NAME_CHARS = 4


def _capitalised(token: str) -> bool:
    return token[:1].isupper()


def names_in(sentence: str) -> list[str]:
    """Runs of capitalised words (any script; joined by "of", "the", "de", "van", "&"…, not by "and", which lists
    names), without a leading word that only opens the sentence ("In", "After"), a possessive "'s", or a run across
    a full stop ("St. Louis. Then"); a sentence's first word alone names nothing."""
    tokens = _TOKEN.findall(sentence)
    out: list[str] = []
    run: list[str] = []

    def close() -> None:
        while run and run[-1].lower() in _JOINERS:
            run.pop()
        while run and run[0].lower() in _LEADING:
            run.pop(0)
        name = _POSSESSIVE.sub("", " ".join(run)).rstrip(".")
        if len(name) >= MIN_NAME_CHARS and not (len(run) == 1 and first and sentence.lstrip().startswith(run[0])):
            out.append(name)
        run.clear()

    first = True
    for token in tokens:
        if _capitalised(token):
            run.append(token)
            if token.endswith(".") and len(token) > 3:  # "Louis." ends the sentence; "St." does not
                close()
                first = False
        elif run and token.lower() in _JOINERS:
            run.append(token)
        else:
            if run:
                close()
            first = False
    if run:
        close()
    return out


def hop_names(
    question: str, sentences: Sequence[str], strength: Sequence[float], opened_titles: Sequence[str]
) -> list[str]:
    """Up to ``HOP_NAMES`` names from the ``HOP_SENTENCES`` sentences of highest ``strength``, strongest first:
    none the question already holds (every word of it in the question, any case) and none that is an opened
    passage's subject (its ``title_name``)."""
    asked = {w.lower() for w in _LOWER_WORDS.findall(question)}
    opened = {title_name(t).lower() for t in opened_titles}
    order = sorted(range(len(sentences)), key=lambda i: -strength[i])[:HOP_SENTENCES]
    out: list[str] = []
    for i in order:
        for name in names_in(sentences[i]):
            words = {w.lower() for w in _LOWER_WORDS.findall(name)}
            if words <= asked or name.lower() in opened or name in out:
                continue
            out.append(name)
            if len(out) == HOP_NAMES:
                return out
    return out
