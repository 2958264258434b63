"""The screen's features: what its learned layer (:mod:`veracity.guards.screen_model`) reads of a message.

Features, the same at fitting and at run time (:func:`feature_rows`):

- the message's sentence embedding (the process's semantic model, all-MiniLM-L6-v2), when it is loaded;
- the general cues of :mod:`veracity.guards.cues` (first person, a narrative, "should I", intent, method ...), one
  binary feature each;
- per domain, whether the shipped policy packs' terms for it occur (none, one, two or more) and whether the asker
  owns one ("my tax return");
- with the cross-encoder (``semantic.nli``, the judge's contradiction reader) when it is allowed
  (``VERACITY_SEMANTIC__SCREEN_READER``) and can read: its reading of the message together with one statement,
  ``READING`` ("The writer wants to harm or kill themselves."): the mean of its last layer (384 numbers) and its
  logit. The sentence model embeds the message alone; the cross-encoder reads it word against word with what a
  crisis is, and out of fold that raised crisis recall at the same false-crisis bound (see the README). The heads
  of ``READ_CLASSES`` (crisis) are used as fitted with it; an advice head is averaged with its head fitted without it.
"""

from __future__ import annotations

import re
from functools import cache

import numpy as np

from veracity.guards.cues import CUE_NAMES, find_cues, owned_term
from veracity.semantic.model import SemanticModel
from veracity.semantic.nli import ContradictionModel

CRISIS = "crisis"
ADVICE = ("legal", "medical", "financial")
CLASSES = (CRISIS, *ADVICE)
DOMAIN_FEATURES = tuple(f"terms_{d}" for d in CLASSES) + ("owned_domain",)
LEXICAL_FEATURES = CUE_NAMES + DOMAIN_FEATURES
READING = "The writer wants to harm or kill themselves."
"""The statement the cross-encoder reads each message with (the only wording tried; chosen before any figure)."""
READ_CLASSES = (CRISIS,)
"""The classes whose heads fitted with the cross-encoder's reading (a statement about self-harm) are used alone,
not averaged; an advice head's probability is the mean of its heads fitted with it and without it
(``screen_fit.fit_read_mode``)."""
READING_FEATURES = ("reading", "reading_logit")
"""Named as the fitted file names them: ``reading`` stands for the 384 numbers of the last layer's mean."""
READING_WIDTH = 385
MAX_SENTENCES = 8
"""Sentences of one message scored on their own for crisis (a longer message keeps its first ones)."""


def nearest_share(similarity: np.ndarray, positive: np.ndarray, k: int) -> np.ndarray:
    """Per row of ``similarity`` (rows against a pool), the share of its ``k`` most similar pool items that are
    ``positive``."""
    if len(similarity) == 0:
        return np.zeros(0)
    nearest = np.argpartition(-similarity, k - 1, axis=1)[:, :k]
    return np.asarray(positive[nearest].mean(axis=1), dtype=np.float64)


def neighbour_share(vectors: np.ndarray, pool: np.ndarray, positive: np.ndarray, k: int) -> np.ndarray:
    """Per row of ``vectors``, the share of its ``k`` nearest rows of ``pool`` (by cosine: the rows are
    L2-normalised) that are ``positive``."""
    return nearest_share(vectors.astype(np.float32) @ pool.T.astype(np.float32), positive, k)


@cache
def _domain_terms() -> dict[str, re.Pattern[str]]:
    """The shipped packs' domain terms, one expression per domain, run on the lower-cased message."""
    from veracity.specs.policy import all_packs_policy  # the packs import the spec models, which import guards

    terms: dict[str, re.Pattern[str]] = {}
    for name, domain in all_packs_policy().classifier_domains.items():
        if name in CLASSES and domain.terms:
            joined = "|".join(f"(?:{t})" for t in domain.terms)
            terms[name] = re.compile(rf"(?<!\w)(?:{joined})(?!\w)")
    return terms


def lexical_features(text: str) -> tuple[np.ndarray, dict[str, str]]:
    """The cue and domain-term features of one normalised message, and the text each one matched."""
    low = text.lower()
    cues = find_cues(text)
    row = [1.0 if name in cues else 0.0 for name in CUE_NAMES]
    owned: str | None = None
    for name in CLASSES:
        pattern = _domain_terms().get(name)
        found = list(dict.fromkeys(m.group(0) for m in pattern.finditer(low))) if pattern else []
        row.append(min(len(found), 2) / 2)
        if found:
            cues[f"terms_{name}"] = ", ".join(found[:4])
        if found and name != CRISIS and owned is None and pattern is not None:
            owned = owned_term(pattern, low)
    row.append(1.0 if owned else 0.0)
    if owned:
        cues["owned_domain"] = owned
    return np.asarray(row, dtype=np.float32), cues


def reading_rows(texts: list[str], reader: ContradictionModel) -> np.ndarray | None:
    """Per text, the cross-encoder's reading of it with ``READING``: [last layer's mean, logit] (``READING_WIDTH``
    columns); None when the reader cannot read (its session could not be made)."""
    if not texts:
        return np.zeros((0, READING_WIDTH), dtype=np.float32)
    read = reader.read([(text, READING) for text in texts]) if reader.readable() else None
    if read is None:
        return None
    logits, hidden = read
    return np.hstack([hidden, logits[:, None].astype(np.float32)])


def message_reading(pieces: list[str], reader: ContradictionModel) -> np.ndarray | None:
    """``reading_rows`` of one message's pieces as the screen reads them, at run time and at fitting alike: the
    whole message (``pieces[0]``) alone, then its sentences together. A reading moves with its batch-mates (the
    graph quantises each batch's activations together: a logit by up to 0.75 read beside three other messages), so
    the fit must not batch unrelated messages either."""
    whole = reading_rows(pieces[:1], reader)
    if whole is None or len(pieces) == 1:
        return whole
    rest = reading_rows(pieces[1:], reader)
    return None if rest is None else np.vstack([whole, rest])


def feature_rows(
    texts: list[str],
    semantic: SemanticModel | None,
    lexical: list[np.ndarray] | None = None,
    reading: np.ndarray | None = None,
) -> np.ndarray:
    """One row per normalised text: [embedding, lexical features] with the model, lexical features without, and
    the cross-encoder's ``reading`` (``reading_rows``) after them when given. ``lexical`` holds rows already
    computed for the first texts."""
    known = lexical or []
    rows = known + [lexical_features(t)[0] for t in texts[len(known) :]]
    matrix = np.stack(rows) if rows else np.zeros((0, len(LEXICAL_FEATURES)))
    if semantic is not None:
        matrix = np.hstack([semantic.encode(texts), matrix])
    return matrix if reading is None else np.hstack([matrix, reading])
