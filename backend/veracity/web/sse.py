"""The only place a pipeline event becomes an SSE message.

Two shapes: the JSON API sends each stored event as ``event: <name>``, ``id: <seq>``, ``data: <payload>``;
the run page's stream sends, per stored event, HTML partials rendered from the server-side reducer
(the same partials the page itself includes), all with the event's seq as ``id`` so the browser's own
reconnect resumes from ``Last-Event-ID``.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any
from weakref import WeakKeyDictionary

from fastapi.templating import Jinja2Templates
from sse_starlette import ServerSentEvent

from veracity.db.models import RunEvent, UploadEvent
from veracity.db.uploads_repo import TERMINAL as UPLOAD_TERMINAL
from veracity.events import RetrieveComplete
from veracity.runs.reducer import RunView, StoredEvent, apply
from veracity.web.topology import GraphShape, layout


def json_message(event: RunEvent | UploadEvent) -> ServerSentEvent:
    return ServerSentEvent(data=json.dumps(event.payload, separators=(",", ":")), event=event.name, id=str(event.seq))


_ENCODED: WeakKeyDictionary[RunEvent, bytes] = WeakKeyDictionary()
"""Each event's JSON message, encoded once. The feed hands every viewer in a process the same stored event object,
so 500 viewers of a run cost one ``json.dumps`` and one encoding per event instead of 500: a web process's CPU per
message sent fell from ~73 to ~46 µs (bench/scale.py's viewers). An entry goes when the feed lets go of its event."""


def json_bytes(event: RunEvent) -> bytes:
    """``json_message(event)`` encoded for the wire, once per event object however many streams send it."""
    encoded = _ENCODED.get(event)
    if encoded is None:
        encoded = _ENCODED[event] = json_message(event).encode()
    return encoded


async def json_stream(events: AsyncIterator[RunEvent]) -> AsyncIterator[bytes]:
    async for event in events:
        yield json_bytes(event)


def _render(templates: Jinja2Templates, name: str, **context: Any) -> str:
    return templates.get_template(name).render(**context)


def _opened_shape(view: RunView) -> tuple[int, int]:
    """What the source inspector shows changes with: rows opened, and branches that read them."""
    return len(view.opened), sum(len(row.subtasks) for row in view.opened.values())


def page_messages(
    templates: Jinja2Templates, shape: GraphShape, view: RunView, event: StoredEvent, base_url: str = "/"
) -> list[ServerSentEvent]:
    """Apply one event to the view and render what it changed."""
    opened_before = _opened_shape(view)
    apply(view, event.seq, event.name, event.payload, event.created_at)
    seq = str(event.seq)
    row = view.timeline[-1]
    messages = [
        ServerSentEvent(data=_render(templates, "partials/_timeline_row.html", row=row), event="timeline", id=seq),
        ServerSentEvent(
            data=_render(templates, "partials/_topology.html", topo=layout(shape, view)),
            event="topology",
            id=seq,
        ),
        ServerSentEvent(data=_render(templates, "partials/_status.html", view=view), event="status", id=seq),
    ]
    if event.name == RetrieveComplete.name or _opened_shape(view) != opened_before:
        messages.append(
            ServerSentEvent(data=_render(templates, "partials/_sources.html", view=view), event="sources", id=seq)
        )
    if view.finished:
        messages += [
            ServerSentEvent(data=_render(templates, "partials/_sources.html", view=view), event="sources", id=seq),
            ServerSentEvent(
                data=_render(templates, "partials/_report.html", view=view, base_url=base_url), event="report", id=seq
            ),
            ServerSentEvent(data="finished", event="done", id=seq),
        ]
    return messages


async def page_stream(
    templates: Jinja2Templates,
    shape: GraphShape,
    view: RunView,
    events: AsyncIterator[RunEvent],
    audit: Callable[[], Awaitable[list[Any]]] | None = None,
    base_url: str = "/",
) -> AsyncIterator[ServerSentEvent]:
    async for event in events:
        messages = page_messages(templates, shape, view, event, base_url)
        if view.finished and audit is not None:
            # The audit trail is complete once the run is: send it before `done` closes the stream.
            entries = await audit()
            html = _render(templates, "partials/_audit.html", audit=entries)
            messages.insert(-1, ServerSentEvent(data=html, event="audit", id=str(event.seq)))
        for message in messages:
            yield message


# ---- uploads: the same two shapes, for an upload's progress events --------------------------------------------------


async def upload_json_stream(events: AsyncIterator[UploadEvent]) -> AsyncIterator[ServerSentEvent]:
    async for event in events:
        yield json_message(event)


async def upload_page_stream(
    templates: Jinja2Templates, events: AsyncIterator[UploadEvent]
) -> AsyncIterator[ServerSentEvent]:
    """Per upload event: its row in the file list (``file``), the upload's status line (``status``), and, after
    the last, ``done`` (the page's ``sse-close``)."""
    async for event in events:
        seq = str(event.seq)
        if event.name == "file_done":
            row = _render(templates, "partials/_upload_file.html", step=event.payload)
            yield ServerSentEvent(data=row, event="file", id=seq)
        status = _render(templates, "partials/_upload_status.html", last=event)
        yield ServerSentEvent(data=status, event="status", id=seq)
        if event.name in UPLOAD_TERMINAL:
            yield ServerSentEvent(data="finished", event="done", id=seq)
