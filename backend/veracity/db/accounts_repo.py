"""Data access for accounts: users, browser sessions, API tokens and the security log. Callers own the
transaction; secrets arrive here already hashed (``veracity.accounts``)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import delete, func, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from veracity.db.models import ApiToken, SecurityEvent, User, UserSession, utcnow


async def user_count(*, session: AsyncSession) -> int:
    return int(await session.scalar(select(func.count()).select_from(User)) or 0)


async def user_by_name(*, session: AsyncSession, username: str) -> User | None:
    return await session.scalar(select(User).where(User.username == username))


async def add_user(*, session: AsyncSession, username: str, password_hash: str, is_admin: bool) -> User:
    user = User(username=username, password_hash=password_hash, is_admin=is_admin)
    session.add(user)
    await session.flush()
    return user


async def set_password(*, session: AsyncSession, user_id: int, password_hash: str) -> None:
    await session.execute(update(User).where(User.id == user_id).values(password_hash=password_hash))
    await session.execute(delete(UserSession).where(UserSession.user_id == user_id))


async def all_users(*, session: AsyncSession) -> Sequence[User]:
    return (await session.execute(select(User).order_by(User.id))).scalars().all()


async def add_session(*, session: AsyncSession, token_hash: str, user_id: int, expires_at: datetime) -> None:
    session.add(UserSession(token_hash=token_hash, user_id=user_id, expires_at=expires_at))
    # Sign-ins that have lapsed go with each new one: the table holds live sessions only.
    await session.execute(delete(UserSession).where(UserSession.expires_at < utcnow()))


async def session_user(*, session: AsyncSession, token_hash: str) -> User | None:
    """The user a live session belongs to (None when unknown or lapsed)."""
    return await session.scalar(
        select(User)
        .join(UserSession, UserSession.user_id == User.id)
        .where(UserSession.token_hash == token_hash, UserSession.expires_at > utcnow())
    )


async def end_session(*, session: AsyncSession, token_hash: str) -> None:
    await session.execute(delete(UserSession).where(UserSession.token_hash == token_hash))


async def add_token(*, session: AsyncSession, user_id: int, name: str, token_hash: str, prefix: str) -> ApiToken:
    token = ApiToken(user_id=user_id, name=name, token_hash=token_hash, prefix=prefix)
    session.add(token)
    await session.flush()
    return token


async def tokens_of(*, session: AsyncSession, user_id: int) -> Sequence[ApiToken]:
    result = await session.execute(select(ApiToken).where(ApiToken.user_id == user_id).order_by(ApiToken.id))
    return result.scalars().all()


async def token_user(*, session: AsyncSession, token_hash: str) -> tuple[ApiToken, User] | None:
    """The live (unrevoked) token with this hash and its user."""
    row = (
        await session.execute(
            select(ApiToken, User)
            .join(User, User.id == ApiToken.user_id)
            .where(ApiToken.token_hash == token_hash, ApiToken.revoked_at.is_(None))
        )
    ).first()
    return None if row is None else (row[0], row[1])


async def touch_token(*, session: AsyncSession, token_id: int) -> None:
    await session.execute(update(ApiToken).where(ApiToken.id == token_id).values(last_used_at=utcnow()))


async def revoke_token(*, session: AsyncSession, token_id: int, user_id: int | None) -> ApiToken | None:
    """Revoke a live token (``user_id``: only if it is theirs; None: anyone's, an admin's act); the token, or None
    when there is no such live token."""
    query = update(ApiToken).where(ApiToken.id == token_id, ApiToken.revoked_at.is_(None))
    if user_id is not None:
        query = query.where(ApiToken.user_id == user_id)
    result = await session.execute(query.values(revoked_at=utcnow()).returning(ApiToken.id))
    if result.first() is None:
        return None
    return await session.get(ApiToken, token_id, populate_existing=True)


async def log(
    *, session: AsyncSession, actor: str, action: str, target: str = "", client: str = "", detail: dict[str, Any]
) -> None:
    session.add(SecurityEvent(actor=actor[:64], action=action, target=target[:160], client=client[:64], detail=detail))


async def security_log(*, session: AsyncSession, limit: int = 100) -> Sequence[SecurityEvent]:
    result = await session.execute(select(SecurityEvent).order_by(SecurityEvent.id.desc()).limit(limit))
    return result.scalars().all()
