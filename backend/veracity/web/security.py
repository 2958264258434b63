"""Security headers on the app's own HTML pages.

A pure ASGI middleware (it never buffers a body, so the SSE streams pass straight through): every ``text/html``
response, except FastAPI's interactive API docs (which need inline scripts), gets a Content-Security-Policy
that allows scripts only from this origin's ``/static`` files — so even a source URL or text that slipped past
escaping could not run — plus ``nosniff``, no framing and no referrer leaking a run ID to a cited site
(``same-origin``, not ``no-referrer``: under ``no-referrer`` a browser sends ``Origin: null`` even on this site's
own form posts, and the cross-site check of ``web/auth.py`` could not tell them from a forged one).
"""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

CONTENT_SECURITY_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
    "connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)
HEADERS = [
    (b"content-security-policy", CONTENT_SECURITY_POLICY.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"same-origin"),
]
EXEMPT_PREFIXES = ("/docs", "/redoc")


class SecurityHeaders:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or str(scope.get("path", "")).startswith(EXEMPT_PREFIXES):
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                content_type = next((v for k, v in headers if k.lower() == b"content-type"), b"")
                if content_type.startswith(b"text/html"):
                    present = {k.lower() for k, _ in headers}
                    headers += [(k, v) for k, v in HEADERS if k not in present]
                    message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, send_with_headers)
