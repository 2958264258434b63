"""The screen's learned layer: is this message a crisis, a request for personal legal, medical or financial advice,
or neither? Models fitted offline (``python -m veracity.guards.screen_fit``, ``make fit-screen``) on the
material in ``training/screen`` and shipped as ``guards/data/screen.json`` with its split, sources and
cross-validated figures. Nothing here is a hand-set weight or threshold: both come from that file.

Its features are :mod:`veracity.guards.screen_features`' (the same at fitting and at run time).

Each class has its own one-vs-rest model: a logistic regression or a network with one hidden layer, whichever
the fit found better out of fold (``family`` in the file). With the semantic model, a class's probability may be
the mean of that model and the share of that class among the message's nearest training messages (``neighbours``
in the file, chosen per class out of fold; 0 keeps the model alone): the model generalises, the neighbours keep a
message next to many look-alikes of one label from being carried by a single word. In the ``semantic+reader`` mode
an advice class's probability is the mean of its head fitted with the cross-encoder's reading and its ``semantic``
head fitted without it (``Head.partner``; ``"with"`` in the file).
Crisis may also be scored on each sentence of the message (the highest counts, so one disclosure inside a long,
ordinary message still counts) when that won out of fold at fitting (``by_sentence`` in the file). Without the
semantic model the lexical models (cues and domain terms only, fitted on the same material) decide, and the product
says so.

``nearest`` returns the training examples closest in meaning, which ``veracity screen`` prints to explain a route.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass, replace
from functools import cache
from importlib import resources
from typing import Any

import numpy as np

from veracity.guards.cues import normalise
from veracity.guards.screen_features import (
    CLASSES,
    CRISIS,
    MAX_SENTENCES,
    READING_FEATURES,
    READING_WIDTH,
    feature_rows,
    lexical_features,
    message_reading,
    nearest_share,
)
from veracity.semantic.logistic import LogisticModel, load_fit
from veracity.semantic.model import SemanticModel
from veracity.semantic.network import NetworkModel, model_from_dict
from veracity.semantic.nli import ContradictionModel, reading_model
from veracity.text import sentence_spans

REMEMBERED = 256
"""Messages whose scores a screen keeps (most recently used first out)."""
NEAREST = 3


@dataclass(frozen=True)
class Head:
    """One class's fitted model, logistic or network as the fit chose (``features`` names the embedding as one
    entry for its 384 columns)."""

    model: LogisticModel | NetworkModel
    by_sentence: bool = False
    """Crisis only: also score each sentence of the message and keep the highest (chosen at fitting)."""
    neighbours: int = 0
    """Nearest training messages averaged in (0: the model alone; chosen at fitting)."""
    reads: bool = True
    """Whether its features hold the cross-encoder's reading when its mode's do."""
    partner: Head | None = None
    """An advice head of the reading mode: the head fitted without the reading, whose probability is averaged with
    this one's (``screen_fit.fit_read_mode``); the pair's cut-off is this head's."""

    @property
    def threshold(self) -> float:
        return self.model.threshold

    @classmethod
    def from_fit(cls, data: dict[str, Any], features: tuple[str, ...], partner: Head | None = None) -> Head:
        """The head of a fitted mode whose features are ``features``."""
        return cls(
            model_from_dict(data, features),
            bool(data.get("by_sentence", False)),
            int(data.get("neighbours", 0)),
            READING_FEATURES[0] in features,
            partner,
        )


@dataclass(frozen=True)
class Example:
    label: str
    text: str
    similarity: float


@dataclass(frozen=True)
class ScreenScore:
    """Every class's probability for one message, the cues that fired, and the closest training examples."""

    probabilities: dict[str, float]
    thresholds: dict[str, float]
    cues: dict[str, str]
    nearest: list[Example]
    sentence: str | None
    """The sentence that carried the crisis score when it was higher than the whole message's."""
    mode: str

    def fired(self, name: str) -> bool:
        return self.probabilities[name] >= self.thresholds[name]


