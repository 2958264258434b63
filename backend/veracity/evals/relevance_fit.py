"""Fit the relevance model (``semantic/data/relevance.json``): ``python -m veracity.evals.relevance_fit EVAL_DATA
[--wiki-labels FILE --wiki-db DB]`` (``make fit-relevance``).

Training material, and nothing else:

- HotpotQA's **fit split** (``split_of(id) == "fit"``: the SHA-256 of the question id is even). For each such
  question the pooled corpus is searched as runs search it (hybrid, 8 passages, each sentence knowing its
  passage's rank); every fact-shaped sentence of a gold paragraph is a positive, every one of another paragraph
  a negative. Each question is read a second time with its gold paragraphs left out of the results — what a run
  sees when the corpus holds no answer — where every sentence is a negative: without it the model would learn
  that the first-ranked passage is relevant because it is first. The **report split** (odd) is never read here;
  ``make eval-relevance`` reports on it. HotpotQA is CC BY-SA 4.0, read by path, never copied.
- The project's own hand-labelled questions (``training/relevance/wiki_questions.jsonl``: questions written for
  the purpose, candidates from the project's search over the Wikipedia corpus, labels 0/1/2 by hand; label ≥ 1
  is a positive), when given. They reference the corpus by offsets; the text is read from the database, and each
  sentence's passage is ranked by the same hybrid search over that corpus.

A logistic regression (``semantic.logistic.fit_logistic``: standardised features, L2 0.01, Newton's method) is
fitted for the semantic features and for the lexical ones. Figures are 5-fold cross-validated with questions kept
whole inside a fold. The default cut-off is the one with the best F0.5 (precision weighs twice recall: shipping an
off-topic sentence is worse than leaving one out) on the out-of-fold predictions.

Then the question-level model (``relevance.answered``: does the pool answer the question at all?), per mode: one
pool per HotpotQA fit-split reading (as searched: answered when it holds a gold sentence; gold left out: not
answered), each sentence scored by its sentence model out of fold, and, with ``--notes``/``--notes-questions``, one
per written notes question (answered when a labelled answer line is in its pool; a question nothing answers: not),
scored by the sentence model fitted on everything (the notes are not in it: everyday questions over small notes are
unlike HotpotQA's, and a question-level model fitted on HotpotQA alone declined all but 9 of their 206 answerable
ones). Its cut-off is the best balanced accuracy (answered pools passed, unanswered ones declined, weighed
equally) over out-of-fold predictions, in the same folds (a notes question in its document's). The reader's own
judgement (below) takes the best among the cut-offs that pass at least as many answerable pools of each source as
the sentence model's judgement does: unbounded, it passed 37% of the answerable notes questions (the sentence
model's 58%) and withheld a help-centre answer.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sqlite3
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from veracity.corpus.readers import read_file
from veracity.db.corpus_repo import ChunkHit, chunk_spans
from veracity.search.evidence import is_fact_shaped
from veracity.search.hop import HOP_K, hop_names
from veracity.search.memindex import MemoryIndex
from veracity.semantic.logistic import L2, LogisticModel, auc, fit_logistic, logistic_dict, predict
from veracity.semantic.model import SemanticModel, head_text, load_semantics
from veracity.semantic.nli import ContradictionModel, process_contradiction
from veracity.semantic.relevance import (
    ANSWERED_FEATURES,
    READ_JUDGEMENT_FEATURES,
    READER_FEATURES,
    Candidate,
    answered_features,
    features,
    logit,
    read_features,
    read_values,
    reader_chosen,
    reader_pairs,
    reader_rows,
    reread,
    strength,
)
from veracity.text import sentence_spans

FOLDS = 5
HITS = 8
WIKI_RANKS = 50
CHUNK_CHARS = 1200
"""Passage size as ingest chunks by default (``corpus.chunk_chars``)."""
OUT = Path(__file__).parents[1] / "semantic" / "data" / "relevance.json"


def split_of(question_id: str) -> str:
    """``fit`` or ``report``: fixed by the id alone, so every tool agrees which items were seen."""
    return "fit" if int(hashlib.sha256(question_id.encode()).hexdigest(), 16) % 2 == 0 else "report"


def passage_candidates(text: str, title: str, vector: Any) -> tuple[list[Candidate], list[tuple[int, int]]]:
    """The fact-shaped sentences of a passage as candidates (positions and neighbours as ``retrieve`` makes
    them), with their spans."""
    spans = sentence_spans(text)
    kept = [(i, s, e) for i, (s, e) in enumerate(spans) if is_fact_shaped(text[s:e])]
    by_position = {i: n for n, (i, _, _) in enumerate(kept)}
    out = []
    for i, s, e in kept:
        neighbours = tuple(by_position[j] for j in (i - 1, i + 1) if j in by_position)
        out.append(Candidate(text=text[s:e], title=title, position=i, neighbours=neighbours, passage_vector=vector))
    return out, [(s, e) for _, s, e in kept]


Row = tuple[str, str, list[Candidate], list[int]]
"""(group id, question, candidates, labels)."""


def hotpot_rows(eval_data: Path, model: SemanticModel | None) -> list[Row]:
    """Two rows per fit-split question: as searched, and with its gold paragraphs left out (group id + ":hidden",
    kept in the question's fold)."""
    folder = eval_data / "qa_hotpotqa"
    docs = [json.loads(line) for line in (folder / "corpus.jsonl").open(encoding="utf-8")]
    hits = [
        ChunkHit(i, i, d["_id"], d.get("title", ""), d["text"], 0, len(d["text"]), 0.0, None, None)
        for i, d in enumerate(docs)
    ]
    vectors = model.encode_heads([head_text(h.title, h.text) for h in hits]) if model is not None else None
    index = MemoryIndex(hits, vectors=vectors)
    rows = []
    for line in (folder / "questions.jsonl").open(encoding="utf-8"):
        item = json.loads(line)
        if split_of(item["id"]) != "fit":
            continue
        gold = frozenset(item["supporting_doc_ids"])

        def in_gold(hit: ChunkHit, _text: str, gold: frozenset[str] = gold) -> int:
            return int(hit.doc_id in gold)

        # One search for both readings: as searched, and with the gold left out (asked for as many more).
        found = index.search(item["question"], HITS + len(gold), _vector(model, item["question"]))
        for group, hidden in ((item["id"], frozenset[str]()), (f"{item['id']}:hidden", gold)):
            hits = [h for h in found if h.doc_id not in hidden][:HITS]
            candidates, labels = pooled(index, vectors, model, item["question"], hits, in_gold, hidden)
            rows.append((group, item["question"], candidates, labels))
    return rows


Labeller = Callable[[ChunkHit, str], int]
"""A candidate's label from its passage and its text."""


def pooled(
    index: MemoryIndex,
    vectors: Any,
    model: SemanticModel | None,
    question: str,
    hits: list[ChunkHit],
    label: Labeller,
    hidden: frozenset[str] = frozenset(),
) -> tuple[list[Candidate], list[int]]:
    """The candidates a run reads for ``question`` from the first pass's ``hits``, then the second hop as
    ``retrieve`` takes it (documents in ``hidden`` left out), each labelled by ``label``."""
    candidates: list[Candidate] = []
    labels: list[int] = []
    for rank, hit in enumerate(hits):
        add_passage(candidates, labels, hit, rank, vectors, label)
    # The second hop, as retrieve takes it: names in the sentences most like the question, each searched.
    opened = {h.doc_id for h in hits}
    strong = strength(question, candidates, model)
    for name in hop_names(question, [c.text for c in candidates], strong, [h.title for h in hits]):
        named = index.search(name, HOP_K + len(hidden), _vector(model, name))
        for rank, hit in enumerate([h for h in named if h.doc_id not in hidden][:HOP_K]):
            if hit.doc_id not in opened:
                opened.add(hit.doc_id)
                add_passage(candidates, labels, hit, rank, vectors, label)
    return candidates, labels


def add_passage(
    candidates: list[Candidate], labels: list[int], hit: ChunkHit, rank: int, vectors: Any, label: Labeller
) -> None:
    """A passage's fact-shaped sentences appended to the pool (neighbours offset into it), each labelled by
    ``label``."""
    pv = vectors[hit.chunk_id] if vectors is not None else None
    offset = len(candidates)
    candidates.extend(
        Candidate(c.text, c.title, c.position, tuple(offset + n for n in c.neighbours), pv, rank)
        for c in passage_candidates(hit.text, hit.title, pv)[0]
    )
    labels.extend(label(hit, c.text) for c in candidates[offset:])


def notes_rows(folder: Path, questions_file: Path, model: SemanticModel | None) -> list[Row]:
    """One row per written question over the project's own small documents (``training/relevance/notes``): the
    documents read as an upload reads them (``read_file``: a Markdown file's title is its first heading) and
    chunked as ingest chunks them, all of them one corpus searched as runs search it. A candidate is a positive
    when it is one of the lines or sentences the question's ``answers`` name (labelled by hand); a question
    nothing answers (``answers`` empty) has every candidate negative, grouped with ``:hidden`` like HotpotQA's
    gold-less reading. Groups are ``notes:<document>|<id>``: folds keep a document's questions together."""
    hits: list[ChunkHit] = []
    for n, path in enumerate(sorted(p for p in folder.iterdir() if p.is_file())):
        for doc in read_file(path, path.name):
            for s, e in chunk_spans(doc.text, CHUNK_CHARS):
                hits.append(ChunkHit(len(hits), n, doc.doc_id, doc.title, doc.text[s:e], s, e, 0.0, None, None))
    vectors = model.encode_heads([head_text(h.title, h.text) for h in hits]) if model is not None else None
    index = MemoryIndex(hits, vectors=vectors)
    rows = []
    for line in questions_file.open(encoding="utf-8"):
        if not line.strip():
            continue
        item = json.loads(line)
        answers = [_squash(a) for a in item["answers"]]

        def answers_it(hit: ChunkHit, text: str, doc: str = item["doc"], answers: list[str] = answers) -> int:
            return int(hit.doc_id == doc and any(_same_line(_squash(text), a) for a in answers))

        hits = index.search(item["question"], HITS, _vector(model, item["question"]))
        candidates, labels = pooled(index, vectors, model, item["question"], hits, answers_it)
        suffix = "" if answers else ":hidden"
        rows.append((f"notes:{item['doc']}|{item['id']}{suffix}", item["question"], candidates, labels))
    return rows


def _squash(text: str) -> str:
    return " ".join(text.split())


def _same_line(candidate: str, answer: str) -> bool:
    """The candidate is the answer's line or sentence: equal, or one holding the other where the splitter drew
    the line a little differently (a heading's colon, a trailing note), most of it shared."""
    if candidate == answer:
        return True
    shorter, longer = sorted((candidate, answer), key=len)
    return shorter in longer and len(shorter) >= 0.6 * len(longer)


def _vector(model: SemanticModel | None, text: str) -> Any:
    return model.encode([text])[0] if model is not None else None


def wiki_index(con: sqlite3.Connection, model: SemanticModel | None) -> MemoryIndex:
    """The corpus ``wiki`` of the database as runs search it: its passages, with their stored head vectors."""
    rows = con.execute(
        'SELECT c.id, c.document_id, d.doc_id, c.title, c.text, c.start, c."end", v.vector FROM chunks c '
        "JOIN documents d ON d.id = c.document_id LEFT JOIN chunk_vectors v ON v.chunk_id = c.id "
        "WHERE c.corpus = 'wiki' ORDER BY c.id"
    ).fetchall()
    hits = [ChunkHit(r[0], r[1], r[2], r[3], r[4], r[5], r[6], 0.0, None, None) for r in rows]
    if model is None or any(r[7] is None for r in rows):
        vectors = model.encode_heads([head_text(h.title, h.text) for h in hits]) if model is not None else None
    else:
        vectors = np.vstack([np.frombuffer(r[7], dtype=np.float16) for r in rows]).astype(np.float32)  # as stored
    return MemoryIndex(hits, vectors=vectors)


def wiki_rows(labels_file: Path, db: Path, model: SemanticModel | None) -> list[Row]:
    """One row per hand-labelled question; texts read from the database, each sentence's passage ranked where the
    hybrid search over the corpus puts it for the question (``WIKI_RANKS`` when further down)."""
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    index = wiki_index(con, model)
    ranks: dict[str, dict[tuple[str, int], int]] = {}
    grouped: dict[str, tuple[str, list[Candidate], list[int]]] = {}
    for line in labels_file.open(encoding="utf-8"):
        item = json.loads(line)
        row = con.execute(
            "SELECT title, text FROM documents WHERE corpus = 'wiki' AND doc_id = ?", (item["doc_id"],)
        ).fetchone()
        if row is None:
            continue
        title, text = row
        sentence = text[item["start"] : item["end"]]
        chunk = next(((s, e) for s, e in chunk_spans(text, 1200) if s <= item["start"] < e), (0, len(text)))
        passage = text[chunk[0] : chunk[1]]
        position = sum(1 for s, _ in sentence_spans(passage) if s + chunk[0] < item["start"])
        vector = model.encode_heads([head_text(title, passage)])[0] if model is not None else None
        if item["qid"] not in ranks:
            qvec = _vector(model, item["question"])
            found = index.search(item["question"], WIKI_RANKS, qvec)
            ranks[item["qid"]] = {(h.doc_id, h.start): n for n, h in enumerate(found)}
        rank = ranks[item["qid"]].get((item["doc_id"], chunk[0]), WIKI_RANKS)
        question, cands, labels = grouped.setdefault(item["qid"], (item["question"], [], []))
        cands.append(Candidate(sentence, title, position, (), vector, rank))
        labels.append(int(item["label"] >= 1))
    return [(f"wiki:{qid}", q, c, lab) for qid, (q, c, lab) in grouped.items()]


HIDDEN = "hotpotqa, gold left out"


NOTES_ABSENT = "notes, nothing answers"


def source_of(group: str) -> str:
    if group.startswith("wiki:"):
        return "wiki"
    if group.startswith("notes:"):
        return NOTES_ABSENT if group.endswith(":hidden") else "notes"
    return HIDDEN if group.endswith(":hidden") else "hotpotqa"


def declined(groups: list[str], oof: np.ndarray, threshold: float) -> float:
    """Share of the questions read with their gold paragraphs left out where no sentence reaches ``threshold``:
    a run on them would keep no evidence and decline."""
    best: dict[str, float] = {}
    for g, p in zip(groups, oof, strict=True):
        if g.endswith(":hidden"):
            best[g] = max(best.get(g, 0.0), float(p))
    return round(sum(p < threshold for p in best.values()) / len(best), 3) if best else 0.0


def fold(group: str) -> int:
    """A question's fold, the same for its row with the gold paragraphs left out; a written note's questions all
    in their document's fold (``notes:<document>|<id>``), so no fold is measured on a document it was fitted on."""
    key = group.removesuffix(":hidden").split("|", 1)[0]
    return int(hashlib.sha256(key.encode()).hexdigest(), 16) % FOLDS


def at_threshold(y: np.ndarray, p: np.ndarray, t: float) -> dict[str, float]:
    kept = p >= t
    tp = float((kept & (y == 1)).sum())
    precision = tp / kept.sum() if kept.sum() else 1.0
    recall = tp / (y == 1).sum() if (y == 1).sum() else 0.0
    f05 = 1.25 * precision * recall / (0.25 * precision + recall) if precision + recall else 0.0
    return {
        "threshold": round(t, 3),
        "precision": round(precision, 3),
        "recall": round(recall, 3),
        "f0.5": round(f05, 3),
    }


def fit_one(
    rows: list[tuple[str, str, np.ndarray, list[int]]], names: tuple[str, ...]
) -> tuple[dict[str, Any], np.ndarray]:
    """The sentence model and its figures, and its out-of-fold prediction of every sentence (in ``rows`` order)."""
    groups = [g for g, _, x, _ in rows for _ in range(len(x))]
    x = np.vstack([x for _, _, x, _ in rows])
    y = np.concatenate([np.asarray(lab, dtype=np.float64) for _, _, _, lab in rows])
    fold_of = {g: fold(g) for g in dict.fromkeys(groups)}
    folds = np.array([fold_of[g] for g in groups])
    oof = np.zeros(len(y))
    for k in range(FOLDS):
        w, b, m, s = fit_logistic(x[folds != k], y[folds != k], L2)
        oof[folds == k] = predict(x[folds == k], w, b, m, s)
    best, by_source = figures(groups, y, oof)
    w, b, m, s = fit_logistic(x, y, L2)
    fit = {
        "features": list(names),
        **logistic_dict((w, b, m, s)),
        "threshold": best["threshold"],
        "cv": {
            "folds": FOLDS,
            "auc": round(auc(y, oof), 3),
            "at_threshold": best,
            "by_source": by_source,
            "questions": len({g.removesuffix(":hidden") for g in fold_of}),
            "sentences": len(y),
            "positives": int(y.sum()),
        },
    }
    return fit, oof


def figures(
    groups: list[str], y: np.ndarray, oof: np.ndarray, cutoff: float | None = None
) -> tuple[dict[str, float], dict[str, dict[str, Any]]]:
    """The cut-off with the best F0.5 over out-of-fold predictions ``oof`` (or the given ``cutoff``), figures at it
    and figures per source."""
    grid = [at_threshold(y, oof, t) for t in np.arange(0.05, 0.96, 0.01)]
    best = max(grid, key=lambda r: (r["f0.5"], r["threshold"]))
    if cutoff is not None:
        best = at_threshold(y, oof, cutoff)
    by_source: dict[str, dict[str, Any]] = {}
    sources = np.array([source_of(g) for g in groups])
    for source in sorted(set(sources)):
        mask = sources == source
        if source in (HIDDEN, NOTES_ABSENT):
            of_source = [g for g in groups if source_of(g) == source]
            by_source[source] = {
                "sentences": int(mask.sum()),
                "cv_declined": declined(of_source, oof[mask], best["threshold"]),
            }
            continue
        by_source[source] = {
            "sentences": int(mask.sum()),
            "positives": int(y[mask].sum()),
            "cv_auc": round(auc(y[mask], oof[mask]), 3),
            "cv_at_threshold": at_threshold(y[mask], oof[mask], best["threshold"]),
        }
    return best, by_source


READER_TOP = 8
"""Candidates per question the reader reads: the sentence model's best 8. Chosen on the fit split before fitting
(out of fold, 8 kept as many answers as 12 at a decline of 0.8, at two thirds of the cost)."""
READER_CUTOFF = 0.38
"""The reader's cut-off, calibrated end to end on 60 HotpotQA ``fit``-split questions (``make eval-relevance --split
fit --templates answer``, development figures; the report split was not read): of the F0.5 rule's 0.47 and two lower
cut-offs, the one whose worst ratio to the issue's targets (claim precision 0.85, answer recall 0.60, decline 0.80)
was best — 0.30: 0.845 / 0.600 / 0.650; **0.38: 0.884 / 0.533 / 0.767**; 0.47: 0.912 / 0.467 / 0.800 (the sentence
model alone, its 0.32: 0.780 / 0.550 / 0.667). The F0.5 rule weighs off-topic sentences over missed ones, sentence by
sentence; end to end it cost more answers than the issue's targets allow."""
READER_L2 = (0.03, 0.1, 0.3)
"""Ridge penalties tried for the reader's head (its 386 inputs need more than the sentence model's 0.01); the best
out-of-fold log-loss is kept."""


def log_loss(y: np.ndarray, p: np.ndarray) -> float:
    q = np.clip(p, 1e-6, 1 - 1e-6)
    return float(-(y * np.log(q) + (1 - y) * np.log(1 - q)).mean())


def fit_reader(read: list[Row], oof: np.ndarray, reader: ContradictionModel) -> tuple[dict[str, Any], np.ndarray]:
    """The reader's head over the sentence model's best ``READER_TOP`` candidates of each reading (read as a run
    reads them, in batches of four in the sentence model's order; the sentence model here is out of fold, so a
    batch can hold other candidates than at run time, and a pair's reading moves a little with its batch-mates:
    ``ContradictionModel.read``), the calibration of the others from their sentence-model relevance alone, and
    the out-of-fold relevance of every candidate on the reader's scale (in ``read`` order)."""
    head_x, head_y, head_g, unread_x, unread_y, unread_g, where = [], [], [], [], [], [], []
    start = 0
    for group, question, candidates, labels in read:
        p = oof[start : start + len(candidates)]
        chosen = reader_chosen(p, READER_TOP)
        reading = reader.read(reader_pairs(question, candidates, chosen))
        if reading is None:
            raise RuntimeError("the cross-encoder cannot read (is the onnx package installed?)")
        head_x.append(reader_rows(p[chosen], *reading))
        is_chosen = np.zeros(len(candidates), dtype=bool)
        is_chosen[chosen] = True
        for i in range(len(candidates)):
            if is_chosen[i]:
                continue
            unread_x.append(p[i])
            unread_y.append(labels[i])
            unread_g.append(group)
        head_y += [labels[i] for i in chosen]
        head_g += [group] * len(chosen)
        where.append((start, chosen, is_chosen))
        start += len(candidates)
    hx, hy = np.vstack(head_x), np.array(head_y, dtype=np.float64)
    ux, uy = logit(np.array(unread_x))[:, None], np.array(unread_y, dtype=np.float64)
    h_folds = np.array([fold(g) for g in head_g])
    u_folds = np.array([fold(g) for g in unread_g])

    def out_of_fold(x: np.ndarray, y: np.ndarray, folds: np.ndarray, l2: float) -> np.ndarray:
        o = np.zeros(len(y))
        for k in range(FOLDS):
            w, b, m, s = fit_logistic(x[folds != k], y[folds != k], l2)
            o[folds == k] = predict(x[folds == k], w, b, m, s)
        return o

    losses = {l2: out_of_fold(hx, hy, h_folds, l2) for l2 in READER_L2}
    penalty = min(READER_L2, key=lambda l2: log_loss(hy, losses[l2]))
    head_oof = losses[penalty]
    unread_oof = out_of_fold(ux, uy, u_folds, L2)
    final = np.zeros(len(oof))
    h = u = 0
    for begin, chosen, is_chosen in where:
        final[begin + chosen] = head_oof[h : h + len(chosen)]
        h += len(chosen)
        rest = np.flatnonzero(~is_chosen)
        final[begin + rest] = unread_oof[u : u + len(rest)]
        u += len(rest)
    groups = [g for g, _, c, _ in read for _ in range(len(c))]
    y = np.concatenate([np.asarray(lab, dtype=np.float64) for _, _, _, lab in read])
    f05, _ = figures(groups, y, final)
    best, by_source = figures(groups, y, final, READER_CUTOFF)
    fit = {
        "features": list(READER_FEATURES),
        "model": reader.id,
        "top": READER_TOP,
        "penalty": penalty,
        "log_loss": {str(l2): round(log_loss(hy, o), 4) for l2, o in losses.items()},
        **logistic_dict(fit_logistic(hx, hy, penalty)),
        "threshold": best["threshold"],
        "threshold_selection": "calibrated end to end on 60 fit-split questions (veracity.evals.relevance_fit."
        f"READER_CUTOFF); the best F0.5 over out-of-fold sentences would be {f05['threshold']}",
        "unread": {"features": ["relevance"], **logistic_dict(fit_logistic(ux, uy, L2)), "threshold": 0.5},
        "cv": {
            "folds": FOLDS,
            "auc": round(auc(y, final), 3),
            "read_auc": round(auc(hy, head_oof), 3),
            "at_threshold": best,
            "by_source": by_source,
            "read": int(len(hy)),
            "unread": int(len(uy)),
        },
    }
    return fit, final


Pool = tuple[str, str, list[tuple[float, str, str]], int]
"""A question-level row: group, question, its pool of (relevance, text, title), 1 when the pool answers it."""


def pool_of(group: str, question: str, candidates: list[Candidate], labels: list[int], p: np.ndarray) -> Pool:
    """A reading's pool as the question-level model sees it; answered when a positive sentence is in it (never for a
    gold-left-out or nothing-answers reading, whose sentences are all negatives)."""
    pool = [(float(x), c.text, c.title) for x, c in zip(p, candidates, strict=True)]
    return group, question, pool, int(any(labels))


def fit_answered(
    pools: list[Pool],
    cutoff: float,
    floor: dict[str, float] | None = None,
    extra: np.ndarray | None = None,
    names: tuple[str, ...] = ANSWERED_FEATURES,
) -> dict[str, Any]:
    """The question-level model over ``pools`` (sentences kept at ``cutoff``), its cut-off (best balanced accuracy
    out of fold, among the cut-offs that pass at least ``floor``'s share of each source's answerable pools) and
    figures per source."""
    x = np.vstack([answered_features(q, pool, cutoff) for _, q, pool, _ in pools])
    if extra is not None:  # more columns per pool (the read judgement's)
        x = np.column_stack([x, extra])
    y = np.array([label for *_, label in pools], dtype=np.float64)
    folds = np.array([fold(g) for g, *_ in pools])
    oof = np.zeros(len(y))
    for k in range(FOLDS):
        w, b, m, s = fit_logistic(x[folds != k], y[folds != k], L2)
        oof[folds == k] = predict(x[folds == k], w, b, m, s)

    def balanced(t: float, mask: np.ndarray) -> tuple[float, float]:
        yes, no = mask & (y == 1), mask & (y == 0)
        passed = float((oof[yes] >= t).mean()) if yes.any() else 1.0
        declined = float((oof[no] < t).mean()) if no.any() else 1.0
        return passed, declined

    everything = np.ones(len(y), dtype=bool)
    grid = [round(float(t), 2) for t in np.arange(0.05, 0.96, 0.01)]
    sources = np.array([source_of(g).split(",")[0] for g, *_ in pools])

    def passes_enough(t: float) -> bool:
        # ``floor`` holds figures rounded to three places: a rate equal to one before rounding passes.
        return all(balanced(t, sources == source)[0] >= rate - 5e-4 for source, rate in (floor or {}).items())

    allowed = [t for t in grid if passes_enough(t)]
    if not allowed:
        raise ValueError(f"no cut-off passes the floor {floor}")
    threshold = max(allowed, key=lambda t: (sum(balanced(t, everything)), -t))
    w, b, m, s = fit_logistic(x, y, L2)
    by_source: dict[str, Any] = {}
    for source in sorted(set(sources)):
        mask = sources == source
        passed, declined = balanced(threshold, mask)
        by_source[source] = {
            "answered": int((mask & (y == 1)).sum()),
            "unanswered": int((mask & (y == 0)).sum()),
            "passed": round(passed, 3),
            "declined": round(declined, 3),
        }
    passed, declined = balanced(threshold, everything)
    return {
        "features": list(names),
        **logistic_dict((w, b, m, s)),
        "threshold": threshold,
        "cv": {
            "folds": FOLDS,
            "auc": round(auc(y, oof), 3),
            "passed": round(passed, 3),
            "declined": round(declined, 3),
            "by_source": by_source,
        },
    }


def question_pools(
    read: list[Row],
    oof: np.ndarray,
    notes: list[Row],
    sentence: LogisticModel,
    model: SemanticModel | None,
    reading: tuple[ContradictionModel, dict[str, Any]] | None = None,
) -> list[Pool]:
    """The question-level model's pools: the readings a run reads (HotpotQA's; the wiki labels are hand-picked
    sentences, not a pool), each sentence at its out-of-fold relevance ``oof``, and the notes' questions scored by
    the models fitted on everything (the sentence model, then, given ``reading``, the reader)."""
    pools: list[Pool] = []
    start = 0
    for group, question, candidates, labels in read:
        if not group.startswith("wiki:"):
            pools.append(pool_of(group, question, candidates, labels, oof[start : start + len(candidates)]))
        start += len(candidates)
    for group, question, candidates, labels in notes:
        p = sentence.probability(features(question, candidates, model)[0]) if candidates else np.zeros(0)
        if reading is not None and candidates:
            reader, fit = reading
            chosen = reader_chosen(p, int(fit["top"]))
            p = reread(p, reader.read(reader_pairs(question, candidates, chosen)), chosen, fit)
        pools.append(pool_of(group, question, candidates, labels, p))
    return pools


def read_columns(
    read: list[Row],
    oof: np.ndarray,
    final: np.ndarray,
    notes: list[Row],
    sentence: LogisticModel,
    model: SemanticModel | None,
    reader: ContradictionModel,
    fit: dict[str, Any],
) -> np.ndarray:
    """Per pool of ``question_pools`` (same order), the read judgement's columns: the reader head's relevance of the
    pool's best ``fit["top"]`` sentences, out of fold for HotpotQA's readings (``final``, as ``fit_reader`` gave it),
    by the fitted head for the notes (never in its material)."""
    rows = []
    start = 0
    for group, _question, candidates, _labels in read:
        p, f = oof[start : start + len(candidates)], final[start : start + len(candidates)]
        start += len(candidates)
        if not group.startswith("wiki:"):
            rows.append(read_features(np.sort(f[reader_chosen(p, int(fit["top"]))])[::-1]))
    for _group, question, candidates, _labels in notes:
        p = sentence.probability(features(question, candidates, model)[0]) if candidates else np.zeros(0)
        pool = [(float(v), c.text, c.title) for v, c in zip(p, candidates, strict=True)]
        values = read_values(question, pool, reader, fit) if pool else np.zeros(0)
        rows.append(read_features(values if values is not None else np.zeros(0)))
    return np.vstack(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m veracity.evals.relevance_fit", description=__doc__.split("\n")[0])
    parser.add_argument("eval_data", type=Path, help="the folder holding qa_hotpotqa/")
    parser.add_argument("--wiki-labels", type=Path, default=None, help="training/relevance/wiki_questions.jsonl")
    parser.add_argument("--wiki-db", type=Path, default=Path("data/veracity.db"), help="database with corpus wiki")
    parser.add_argument(
        "--notes", type=Path, default=None, help="training/relevance/notes (the written documents; question level)"
    )
    parser.add_argument("--notes-questions", type=Path, default=None, help="training/relevance/notes_questions.jsonl")
    parser.add_argument(
        "--notes-in-sentences", action="store_true", help="fit the sentence model on the notes too (not shipped)"
    )
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    if (args.notes is None) != (args.notes_questions is None):
        print("--notes and --notes-questions go together", file=sys.stderr)
        return 2
    if not (args.eval_data / "qa_hotpotqa" / "questions.jsonl").is_file():
        print(f"no HotpotQA set under {args.eval_data}", file=sys.stderr)
        return 2
    started = time.perf_counter()
    semantics = load_semantics()
    if semantics.model is None:
        print(f"the semantic model did not load: {semantics.reason}", file=sys.stderr)
        return 1
    raw = hotpot_rows(args.eval_data, semantics.model)
    sources = [
        {
            "name": "HotpotQA dev (IRCoT 500-question subsample), fit split only",
            "licence": "CC BY-SA 4.0",
            "path": "qa_hotpotqa",
            "questions": len(raw) // 2,
        },
    ]
    if args.wiki_labels is not None and args.wiki_labels.is_file():
        wiki = wiki_rows(args.wiki_labels, args.wiki_db, semantics.model)
        raw += wiki
        sources.append(
            {
                "name": "Veracity's hand-labelled questions over the Wikipedia corpus",
                "licence": "Apache-2.0 (labels); the referenced text is CC BY-SA 4.0",
                "path": str(args.wiki_labels),
                "questions": len(wiki),
            }
        )
    notes: list[Row] = []
    if args.notes is not None and args.notes_questions is not None:  # both or neither (checked above)
        notes = notes_rows(args.notes, args.notes_questions, semantics.model)
        count = len(notes)
        if args.notes_in_sentences:
            raw += notes
            notes = []
        sources.append(
            {
                "name": "Veracity's written notes, pages and tables with hand-labelled questions"
                + ("" if args.notes_in_sentences else " (the question-level model only)"),
                "licence": "Apache-2.0",
                "path": str(args.notes_questions),
                "questions": count,
            }
        )
    result: dict[str, Any] = {
        "model": semantics.model.id,
        "fitted": datetime.now(UTC).date().isoformat(),
        "split": "HotpotQA: fit = int(sha256(question id), 16) % 2 == 0 (veracity.evals.relevance_fit.split_of); the "
        "report split is never read when fitting",
        "selection": "threshold = best F0.5 over out-of-fold predictions (5 folds, questions kept whole); the "
        "question-level model's (answered) = best balanced accuracy over its out-of-fold predictions, same folds (the "
        "reader's: among the cut-offs passing at least the sentence model's share of each source's answerable pools); "
        "the reader's cut-off = calibrated end to end on 60 fit-split questions",
        "sources": sources,
    }
    for mode, model in (("semantic", semantics.model), ("lexical", None)):
        rows = []
        names: tuple[str, ...] = ()
        read: list[Row] = []
        for group, question, candidates, labels in raw:
            if not candidates:
                continue
            x, names = features(question, candidates, model)
            rows.append((group, question, x, labels))
            read.append((group, question, candidates, labels))
        result[mode], oof = fit_one(rows, names)
        print(f"{mode}: {json.dumps(result[mode]['cv'])}")
        sentence = LogisticModel.from_dict(result[mode])
        result[mode]["answered"] = fit_answered(
            question_pools(read, oof, notes, sentence, model), result[mode]["threshold"]
        )
        print(f"{mode}, question level: {json.dumps(result[mode]['answered']['cv'])}")
        if model is None:
            continue
        # The reader: the cross-encoder over each reading's best candidates, its head fitted on the same folds.
        reader = process_contradiction(True).model
        if reader is not None:
            reader.want_reading()
        if reader is None or not reader.readable():
            print("the cross-encoder cannot read: no reader fitted", file=sys.stderr)
            return 1
        fit, final = fit_reader(read, oof, reader)
        print(f"{mode}, reader: {json.dumps(fit['cv'])}")
        # Its question-level judgement may not pass fewer answerable pools of a source than the sentence model's.
        floor = {k: v["passed"] for k, v in result[mode]["answered"]["cv"]["by_source"].items()}
        fit["answered"] = fit_answered(
            question_pools(read, final, notes, sentence, model, (reader, fit)), fit["threshold"], floor
        )
        fit["answered"]["floor"] = floor
        print(f"{mode}, reader, question level: {json.dumps(fit['answered']['cv'])}")
        result[mode]["reader"] = fit
        # The read judgement: the sentence model's pools (and cut-off), their best sentences read by the reader.
        pools = question_pools(read, oof, notes, sentence, model)
        extra = read_columns(read, oof, final, notes, sentence, model, reader, fit)
        judgement = fit_answered(pools, result[mode]["threshold"], floor, extra, READ_JUDGEMENT_FEATURES)
        judgement["floor"] = floor
        print(f"{mode}, read judgement: {json.dumps(judgement['cv'])}")
        result[mode]["read_judgement"] = judgement
    args.out.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {args.out} in {time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
