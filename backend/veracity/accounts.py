"""Accounts: who is asking, and what they may do.

Passwords are hashed with argon2 through ``pwdlib`` (the hashing library FastAPI's own security guide uses; it
wraps argon2-cffi). Sessions and API tokens are random secrets (``secrets.token_urlsafe``, 256 bits) of which only
the SHA-256 is stored: a secret that strong needs no slow hash, and a lookup by hash is one indexed read. A
``Principal`` is the reader of a request: a user (by session or token), the single-user mode's local user, or no
one; ``visibility`` turns it into what runs it may see.
"""

from __future__ import annotations

import hashlib
import re
import secrets
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Literal

from pwdlib import PasswordHash
from sqlalchemy.ext.asyncio import AsyncSession

from veracity import messages
from veracity.db import accounts_repo
from veracity.db.models import ApiToken, User, utcnow
from veracity.db.runs_repo import Visibility
from veracity.errors import BadInput, Conflict, NotFound

TOKEN_PREFIX = "vrc_"
USERNAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._@-]{1,63}")
MIN_PASSWORD = 10
MAX_PASSWORD = 256
HASHER = PasswordHash.recommended()
_DUMMY_HASH = HASHER.hash("a password no one has: it makes an unknown name cost what a known one does")


@dataclass(frozen=True)
class Principal:
    """Who a request acts as. ``user_id`` None with ``via="local"``: single-user mode's one user (sees all);
    ``via="anonymous"``: no one (accounts are on and nothing signed the request)."""

    user_id: int | None
    name: str
    is_admin: bool
    via: Literal["local", "session", "token", "anonymous"]
    token_id: int | None = None

    @property
    def signed_in(self) -> bool:
        return self.via in ("local", "session", "token")

    @property
    def visibility(self) -> Visibility:
        return Visibility(user_id=self.user_id, every=self.is_admin)


LOCAL = Principal(user_id=None, name="local", is_admin=True, via="local")
ANONYMOUS = Principal(user_id=None, name="anonymous", is_admin=False, via="anonymous")


def digest(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def new_secret() -> str:
    return secrets.token_urlsafe(32)


def check_username(username: str) -> str:
    username = username.strip()
    if not USERNAME.fullmatch(username):
        raise BadInput(messages.USERNAME_INVALID)
    return username


def check_password(password: str) -> str:
    if not (MIN_PASSWORD <= len(password) <= MAX_PASSWORD):
        raise BadInput(messages.PASSWORD_LENGTH.format(low=MIN_PASSWORD, high=MAX_PASSWORD))
    if password.isspace() or len(set(password)) < 4:
        raise BadInput(messages.PASSWORD_WEAK)
    return password


async def add_user(*, session: AsyncSession, username: str, password: str, is_admin: bool) -> User:
    """A new account (the caller commits); ``BadInput`` for a bad name or password, ``Conflict`` when taken."""
    username = check_username(username)
    check_password(password)
    if await accounts_repo.user_by_name(session=session, username=username) is not None:
        raise Conflict(messages.USERNAME_TAKEN.format(username=username))
    return await accounts_repo.add_user(
        session=session, username=username, password_hash=HASHER.hash(password), is_admin=is_admin
    )


async def authenticate(*, session: AsyncSession, username: str, password: str) -> User | None:
    """The user these credentials sign in, or None. An unknown name costs a hash too, so timing tells nothing."""
    user = await accounts_repo.user_by_name(session=session, username=username.strip())
    if user is None:
        HASHER.verify(password, _DUMMY_HASH)
        return None
    valid, updated = HASHER.verify_and_update(password, user.password_hash)
    if not valid:
        return None
    if updated is not None:  # the recommended parameters moved on: store the stronger hash
        await accounts_repo.set_password(session=session, user_id=user.id, password_hash=updated)
    return user


async def open_session(*, session: AsyncSession, user: User, hours: float) -> str:
    """A new sign-in for ``user``: the secret for the cookie (only its hash is stored)."""
    secret = new_secret()
    expires = utcnow() + timedelta(hours=hours)
    await accounts_repo.add_session(session=session, token_hash=digest(secret), user_id=user.id, expires_at=expires)
    return secret


async def session_principal(*, session: AsyncSession, secret: str) -> Principal | None:
    user = await accounts_repo.session_user(session=session, token_hash=digest(secret))
    if user is None:
        return None
    return Principal(user_id=user.id, name=user.username, is_admin=user.is_admin, via="session")


async def make_token(*, session: AsyncSession, user: User | Principal, name: str) -> tuple[ApiToken, str]:
    """A new API token for ``user`` named ``name``: the stored row and the secret, shown once."""
    name = " ".join(name.split())[:64]
    if not name:
        raise BadInput(messages.TOKEN_NAME_EMPTY)
    user_id = user.id if isinstance(user, User) else user.user_id
    if user_id is None:
        raise BadInput(messages.TOKEN_NEEDS_ACCOUNT)
    secret = TOKEN_PREFIX + new_secret()
    token = await accounts_repo.add_token(
        session=session, user_id=user_id, name=name, token_hash=digest(secret), prefix=secret[:10]
    )
    return token, secret


async def token_principal(*, session: AsyncSession, secret: str) -> tuple[Principal, bool] | None:
    """The principal an API token signs in (and whether this use is worth a line in the security log: its first
    in ten minutes), or None when the token is unknown or revoked. Marks the token used."""
    if not secret.startswith(TOKEN_PREFIX):
        return None
    found = await accounts_repo.token_user(session=session, token_hash=digest(secret))
    if found is None:
        return None
    token, user = found
    worth_logging = token.last_used_at is None or utcnow() - _aware(token.last_used_at) > timedelta(minutes=10)
    if worth_logging:
        await accounts_repo.touch_token(session=session, token_id=token.id)
    principal = Principal(user_id=user.id, name=user.username, is_admin=user.is_admin, via="token", token_id=token.id)
    return principal, worth_logging


async def revoke(*, session: AsyncSession, token_id: int, by: Principal) -> ApiToken:
    """Revoke a token of ``by``'s (any user's when ``by`` is an admin); ``NotFound`` otherwise."""
    token = await accounts_repo.revoke_token(
        session=session, token_id=token_id, user_id=None if by.is_admin else by.user_id
    )
    if token is None:
        raise NotFound(messages.TOKEN_UNKNOWN.format(token_id=token_id))
    return token


def _aware(moment: datetime) -> datetime:
    """SQLite hands back naive datetimes (stored as UTC): make them comparable with ``utcnow()``."""
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment
