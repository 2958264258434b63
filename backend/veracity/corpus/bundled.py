"""The small knowledge corpora written for the bundled templates (``specs/corpora/<template>/``), each loaded
as the corpus of the same name. Idempotent: unchanged documents are skipped by content hash."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from veracity.corpus.ingest import IngestReport, ingest_path

CORPORA = Path(__file__).resolve().parent.parent / "specs" / "corpora"


async def ensure_bundled_corpora(
    *, sessionmaker: async_sessionmaker[AsyncSession], chunk_chars: int
) -> dict[str, IngestReport]:
    reports: dict[str, IngestReport] = {}
    for folder in sorted(p for p in CORPORA.iterdir() if p.is_dir()) if CORPORA.is_dir() else []:
        reports[folder.name] = await ingest_path(
            sessionmaker=sessionmaker, path=folder, corpus=folder.name, chunk_chars=chunk_chars
        )
    return reports
