"""How much a sentence answers a question: a logistic model over a few signals, fitted offline (``python -m
veracity.evals.relevance_fit``) and shipped as ``semantic/data/relevance.json`` with its training split, data sources
and cross-validated figures. Nothing here is a hand-set threshold: the coefficients and the default cut-off
(``threshold``) come from that file; a template may set its own cut-off (``relevance.min_relevance``).

Signals (``FEATURES``), the same at fitting and at run time (``Candidate`` → ``features``):

- ``cos_sentence``: cosine of the question and the sentence read with its passage's title;
- ``cos_neighbour``: the best such cosine of the sentence just before or after it in the passage (a sentence
  that says "It was founded in 1998" is about what its neighbour names);
- ``cos_passage``: cosine of the question and the passage's head (its title and first words);
- ``lexical``: share of the question's content words (stemmed) found in the sentence or the title;
- ``answer_type``: the question asks for a number or a date and the sentence holds one;
- ``lead``: 1 for a passage's first sentence, falling with position (Wikipedia leads define first);
- ``search_rank``: 1 for a sentence of the passage the search ranked first, falling with the passage's rank (the
  hybrid search's own judgement of the passage, which the cosines of one sentence do not carry: fitted with it,
  a sentence of the fifth passage needs a closer match than one of the first to count);
- ``bridge``: how relevant the best sentence of *another* passage is that names this sentence's passage (its title,
  a parenthesised qualifier such as "(film)" left out) — the second hop of a question about something the first
  passage names ("the woman who portrayed Corliss Archer" → the film's article names Shirley Temple → her article
  holds the answer), matched in the title's own case so that a common noun ("car") does not name "Car". Its
  strength is that sentence's ``cos_sentence`` (``lexical`` without the model); 0 when no other passage among the
  candidates names it;
- ``cos_bridged``: for a sentence of a passage another passage names, its cosine with the question as it would be
  asked of that passage — the words the naming sentence answers taken out and the passage's name put in ("What
  government position was held by the woman who portrayed Corliss Archer in the film Kiss and Tell?" read by
  "Kiss and Tell … starring Shirley Temple as Corliss Archer" becomes "Shirley Temple: What government position
  was held by the woman who portrayed in the"); the sentence's ``cos_sentence`` when nothing names its passage.

Without the semantic model the lexical model (``lexical``, ``answer_type``, ``lead``, ``search_rank``, fitted on
the same data)
decides, and the product says so.

**The reader** (``semantic.reader`` in the fit, ``RelevanceScorer`` with a ``reader``): the sentence model embeds the
question and each sentence apart; the best ``top`` (8) of its candidates are then read *together* with the question by
the cross-encoder of ``semantic.nli`` (``read``: the mean of its last layer over the pair's tokens), and a logistic head
over that reading, the contradiction logit and the sentence model's relevance gives their relevance
(``READER_FEATURES``). The other candidates' relevance is the sentence model's, recalibrated onto the same scale
(``unread``). The reader has its own cut-off and question-level judgement; without it (no ``onnx`` package, the
setting off) the sentence model's apply. Off by default (README, "The reader").

**The read judgement** (``read_judgement``, ``RelevanceScorer`` with a ``judge_reader``; on by default): the
question-level judgement over the sentence model's pool, with two more signals, the reader head's best relevance over
the pool's best ``top`` sentences read with the question and the mean of its best three (``READ_JUDGEMENT_FEATURES``).
The sentences that go on are the sentence model's all the same.

**Whether the run's best passages answer the question at all** is a second, question-level judgement
(``answered``): a sentence can clear the cut-off because it is close in meaning to the question while its pool
answers nothing ("the capital of Tasmania" for "the capital of Australia"; a HotpotQA question whose two gold
paragraphs are gone still has eight on its topic). A logistic model over the pool (``ANSWERED_FEATURES``: the three
best relevances, how many sentences cleared the cut-off, and how much of the question's names and content words the
best sentence and the best three state, titles included), fitted on the same fit split as searched with and without
its gold paragraphs and on the written notes' questions with and without an answer, out of fold; below its cut-off
the run keeps no evidence and says that nothing answers it, showing the best sentences as the closest passages.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import numpy as np

from veracity.semantic.logistic import LogisticModel, load_fit
from veracity.semantic.model import SemanticModel, titled
from veracity.semantic.nli import ContradictionModel
from veracity.text import ANALYZER, content_terms, index_stems

SEMANTIC_FEATURES = (
    "cos_sentence",
    "cos_neighbour",
    "cos_passage",
    "lexical",
    "answer_type",
    "lead",
    "search_rank",
    "bridge",
    "cos_bridged",
)
LEXICAL_FEATURES = ("lexical", "answer_type", "lead", "search_rank", "bridge")
_NUMERIC_QUESTION = re.compile(
    r"^\s*(when|what year|which year|in what year|how (many|much|long|old|tall|high|far|large|big|fast))\b", re.I
)
_NUMBER = re.compile(r"\d")
_QUALIFIER = re.compile(r"\s*\([^)]*\)\s*$")
ANSWERED_FEATURES = (
    "best",
    "second",
    "third",
    "kept",
    "names_best",
    "names_top",
    "words_best",
    "words_top",
)
ANSWERED_TOP = 3
"""How many of the best sentences the question-level judgement reads."""
_WORD = re.compile(r"\b[^\W\d_][\w'’.-]*", re.UNICODE)
MIN_NAME_CHARS = 3
"""A title shorter than this (after its qualifier is removed) names nothing reliably."""


@dataclass(frozen=True)
class Candidate:
    """One sentence to judge: its text, its passage's title, its position among the passage's sentences, the
    index of its neighbours among the candidates being scored (same passage, adjacent), the passage's head
    vector when the index has one, and where the search ranked the passage (0 = first; a claim scored on its
    own, outside any search, reads as first)."""

    text: str
    title: str
    position: int = 0
    neighbours: tuple[int, ...] = ()
    passage_vector: Any = None
    rank: int = 0


def lexical_share(question_stems: set[str], text: str, title: str) -> float:
    if not question_stems:
        return 0.0
    found = set(ANALYZER.tokens(text)) | set(ANALYZER.tokens(title))
    return len(question_stems & found) / len(question_stems)


def title_name(title: str) -> str:
    """What another passage would call this passage's subject: its title without a trailing "(qualifier)"."""
    return _QUALIFIER.sub("", title).strip()


