"""Check wiki_questions.jsonl against the local corpus and print its counts.

Every line references one sentence of a `wiki` document by character offsets. This re-reads the
document text from the SQLite database and checks, for every line:

* the fields and their types, the label (0/1/2) and kind (broad/factual/homonym);
* the document exists in corpus `wiki` and its title is the one recorded;
* 0 <= start < end <= len(text), the slice has no surrounding whitespace and lies inside one chunk;
* the slice is the sentence that was labelled: its SHA-256 matches wiki_questions.sha256;
* one question text and kind per qid, and no (qid, doc_id, start, end) twice.

Usage (from the repo root):  .venv/bin/python training/relevance/check.py [--db PATH]
The database defaults to the SQLite file of VERACITY_DATABASE__URL, else ./data/veracity.db.
Exits 1 on any mismatch, 2 if the database or a file is missing.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sqlite3
import sys
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
DATA = HERE / "wiki_questions.jsonl"
SUMS = HERE / "wiki_questions.sha256"
FIELDS = {"qid": str, "question": str, "kind": str, "doc_id": str, "title": str, "start": int, "end": int, "label": int}
KINDS = ("broad", "factual", "homonym")
LABELS = (0, 1, 2)


def default_db() -> Path:
    url = os.environ.get("VERACITY_DATABASE__URL", "")
    for prefix in ("sqlite+aiosqlite:///", "sqlite:///"):
        if url.startswith(prefix):
            path = Path(url[len(prefix):])
            return path if path.is_absolute() else REPO / path
    return REPO / "data" / "veracity.db"


def sha16(s: str) -> str:
    return hashlib.sha256(s.encode("utf-8")).hexdigest()[:16]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--db", type=Path, default=None, help="SQLite database (default: %(default)s → see module doc)")
    args = ap.parse_args()
    db_path = args.db or default_db()
    for p in (DATA, SUMS, db_path):
        if not p.is_file():
            print(f"missing: {p}", file=sys.stderr)
            return 2
    con = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)

    sums: dict[tuple, str] = {}
    for line in SUMS.read_text(encoding="utf-8").splitlines():
        if not line or line.startswith("#"):
            continue
        qid, doc_id, start, end, digest = line.split("\t")
        sums[(qid, doc_id, int(start), int(end))] = digest

    docs: dict[str, tuple[int, str, str] | None] = {}
    chunks: dict[int, list[tuple[int, int]]] = {}
    errors: list[str] = []
    seen: set[tuple] = set()
    qmeta: dict[str, tuple[str, str]] = {}
    by_label: Counter = Counter()
    by_kind: Counter = Counter()
    by_both: Counter = Counter()
    n = 0

    for lineno, raw in enumerate(DATA.read_text(encoding="utf-8").splitlines(), 1):
        if not raw.strip():
            continue
        n += 1
        where = f"line {lineno}"
        try:
            row = json.loads(raw)
        except json.JSONDecodeError as exc:
            errors.append(f"{where}: bad JSON ({exc})")
            continue
        if set(row) != set(FIELDS) or any(type(row[k]) is not t for k, t in FIELDS.items()):
            errors.append(f"{where}: fields/types must be exactly {list(FIELDS)}")
            continue
        qid, doc_id, start, end = row["qid"], row["doc_id"], row["start"], row["end"]
        if row["label"] not in LABELS:
            errors.append(f"{where}: label {row['label']!r} not in {LABELS}")
        if row["kind"] not in KINDS:
            errors.append(f"{where}: kind {row['kind']!r} not in {KINDS}")
        if qmeta.setdefault(qid, (row["question"], row["kind"])) != (row["question"], row["kind"]):
            errors.append(f"{where}: qid {qid} has another question text or kind elsewhere")
        key = (qid, doc_id, start, end)
        if key in seen:
            errors.append(f"{where}: duplicate {key}")
        seen.add(key)

        if doc_id not in docs:
            found = con.execute(
                "SELECT id, title, text FROM documents WHERE corpus = 'wiki' AND doc_id = ?", (doc_id,)
            ).fetchone()
            docs[doc_id] = found
            if found:
                chunks[found[0]] = con.execute(
                    'SELECT start, "end" FROM chunks WHERE document_id = ?', (found[0],)
                ).fetchall()
        found = docs[doc_id]
        if found is None:
            errors.append(f"{where}: no wiki document {doc_id!r}")
            continue
        pk, title, text = found
        if title != row["title"]:
            errors.append(f"{where}: title {row['title']!r} != {title!r}")
        if not (0 <= start < end <= len(text)):
            errors.append(f"{where}: offsets {start}:{end} out of range (len {len(text)})")
            continue
        sentence = text[start:end]
        if sentence != sentence.strip():
            errors.append(f"{where}: slice has surrounding whitespace")
        if not any(cs <= start and end <= ce for cs, ce in chunks[pk]):
            errors.append(f"{where}: slice {start}:{end} is not inside one chunk of {doc_id!r}")
        digest = sums.get(key)
        if digest is None:
            errors.append(f"{where}: no checksum for {key}")
        elif digest != sha16(sentence):
            errors.append(f"{where}: slice {start}:{end} of {doc_id!r} is not the labelled sentence (checksum)")

        by_label[row["label"]] += 1
        by_kind[row["kind"]] += 1
        by_both[(row["kind"], row["label"])] += 1

    if len(sums) != len(seen):
        errors.append(f"{SUMS.name} has {len(sums)} entries for {len(seen)} lines")

    print(f"{n} labelled sentences, {len(qmeta)} questions, {len(docs)} documents")
    print("per label: " + ", ".join(f"{lab}={by_label[lab]}" for lab in LABELS))
    print("per kind:  " + ", ".join(f"{k}={by_kind[k]}" for k in KINDS))
    print("kind x label:")
    for k in KINDS:
        print(f"  {k:8s} " + "  ".join(f"{lab}={by_both[(k, lab)]:<4d}" for lab in LABELS))
    qk = Counter(kind for _, kind in qmeta.values())
    print("questions per kind: " + ", ".join(f"{k}={qk[k]}" for k in KINDS))
    if errors:
        print(f"\n{len(errors)} problem(s):", file=sys.stderr)
        for e in errors[:50]:
            print("  " + e, file=sys.stderr)
        return 1
    print("all slices match the database")
    return 0


if __name__ == "__main__":
    sys.exit(main())
