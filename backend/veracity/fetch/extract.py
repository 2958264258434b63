"""Bytes to text, routed by content type: HTML through trafilatura, PDF through pypdf, plain text as is.

CPU-bound and synchronous on purpose; the fetcher runs it in a worker thread.

The HTML is parsed once (trafilatura's ``load_html``, which never touches the network) and that tree is handed
to both trafilatura and htmldate. Deliberately never a string and never a URL: htmldate *downloads* any string
that starts with "http" and has no space, so a page whose body is a bare URL would make it fetch, past the SSRF
guard. htmldate runs with ``extensive_search=False`` (meta tags, ``<time>``, JSON-LD; no free-text scan), which
is about a tenth of a millisecond per page; trafilatura's own internal date pass gets the same settings.

Paywall rule (``paywalled=True``), checked on HTML only:
  1. the publisher says so: any JSON-LD object with ``isAccessibleForFree`` false (schema.org paywall markup), or
  2. a wall is visible and the story is not: an element whose class or id names a wall (``paywall``,
     ``regwall``, ``subscriber-only``, ``premium-content``, ``article-locked``, …) or a wall phrase
     ("subscribe to continue reading", "already a subscriber", …) on the page, *and* fewer than
     ``SHORT_TEXT_CHARS`` characters of extracted text. A long article with a "subscribe" box is not paywalled.
"""

from __future__ import annotations

import io
import json
import logging
import re
from dataclasses import dataclass
from typing import Any

import htmldate
import pypdf
import trafilatura
from lxml.html import HtmlElement
from trafilatura.settings import Document
from trafilatura.utils import load_html

from veracity.fetch.types import FetchError

logger = logging.getLogger(__name__)

HTML_TYPES = frozenset({"text/html", "application/xhtml+xml"})
PDF_TYPES = frozenset({"application/pdf", "application/x-pdf"})
_UNTYPED = frozenset({"", "application/octet-stream"})
_SUPPORTED = HTML_TYPES | PDF_TYPES | _UNTYPED | {"text/plain"}
SHORT_TEXT_CHARS = 1500
_DATE_PARAMS: dict[str, Any] = {"extensive_search": False, "original_date": True, "outputformat": "%Y-%m-%d"}
_WALL_CLASS = re.compile(
    r"paywall|regwall|subscriber-?only|subscribers-?only|premium-content|article-locked|locked-content"
    r"|meter-?wall|piano-?(?:offer|template)",
    re.I,
)
_WALL_PHRASE = re.compile(
    r"subscribe (?:now )?to (?:continue|keep) reading|subscribe to read|to continue reading,? (?:please )?subscribe"
    r"|already a subscriber|(?:this|the) (?:article|story|content) is (?:only )?(?:available )?(?:for|to) subscribers"
    r"|for subscribers only|to read the full (?:article|story),? (?:please )?subscribe",
    re.I,
)


@dataclass(frozen=True)
class Extracted:
    """What one response body says, independent of how it was fetched."""

    text: str
    title: str
    author: str | None = None
    published: str | None = None
    paywalled: bool = False


def media_type(content_type: str) -> str:
    """``text/html; charset=utf-8`` -> ``text/html``."""
    return content_type.split(";", 1)[0].strip().lower()


def is_supported(content_type: str) -> bool:
    """Whether a body of this declared type may be worth downloading (untyped bodies are sniffed later)."""
    return media_type(content_type) in _SUPPORTED


def extract(*, raw: bytes, content_type: str, url: str) -> Extracted:
    """Route ``raw`` by its content type (PDF also by its magic bytes). Raises FetchError unsupported_type/parse."""
    kind = media_type(content_type)
    head = raw[:1024].lstrip()
    try:
        if kind in PDF_TYPES or head.startswith(b"%PDF-"):
            return extract_pdf(raw)
        if kind in HTML_TYPES or (kind in _UNTYPED and _looks_like_html(head)):
            return extract_html(raw, url=url)
    except FetchError:
        raise
    except Exception as exc:  # a parser bug on one odd page must fail that page, not the run's branch
        logger.warning("extraction failed for %s: %s", url[:200], exc, exc_info=True)
        raise FetchError("parse", "the page could not be parsed") from exc
    if kind == "text/plain":
        return Extracted(text=_decode(raw, content_type).strip(), title="")
    raise FetchError("unsupported_type", f"cannot extract text from {kind or 'an untyped response'}")


