"""Canonical URLs: one key per page however a search engine or a link spells it.

courlan (a maintained URL library, already a trafilatura dependency) lowercases scheme and host, drops default
ports, sorts query keys and removes the common tracking parameters (utm_*, gclid, fbclid, msclkid, ref, …).
We also drop the fragment (it never changes what the server sends) and a few trackers courlan keeps.
"""

from __future__ import annotations

import re
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from courlan import normalize_url

from veracity.text import sha256_hex

# Trackers courlan's pattern does not cover (HubSpot, Mailchimp, Matomo/Piwik, Adobe, Instagram/YouTube share ids).
_EXTRA_TRACKERS = re.compile(r"^(?:_hs(?:enc|mi)|mc_eid|mkt_tok|pk_\w+|s_cid|si|spm|_ga|_gl|igsh|oly_\w+)$", re.I)


class BadUrl(ValueError):
    """Not an absolute http(s) URL."""


def link_url(url: str | None) -> str | None:
    """``url`` stripped when it is an absolute http(s) URL with a host, else None. A source's URL comes from a
    fetched page or an ingested file: ``javascript:``, ``data:`` or ``file:`` there is shown as text, never
    made a link (the run page, the Markdown export) or fetched."""
    raw = (url or "").strip()
    try:
        parts = urlsplit(raw)
        ok = parts.scheme.lower() in ("http", "https") and bool(parts.hostname)
    except ValueError:
        return None
    return raw if ok else None


def canonical_url(url: str) -> str:
    """The canonical spelling of ``url``. Raises BadUrl for anything that is not an absolute http(s) URL."""
    raw = (url or "").strip()
    if link_url(raw) is None:
        raise BadUrl(f"not an absolute http(s) URL: {raw[:200]}")
    try:
        normal = normalize_url(raw, strict=False, trailing_slash=True)
    except (ValueError, AttributeError) as exc:  # courlan raises on malformed ports and the like
        raise BadUrl(f"malformed URL: {raw[:200]}") from exc
    parts = urlsplit(normal)
    query = [(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True) if not _EXTRA_TRACKERS.match(k)]
    path = parts.path or "/"
    return urlunsplit((parts.scheme.lower(), parts.netloc.lower(), path, urlencode(sorted(query)), ""))


def url_key(url: str) -> str:
    """SHA-256 hex of the canonical URL: the fetch cache key and the run's dedupe key."""
    return sha256_hex(canonical_url(url))


def host_of(url: str) -> str:
    """Lower-case host without a leading ``www.``; '' when there is none."""
    host = (urlsplit(url).hostname or "").lower()
    return host[4:] if host.startswith("www.") else host
