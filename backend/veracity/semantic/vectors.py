"""Passage vectors for the dense half of hybrid retrieval: computed for every passage that lacks one (at ingest,
with progress; or, for a corpus ingested before, when its in-memory index is first built) and stored, so a
process start never embeds a corpus again. The default corpus's passages are not embedded at all: their vectors
ship with the package (``semantic.shipped``)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

import numpy as np
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from veracity.db.vectors_repo import chunks_without_vectors, corpus_vectors, store_vectors
from veracity.rank.embed import Vectors
from veracity.semantic.model import DIM, SemanticModel, head_text
from veracity.semantic.shipped import shipped_vectors

logger = logging.getLogger(__name__)

BATCH = 256
"""Passages embedded and stored per transaction: an interrupted embedding keeps what it finished."""


async def ensure_vectors(
    *,
    sessionmaker: async_sessionmaker[AsyncSession],
    model: SemanticModel,
    corpus: str,
    progress: Callable[[int], None] | None = None,
) -> int:
    """Embed (or take from the shipped vectors) and store the head of every passage of ``corpus`` without a vector;
    returns how many were stored. ``progress`` hears each batch's count."""
    made = embedded = 0
    while True:
        async with sessionmaker() as session:
            todo = await chunks_without_vectors(session=session, corpus=corpus, model=model.id, limit=BATCH)
        if not todo:
            break
        if made == 0:
            logger.info("storing the passage vectors of corpus %s for hybrid retrieval", corpus)
        rows, fresh = await asyncio.to_thread(
            _vectors_of, model, [(cid, head_text(title, text)) for cid, title, text in todo]
        )
        embedded += fresh
        async with sessionmaker() as session, session.begin():
            await store_vectors(session=session, model=model.id, rows=rows)
        made += len(todo)
        if progress:
            progress(len(todo))
    if made:
        logger.info(
            "stored %d passage vector(s) of corpus %s, %d embedded, %d shipped", made, corpus, embedded, made - embedded
        )
    return made


def _vectors_of(model: SemanticModel, heads: list[tuple[int, str]]) -> tuple[list[tuple[int, bytes]], int]:
    """Each passage's vector as stored (float16 bytes): the shipped one when the package ships one for this head
    and the model is the pinned one (``semantic.shipped``; in practice the default corpus's passages), else embedded
    now; and how many were embedded."""
    shipped = shipped_vectors()
    found = {cid: v for cid, head in heads if shipped is not None and (v := shipped.get(model.id, head)) is not None}
    missing = [(cid, head) for cid, head in heads if cid not in found]
    if missing:
        embedded = model.encode_heads([head for _, head in missing])
        found |= {cid: embedded[i].astype(np.float16) for i, (cid, _) in enumerate(missing)}
    return [(cid, found[cid].tobytes()) for cid, _ in heads], len(missing)


async def load_matrix(*, session: AsyncSession, corpus: str, model: str, chunk_ids: list[int]) -> Vectors | None:
    """The vectors of ``chunk_ids`` as rows in that order, or None when any passage lacks one."""
    stored = await corpus_vectors(session=session, corpus=corpus, model=model)
    if any(cid not in stored for cid in chunk_ids):
        return None
    matrix = np.zeros((len(chunk_ids), DIM), dtype=np.float32)
    for row, cid in enumerate(chunk_ids):
        matrix[row] = np.frombuffer(stored[cid], dtype=np.float16)
    return matrix
