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
SESSION_COOKIE = "veracity_session"
"""The browser's sign-in cookie: a random secret whose SHA-256 is the session's key."""
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
SHELL = Principal(user_id=None, name="cli", is_admin=True, via="local")
"""Whoever runs ``veracity user|token …`` on the server's database: its administrator."""
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


async def add_user(
    *, session: AsyncSession, username: str, password: str, is_admin: bool, added_by: str | None, client: str = ""
) -> User:
    """A new account, logged in the caller's transaction: ``signup`` when ``added_by`` is None (made by its own
    user), else ``user_added`` by ``added_by``. ``BadInput`` for a bad name or password, ``Conflict`` when taken."""
    username = check_username(username)
    check_password(password)
    if await accounts_repo.user_by_name(session=session, username=username) is not None:
        raise Conflict(messages.USERNAME_TAKEN.format(username=username))
    user = await accounts_repo.add_user(
        session=session, username=username, password_hash=HASHER.hash(password), is_admin=is_admin
    )
    if added_by is None:
        await accounts_repo.log(
            session=session, actor=username, action="signup", client=client, detail={"admin": is_admin}
        )
    else:
        await accounts_repo.log(
            session=session,
            actor=added_by,
            action="user_added",
            target=f"user {username}",
            client=client,
            detail={"admin": is_admin},
        )
    return user


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


async def make_token(
    *, session: AsyncSession, user: User | Principal, name: str, actor: str, client: str = ""
) -> tuple[ApiToken, str]:
    """A new API token for ``user`` named ``name``, made by ``actor`` (logged): the stored row and the secret,
    shown once."""
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
    await accounts_repo.log(
        session=session,
        actor=actor,
        action="token_created",
        target=f"token {token.id}",
        client=client,
        detail={"name": token.name, "user_id": user_id},
    )
    return token, secret


async def token_principal(*, session: AsyncSession, secret: str, client: str = "", path: str = "") -> Principal | None:
    """The principal an API token signs in, or None when the token is unknown or revoked (logged as
    ``token_refused``). A use is marked and logged (``token_used``) once in ten minutes, not on every request."""
    found = None
    if secret.startswith(TOKEN_PREFIX):
        found = await accounts_repo.token_user(session=session, token_hash=digest(secret))
    if found is None:
        await accounts_repo.log(session=session, actor="anonymous", action="token_refused", client=client, detail={})
        return None
    token, user = found
    if token.last_used_at is None or utcnow() - _aware(token.last_used_at) > timedelta(minutes=10):
        await accounts_repo.touch_token(session=session, token_id=token.id)
        await accounts_repo.log(
            session=session,
            actor=user.username,
            action="token_used",
            target=f"token {token.id}",
            client=client,
            detail={"path": path[:200]},
        )
    return Principal(user_id=user.id, name=user.username, is_admin=user.is_admin, via="token", token_id=token.id)


async def revoke(*, session: AsyncSession, token_id: int, by: Principal, client: str = "") -> ApiToken:
    """Revoke (and log) a token of ``by``'s (any user's when ``by`` is an admin); ``NotFound`` otherwise."""
    token = await accounts_repo.revoke_token(
        session=session, token_id=token_id, user_id=None if by.is_admin else by.user_id
    )
    if token is None:
        raise NotFound(messages.TOKEN_UNKNOWN.format(token_id=token_id))
    await accounts_repo.log(
        session=session,
        actor=by.name,
        action="token_revoked",
        target=f"token {token.id}",
        client=client,
        detail={"owner_id": token.user_id},
    )
    return token


def _aware(moment: datetime) -> datetime:
    """SQLite hands back naive datetimes (stored as UTC): make them comparable with ``utcnow()``."""
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment
