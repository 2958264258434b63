"""Who a request is, and whether a browser on another site sent it.

``principal``: single-user mode (``VERACITY_AUTH__ENABLED=false``, loopback only) answers the local user for every
request; with accounts, an ``Authorization: Bearer`` API token or the ``veracity_session`` cookie names the user,
else the request is anonymous. ``SignedInDep`` refuses the anonymous (401 JSON; the pages' handler redirects a
browser to /signin), ``AdminDep`` anyone but an admin (403).

``SameOrigin`` (pure ASGI) guards every state change a browser could be tricked into: a POST, PUT, PATCH or
DELETE that carries no API token is refused (403) when the browser says it came from elsewhere — an ``Origin``
other than this server's (or a trusted one), or ``Sec-Fetch-Site: cross-site``/``same-site``. It also hands each
browser a CSRF secret in a ``SameSite=Lax`` cookie (Lax, not Strict: a link followed from another site must not
make a new secret that breaks the forms already open in other tabs), which every form of the pages echoes as a
hidden field (``CsrfDep`` compares them): a form posted from another site, which cannot read the cookie, fails
even where the browser sent no ``Origin``. Cookies are ``HttpOnly`` and ``Secure`` over HTTPS.
"""

from __future__ import annotations

import hmac
import logging
import secrets
from contextvars import ContextVar
from typing import Annotated
from urllib.parse import urlsplit

from fastapi import Depends, Form, Request
from fastapi.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from veracity import accounts, messages
from veracity.accounts import ANONYMOUS, LOCAL, SESSION_COOKIE, Principal
from veracity.errors import Forbidden, Unauthorized
from veracity.settings import Settings

logger = logging.getLogger(__name__)

CSRF_COOKIE = "veracity_csrf"
CSRF_FIELD = "csrf_token"
UNSAFE = frozenset({"POST", "PUT", "PATCH", "DELETE"})
CSRF_TOKEN: ContextVar[str] = ContextVar("csrf_token", default="")
"""This request's CSRF secret (the cookie's, or the one being set): what the pages' forms carry."""


def csrf_token() -> str:
    """For the templates: the hidden field's value."""
    return CSRF_TOKEN.get()


def client_of(request: Request) -> str:
    return request.client.host if request.client else ""


def bearer(request: Request) -> str | None:
    scheme, _, value = request.headers.get("authorization", "").partition(" ")
    return value.strip() if scheme.lower() == "bearer" and value.strip() else None


def secure(request: Request, settings: Settings) -> bool:
    if settings.auth.secure_cookies is not None:
        return settings.auth.secure_cookies
    return request.url.scheme == "https"


async def principal(request: Request) -> Principal:
    """Who this request acts as (computed once per request)."""
    cached = getattr(request.state, "principal", None)
    if isinstance(cached, Principal):
        return cached
    settings: Settings = request.app.state.settings
    found = LOCAL if not settings.auth.enabled else await _signed(request)
    request.state.principal = found
    return found


async def _signed(request: Request) -> Principal:
    """The user an API token or the session cookie names; anonymous without either. A bad token is a 401, raised
    once the transaction that logged it has committed."""
    token = bearer(request)
    async with request.app.state.sessionmaker() as session, session.begin():
        if token is not None:
            who = await accounts.token_principal(
                session=session, secret=token, client=client_of(request), path=request.url.path
            )
        else:
            cookie = request.cookies.get(SESSION_COOKIE)
            who = await accounts.session_principal(session=session, secret=cookie) if cookie else None
    if who is not None:
        return who
    if token is not None:
        raise Unauthorized(messages.TOKEN_INVALID)
    return ANONYMOUS


async def signed_in(request: Request) -> Principal:
    who = await principal(request)
    if not who.signed_in:
        raise Unauthorized(messages.SIGNIN_NEEDED)
    return who


async def admin(request: Request) -> Principal:
    who = await signed_in(request)
    if not who.is_admin:
        raise Forbidden(messages.ADMIN_ONLY)
    return who


async def csrf_form(request: Request, csrf_token: Annotated[str, Form()] = "") -> None:
    """A page's form must echo the browser's CSRF cookie (API-token requests carry no ambient credentials)."""
    if bearer(request) is not None:
        return
    cookie = request.cookies.get(CSRF_COOKIE, "")
    if not cookie or not hmac.compare_digest(cookie.encode(), csrf_token.encode()):
        raise Forbidden(messages.CSRF_MISSING)


ReaderDep = Annotated[Principal, Depends(principal)]
"""Whoever asks (possibly anonymous): a page that shows something else to the signed-out."""
SignedInDep = Annotated[Principal, Depends(signed_in)]
"""A signed-in user (or single-user mode's local user); 401 otherwise."""
AdminDep = Annotated[Principal, Depends(admin)]
CsrfDep = Depends(csrf_form)


def _origin_host(value: str) -> str:
    parts = urlsplit(value)
    return f"{parts.scheme}://{parts.netloc}".lower() if parts.scheme and parts.netloc else value.lower()


class SameOrigin:
    """Refuse cross-site state changes; hand out the CSRF cookie (see the module's doc)."""

    def __init__(self, app: ASGIApp, settings: Settings) -> None:
        self.app = app
        self.settings = settings
        self.trusted = {_origin_host(o.strip()) for o in settings.auth.trusted_origins.split(",") if o.strip()}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request = Request(scope)
        if request.method in UNSAFE and bearer(request) is None:
            refused = self._cross_site(request)
            if refused is not None:
                logger.warning("refused a cross-site %s %s from %s", request.method, request.url.path, refused)
                body = {"error": {"code": "forbidden", "message": messages.CROSS_ORIGIN.format(origin=refused[:80])}}
                await JSONResponse(body, status_code=403)(scope, receive, send)
                return
        existing = request.cookies.get(CSRF_COOKIE, "")
        token = existing if 20 <= len(existing) <= 128 else secrets.token_urlsafe(32)
        CSRF_TOKEN.set(token)
        if token == existing:
            await self.app(scope, receive, send)
            return
        flags = "; Secure" if secure(request, self.settings) else ""
        header = f"{CSRF_COOKIE}={token}; Path=/; HttpOnly; SameSite=Lax{flags}".encode()

        async def with_cookie(message: Message) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", []), (b"set-cookie", header)]}
            await send(message)

        await self.app(scope, receive, with_cookie)

    def _cross_site(self, request: Request) -> str | None:
        """The other site a browser says this request came from, or None when it is this server's own."""
        origin = request.headers.get("origin")
        if origin is not None:
            host = request.headers.get("host", "")
            schemes = {request.url.scheme, request.headers.get("x-forwarded-proto", request.url.scheme)}
            own = {_origin_host(f"{scheme}://{host}") for scheme in schemes}
            if _origin_host(origin) not in own | self.trusted:
                return origin
            return None
        site = request.headers.get("sec-fetch-site")
        if site in ("cross-site", "same-site"):
            return f"a {site} page"
        return None
