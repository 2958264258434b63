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
_NAME = re.compile(r"(?<![\w'’])[A-Z][\w'’.\-]*(?:\s+(?:(?:of|the|de|del|da|van|von|der|&)\s+)*[A-Z][\w'’.\-]*)*")
_LOWER_WORDS = re.compile(r"[\w'’]+")
MIN_NAME_CHARS = 4


def names_in(sentence: str) -> list[str]:
    """Runs of capitalised words (joined by "of", "the", "de", "van", "&"…, not by "and", which lists names), the
    sentence's first word kept only inside a run of two or more (a sentence opening with "The" or "In" names
    nothing)."""
    out = []
    for match in _NAME.finditer(sentence):
        name = match.group(0).rstrip(".")
        if match.start() == 0 and " " not in name:
            continue
        if len(name) >= MIN_NAME_CHARS:
            out.append(name)
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
