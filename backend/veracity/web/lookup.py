"""Reading what a request names: a run id, a ``Last-Event-ID``, a run and one of its artifact versions, or the
404 (or 422) that says why not (pages and API alike)."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy.ext.asyncio import AsyncSession

from veracity import messages
from veracity.db import runs_repo
from veracity.db.models import ArtifactVersion, ResearchRun
from veracity.db.runs_repo import Visibility
from veracity.errors import NotFound
from veracity.inputs import parse_cursor
from veracity.runs.service import RUN_ID_LEN


def check_run_id(run_id: str) -> str:
    if len(run_id) != RUN_ID_LEN or any(c not in "0123456789abcdef" for c in run_id):
        raise NotFound(messages.RUN_ID_MALFORMED.format(run_id=run_id[:80]))
    return run_id


def parse_last_event_id(value: str | None) -> int:
    """The SSE resume cursor (the header, or the live page's ``?after=``): 0 when absent or blank, else the
    whole number from 0 to ``inputs.MAX_CURSOR`` it must be (``BadInput`` otherwise)."""
    return parse_cursor(value)


async def run_or_404(session: AsyncSession, run_id: str, visible: Visibility) -> ResearchRun:
    """The run, when the reader may see it; another user's run is as unknown as one that never existed."""
    check_run_id(run_id)
    run = await runs_repo.get_run(session=session, run_id=run_id)
    if run is None or not visible.allows(run):
        raise NotFound(messages.RUN_UNKNOWN.format(run_id=run_id))
    return run


def version_or_404(run: ResearchRun, versions: Sequence[ArtifactVersion], version: int | None) -> ArtifactVersion:
    """The version asked for among ``versions`` (oldest first), the latest when ``version`` is None."""
    if not versions:
        raise NotFound(run.error or messages.NO_ARTIFACT.format(run_id=run.id, status=run.status))
    if version is None:
        return versions[-1]
    chosen = next((a for a in versions if a.version == version), None)
    if chosen is None:
        have = ", ".join(str(a.version) for a in versions)
        raise NotFound(messages.VERSION_UNKNOWN.format(run_id=run.id, version=version, have=have))
    return chosen
