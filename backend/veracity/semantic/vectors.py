"""Passage vectors for the dense half of hybrid retrieval: computed for every passage that lacks one (at ingest,
with progress; or, for a corpus ingested before, when its in-memory index is first built) and stored, so a
process start never embeds a corpus again."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

import numpy as np
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from veracity.db.vectors_repo import chunks_without_vectors, corpus_vectors, store_vectors
from veracity.rank.embed import Vectors
from veracity.semantic.model import DIM, SemanticModel, head_text

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
    """Embed and store the head of every passage of ``corpus`` without a vector; returns how many were made.
    ``progress`` hears each batch's count."""
    made = 0
    while True:
        async with sessionmaker() as session:
            todo = await chunks_without_vectors(session=session, corpus=corpus, model=model.id, limit=BATCH)
        if not todo:
            break
        if made == 0:
            logger.info("embedding the passages of corpus %s for hybrid retrieval", corpus)
        vectors = await asyncio.to_thread(model.encode_heads, [head_text(title, text) for _, title, text in todo])
        rows = [(chunk_id, vectors[i].astype(np.float16).tobytes()) for i, (chunk_id, _, _) in enumerate(todo)]
        async with sessionmaker() as session, session.begin():
            await store_vectors(session=session, model=model.id, rows=rows)
        made += len(todo)
        if progress:
            progress(len(todo))
    if made:
        logger.info("embedded %d passage(s) of corpus %s", made, corpus)
    return made


async def load_matrix(*, session: AsyncSession, corpus: str, model: str, chunk_ids: list[int]) -> Vectors | None:
    """The vectors of ``chunk_ids`` as rows in that order, or None when any passage lacks one."""
    stored = await corpus_vectors(session=session, corpus=corpus, model=model)
    if any(cid not in stored for cid in chunk_ids):
        return None
    matrix = np.zeros((len(chunk_ids), DIM), dtype=np.float32)
    for row, cid in enumerate(chunk_ids):
        matrix[row] = np.frombuffer(stored[cid], dtype=np.float16)
    return matrix