def namers(candidates: list[Candidate], strength: np.ndarray) -> dict[str, int]:
    """Per passage title, the candidate of another passage (another title) with the best ``strength`` whose
    sentence names it (its ``title_name``, as whole words, in the title's own case: "Shirley Temple" names her
    article, while "car" or "solar power" in running text does not name the articles "Car" or "Solar power", whose
    titles only capitalise a common noun); titles nothing names are left out."""
    out: dict[str, int] = {}
    for title in dict.fromkeys(c.title for c in candidates):
        if len(name := title_name(title)) < MIN_NAME_CHARS:
            continue
        pattern = re.compile(rf"(?<!\w){re.escape(name)}(?!\w)")
        naming = [j for j, c in enumerate(candidates) if c.title != title and pattern.search(c.text)]
        if naming:
            out[title] = max(naming, key=lambda j: (float(strength[j]), -j))
    return out


def bridges(candidates: list[Candidate], strength: np.ndarray, named: dict[str, int] | None = None) -> np.ndarray:
    """Per candidate, the ``strength`` of the best sentence of another passage that names its passage (``named``,
    from ``namers`` when not given); 0 when none does."""
    named = namers(candidates, strength) if named is None else named
    return np.array(
        [max(float(strength[named[c.title]]), 0.0) if c.title in named else 0.0 for c in candidates],
        dtype=np.float64,
    )


_WORD = re.compile(r"[\w'’-]+")


def asked_of(question: str, naming: str, name: str) -> str:
    """``question`` as it would be asked of the passage called ``name``, which the sentence ``naming`` names: the
    question's content words that ``naming`` holds (what it has already answered) dropped, the name put first."""
    answered = set(ANALYZER.tokens(naming))
    kept = [w for w in _WORD.findall(question) if not set(ANALYZER.tokens(w)) & answered]
    return f"{name}: {' '.join(kept)}"