def _looks_like_html(head: bytes) -> bool:
    return head[:15].lower().startswith((b"<!doctype html", b"<html"))


def _decode(raw: bytes, content_type: str) -> str:
    match = re.search(r"charset=[\"']?([\w.:-]+)", content_type, re.I)
    encoding = match.group(1) if match else "utf-8"
    try:
        return raw.decode(encoding, errors="replace")
    except LookupError:  # an unknown charset name: UTF-8 is the web's overwhelming default
        return raw.decode("utf-8", errors="replace")


def extract_html(raw: bytes, *, url: str) -> Extracted:
    """Main text, title and author (trafilatura), publication date (htmldate) and the paywall flag."""
    tree = load_html(raw)
    if tree is None:
        raise FetchError("parse", "the page is not parseable HTML")
    published = htmldate.find_date(tree, **_DATE_PARAMS)
    document = trafilatura.bare_extraction(
        tree, url=url, with_metadata=True, include_comments=False, date_extraction_params=_DATE_PARAMS
    )
    text = title = ""
    author = None
    if isinstance(document, Document):
        # trafilatura puts one block (paragraph, heading, list item) per line; a blank line between blocks keeps
        # a heading from running into the sentence after it when the text is split into sentences.
        text = "\n\n".join(line.strip() for line in (document.text or "").splitlines() if line.strip())
        title = (document.title or "").strip()
        author = (document.author or "").strip() or None
    if not title:
        title = " ".join(" ".join(tree.xpath("//title//text()")).split())
    paywalled = is_paywalled(tree, text)
    if not text and not paywalled:
        raise FetchError("parse", "no main text found in the page")
    return Extracted(text=text, title=title, author=author, published=published or None, paywalled=paywalled)


def is_paywalled(tree: HtmlElement, text: str) -> bool:
    """The paywall rule from the module docstring."""
    for block in tree.xpath('//script[@type="application/ld+json"]/text()'):
        try:
            data = json.loads(block)
        except ValueError:
            continue
        if _declares_not_free(data):
            return True
    if len(text) >= SHORT_TEXT_CHARS:
        return False
    names = " ".join(tree.xpath("//@class | //@id"))
    if _WALL_CLASS.search(names):
        return True
    visible = " ".join(tree.xpath("//body//text()[not(ancestor::script) and not(ancestor::style)]"))
    return bool(_WALL_PHRASE.search(" ".join(visible.split())))


def _declares_not_free(data: object) -> bool:
    if isinstance(data, dict):
        flag = data.get("isAccessibleForFree")
        if flag is False or (isinstance(flag, str) and flag.strip().lower() == "false"):
            return True
        return any(_declares_not_free(value) for value in data.values())
    if isinstance(data, list):
        return any(_declares_not_free(item) for item in data)
    return False


def extract_pdf(raw: bytes) -> Extracted:
    """Text of every page (blank line between pages); title, author and creation date from the metadata."""
    try:
        reader = pypdf.PdfReader(io.BytesIO(raw))
        if reader.is_encrypted and not reader.decrypt(""):
            raise FetchError("parse", "the PDF is encrypted")
        pages = [(page.extract_text() or "").strip() for page in reader.pages]
        meta = reader.metadata
        title = (meta.title or "").strip() if meta else ""
        author = ((meta.author or "").strip() or None) if meta else None
        created = meta.creation_date if meta else None
    except FetchError:
        raise
    except Exception as exc:  # pypdf raises many unrelated types (KeyError, ValueError, …) on broken files
        logger.info("unreadable PDF: %s", exc)
        raise FetchError("parse", "the PDF could not be read") from exc
    text = "\n\n".join(page for page in pages if page)
    if not text:  # a scanned PDF: nothing to quote from, so nothing to cite
        raise FetchError("parse", "the PDF has no extractable text")
    published = created.date().isoformat() if created else None
    return Extracted(text=text, title=title, author=author, published=published)
