"""A run request checked before anything is stored: the question, the template and the corpus (or the web)."""

from __future__ import annotations

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from veracity import messages
from veracity.db import corpora_repo
from veracity.db.runs_repo import Visibility
from veracity.domain import WEB_SOURCE
from veracity.errors import BadInput
from veracity.inputs import check_text, says_something
from veracity.settings import Settings
from veracity.specs.models import Spec
from veracity.specs.registry import SpecRegistry


async def validate_request(
    *,
    question: str,
    template: str,
    corpus: str | None,
    settings: Settings,
    registry: SpecRegistry,
    web: bool,
    sessionmaker: async_sessionmaker[AsyncSession],
    reader: Visibility | None = None,
) -> tuple[str, Spec, str]:
    """(question, spec, corpus) as the run will use them; ``BadInput`` (a message from ``messages.py``) when the
    question is empty, says nothing (no letter or digit) or is too long, any of the three holds what no database
    can store (checked first: even an error message must not echo it), the template unknown, the corpus unknown,
    or the web asked for where there is none (``web``: this process can search it). ``reader``: whose corpora
    may be searched (None: all) — another user's corpus is as unknown as one that does not exist."""
    question = check_text(question or "", what="The question").strip()
    template = check_text(template or "", what="The template name")
    corpus = check_text(corpus, what="The corpus name") if corpus is not None else None
    if not question:
        raise BadInput(messages.QUESTION_EMPTY)
    if not says_something(question):
        raise BadInput(messages.QUESTION_SAYS_NOTHING)
    limit = settings.limits.max_question_chars
    if len(question) > limit:
        raise BadInput(messages.QUESTION_TOO_LONG.format(length=len(question), limit=limit))
    spec = registry.get(template)
    default = WEB_SOURCE if spec.default_source.kind == "web" else spec.default_source.corpus
    corpus = (corpus or "").strip() or default or settings.corpus.default
    if corpus == WEB_SOURCE:
        if not web:
            raise BadInput(messages.WEB_UNAVAILABLE)
        return question, spec, corpus
    user_id, every = (None, True) if reader is None else (reader.user_id, reader.every)
    async with sessionmaker() as session:
        if not await corpora_repo.corpus_usable(session=session, corpus=corpus, user_id=user_id, every=every):
            # Only the error path pays for listing the corpora.
            usable = await corpora_repo.usable_corpora(session=session, user_id=user_id, every=every)
            known = ", ".join(sorted(usable)) or "none"
            raise BadInput(messages.CORPUS_UNKNOWN.format(corpus=corpus, known=known))
    return question, spec, corpus