def features(
    question: str, candidates: list[Candidate], model: SemanticModel | None
) -> tuple[np.ndarray, tuple[str, ...]]:
    """The feature matrix (one row per candidate) and the names of its columns."""
    numeric = bool(_NUMERIC_QUESTION.search(question))
    lexical = _lexical(question, candidates)
    answer = np.array([1.0 if numeric and _NUMBER.search(c.text) else 0.0 for c in candidates])
    lead = np.array([1.0 / (1 + c.position) for c in candidates])
    rank = np.array([1.0 / (1 + c.rank) for c in candidates])
    if model is None:
        if not candidates:
            return np.zeros((0, len(LEXICAL_FEATURES))), LEXICAL_FEATURES
        return np.column_stack([lexical, answer, lead, rank, bridges(candidates, lexical)]), LEXICAL_FEATURES
    if not candidates:
        return np.zeros((0, len(SEMANTIC_FEATURES))), SEMANTIC_FEATURES
    q, rows = _vectors(question, candidates, model)
    cos_sentence = (rows @ q).astype(np.float64)
    named = namers(candidates, cos_sentence)
    asked = {t: asked_of(question, candidates[j].text, title_name(t)) for t, j in named.items()}
    asked_vectors = dict(zip(asked, model.encode(list(asked.values())), strict=True)) if asked else {}
    cos_bridged = np.array(
        [
            float(rows[i] @ asked_vectors[c.title]) if c.title in asked_vectors else cos_sentence[i]
            for i, c in enumerate(candidates)
        ]
    )
    cos_neighbour = np.array(
        [max((cos_sentence[j] for j in c.neighbours), default=cos_sentence[i]) for i, c in enumerate(candidates)]
    )
    cos_passage = np.array(
        [
            float(np.asarray(c.passage_vector, dtype=np.float32) @ q)
            if c.passage_vector is not None
            else cos_sentence[i]
            for i, c in enumerate(candidates)
        ]
    )
    bridge = bridges(candidates, cos_sentence, named)
    columns = [cos_sentence, cos_neighbour, cos_passage, lexical, answer, lead, rank, bridge, cos_bridged]
    return np.column_stack(columns), SEMANTIC_FEATURES


def _lexical(question: str, candidates: list[Candidate]) -> np.ndarray:
    stems = set(index_stems(content_terms(question)))
    return np.array([lexical_share(stems, c.text, c.title) for c in candidates], dtype=np.float64)


def _vectors(question: str, candidates: list[Candidate], model: SemanticModel) -> tuple[np.ndarray, np.ndarray]:
    """The question's vector and each candidate's, read with its title."""
    vectors = model.encode([question, *(titled(c.title, c.text) for c in candidates)])
    return vectors[0], vectors[1:]


def strength(question: str, candidates: list[Candidate], model: SemanticModel | None) -> list[float]:
    """Per candidate, how like the question it reads before any fitted weighing: ``cos_sentence`` with the model,
    ``lexical`` without (what ``bridge`` borrows, and what the second hop reads names from)."""
    if not candidates:
        return []
    if model is None:
        return [float(v) for v in _lexical(question, candidates)]
    q, rows = _vectors(question, candidates, model)
    return [float(v) for v in rows @ q]


READER_FEATURES = ("relevance", "contradiction", "reading")
"""The reader's inputs, in its weights' order: the sentence model's relevance (as a logit), the cross-encoder's
contradiction logit, and the 384 numbers of its reading (the mean of its last layer over the pair's tokens)."""


def logit(p: np.ndarray) -> np.ndarray:
    q = np.clip(np.asarray(p, dtype=np.float64), 1e-6, 1 - 1e-6)
    return np.asarray(np.log(q / (1 - q)))


def reader_chosen(base: np.ndarray, top: int) -> np.ndarray:
    """Indices of the ``top`` candidates the sentence model ranks highest (ties in candidate order), in that order:
    the ones the reader reads."""
    return np.argsort(-np.asarray(base), kind="stable")[:top]


def reader_pairs(question: str, candidates: list[Candidate], chosen: np.ndarray) -> list[tuple[str, str]]:
    """What the cross-encoder reads per chosen candidate: the sentence with its title, then the question."""
    return [(titled(candidates[i].title, candidates[i].text), question) for i in chosen]


def reader_rows(base: np.ndarray, contradiction: np.ndarray, reading: np.ndarray) -> np.ndarray:
    """The reader's feature rows (``READER_FEATURES``) of candidates with sentence-model relevance ``base``."""
    return np.column_stack([logit(base), contradiction, reading])


