"""The text analyser every layer shares: words, content terms, sentence spans, the index's own reading
(``query_terms``, ``Analyzer``: unicode61 tokens Porter-stemmed as FTS5 does, ``index_stems``), and the checker's
(``fact_tokens``: numbers kept whole, for the grounding judge, which stems words with the same ``ANALYZER``)."""

from __future__ import annotations

import hashlib
import re
import unicodedata

import Stemmer

WORD_RE = re.compile(r"[^\W_]+(?:['’][^\W_]+)?", re.UNICODE)
_TOKEN = re.compile(r"[^\W_]+", re.UNICODE)  # unicode61: letters and digits; everything else separates

STOPWORDS = frozenset(
    """a about above after again against all also am an and any are aren't as at be because been before being
    below between both but by can cannot could did do does doing down during each few for from further had has
    have having he her here hers herself him himself his how i if in into is it its itself let me more most my
    myself no nor not of off on once only or other ought our ours ourselves out over own same she should so some
    such than that the their theirs them themselves then there these they this those through to too under until
    up very was we were what when where which while who whom why will with would you your yours yourself
    yourselves tell explain describe give show list please know want need find much many whats s t
    """.split()
)


def words(text: str) -> list[str]:
    return [w.lower() for w in WORD_RE.findall(text)]


# The checker's reading (the grounding judge's): a number stays whole ("1.2", "21st"), a clock time is one token
# ("4:12", not the counts 4 and 12), "%" is a token, and a word with digits after letters is a name, not a number
# ("CO2", "A321neo", "KT200").
CLOCK_TIME = r"(?:[01]?\d|2[0-3]):[0-5]\d"
"""A clock time as written, hour:minute ("4:12", "16:30"); a pattern, shared with the judge's number reader."""
FACT_TOKEN_RE = re.compile(
    rf"(?<!\d){CLOCK_TIME}(?![\d:])|"
    r"[^\W\d_]+\d[^\W_]*|\d+(?:\.\d+)?(?:st|nd|rd|th)?(?![^\W_])|\d+(?:\.\d+)?|[^\W\d_]+(?:['’][^\W\d_]+)*|%"
)
_THOUSANDS_RE = re.compile(r"(?<=\d),(?=\d{3}(?!\d))")


def fact_tokens(text: str) -> list[str]:
    """``text``'s words and numbers as written, read by ``FACT_TOKEN_RE`` once thousands separators are dropped
    ("1,200" is the one number 1200)."""
    return FACT_TOKEN_RE.findall(_THOUSANDS_RE.sub("", text))


def content_terms(text: str, *, limit: int = 32) -> list[str]:
    """Lower-cased content words in first-seen order, stopwords and duplicates removed."""
    seen: dict[str, None] = {}
    for word in words(text):
        word = word.replace("’", "'")
        if word in STOPWORDS or (len(word) < 2 and not word.isdigit()):
            continue
        seen.setdefault(word, None)
        if len(seen) >= limit:
            break
    return list(seen)