class LearnedScreen:
    """The fitted heads for one mode (``semantic+reader``, ``semantic`` or ``lexical``) and, with the model, the
    training examples' vectors for ``nearest``."""

    def __init__(
        self,
        heads: dict[str, Head],
        semantic: SemanticModel | None,
        examples: tuple[np.ndarray, list[str], list[str]] | None = None,
        reader: ContradictionModel | None = None,
    ) -> None:
        self.heads = heads
        self.semantic = semantic
        self.examples = examples
        self.reader = reader if semantic is not None else None
        self._mode = screen_mode(semantic, self.reader)
        self._unread: LearnedScreen | None = None
        """The screen fitted without the reading, once the cross-encoder has failed to read (it stays failed)."""
        self._remembered: OrderedDict[str, ScreenScore] = OrderedDict()
        self._lock = threading.Lock()
        self._pools: dict[str, tuple[np.ndarray | None, np.ndarray]] = {}
        """Per class with neighbours: which training messages are its pool (None: all of them; the advice classes
        exclude crises, as their models were fitted) and which of those are that class."""
        if examples is not None:
            labels = np.asarray(examples[1])
            for name, head in heads.items():
                if head.neighbours or (head.partner is not None and head.partner.neighbours):
                    pool = None if name == CRISIS else labels != CRISIS
                    self._pools[name] = (pool, (labels if pool is None else labels[pool]) == name)

    @property
    def mode(self) -> str:
        """The mode that scores now: ``semantic`` once the cross-encoder has failed to read."""
        return self._unread.mode if self._unread is not None else self._mode

    def score(self, text: str, *, explain: bool = True) -> ScreenScore:
        """Every class's probability for one message; ``explain`` adds the nearest training examples. The last
        ``REMEMBERED`` messages' scores are kept: a run's route and its reviewer screen the same question, and the
        cross-encoder's reading is most of a score's cost."""
        text = normalise(text)
        with self._lock:
            known = self._remembered.get(text)
            if known is not None:
                self._remembered.move_to_end(text)
        if known is None:
            known = self._score(text)
            with self._lock:
                self._remembered[text] = known
                while len(self._remembered) > REMEMBERED:
                    self._remembered.popitem(last=False)
        # A copy: what a caller does with its score never reaches the remembered one.
        return replace(
            known,
            probabilities=dict(known.probabilities),
            thresholds=dict(known.thresholds),
            cues=dict(known.cues),
            nearest=list(known.nearest) if explain else [],
        )

    def _score(self, text: str) -> ScreenScore:
        if self._unread is not None:
            return self._unread._score(text)
        sentences = [text[s:e] for s, e in sentence_spans(text)][:MAX_SENTENCES]
        pieces = [text]
        if self.heads[CRISIS].by_sentence and len(sentences) > 1:
            pieces += [s for s in sentences if s != text]
        reading = None
        if self.reader is not None:
            reading = message_reading(pieces, self.reader)
            if reading is None:  # the cross-encoder cannot read (its session failed): the screen fitted without it
                unread = learned_screen(self.semantic, None)
                with self._lock:
                    self._unread = self._unread or unread
                return self._unread._score(text)
        whole, cues = lexical_features(text)
        rows = feature_rows(pieces, self.semantic, [whole], reading)
        # Each piece against every training message, once: the neighbours and the explanation both read it.
        similarity = None
        if self.examples is not None:
            vectors = self.examples[0]
            similarity = rows[:, : vectors.shape[1]].astype(np.float32) @ vectors.T
        read = reading is not None
        probabilities = {name: float(self._probability(name, rows[:1], similarity, 0, read)[0]) for name in self.heads}
        sentence = None
        if len(pieces) > 1:
            by_sentence = self._probability(CRISIS, rows[1:], similarity, 1, read)
            best = int(np.argmax(by_sentence))
            if by_sentence[best] > probabilities[CRISIS]:
                probabilities[CRISIS], sentence = float(by_sentence[best]), pieces[1 + best]
        return ScreenScore(
            probabilities=probabilities,
            thresholds={name: head.threshold for name, head in self.heads.items()},
            cues=cues,
            nearest=self._nearest(similarity[0]) if similarity is not None else [],
            sentence=sentence,
            mode=self.mode,
        )

    def _probability(
        self, name: str, rows: np.ndarray, similarity: np.ndarray | None, first: int, read: bool
    ) -> np.ndarray:
        """The class's probability for ``rows`` (which end with the reading when ``read``): its head's, averaged
        with its partner's when it has one."""
        head = self.heads[name]
        p = self._head_probability(name, head, rows, similarity, first, read)
        if head.partner is not None:
            p = (p + self._head_probability(name, head.partner, rows, similarity, first, read)) / 2
        return p

    def _head_probability(
        self, name: str, head: Head, rows: np.ndarray, similarity: np.ndarray | None, first: int, read: bool
    ) -> np.ndarray:
        """One head's model's probability (a head that does not read the reading is given the columns before it),
        averaged with the class's share among the rows' nearest training messages when the fit chose neighbours
        (``similarity[first:]`` holds those rows against every message)."""
        p = head.model.probability(rows[:, :-READING_WIDTH] if read and not head.reads else rows)
        if head.neighbours and name in self._pools and similarity is not None:
            pool, positive = self._pools[name]
            against = similarity[first : first + len(rows)]
            p = (p + nearest_share(against if pool is None else against[:, pool], positive, head.neighbours)) / 2
        return np.asarray(p)

    def _nearest(self, similarity: np.ndarray) -> list[Example]:
        assert self.examples is not None
        _, labels, texts = self.examples
        order = np.argsort(-similarity)[:NEAREST]
        return [Example(labels[i], texts[i], round(float(similarity[i]), 3)) for i in order]