def head_relevance(fit: dict[str, Any], base: np.ndarray, read: tuple[np.ndarray, np.ndarray]) -> np.ndarray:
    """The reader head's relevance (``fit``: the reader's) of candidates read (``read``) with sentence-model
    relevance ``base``."""
    return LogisticModel.from_dict(fit, READER_FEATURES).probability(reader_rows(base, *read))


def reread(
    base: np.ndarray, read: tuple[np.ndarray, np.ndarray] | None, chosen: np.ndarray, fit: dict[str, Any]
) -> np.ndarray:
    """Every candidate's relevance on the reader's scale: a chosen one's from its reading (``read``, in ``chosen``
    order), any other's from its sentence-model relevance alone, calibrated on the candidates the reader did not
    read (``fit["unread"]``)."""
    unread = LogisticModel.from_dict(fit["unread"], ("relevance",))
    out = unread.probability(logit(base)[:, None]) if len(base) else np.zeros(0)
    if read is not None and len(chosen):
        out[chosen] = head_relevance(fit, base[chosen], read)
    return np.asarray(out)


def question_names(question: str) -> set[str]:
    """The question's names, as the index stems them: its capitalised words but the first (which any question
    capitalises)."""
    return set(index_stems([w for w in _WORD.findall(question)[1:] if w[0].isupper()]))


def _covered(stems: set[str], text: str) -> float:
    """Share of ``stems`` that ``text`` holds (1 when there is nothing to hold)."""
    if not stems:
        return 1.0
    have = set(ANALYZER.tokens(text))
    return sum(s in have for s in stems) / len(stems)


def answered_features(question: str, pool: list[tuple[float, str, str]], cutoff: float) -> np.ndarray:
    """The question-level signals (``ANSWERED_FEATURES``) of a pool of (relevance, text, title), any order."""
    ranked = sorted(pool, key=lambda t: -t[0])
    best = [p for p, _, _ in ranked[:ANSWERED_TOP]] + [0.0] * ANSWERED_TOP
    names = question_names(question)
    words = set(index_stems(content_terms(question)))
    first = " ".join(f"{text} {title}" for _, text, title in ranked[:1])
    top = " ".join(f"{text} {title}" for _, text, title in ranked[:ANSWERED_TOP])
    kept = sum(1 for p, _, _ in ranked if p >= cutoff)
    return np.array(
        [
            best[0],
            best[1],
            best[2],
            float(np.log1p(kept)),
            _covered(names, first),
            _covered(names, top),
            _covered(words, first),
            _covered(words, top),
        ]
    )


READ_JUDGEMENT_FEATURES = (*ANSWERED_FEATURES, "read_best", "read_top")
"""The question-level judgement with the pool read (``read_judgement``): ``ANSWERED_FEATURES`` and, over the pool's
best ``top`` sentences read with the question by the cross-encoder, the reader head's best relevance and the mean of
its three best."""


def read_values(
    question: str, pool: list[tuple[float, str, str]], reader: ContradictionModel, fit: dict[str, Any]
) -> np.ndarray | None:
    """The reader head's relevance (``fit``: the reader's) of the pool's best ``fit["top"]`` sentences by relevance,
    read with ``question``, best first; None when the cross-encoder cannot read."""
    ranked = sorted(pool, key=lambda t: -t[0])[: int(fit["top"])]
    read = reader.read([(titled(title, text), question) for _, text, title in ranked])
    if read is None:
        return None
    return np.sort(head_relevance(fit, np.array([p for p, _, _ in ranked], dtype=np.float64), read))[::-1]


def read_features(values: np.ndarray) -> np.ndarray:
    """``read_best`` and ``read_top`` of the reader head's relevances ``values`` (best first)."""
    if len(values) == 0:
        return np.zeros(2)
    return np.array([float(values[0]), float(values[:ANSWERED_TOP].mean())])


@dataclass(frozen=True)
class Answered:
    """The question-level judgement: the probability that the pool answers the question, the fitted cut-off, and
    whether the pool's best sentences were read with the question (``read_judgement``)."""

    probability: float
    cutoff: float
    read: bool = False

    @property
    def passed(self) -> bool:
        return self.probability >= self.cutoff


