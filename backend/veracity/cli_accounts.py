"""``veracity user …``, ``veracity token …`` and ``veracity security-log``: accounts from the shell (whoever can
run the CLI on the server's database is its administrator). Passwords are read from a prompt, or from stdin with
``--password-stdin``; never from the command line, where ``ps`` and shell history would keep them."""

from __future__ import annotations

import argparse
import getpass
import json
import sys
from collections.abc import Awaitable, Callable

from sqlalchemy.ext.asyncio import AsyncSession

from veracity import accounts, messages
from veracity.accounts import SHELL
from veracity.db import accounts_repo
from veracity.db.engine import make_engine, make_sessionmaker
from veracity.db.models import User
from veracity.errors import BadInput, Conflict, NotFound
from veracity.settings import Settings


def add_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("user", help="add or list accounts (for VERACITY_AUTH__ENABLED=true)")
    users = p.add_subparsers(dest="user_command", required=True)
    q = users.add_parser("add", help="add an account (the password is prompted for, or read from stdin)")
    q.add_argument("username")
    q.add_argument("--admin", action="store_true", help="an admin: sees every run, adds users")
    q.add_argument("--password-stdin", action="store_true", help="read the password from the first line of stdin")
    q = users.add_parser("password", help="set an account's password (its browser sessions end)")
    q.add_argument("username")
    q.add_argument("--password-stdin", action="store_true")
    users.add_parser("list", help="list the accounts")

    p = sub.add_parser("token", help="make, list or revoke API tokens")
    tokens = p.add_subparsers(dest="token_command", required=True)
    q = tokens.add_parser("create", help="make a token for a user; its secret is printed once")
    q.add_argument("username")
    q.add_argument("--name", required=True, help="what the token is for")
    q = tokens.add_parser("list", help="a user's tokens (never their secrets)")
    q.add_argument("username")
    q = tokens.add_parser("revoke", help="revoke a token by its ID")
    q.add_argument("token_id", type=int)

    p = sub.add_parser("security-log", help="sign-ins, token use, deletions and admin acts, newest first")
    p.add_argument("--limit", type=int, default=50)


def _password(from_stdin: bool) -> str:
    if from_stdin:
        return sys.stdin.readline().rstrip("\r\n")
    first = getpass.getpass("Password: ")
    if getpass.getpass("Password again: ") != first:
        raise BadInput(messages.PASSWORDS_DIFFER)
    return first


async def _user_list(session: AsyncSession, _args: argparse.Namespace) -> None:
    for user in await accounts_repo.all_users(session=session):
        print(f"{user.id}\t{user.username}\t{'admin' if user.is_admin else 'user'}")


async def _user_add(session: AsyncSession, args: argparse.Namespace) -> None:
    accounts.check_username(args.username)  # before the password prompt
    try:
        user = await accounts.add_user(
            session=session,
            username=args.username,
            password=_password(args.password_stdin),
            is_admin=args.admin,
            added_by=SHELL.name,
        )
    except Conflict as exc:  # a taken name is the caller's to change: bad input (exit 2)
        raise BadInput(exc.message) from exc
    print(f"added {'admin' if user.is_admin else 'user'} {user.username}")


async def _user_password(session: AsyncSession, args: argparse.Namespace) -> None:
    user = await _user(session, args.username)
    password = accounts.check_password(_password(args.password_stdin))
    await accounts_repo.set_password(session=session, user_id=user.id, password_hash=accounts.HASHER.hash(password))
    await accounts_repo.log(
        session=session, actor=SHELL.name, action="password_set", target=f"user {user.username}", detail={}
    )
    print(f"password of {user.username} set; their sessions ended")


async def _token_create(session: AsyncSession, args: argparse.Namespace) -> None:
    owner = await _user(session, args.username)
    _, secret = await accounts.make_token(session=session, user=owner, name=args.name, actor=SHELL.name)
    print(secret)


async def _token_list(session: AsyncSession, args: argparse.Namespace) -> None:
    for t in await accounts_repo.tokens_of(session=session, user_id=(await _user(session, args.username)).id):
        print(f"{t.id}\t{t.name}\t{t.prefix}…\t{'revoked' if t.revoked_at else 'live'}")


async def _token_revoke(session: AsyncSession, args: argparse.Namespace) -> None:
    token = await accounts.revoke(session=session, token_id=args.token_id, by=SHELL)
    print(f"revoked token {token.id} ({token.name})")


async def _security_log(session: AsyncSession, args: argparse.Namespace) -> None:
    for entry in await accounts_repo.security_log(session=session, limit=max(1, args.limit)):
        row = {"at": entry.at.isoformat(), "actor": entry.actor, "action": entry.action}
        print(json.dumps({**row, "target": entry.target, "client": entry.client, "detail": entry.detail}))


async def _user(session: AsyncSession, username: str) -> User:
    user = await accounts_repo.user_by_name(session=session, username=username)
    if user is None:
        raise NotFound(messages.USER_UNKNOWN.format(username=username))
    return user


COMMANDS: dict[tuple[str, str | None], Callable[[AsyncSession, argparse.Namespace], Awaitable[None]]] = {
    ("user", "list"): _user_list,
    ("user", "add"): _user_add,
    ("user", "password"): _user_password,
    ("token", "create"): _token_create,
    ("token", "list"): _token_list,
    ("token", "revoke"): _token_revoke,
    ("security-log", None): _security_log,
}


async def run(args: argparse.Namespace, settings: Settings) -> int:
    """One account command in one transaction (what it wrote and its log line, or nothing)."""
    command = COMMANDS[(args.command, getattr(args, "user_command", None) or getattr(args, "token_command", None))]
    engine = make_engine(settings.database.url)
    try:
        async with make_sessionmaker(engine)() as session, session.begin():
            await command(session, args)
        return 0
    finally:
        await engine.dispose()
