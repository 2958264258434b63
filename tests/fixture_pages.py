"""Deterministic content for the fixture website: article HTML, paywalled pages and a small real PDF.

Every byte depends only on its arguments, so ETags are stable across runs and tests can assert exact facts.
The PDF is written by hand (a dozen objects and an xref table) rather than generated, because pypdf can read
text but not lay it out; the reader side of the tests is pypdf, so a hand-built file keeps both sides honest.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date, timedelta
from functools import cache
from html import escape

SITE_NAME = "The Fixture Gazette"
NAV_TEXT = "Sign up for the morning briefing"
FOOTER_TEXT = "All rights reserved by the Fixture Gazette Company"
RELATED_TEXT = "Related stories you may have missed"

_SUBJECTS = (
    ("coffee", "Brazil", "Minas Gerais", "International Coffee Organization"),
    ("cocoa", "Ghana", "Ashanti", "International Cocoa Organization"),
    ("copper", "Chile", "Antofagasta", "Chilean Copper Commission"),
    ("wheat", "Canada", "Saskatchewan", "Canadian Grain Commission"),
    ("rice", "Vietnam", "the Mekong Delta", "Food and Agriculture Organization"),
    ("lithium", "Australia", "Western Australia", "Department of Industry"),
    ("tea", "Kenya", "Kericho", "Tea Board of Kenya"),
    ("steel", "India", "Odisha", "World Steel Association"),
)
_AUTHORS = ("Maria Okafor", "Daniel Lindqvist", "Priya Raman", "Tomas Herrera", "Aiko Tanaka")
_FIRST_DATE = date(2024, 1, 2)
PDF_TITLE = "Commodity Markets Annual Review"
PDF_AUTHOR = "Fixture Research Unit"
PDF_CREATED = date(2024, 2, 29)


@dataclass(frozen=True)
class Article:
    """One fixture article: its metadata and the facts its body states, for tests to assert against."""

    number: int
    title: str
    author: str
    published: date
    paragraphs: tuple[str, ...]
    html: bytes
    etag: str
    last_modified: str


@cache
def article(number: int) -> Article:
    """The article at ``/articles/{number}``; the same number always gives the same bytes."""
    commodity, country, region, agency = _SUBJECTS[(number - 1) % len(_SUBJECTS)]
    year = 2015 + number % 9
    output = round(1.5 + (number * 37 % 90) / 10, 1)
    rise, workers, price, growth = 3 + number * 7 % 40, 20 + number * 13 % 300, 900 + number * 53 % 4000, 2 + number % 5
    title = f"{commodity.capitalize()} production in {country} reached a record in {year} (report {number})"
    author = _AUTHORS[(number - 1) % len(_AUTHORS)]
    published = _FIRST_DATE + timedelta(days=3 * number)
    paragraphs = (
        f"{country} produced {output} million tonnes of {commodity} in {year}, the largest harvest on record. "
        f"Most of the crop came from {region}, where yields rose for the third year in a row.",
        f"Exports of {commodity} from {country} rose by {rise} percent between {year - 5} and {year}. "
        f"The {commodity} sector employed about {workers} thousand workers in {region} during {year}.",
        f"Prices for {commodity} averaged {price} dollars per tonne in {year}, according to the {agency}. "
        f"Storage capacity in {region} was expanded twice over the same period to absorb the larger harvests.",
        f"Analysts at the {agency} expect demand for {commodity} to grow by {growth} percent a year until "
        f"{year + 6}. Smaller producers in {country} have formed cooperatives to share transport costs.",
    )
    html = _article_html(number, title, author, published, paragraphs).encode()
    etag = '"a' + hashlib.sha256(html).hexdigest()[:16] + '"'
    modified = published + timedelta(days=1)
    last_modified = modified.strftime("%a, %d %b %Y") + " 10:00:00 GMT"
    return Article(number, title, author, published, paragraphs, html, etag, last_modified)


def _article_html(number: int, title: str, author: str, published: date, paragraphs: Sequence[str]) -> str:
    body = "\n".join(f"    <p>{escape(p)}</p>" for p in paragraphs[:3])
    human_date = f"{published.day} {published.strftime('%B %Y')}"
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
  <meta charset="utf-8">
  <title>{escape(title)} | {SITE_NAME}</title>
  <meta name="author" content="{escape(author)}">
  <meta name="description" content="{escape(paragraphs[0])}">
  <meta property="og:title" content="{escape(title)}">
  <meta property="og:site_name" content="{SITE_NAME}">
  <meta property="article:published_time" content="{published.isoformat()}T09:00:00Z">
</head>
<body>
  <header>
    <nav class="site-nav"><a href="/">Home</a> <a href="/world">World</a> <a href="/business">Business</a>
      <a href="/newsletter">{NAV_TEXT}</a></nav>
  </header>
  <main>
   <article>
    <h1>{escape(title)}</h1>
    <p class="byline">By <span class="author">{escape(author)}</span>,
      <time datetime="{published.isoformat()}">published {human_date}</time></p>
{body}
    <h2 id="section">Outlook</h2>
    <p>{escape(paragraphs[3])}</p>
   </article>
   <aside class="related"><h3>{RELATED_TEXT}</h3>
    <ul><li><a href="/articles/{number + 1}">Next report</a></li><li><a href="/articles/1">First report</a></li></ul>
   </aside>
  </main>
  <footer>
    <p>&copy; 2024 {FOOTER_TEXT}.</p>
    <p><a href="/privacy">Privacy policy</a> &middot; <a href="/cookies">Cookie settings</a></p>
  </footer>
</body>
</html>
"""


