"""The process's semantic model: the int8 ONNX all-MiniLM-L6-v2 shipped in a wheel (``veracity.rank.embed``),
loaded once, with a bounded cache of vectors keyed by text.

Loading never reaches a hub: the wheels' files are pinned by SHA-256 and a different file is refused. When it
cannot load (wheels missing, a file not the pinned one, turned off by a setting) the product runs on its lexical
path and says so — ``Semantics.notice`` is logged at start-up and shown on every page — never silently.

Texts are embedded at two lengths: passage *heads* (title and the passage's first words, ``HEAD_TOKENS``) stored
per chunk at ingest for the dense half of hybrid retrieval, and *sentences* (``SENTENCE_TOKENS``) embedded at
query time, bounded per run, and cached here so a sentence met again (another branch, another run on the same
topic) costs nothing.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache

import numpy as np

from veracity.rank.embed import MODEL_ID, Embedder, Vectors

logger = logging.getLogger(__name__)

HEAD_TOKENS = 32
"""Tokens of a passage embedded for dense retrieval: its title and first words name what it is about, and 32
tokens embed at about 140 passages/s here (a whole 256-token passage at about 30/s)."""
SENTENCE_TOKENS = 128
"""Tokens of a sentence, a claim or a question (all-MiniLM-L6-v2 was trained on 128)."""
DIM = 384
CACHE_SIZE = 50_000
"""Vectors kept per process (about 77 MB at float32)."""


class SemanticModel:
    """Embeddings with a cache. Thread-safe: the ONNX session runs in any thread, the cache is locked."""

    id = MODEL_ID

    def __init__(self, embedder: Embedder, *, cache_size: int = CACHE_SIZE) -> None:
        self.embedder = embedder
        for size in (HEAD_TOKENS, SENTENCE_TOKENS):
            embedder._truncated(size)  # made here, once, before any thread encodes
        self._cache: OrderedDict[tuple[int, str], np.ndarray] = OrderedDict()
        self._cache_size = cache_size
        self._lock = threading.Lock()
        self.encoded = 0
        """Texts actually run through the model (cache misses), for benchmarks and tests."""

    def encode(self, texts: Sequence[str], *, max_tokens: int = SENTENCE_TOKENS) -> Vectors:
        """L2-normalised rows, one per text, in order; cached texts are not encoded again."""
        out = np.zeros((len(texts), DIM), dtype=np.float32)
        missing: dict[str, list[int]] = {}
        with self._lock:
            for i, text in enumerate(texts):
                hit = self._cache.get((max_tokens, text))
                if hit is None:
                    missing.setdefault(text, []).append(i)
                else:
                    self._cache.move_to_end((max_tokens, text))
                    out[i] = hit
        if missing:
            fresh = self.embedder.encode(list(missing), batch_size=16, max_tokens=max_tokens)
            with self._lock:
                self.encoded += len(missing)
                for row, (text, places) in enumerate(missing.items()):
                    out[places] = fresh[row]
                    self._cache[(max_tokens, text)] = fresh[row].copy()  # not a view pinning the batch
                while len(self._cache) > self._cache_size:
                    self._cache.popitem(last=False)
        return out

    def clear_cache(self) -> None:
        """Forget every cached vector (benchmarks measure a cold run with it)."""
        with self._lock:
            self._cache.clear()

    def encode_heads(self, texts: Sequence[str]) -> Vectors:
        """Passage heads for dense retrieval (not cached: they are stored per chunk instead)."""
        return self.embedder.encode(list(texts), batch_size=16, max_tokens=HEAD_TOKENS)


def titled(title: str, text: str) -> str:
    """A sentence as the model reads it: with its passage's title (one form everywhere, so the cache hits)."""
    return f"{title}: {text}" if title else text


def head_text(title: str, text: str) -> str:
    """What a passage's dense vector is made of: its title and opening words (cut at ``HEAD_TOKENS``)."""
    return f"{title}: {text[:400]}" if title else text[:400]


@dataclass(frozen=True)
class Semantics:
    """The process's relevance mode: the model, or None and why (the lexical path)."""

    model: SemanticModel | None
    reason: str = ""
    load_ms: float = 0.0

    @property
    def mode(self) -> str:
        return "semantic" if self.model is not None else "lexical"

    @property
    def notice(self) -> str | None:
        """What every page and the start-up log say when meaning cannot be used."""
        if self.model is not None:
            return None
        return f"relevance: lexical only ({self.reason})"


@cache
def process_semantics(enabled: bool = True) -> Semantics:
    """The process's one ``Semantics``: loaded on first call (by the composition root), shared after."""
    semantics = load_semantics(enabled)
    if semantics.notice:
        logger.warning("%s: meaning does not decide what ships", semantics.notice)
    return semantics


def load_semantics(enabled: bool = True) -> Semantics:
    """Load the model once (the composition root calls this); a failure is a notice, not a crash."""
    if not enabled:
        return Semantics(None, "turned off by VERACITY_SEMANTIC__ENABLED=false")
    started = time.perf_counter()
    try:
        embedder = Embedder.load()
    except Exception as exc:  # a broken runtime or model file: lexical, said so, never a crash at start-up
        logger.exception("the semantic model failed to load")
        return Semantics(None, f"the embedding model failed to load ({type(exc).__name__})")
    if embedder is None:
        return Semantics(None, "the embedding model's wheels are not installed or not the pinned files")
    load_ms = round((time.perf_counter() - started) * 1000, 1)
    logger.info("semantic model %s loaded in %.0f ms", MODEL_ID, load_ms)
    return Semantics(SemanticModel(embedder), load_ms=load_ms)


def cosine(matrix: Vectors, vector: np.ndarray) -> np.ndarray:
    """Cosine of each row with ``vector`` (all rows L2-normalised)."""
    if len(matrix) == 0:
        return np.zeros(0, dtype=np.float32)
    product: np.ndarray = matrix @ vector
    return product
