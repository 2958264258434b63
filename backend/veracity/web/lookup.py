"""Reading what a request names: a run id, a ``Last-Event-ID``, a run and one of its artifact versions, or the
404 (or 422) that says why not (pages and API alike)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from urllib.parse import parse_qs, urlsplit

from sqlalchemy.ext.asyncio import AsyncSession

from veracity import messages
from veracity.db import runs_repo
from veracity.db.models import ArtifactVersion, ResearchRun
from veracity.db.runs_repo import Visibility
from veracity.errors import NotFound
from veracity.inputs import parse_cursor, shown
from veracity.runs.service import RUN_ID_LEN


def check_run_id(run_id: str) -> str:
    if len(run_id) != RUN_ID_LEN or any(c not in "0123456789abcdef" for c in run_id):
        raise NotFound(messages.RUN_ID_MALFORMED.format(run_id=run_id[:80]))
    return run_id


_RUN_ID_RE = re.compile(rf"[0-9a-f]{{{RUN_ID_LEN}}}")
_VERSION_RE = re.compile(r"[1-9][0-9]{0,8}")


def run_address(text: str) -> tuple[str, int | None]:
    """The run a reader typed or pasted into the home page's "Open a run" box, and the version it names: a run ID
    (any case, spaces around it), or any address with the ID as one step of its path — the run's page or its
    permalink (``…/runs/<id>?version=2``), its API answer, an export. ``NotFound`` saying what it takes when
    the text is neither."""
    text = text.strip()
    if _RUN_ID_RE.fullmatch(text.lower()):
        return text.lower(), None
    try:
        parts = urlsplit(text)
    except ValueError:  # e.g. an unclosed "[" where a host would be
        parts = None
    ids = [s.lower() for s in (parts.path.split("/") if parts else []) if _RUN_ID_RE.fullmatch(s.lower())]
    if parts is None or len(set(ids)) != 1:
        raise NotFound(messages.OPEN_RUN_UNREADABLE.format(text=shown(text)))
    asked = parse_qs(parts.query).get("version", [""])[0]
    return ids[0], int(asked) if _VERSION_RE.fullmatch(asked) else None


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