PAYWALL_TEASER = "Shipping rates between Rotterdam and Shanghai doubled in the first quarter of 2024."


def paywalled_html(*, json_ld: bool) -> bytes:
    """A paywalled story: a one-sentence teaser and a subscribe wall.

    With ``json_ld`` the publisher also declares ``isAccessibleForFree: false`` (schema.org's paywall markup);
    without it only the wall's class name and wording give it away.
    """
    ld = (
        '<script type="application/ld+json">{"@context": "https://schema.org", "@type": "NewsArticle", '
        '"headline": "Container shipping rates", "isAccessibleForFree": "False", '
        '"hasPart": {"@type": "WebPageElement", "isAccessibleForFree": "False", "cssSelector": ".paywall"}}'
        "</script>"
        if json_ld
        else ""
    )
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>Container shipping rates | {SITE_NAME}</title>{ld}</head>
<body><main><article>
  <h1>Container shipping rates</h1>
  <p>{PAYWALL_TEASER}</p>
  <div class="paywall article-locked">
    <p>Subscribe to continue reading. This article is for subscribers only.</p>
    <p>Already a subscriber? <a href="/login">Sign in</a>.</p>
  </div>
</article></main></body></html>
""".encode()


PDF_PAGES = (
    (
        PDF_TITLE,
        "Global coffee exports reached 10.9 million tonnes in 2023.",
        "Copper prices averaged 8,500 dollars per tonne over the year.",
    ),
    (
        "Outlook",
        "Wheat stocks in Canada fell by 12 percent compared with 2022.",
        "The review covers forty-two producing countries.",
    ),
)


@cache
def report_pdf() -> bytes:
    """The fixture's ``/report.pdf``: two pages of text plus Title, Author and CreationDate metadata."""
    stamp = PDF_CREATED.strftime("D:%Y%m%d090000Z")
    return build_pdf(PDF_PAGES, title=PDF_TITLE, author=PDF_AUTHOR, created=stamp)


def _pdf_string(text: str) -> bytes:
    return b"(" + text.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)").encode("latin-1") + b")"


def build_pdf(pages: Sequence[Sequence[str]], *, title: str, author: str, created: str) -> bytes:
    """A minimal valid PDF (Helvetica text, one line per string) with an exact xref table."""
    page_ids = [5 + 2 * i for i in range(len(pages))]
    objects: list[bytes] = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [" + b" ".join(b"%d 0 R" % i for i in page_ids) + b"] /Count %d >>" % len(pages),
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>",
        b"<< /Title "
        + _pdf_string(title)
        + b" /Author "
        + _pdf_string(author)
        + b" /CreationDate "
        + _pdf_string(created)
        + b" /Producer (Veracity fixture site) >>",
    ]
    for page_id, lines in zip(page_ids, pages, strict=True):
        ops = b"BT /F1 12 Tf 16 TL 72 720 Td " + b" ".join(_pdf_string(line) + b" Tj T*" for line in lines) + b" ET"
        objects.append(
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 3 0 R >> >> "
            b"/Contents %d 0 R >>" % (page_id + 1)
        )
        objects.append(b"<< /Length %d >>\nstream\n" % len(ops) + ops + b"\nendstream")
    out = bytearray(b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R /Info 4 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    return bytes(out)