def sha256_hex(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


# A sentence ends at . ! or ? followed by whitespace and an upper-case letter, digit or quote, unless the
# word before the dot is a known abbreviation or a single initial.
_ABBREVIATIONS = frozenset(
    "mr mrs ms dr prof sr jr st vs etc e.g i.e inc ltd co corp no fig approx est jan feb mar apr jun jul aug "
    "sep sept oct nov dec u.s u.k ss sec secs para paras art arts cf al".split()
)
_BOUNDARY_RE = re.compile(r"[.!?][\"'”’)\]]*\s+(?=[\"'“‘(\[]?[A-Z0-9])")


_ORDINAL_RE = re.compile(r"[(\[]?(?:\d{1,3}|[ivx]{1,4}|[IVX]{1,4})[.)]")
_BLOCK_RE = re.compile(r"\n[ \t\r]*\n|\n(?=[ \t]*#)")


def sentence_spans(text: str) -> list[tuple[int, int]]:
    """Character spans of the sentences in ``text`` (offsets into ``text``, whitespace trimmed). A blank line
    or a Markdown heading always ends a sentence, and so does a line that ends a line of its own (``_lines``)."""
    spans: list[tuple[int, int]] = []
    start = 0
    for match in [*_BLOCK_RE.finditer(text), None]:
        end = len(text) if match is None else match.start()
        for s, e in _lines(text[start:end]):
            spans += [(start + s + a, start + s + b) for a, b in _line_spans(text[start + s : start + e])]
        if match is not None:
            start = match.end()
    return spans


_ROW_CELL_MAX = 40
"""A table row's cells are short; a paragraph holding two "|" ("cat a.txt | grep foo | wc -l …") is none."""


def _is_row(line: str) -> bool:
    """A table row as extractors write one: short cells between "|" rules (two at least), on one line."""
    row = line.strip()
    return "\n" not in row and row.count("|") >= 2 and all(len(c.strip()) <= _ROW_CELL_MAX for c in row.split("|"))


# A list item starts a line of its own: a bullet, "1." or "1)", or a cell rule "|" (and so does a table row).
_ITEM_RE = re.compile(r"[ \t]*(?:[-*+•·▪‣◦]\s|\d{1,3}[.)]\s|\|)")
# A line ending so runs on by the sentence rule; one ending in ":" heads what follows ("Opening hours:").
_ENDED_RE = re.compile(r"[.!?;,][\"'”’)\]]*\s*$")
# No sentence ends on an article, preposition or conjunction ("… a grant from the" / "Harbour Authority …").
_CARRIES_ON = frozenset("a an the of to from with and or nor but than that its their his her our your my whose".split())
# A menu's "Sign in" or "Log in" ends its line; "opened in" / "2019 and …" does not: these run on before a number.
_BEFORE_A_NUMBER = frozenset("in on at by for since until before after around about".split())
# A record: a short label that opens with a capital, a colon, its value ("Capacity: 1.7 litres", "Weekday evening
# (Mon–Fri, 5pm–11pm): £24 per hour"); not a clock time ("10:40") nor a lower-case run-on ("the chair said: …").
LABEL_RE = re.compile(r"[^\S\n]*([^\W\d_][^:|\n]{0,40}):[^\S\n]+(\S.*)")
"""A "label: value" line: the label (group 1), the value (group 2); the splitter and ``search.evidence`` read it."""
_HEADING_RE = re.compile(r"[ \t]*#{1,6}[ \t]")


def _is_label(line: str) -> bool:
    """A "Label: value" record line, its label opening with a capital of any script."""
    return (m := LABEL_RE.match(line)) is not None and m.group(1)[0].isupper()


def _is_record_line(line: str) -> bool:
    """A table row or a "Label: value" record: a line of its own, left out of the measure of wrapped prose (a run of
    them has lines of much the same length and is no paragraph)."""
    return _is_row(line) or _is_label(line)


_WRAP_MIN = 40
"""Lines as short as this are never taken for a hard-wrapped paragraph (a menu, a caption, a table row)."""
_SLACK = 0.85
"""A wrapped line may fall this far short of the width: PDF text is set in proportional type, where a line's
characters vary by a tenth or more."""


def _lines(block: str) -> list[tuple[int, int]]:
    """A block (no blank line) cut where a line ends on its own, as extracted web pages and plain-text notes
    write headings, menus, captions, list items and table rows: before a list item or table row, and after a line
    with no final punctuation when the next one opens with a capital, digit or quote — unless the line is a wrap of
    prose or ends on a word no sentence ends on ("the", "of", a hyphen). A wrapper breaks a line only where the next
    word would not fit, so a line is a wrap only when it and the next line's first word come near the block's width
    (``_SLACK`` of it), in a block that is wrapped prose at all: its width long enough to be a wrap width, and most
    of its lines that do not end a sentence near it. Any other line break is a space, as before."""
    lines = block.split("\n")
    filled = sum(1 for line in lines if line.strip())
    if filled < 2:
        return [(0, len(block))]
    # Whether the block is wrapped prose is read off its lines of prose: a run of records or rows has lines of much
    # the same length too, and is no paragraph.
    body = [line.rstrip() for line in lines if line.strip() and not _is_record_line(line)]
    lengths = sorted(len(line) for line in body) or [0]
    width = lengths[int(0.9 * (len(lengths) - 1))] if len(lengths) >= 10 else lengths[-1]  # a footer or URL aside
    running = [len(line) for line in body[:-1] if not _ENDED_RE.search(line)]  # a paragraph's last line is short
    near = sum(n >= 0.75 * width for n in running)
    prose = width >= _WRAP_MIN and (filled == len(body) == 2 or (near >= 2 and near >= 0.6 * len(running)))
    cuts: list[int] = []
    offset = 0
    in_item = _ITEM_RE.match(lines[0]) is not None  # the unit being read is a list item
    in_record = _is_label(lines[0])  # or a "Label: value" record
    for line, after in zip(lines, lines[1:], strict=False):
        offset += len(line) + 1
        head = after.strip()
        if not head or not line.strip():
            continue
        ended = _ENDED_RE.search(line) is not None
        wrapped = (
            not ended and prose and not _is_row(line) and len(line.rstrip()) + 1 + len(head.split()[0]) > _SLACK * width
        )
        last = line.rstrip().rsplit(None, 1)[-1]
        # As written: "Korvand Shipping AS" is a name.
        carries_on = last in _CARRIES_ON or last.endswith("-") or (last in _BEFORE_A_NUMBER and head[0].isdigit())
        item = _ITEM_RE.match(after) is not None
        # A hanging indent continues an item or record ("- … Councillor\n  Smith, for ten years …").
        hangs = (in_item or in_record) and after[:1] in " \t" and not item and not _is_record_line(after)
        if _is_row(line) or _is_row(after) or _HEADING_RE.match(line):
            cut = True  # a table row or a heading is a line of its own
        elif item:
            cut = in_item or not wrapped  # items follow items; "… in position\n5. The manager …" is a wrap
        elif _is_label(after):
            cut = not (
                wrapped or carries_on or line.rstrip().endswith((",", ";"))
            )  # "…Prime Minister\nLloyd George: …"
        else:
            opens = head[0].isupper() or head[0].isdigit() or head[0] in "\"'“‘([«"
            cut = not ended and opens and not wrapped and not carries_on and not hangs
        if cut:
            cuts.append(offset)
            in_item, in_record = item, _is_label(after)
    bounds = [0, *cuts, len(block)]
    return [(a, b) for a, b in zip(bounds, bounds[1:], strict=False)]


_ORDINAL_MAX = 8
"""The longest item number "1." or "(iv)." is a handful of characters."""


def _word_before(text: str, start: int, end: int) -> str:
    """The word that ends at ``end`` (its final ".!?" left off), within ``text[start:end]``: read backwards from
    ``end``, so that a sentence that runs on past many abbreviations ("Dr. " × 20,000) costs its length once, not
    once per abbreviation."""
    stop = end
    while stop > start and text[stop - 1] in ".!?":
        stop -= 1
    while stop > start and text[stop - 1].isspace():  # "word ." reads "word"
        stop -= 1
    begin = stop
    while begin > start and not text[begin - 1].isspace():
        begin -= 1
    return text[begin:stop]


def _line_spans(text: str) -> list[tuple[int, int]]:
    """The sentences of one line (or of lines that run on), trimmed. A table row is one record: "1940 | The
    Lantern Keeper | dir. Anselm Rook" is not cut after "dir."."""
    spans: list[tuple[int, int]] = []
    start, opens = 0, len(text) - len(text.lstrip())  # where the sentence and its first word begin
    for match in [] if _is_row(text) else _BOUNDARY_RE.finditer(text):
        end = match.start() + 1
        last_word = _word_before(text, start, end).lower()
        if (
            last_word in _ABBREVIATIONS
            or (len(last_word) == 1 and last_word.isalpha())
            # "1. First step": an item's number (only a short head can be one; never re-read a long one)
            or (end - opens <= _ORDINAL_MAX and _ORDINAL_RE.fullmatch(text[opens:end].rstrip()))
        ):
            continue
        spans.append((start, match.end()))
        start = opens = match.end()
    spans.append((start, len(text)))
    trimmed: list[tuple[int, int]] = []
    for s, e in spans:
        while s < e and text[s].isspace():
            s += 1
        while e > s and text[e - 1].isspace():
            e -= 1
        if e > s:
            trimmed.append((s, e))
    return trimmed


def query_terms(query: str) -> list[str]:
    """The query's content words as the index tokenises them. FTS5's unicode61 splits "O'Brien" into "o" and
    "brien" (so "obrien" matched nothing) and keeps letters of any script ("Lourenço", once dropped from the
    query): a word is split at its apostrophes and the short or stopword pieces left out. Only letters and digits
    remain, which is safe inside an FTS5 string and a tsquery."""
    terms: dict[str, None] = {}
    for word in content_terms(query):
        for part in word.replace("’", "'").split("'"):
            if part.isalnum() and (len(part) > 1 or part.isdigit()) and part not in STOPWORDS:
                terms.setdefault(part, None)
    return list(terms)


class Analyzer:
    """Lower-cased unicode61 tokens without diacritics (FTS5's default ``remove_diacritics``), Porter-stemmed;
    each distinct word is analysed once."""

    def __init__(self) -> None:
        self._stemmer = Stemmer.Stemmer("porter")
        self._cache: dict[str, str] = {}

    def stem(self, word: str) -> str:
        stem = self._cache.get(word)
        if stem is None:
            plain = word if word.isascii() else _strip_diacritics(word)
            stem = self._cache[word] = self._stemmer.stemWord(plain)
        return stem

    def tokens(self, text: str) -> list[str]:
        return [stem for w in _TOKEN.findall(text.lower()) if (stem := self.stem(w))]


ANALYZER = Analyzer()
"""A shared analyser for code that matches words the way the index does (same stems as every index's own)."""


def index_stems(terms: list[str]) -> list[str]:
    """Content words as the index holds them, in first-seen order: split at apostrophes as the index splits them
    ("o'brien" → "brien", as ``query_terms``), short and stop pieces left out, Porter-stemmed."""
    return list(dict.fromkeys(ANALYZER.stem(t) for t in query_terms(" ".join(terms))))


def _strip_diacritics(word: str) -> str:
    return "".join(ch for ch in unicodedata.normalize("NFKD", word) if not unicodedata.combining(ch))
