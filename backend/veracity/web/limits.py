"""Request size limits at the edge, and each user's share of the server: runs started per minute, runs at once,
live streams open.

``RequestLimits`` (pure ASGI, outermost) answers 431 to a request with too many or too large headers and 413 to a
body over ``max_body_bytes`` — by its ``Content-Length`` before a byte is read, or, when it streams without one,
as soon as the bytes read pass the limit (the rest is never buffered). The per-user limits count in the database
(runs started, runs active), so they hold across web processes; live streams are counted per web process.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import TypeVar

from fastapi.responses import JSONResponse
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from veracity import messages
from veracity.accounts import SESSION_COOKIE, Principal
from veracity.db import runs_repo
from veracity.db.models import utcnow
from veracity.errors import TooMany
from veracity.settings import LimitSettings

T = TypeVar("T")


UPLOAD_PATHS = re.compile(r"^/(corpora/upload|v1/corpora/[^/]+/documents)$")
"""The routes that take files: their body limit is the upload limit (``VERACITY_CORPUS__MAX_UPLOAD_BYTES``)."""


class RequestLimits:
    def __init__(self, app: ASGIApp, limits: LimitSettings, upload_bytes: int, accounts: bool = False) -> None:
        self.app = app
        self.limits = limits
        self.upload_bytes = upload_bytes
        self.accounts = accounts
        """With accounts, only a request that carries a sign-in (a session cookie or a bearer token; the route checks
        it) gets the upload limit: no one can make the server spool an upload's worth of bytes before its 401."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers: list[tuple[bytes, bytes]] = scope.get("headers", [])
        size = sum(len(k) + len(v) for k, v in headers)
        if len(headers) > self.limits.max_headers or size > self.limits.max_header_bytes:
            await _refuse(scope, receive, send, 431, "headers_too_large", messages.HEADERS_TOO_LARGE)
            return
        uploading = scope.get("method") == "POST" and UPLOAD_PATHS.match(scope.get("path", "")) is not None
        if uploading and self.accounts:
            uploading = any(
                (k.lower() == b"authorization" and v[:7].lower() == b"bearer ")
                or (k.lower() == b"cookie" and SESSION_COOKIE.encode() + b"=" in v)
                for k, v in headers
            )
        limit = self.upload_bytes if uploading else self.limits.max_body_bytes
        declared = next((v for k, v in headers if k.lower() == b"content-length"), None)
        if declared is not None and (not declared.isdigit() or len(declared) > 15 or int(declared) > limit):
            await _refuse(scope, receive, send, 413, "body_too_large", messages.BODY_TOO_LARGE.format(limit=limit))
            return
        read = 0
        started = refused = False

        async def counted() -> Message:
            nonlocal read, refused
            if refused:
                return {"type": "http.disconnect"}
            message = await receive()
            if message["type"] == "http.request":
                read += len(message.get("body", b""))
                if read > limit and not started:
                    # Answer now; the app is told the client went away, and whatever it sends after is dropped.
                    refused = True
                    await _refuse(
                        scope, receive, send, 413, "body_too_large", messages.BODY_TOO_LARGE.format(limit=limit)
                    )
                    return {"type": "http.disconnect"}
            return message

        async def watch(message: Message) -> None:
            nonlocal started
            if refused:
                return
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, counted, watch)
        except Exception:
            if not refused:
                raise


async def _refuse(scope: Scope, receive: Receive, send: Send, status: int, code: str, message: str) -> None:
    await JSONResponse({"error": {"code": code, "message": message}}, status_code=status)(scope, receive, send)


async def check_run_quota(
    sessionmaker: async_sessionmaker[AsyncSession], who: Principal, limits: LimitSettings
) -> None:
    """Refuse (``TooMany``, with how long to wait) a user who started ``runs_per_minute`` runs in the last minute
    or has ``concurrent_runs`` queued or running."""
    now = utcnow()
    async with sessionmaker() as session:
        started = await runs_repo.started_since(session=session, user_id=who.user_id, since=now - timedelta(minutes=1))
        if len(started) >= limits.runs_per_minute:
            oldest = started[-limits.runs_per_minute]
            oldest = oldest if oldest.tzinfo else oldest.replace(tzinfo=now.tzinfo)
            wait = int(60 - (now - oldest).total_seconds()) + 1
            raise TooMany(
                messages.RUNS_PER_MINUTE.format(count=len(started), limit=limits.runs_per_minute, wait=wait), wait
            )
        active = await runs_repo.active_count(session=session, user_id=who.user_id)
        if active >= limits.concurrent_runs:
            raise TooMany(messages.RUNS_AT_ONCE.format(count=active, limit=limits.concurrent_runs), 10)


class StreamSlots:
    """Live streams open per user in this process (``streams_per_user`` each). ``take`` in the handler (so a
    refusal is an ordinary 429), then ``follow`` wraps the stream and gives the slot back when it ends."""

    def __init__(self, per_user: int) -> None:
        self.per_user = per_user
        self.open: Counter[str] = Counter()

    def take(self, who: Principal) -> str:
        key = who.name if who.user_id is None else f"user:{who.user_id}"
        if self.open[key] >= self.per_user:
            raise TooMany(messages.STREAMS_AT_ONCE.format(count=self.open[key], limit=self.per_user), 30)
        self.open[key] += 1
        return key

    def give(self, key: str) -> None:
        self.open[key] -= 1
        if self.open[key] <= 0:
            del self.open[key]

    async def follow(self, key: str, stream: AsyncIterator[T]) -> AsyncIterator[T]:
        try:
            async for item in stream:
                yield item
        finally:
            self.give(key)
