"""``veracity user …``, ``veracity token …`` and ``veracity security-log``: accounts from the shell (whoever can
run the CLI on the server's database is its administrator). Passwords are read from a prompt, or from stdin with
``--password-stdin``; never from the command line, where ``ps`` and shell history would keep them."""

from __future__ import annotations

import argparse
import getpass
import json
import sys

from veracity import accounts, messages
from veracity.db import accounts_repo
from veracity.db.engine import make_engine, make_sessionmaker
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


async def run(args: argparse.Namespace, settings: Settings) -> int:
    engine = make_engine(settings.database.url)
    try:
        async with make_sessionmaker(engine)() as session, session.begin():
            if args.command == "user":
                if args.user_command == "list":
                    for user in await accounts_repo.all_users(session=session):
                        print(f"{user.id}\t{user.username}\t{'admin' if user.is_admin else 'user'}")
                    return 0
                if args.user_command == "password":
                    found = await accounts_repo.user_by_name(session=session, username=args.username)
                    if found is None:
                        raise NotFound(messages.USER_UNKNOWN.format(username=args.username))
                    password = accounts.check_password(_password(args.password_stdin))
                    await accounts_repo.set_password(
                        session=session, user_id=found.id, password_hash=accounts.HASHER.hash(password)
                    )
                    await accounts_repo.log(
                        session=session, actor="cli", action="password_set", target=f"user {found.username}", detail={}
                    )
                    print(f"password of {found.username} set; their sessions ended")
                    return 0
                accounts.check_username(args.username)
                try:
                    user = await accounts.add_user(
                        session=session,
                        username=args.username,
                        password=_password(args.password_stdin),
                        is_admin=args.admin,
                    )
                except Conflict as exc:  # a taken name is the caller's to change: bad input (exit 2)
                    raise BadInput(exc.message) from exc
                await accounts_repo.log(
                    session=session,
                    actor="cli",
                    action="user_added",
                    target=f"user {user.username}",
                    detail={"admin": user.is_admin},
                )
                print(f"added {'admin' if user.is_admin else 'user'} {user.username}")
                return 0
            if args.command == "token":
                if args.token_command == "revoke":
                    token = await accounts_repo.revoke_token(session=session, token_id=args.token_id, user_id=None)
                    if token is None:
                        raise NotFound(messages.TOKEN_UNKNOWN.format(token_id=args.token_id))
                    await accounts_repo.log(
                        session=session,
                        actor="cli",
                        action="token_revoked",
                        target=f"token {token.id}",
                        detail={"owner_id": token.user_id},
                    )
                    print(f"revoked token {token.id} ({token.name})")
                    return 0
                owner = await accounts_repo.user_by_name(session=session, username=args.username)
                if owner is None:
                    raise NotFound(messages.USER_UNKNOWN.format(username=args.username))
                if args.token_command == "list":
                    for t in await accounts_repo.tokens_of(session=session, user_id=owner.id):
                        state = "revoked" if t.revoked_at else "live"
                        print(f"{t.id}\t{t.name}\t{t.prefix}…\t{state}")
                    return 0
                made, secret = await accounts.make_token(session=session, user=owner, name=args.name)
                await accounts_repo.log(
                    session=session,
                    actor="cli",
                    action="token_created",
                    target=f"token {made.id}",
                    detail={"name": made.name, "user": owner.username},
                )
                print(secret)
                return 0
            for entry in await accounts_repo.security_log(session=session, limit=max(1, args.limit)):
                row = {"at": entry.at.isoformat(), "actor": entry.actor, "action": entry.action}
                print(json.dumps({**row, "target": entry.target, "client": entry.client, "detail": entry.detail}))
            return 0
    finally:
        await engine.dispose()