def fitted() -> dict[str, Any]:
    """The shipped fit: ``semantic`` and ``lexical`` models, the split, the sources and the figures."""
    return load_fit("veracity.semantic", "relevance.json")


@dataclass(frozen=True)
class RelevanceScorer:
    """Scores candidates for a question with the semantic model when there is one, else lexically; with the
    semantic model and a ``reader`` that can read (the cross-encoder, ``semantic.nli``), the sentence model's best
    candidates are then read with the question by the reader, whose fitted head gives their relevance (``mode``
    ``semantic+reader``; cut-off and question-level judgement are the reader's fit's)."""

    model: SemanticModel | None
    reader: ContradictionModel | None = None
    judge_reader: ContradictionModel | None = None
    """The cross-encoder the question-level judgement reads the pool's best sentences with (``read_judgement``);
    None = it judges from the relevances and the words alone."""

    @property
    def logistic(self) -> LogisticModel:
        return LogisticModel.from_dict(fitted()["semantic" if self.model is not None else "lexical"])

    @property
    def _reader_fit(self) -> dict[str, Any] | None:
        """The reader's fit when it is in use: a semantic model, a reader that can read, a fit that has one."""
        if self.model is None or self.reader is None or not self.reader.readable():
            return None
        fit: dict[str, Any] | None = fitted()["semantic"].get("reader")
        return fit

    @property
    def mode(self) -> str:
        if self.model is None:
            return "lexical"
        return "semantic+reader" if self._reader_fit is not None else "semantic"

    def score(self, question: str, candidates: list[Candidate]) -> list[float]:
        """Probability, per candidate, that it helps answer ``question``."""
        x, _names = features(question, candidates, self.model)
        base = self.logistic.probability(x)
        fit = self._reader_fit
        if fit is not None and self.reader is not None and len(candidates):
            chosen = reader_chosen(base, int(fit["top"]))
            # On the reader's scale whatever happens (its cut-off and judgement apply): unread if it cannot read.
            base = reread(base, self.reader.read(reader_pairs(question, candidates, chosen)), chosen, fit)
        return [round(float(p), 4) for p in base]

    def strength(self, question: str, candidates: list[Candidate]) -> list[float]:
        return strength(question, candidates, self.model)

    def threshold(self, override: float | None = None) -> float:
        if override is not None:
            return override
        fit = self._reader_fit
        return float(fit["threshold"]) if fit is not None else self.logistic.threshold

    @property
    def _read_judgement(self) -> tuple[dict[str, Any], dict[str, Any]] | None:
        """The read judgement's fit and the reader head it reads with, when in use: a semantic model, the sentence
        reader not in use (its own judgement applies), a judge reader that can read, a fit that has both."""
        if self.model is None or self.judge_reader is None or self._reader_fit is not None:
            return None
        semantic = fitted()["semantic"]
        if "read_judgement" not in semantic or "reader" not in semantic or not self.judge_reader.readable():
            return None
        return semantic["read_judgement"], semantic["reader"]

    def answered(self, question: str, pool: list[tuple[float, str, str]], cutoff: float, read: bool = True) -> Answered:
        """Whether the pool of (relevance, text, title) answers ``question``; an empty pool answers nothing.
        ``read=False`` keeps the judgement of relevances and words even with a judge reader."""
        reading = self._read_judgement if read else None
        if reading is not None and self.judge_reader is not None:
            gate, head = reading
            if not pool:
                return Answered(0.0, float(gate["threshold"]), read=True)
            values = read_values(question, pool, self.judge_reader, head)
            if values is not None:
                model = LogisticModel.from_dict(gate, READ_JUDGEMENT_FEATURES)
                x = np.r_[answered_features(question, pool, cutoff), read_features(values)]
                return Answered(round(float(model.probability(x[None, :])[0]), 4), model.threshold, read=True)
        fit = self._reader_fit
        gate = (
            fit["answered"]
            if fit is not None
            else fitted()["semantic" if self.model is not None else "lexical"]["answered"]
        )
        if not pool:
            return Answered(0.0, float(gate["threshold"]))
        model = LogisticModel.from_dict(gate)
        p = float(model.probability(answered_features(question, pool, cutoff)[None, :])[0])
        return Answered(round(p, 4), model.threshold)