@cache
def _examples() -> tuple[np.ndarray, list[str], list[str]]:
    """The training messages' vectors, labels and texts (for ``nearest``)."""
    with resources.files("veracity.guards").joinpath("data", "screen_examples.npz").open("rb") as handle:
        archive = np.load(handle, allow_pickle=False)
        return (
            archive["vectors"].astype(np.float32),
            [str(x) for x in archive["labels"]],
            [str(x) for x in archive["texts"]],
        )


def _fitted() -> dict[str, Any]:
    return load_fit("veracity.guards", "screen.json")


MODES = ("semantic+reader", "semantic", "lexical")


def screen_mode(semantic: SemanticModel | None, reader: ContradictionModel | None) -> str:
    """Which fitted mode scores with these models: the reader counts only beside the sentence model (the fit read
    both together)."""
    return "lexical" if semantic is None else "semantic+reader" if reader is not None else "semantic"


@cache
def learned_screen(semantic: SemanticModel | None, reader: ContradictionModel | None = None) -> LearnedScreen:
    """The screen for a semantic model (or the lexical one) and, with it, the cross-encoder, loaded once each.
    Without the sentence model the reader is not used (the fit read both together)."""
    every = _fitted()
    fitted = every[screen_mode(semantic, reader)]
    features = tuple(fitted["features"])
    heads = {
        name: Head.from_fit(fitted["heads"][name], features, partner_head(every, fitted["heads"][name], name, features))
        for name in CLASSES
    }
    return LearnedScreen(heads, semantic, _examples() if semantic is not None else None, reader)


def partner_head(every: dict[str, Any], data: dict[str, Any], name: str, features: tuple[str, ...]) -> Head | None:
    """The head a fitted head is averaged with: the same class's head of the mode its ``with`` names, whose
    features must be ``features`` less the reading (the screen gives it the columns before the reading)."""
    if "with" not in data:
        return None
    other = every[data["with"]]
    own = tuple(other["features"])
    if own + READING_FEATURES != features:
        raise ValueError(f"the {data['with']} mode's features are not this mode's less the reading: {list(own)}")
    return Head.from_fit(other["heads"][name], own)


def process_screen(semantic: SemanticModel | None, read: bool) -> LearnedScreen:
    """The process's screen: with the cross-encoder's reading when ``read`` (``semantic.screen_reader``) allows it
    and the cross-encoder is installed, with the sentence model alone otherwise, lexical without the sentence
    model."""
    return learned_screen(semantic, reading_model(read) if semantic is not None else None)


def fitted_summary() -> dict[str, Any]:
    """Where the shipped models came from, which each class uses and their cross-validated figures (for ``make
    eval-guards``)."""
    fitted = _fitted()
    chosen = ("family", "penalty", "neighbours", "by_sentence")
    return (
        {k: v for k, v in fitted.items() if k not in MODES}
        | {mode: fitted[mode]["cv"] for mode in MODES}
        | {
            "models": {
                mode: {
                    name: {k: head.get(k) for k in chosen}
                    | {"reads": READING_FEATURES[0] in fitted[mode]["features"], "averaged": "with" in head}
                    for name, head in fitted[mode]["heads"].items()
                }
                for mode in MODES
            }
        }
    )
