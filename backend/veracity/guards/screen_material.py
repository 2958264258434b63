"""The screen's training material as the fit reads it: the labelled messages of ``training/screen`` (read once
each, normalised as at run time), their feature rows and those of their sentences, the folds (fixed by the text's
SHA-256, so every run agrees), and a class's probabilities out of fold — scored as at run time (the fitted model,
logistic or network, averaged with the nearest training messages' share when asked; crisis, when asked, the highest
of the message and each sentence). :mod:`veracity.guards.screen_fit` chooses and fits the models on it.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np

from veracity.guards.cues import normalise
from veracity.guards.screen_features import (
    CLASSES,
    CRISIS,
    LEXICAL_FEATURES,
    MAX_SENTENCES,
    READING_WIDTH,
    feature_rows,
    message_reading,
    neighbour_share,
)
from veracity.semantic.model import SemanticModel
from veracity.semantic.network import Fitted, fit_family, predict_family
from veracity.semantic.nli import ContradictionModel
from veracity.text import sentence_spans

FOLDS = 5
LABELS = frozenset((*CLASSES, "none"))


def fold_of(text: str) -> int:
    return int(hashlib.sha256(text.lower().encode()).hexdigest(), 16) % FOLDS


def read_material(folder: Path) -> list[dict[str, str]]:
    rows: list[dict[str, str]] = []
    seen: set[str] = set()
    for path in sorted(folder.glob("*.jsonl")):
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            if not line.strip():
                continue
            row = json.loads(line)
            if row["label"] not in LABELS:
                raise ValueError(f"{path}:{number}: unknown label {row['label']!r}")
            text = normalise(row["text"])
            if text.lower() in seen:
                continue
            seen.add(text.lower())
            rows.append({"text": text, "label": row["label"], "kind": row.get("kind", ""), "file": path.name})
    return rows


class Material:
    """Feature rows of every message and of each message's sentences (for the crisis model's per-sentence max);
    with ``reader``, the cross-encoder's reading of each after them (``screen_features.message_reading``)."""

    def __init__(
        self, rows: list[dict[str, str]], semantic: SemanticModel | None, reader: ContradictionModel | None = None
    ) -> None:
        self.rows = rows
        texts = [r["text"] for r in rows]
        owners: list[int] = []
        pieces: list[str] = []
        whole_readings: list[np.ndarray] = []
        piece_readings: list[np.ndarray] = []
        for i, text in enumerate(texts):
            sentences = [text[s:e] for s, e in sentence_spans(text)][:MAX_SENTENCES]
            own = [s for s in sentences if s != text] if len(sentences) > 1 else []
            pieces += own
            owners += [i] * len(own)
            if reader is not None:  # each message read as the screen reads it (message_reading), never batched
                read = message_reading([text, *own], reader)
                if read is None:
                    why = reader.failure or "its graph cannot be opened"
                    raise RuntimeError(f"the cross-encoder cannot read: {why}")
                whole_readings.append(read[:1])
                piece_readings.append(read[1:])
        readings: tuple[np.ndarray | None, np.ndarray | None] = (None, None)
        if reader is not None:
            readings = (np.vstack(whole_readings), np.vstack(piece_readings))
        self.x = feature_rows(texts, semantic, reading=readings[0])
        self.sentence_x = (
            feature_rows(pieces, semantic, reading=readings[1]) if pieces else np.zeros((0, self.x.shape[1]))
        )
        self.sentence_owner = np.asarray(owners, dtype=int)
        self.folds = np.asarray([fold_of(t) for t in texts])
        self.labels = np.asarray([r["label"] for r in rows])
        dim = self.x.shape[1] - len(LEXICAL_FEATURES) - (READING_WIDTH if reader is not None else 0)
        self.vectors = self.x[:, :dim] if semantic is not None else None
        self.sentence_vectors = self.sentence_x[:, :dim] if semantic is not None else None
        self._fold_models: dict[tuple[str, str, float, int], Fitted] = {}
        """Each fold's fitted model per class, family and penalty (the neighbours and per-sentence choices reuse
        them instead of refitting)."""

    def target(self, name: str) -> tuple[np.ndarray, np.ndarray]:
        """The rows a class's model learns from and their 0/1 labels."""
        use = np.ones(len(self.rows), dtype=bool) if name == CRISIS else self.labels != CRISIS
        return use, (self.labels == name).astype(float)

    def training_set(self, name: str, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The feature rows and labels a class's model is fitted on. For crisis, every sentence of a message that
        is not a crisis is one more negative (no part of it is a crisis), so a sentence scored on its own at run
        time is judged by a model that has seen sentences; a crisis message's sentences are not labelled (any one
        of them may be the ordinary part)."""
        use, y = self.target(name)
        rows = rows[use[rows]]
        x, target = self.x[rows], y[rows]
        if name == CRISIS and len(self.sentence_owner):
            extra = np.isin(self.sentence_owner, rows) & (y[self.sentence_owner] == 0)
            x = np.vstack([x, self.sentence_x[extra]])
            target = np.r_[target, np.zeros(int(extra.sum()))]
        return x, target

    def score(
        self,
        name: str,
        model: Fitted,
        rows: np.ndarray,
        by_sentence: bool = True,
        neighbours: int = 0,
        train: np.ndarray | None = None,
    ) -> np.ndarray:
        """Probabilities of the given rows, as at run time: the fitted model's, averaged with the class's share
        among the ``neighbours`` nearest ``train`` messages when asked; crisis, when ``by_sentence``, the max over
        the message and its sentences."""
        p = self._blend(name, predict_family(model, self.x[rows]), self.vectors, rows, neighbours, train)
        if name == CRISIS and by_sentence and len(self.sentence_owner):
            by_row = {int(r): k for k, r in enumerate(rows)}
            mine = np.flatnonzero(np.isin(self.sentence_owner, rows))
            if len(mine):
                sentence_p = predict_family(model, self.sentence_x[mine])
                sentence_p = self._blend(name, sentence_p, self.sentence_vectors, mine, neighbours, train)
                for owner, value in zip(self.sentence_owner[mine], sentence_p, strict=True):
                    k = by_row[int(owner)]
                    p[k] = max(p[k], value)
        return p

    def _blend(
        self,
        name: str,
        p: np.ndarray,
        vectors: np.ndarray | None,
        rows: np.ndarray,
        neighbours: int,
        train: np.ndarray | None,
    ) -> np.ndarray:
        if not neighbours or vectors is None or self.vectors is None:
            return p
        use, y = self.target(name)
        pool = np.flatnonzero(use) if train is None else train[use[train]]
        share = neighbour_share(vectors[rows], self.vectors[pool], y[pool] == 1, neighbours)
        return np.asarray((p + share) / 2)

    def out_of_fold(
        self, name: str, family: str, strength: float, by_sentence: bool, neighbours: int = 0
    ) -> tuple[np.ndarray, np.ndarray]:
        use, y = self.target(name)
        p = np.full(len(self.rows), np.nan)
        for fold in range(FOLDS):
            train = np.flatnonzero(self.folds != fold)
            key = (name, family, strength, fold)
            if key not in self._fold_models:
                self._fold_models[key] = fit_family(family, *self.training_set(name, train), strength)
            model = self._fold_models[key]
            test = np.flatnonzero(use & (self.folds == fold))
            p[test] = self.score(name, model, test, by_sentence, neighbours, train)
        return p[use], y[use]
