"""Text for the PDF export: the fonts it embeds, and source or model text made into reportlab's paragraph markup
that no character can break.

The body font is DejaVu Sans when the system has it (Debian's ``fonts-dejavu-core``: Latin, Greek, Cyrillic and
more) and otherwise Bitstream Vera, which ships inside the reportlab wheel, so a fresh machine needs no font
package. DejaVu is Vera's extension, so the PDF looks the same either way. A character the font lacks is never
fatal: Chinese, Japanese and Korean are set in the standard Adobe CJK fonts that PDF readers supply (reportlab
names them; nothing is embedded); anything else becomes its base letter without the accent (``ă`` → ``a``) or,
failing that, ``?``. The Markdown, JSON and Word exports carry the exact text.
"""

from __future__ import annotations

import threading
import unicodedata
from dataclasses import dataclass
from functools import cache
from importlib.resources import files
from pathlib import Path
from xml.sax.saxutils import escape, quoteattr

from reportlab.lib.fonts import addMapping
from reportlab.pdfbase import pdfmetrics
from reportlab.pdfbase.cidfonts import UnicodeCIDFont
from reportlab.pdfbase.ttfonts import TTFont

from veracity.runs.report import one_line

FAMILY = "VeracitySans"
DEJAVU = Path("/usr/share/fonts/truetype/dejavu")
_DEJAVU_FILES = ("DejaVuSans.ttf", "DejaVuSans-Bold.ttf", "DejaVuSans-Oblique.ttf", "DejaVuSans-BoldOblique.ttf")
_VERA_FILES = ("Vera.ttf", "VeraBd.ttf", "VeraIt.ttf", "VeraBI.ttf")
_FACES = ("", "-Bold", "-Italic", "-BoldItalic")
_CJK_FONTS = {"han": "STSong-Light", "hangul": "HYSMyeongJo-Medium"}
_REPLACEMENT = "?"
_lock = threading.Lock()


@dataclass(frozen=True)
class Fonts:
    family: str
    """The registered family: ``<b>`` and ``<i>`` in the markup pick its bold and italic faces."""
    source: str
    """Which font files were embedded: ``DejaVu Sans`` or ``Bitstream Vera``."""
    covers: frozenset[int]
    """The code points the regular face draws."""


def _font_files() -> tuple[str, list[str]]:
    if all((DEJAVU / name).is_file() for name in _DEJAVU_FILES):
        return "DejaVu Sans", [str(DEJAVU / name) for name in _DEJAVU_FILES]
    bundled = files("reportlab") / "fonts"
    return "Bitstream Vera", [str(bundled / name) for name in _VERA_FILES]


@cache
def fonts() -> Fonts:
    """The fonts, registered with reportlab once per process (its registry is global, hence the lock)."""
    with _lock:
        source, paths = _font_files()
        faces = [TTFont(FAMILY + suffix, path) for suffix, path in zip(_FACES, paths, strict=True)]
        for face in faces:
            pdfmetrics.registerFont(face)
        for bold, italic, face in ((0, 0, faces[0]), (1, 0, faces[1]), (0, 1, faces[2]), (1, 1, faces[3])):
            addMapping(FAMILY, bold, italic, face.fontName)
        for name in _CJK_FONTS.values():
            pdfmetrics.registerFont(UnicodeCIDFont(name))
        return Fonts(family=FAMILY, source=source, covers=frozenset(faces[0].face.charToGlyph))


def _script(ch: str) -> str | None:
    """Which standard CJK font draws ``ch``, if it is Chinese, Japanese or Korean text."""
    cp = ord(ch)
    if 0xAC00 <= cp <= 0xD7AF or 0x1100 <= cp <= 0x11FF or 0x3130 <= cp <= 0x318F:
        return _CJK_FONTS["hangul"]
    if 0x3000 <= cp <= 0x30FF or 0x3400 <= cp <= 0x4DBF or 0x4E00 <= cp <= 0x9FFF or 0xF900 <= cp <= 0xFAFF:
        return _CJK_FONTS["han"]
    if 0xFF00 <= cp <= 0xFFEF:
        return _CJK_FONTS["han"]
    return None


def _fold(ch: str, covers: frozenset[int]) -> str:
    """``ch`` as the font can draw it: its letters without their accents, else the replacement mark."""
    base = "".join(c for c in unicodedata.normalize("NFKD", ch) if not unicodedata.combining(c))
    return base if base and all(ord(c) in covers for c in base) else _REPLACEMENT


def markup(text: str) -> str:
    """``text`` as reportlab paragraph markup: one line, escaped, each character in a font that draws it."""
    covers = fonts().covers
    runs: list[tuple[str | None, str]] = []  # (CJK font or None for the body font, text)
    for ch in one_line(text):
        face = None if ord(ch) in covers else _script(ch)
        shown = ch if face or ord(ch) in covers else _fold(ch, covers)
        if runs and runs[-1][0] == face:
            runs[-1] = (face, runs[-1][1] + shown)
        else:
            runs.append((face, shown))
    return "".join(
        escape(t) if face is None else f"<font face={quoteattr(face)}>{escape(t)}</font>" for face, t in runs
    )


def link(href: str, text: str) -> str:
    """Markup for ``text`` linked to ``href`` (a URL already checked to be http(s), or ``#name`` in the file)."""
    return f'<a href={quoteattr(href)} color="#1a4fa0"><u>{markup(text)}</u></a>'
