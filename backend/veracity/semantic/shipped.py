"""The default corpus's passage vectors, shipped with the package so that no machine embeds its 10,094 passages
again: ``semantic/data/wiki_vectors.npz`` holds, for the pinned semantic model (``pin``: its id and its files'
hashes, ``rank.embed.MODEL_PIN``), each passage head's key (``head_key``: the first 16 bytes of the SHA-256 of the
text the model embeds, ``head_text(title, passage)``) and its vector as float16, the form ``chunk_vectors`` stores.
``ensure_vectors`` takes a default-corpus passage's vector from here when its head's key is in the file and the
process's model is the pinned one; any other passage (changed text or chunking, another model) is embedded as before.
A file that is missing, unreadable or made by another pin is not used, with a warning. Built from the wiki text itself
by ``make wiki-vectors`` (``corpus.wiki_vectors``).
"""

from __future__ import annotations

import hashlib
import logging
import zipfile
from functools import cache
from importlib import resources
from importlib.resources.abc import Traversable

import numpy as np
import numpy.typing as npt

from veracity.rank.embed import MODEL_ID, MODEL_PIN
from veracity.semantic.model import DIM

logger = logging.getLogger(__name__)

FILE = "wiki_vectors.npz"
KEY_BYTES = 16
"""Bytes of a head's SHA-256 kept as its key (128 bits: no two of the corpus's heads collide)."""


def head_key(head: str) -> bytes:
    return hashlib.sha256(head.encode("utf-8")).digest()[:KEY_BYTES]


class ShippedVectors:
    """Vectors by head key, made by the model ``pin`` names."""

    def __init__(self, pin: str, keys: npt.NDArray[np.uint8], vectors: npt.NDArray[np.float16]) -> None:
        if keys.ndim != 2 or keys.shape[1] != KEY_BYTES or vectors.shape != (len(keys), DIM):
            raise ValueError(f"keys of shape {keys.shape} for vectors of shape {vectors.shape}")
        self.pin = pin
        # Rows of bytes, not numpy "S16" strings, which drop trailing zero bytes.
        self.rows = {key.tobytes(): row for row, key in enumerate(keys)}
        self.vectors = vectors

    def __len__(self) -> int:
        return len(self.rows)

    def get(self, model: str, head: str) -> npt.NDArray[np.float16] | None:
        """The shipped vector of ``head`` when ``model`` is the pinned one that made it (``load`` keeps no file of
        another pin), else None."""
        row = self.rows.get(head_key(head)) if model == MODEL_ID else None
        return self.vectors[row] if row is not None else None


@cache
def shipped_vectors() -> ShippedVectors | None:
    """The package's shipped vectors (read once), or None when there are none to use."""
    source = resources.files("veracity.semantic").joinpath("data", FILE)
    return load(source) if source.is_file() else None


def load(source: Traversable) -> ShippedVectors | None:
    """The vectors in ``source``, or None (with a warning) when it cannot be read or another pin made them."""
    try:
        with source.open("rb") as handle, np.load(handle, allow_pickle=False) as archive:
            shipped = ShippedVectors(
                str(archive["pin"]), archive["keys"].astype(np.uint8), archive["vectors"].astype(np.float16)
            )
    except (OSError, ValueError, KeyError, zipfile.BadZipFile) as exc:
        logger.warning("shipped passage vectors not used: %s cannot be read (%s)", source.name, exc)
        return None
    if shipped.pin != MODEL_PIN:
        logger.warning("shipped passage vectors not used: made by %s, not the pinned %s", shipped.pin, MODEL_PIN)
        return None
    return shipped
