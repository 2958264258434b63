"""Sign-up, sign-in and sign-out, and the account page: API tokens (made, listed, revoked) and, for an admin,
the users. Plain forms, each with the CSRF field; every act goes to the security log."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Form, Path, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from veracity import accounts, messages
from veracity.accounts import SESSION_COOKIE, Principal
from veracity.db import accounts_repo
from veracity.errors import BadInput, Conflict, NotFound
from veracity.web.auth import (
    CsrfDep,
    ReaderDep,
    SignedInDep,
    client_of,
    secure,
)
from veracity.web.deps import SessionDep, SettingsDep, TemplatesDep

router = APIRouter(include_in_schema=False)


def _local_path(target: str) -> str:
    """Where to go after signing in: a path of this site only (never ``//host`` or a URL)."""
    return target if target.startswith("/") and not target.startswith(("//", "/\\")) else "/"


def _page(
    request: Request, templates: TemplatesDep, name: str, context: dict[str, Any], status_code: int = 200
) -> HTMLResponse:
    return templates.TemplateResponse(request, name, context, status_code=status_code)


@router.get("/signin", response_class=HTMLResponse)
async def signin_page(
    request: Request, templates: TemplatesDep, session: SessionDep, settings: SettingsDep, next: str = "/"
) -> Response:
    if not settings.auth.enabled:
        return RedirectResponse("/", status_code=303)
    first = await accounts_repo.user_count(session=session) == 0
    return _page(request, templates, "pages/signin.html", {"next": _local_path(next), "first": first})


@router.post("/signin", response_model=None, dependencies=[CsrfDep])
async def signin(
    request: Request,
    templates: TemplatesDep,
    session: SessionDep,
    settings: SettingsDep,
    username: Annotated[str, Form(max_length=200)] = "",
    password: Annotated[str, Form(max_length=1000)] = "",
    next: Annotated[str, Form(max_length=2000)] = "/",
) -> Response:
    if not settings.auth.enabled:
        return RedirectResponse("/", status_code=303)
    async with session.begin():
        user = await accounts.authenticate(session=session, username=username, password=password)
        if user is None:
            await accounts_repo.log(
                session=session,
                actor=username.strip()[:64] or "anonymous",
                action="signin_failed",
                client=client_of(request),
                detail={},
            )
        else:
            secret = await accounts.open_session(session=session, user=user, hours=settings.auth.session_hours)
            await accounts_repo.log(
                session=session, actor=user.username, action="signin", client=client_of(request), detail={}
            )
    if user is None:
        context = {"next": _local_path(next), "error": messages.SIGNIN_FAILED, "username": username[:64]}
        return _page(request, templates, "pages/signin.html", context, status_code=401)
    response = RedirectResponse(_local_path(next), status_code=303)
    _set_session(response, request, settings, secret)
    return response


def _set_session(response: Response, request: Request, settings: Any, secret: str) -> None:
    response.set_cookie(
        SESSION_COOKIE,
        secret,
        max_age=int(settings.auth.session_hours * 3600),
        httponly=True,
        samesite="lax",
        secure=secure(request, settings),
        path="/",
    )


@router.post("/signout", response_model=None, dependencies=[CsrfDep])
async def signout(request: Request, session: SessionDep, who: ReaderDep) -> Response:
    cookie = request.cookies.get(SESSION_COOKIE)
    if cookie:
        async with session.begin():
            await accounts_repo.end_session(session=session, token_hash=accounts.digest(cookie))
            if who.via == "session":
                await accounts_repo.log(
                    session=session, actor=who.name, action="signout", client=client_of(request), detail={}
                )
    response = RedirectResponse("/signin", status_code=303)
    response.delete_cookie(SESSION_COOKIE, path="/")
    return response


@router.get("/signup", response_class=HTMLResponse)
async def signup_page(
    request: Request, templates: TemplatesDep, session: SessionDep, settings: SettingsDep
) -> Response:
    if not settings.auth.enabled:
        return RedirectResponse("/", status_code=303)
    first = await accounts_repo.user_count(session=session) == 0
    closed = not first and not settings.auth.open_signup
    return _page(request, templates, "pages/signup.html", {"first": first, "closed": closed})


@router.post("/signup", response_model=None, dependencies=[CsrfDep])
async def signup(
    request: Request,
    templates: TemplatesDep,
    session: SessionDep,
    settings: SettingsDep,
    username: Annotated[str, Form(max_length=200)] = "",
    password: Annotated[str, Form(max_length=1000)] = "",
    confirm: Annotated[str, Form(max_length=1000)] = "",
) -> Response:
    if not settings.auth.enabled:
        return RedirectResponse("/", status_code=303)
    error: str | None = None
    async with session.begin():
        first = await accounts_repo.user_count(session=session) == 0
        if not first and not settings.auth.open_signup:
            error = messages.SIGNUP_CLOSED
        elif password != confirm:
            error = messages.PASSWORDS_DIFFER
        else:
            try:
                user = await accounts.add_user(
                    session=session,
                    username=username,
                    password=password,
                    is_admin=first,
                    added_by=None,
                    client=client_of(request),
                )
            except (BadInput, Conflict) as exc:
                error = exc.message
            else:
                secret = await accounts.open_session(session=session, user=user, hours=settings.auth.session_hours)
    if error is not None:
        context = {"first": first, "closed": error == messages.SIGNUP_CLOSED, "error": error, "username": username[:64]}
        return _page(request, templates, "pages/signup.html", context, status_code=403 if context["closed"] else 422)
    response = RedirectResponse("/", status_code=303)
    _set_session(response, request, settings, secret)
    return response


async def _account(
    request: Request,
    templates: TemplatesDep,
    session: SessionDep,
    who: Principal,
    *,
    made: str | None = None,
    error: str | None = None,
    status_code: int = 200,
) -> HTMLResponse:
    tokens = await accounts_repo.tokens_of(session=session, user_id=who.user_id) if who.user_id is not None else []
    users = await accounts_repo.all_users(session=session) if who.is_admin and who.user_id is not None else []
    context = {"who": who, "tokens": tokens, "users": users, "made": made, "error": error}
    return _page(request, templates, "pages/account.html", context, status_code=status_code)


@router.get("/account", response_class=HTMLResponse)
async def account(request: Request, templates: TemplatesDep, session: SessionDep, who: SignedInDep) -> HTMLResponse:
    return await _account(request, templates, session, who)


@router.post("/account/tokens", response_class=HTMLResponse, dependencies=[CsrfDep])
async def token_new(
    request: Request,
    templates: TemplatesDep,
    session: SessionDep,
    who: SignedInDep,
    name: Annotated[str, Form(max_length=200)] = "",
) -> HTMLResponse:
    try:
        async with session.begin():
            _, secret = await accounts.make_token(
                session=session, user=who, name=name, actor=who.name, client=client_of(request)
            )
    except BadInput as exc:
        return await _account(request, templates, session, who, error=exc.message, status_code=422)
    # The secret is shown on this response only: it is stored as a hash.
    return await _account(request, templates, session, who, made=secret)


@router.post("/account/tokens/{token_id}/revoke", response_model=None, dependencies=[CsrfDep])
async def token_revoke(
    request: Request,
    token_id: Annotated[int, Path(ge=1, le=2**63 - 1)],
    templates: TemplatesDep,
    session: SessionDep,
    who: SignedInDep,
) -> Response:
    try:
        async with session.begin():
            await accounts.revoke(session=session, token_id=token_id, by=who, client=client_of(request))
    except NotFound as exc:
        return await _account(request, templates, session, who, error=exc.message, status_code=404)
    return RedirectResponse("/account", status_code=303)


@router.post("/account/users", response_model=None, dependencies=[CsrfDep])
async def user_new(
    request: Request,
    templates: TemplatesDep,
    session: SessionDep,
    who: SignedInDep,
    username: Annotated[str, Form(max_length=200)] = "",
    password: Annotated[str, Form(max_length=1000)] = "",
    admin: Annotated[bool, Form()] = False,
) -> Response:
    if not who.is_admin or who.user_id is None:
        return await _account(request, templates, session, who, error=messages.ADMIN_ONLY, status_code=403)
    try:
        async with session.begin():
            await accounts.add_user(
                session=session,
                username=username,
                password=password,
                is_admin=admin,
                added_by=who.name,
                client=client_of(request),
            )
    except (BadInput, Conflict) as exc:
        return await _account(request, templates, session, who, error=exc.message, status_code=exc.status_code)
    return RedirectResponse("/account", status_code=303)
