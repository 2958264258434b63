"""What any input must be before it is used or stored, checked in one place for the HTTP API, the pages and the
CLI alike: text a database can hold, a question that says something, a JSON line a parser can read, a resume
cursor a database integer can hold.

Each check names what is wrong in a sentence from ``messages``; none echoes a value that could not itself be
shown (a lone surrogate makes any response or log line that carries it fail to encode)."""

from __future__ import annotations

import json
import re
from typing import Any

from veracity import messages
from veracity.errors import BadInput

MAX_CURSOR = 2**31 - 1
"""The largest event number a resume cursor may name: ``run_events.seq`` is a 32-bit integer, so no event has a
larger one, and PostgreSQL's driver refuses to compare the column with a larger number (the feed clamps a cursor
to what is stored before it queries; a bound here keeps every later use safe too)."""

_CURSOR_RE = re.compile(r"[0-9]{1,10}")  # ASCII digits only: str.isdigit() and int() also take '²' or '٣'
_SURROGATE_RE = re.compile("[\ud800-\udfff]")


def unstorable(text: str) -> str | None:
    """Why no database could store ``text``, or None: a NUL character (PostgreSQL refuses it in text) or a lone
    surrogate (it has no UTF-8 encoding; a JSON ``\\ud800`` escape or an undecodable file name makes one)."""
    if "\x00" in text:
        return "a NUL character (\\u0000)"
    if _SURROGATE_RE.search(text):
        return "a lone surrogate (\\ud800-\\udfff), which is not valid Unicode text"
    return None


def check_text(text: str, *, what: str) -> str:
    """``text`` unchanged, or ``BadInput`` naming ``what`` (e.g. "The question") when it cannot be stored."""
    reason = unstorable(text)
    if reason is not None:
        raise BadInput(messages.TEXT_UNSTORABLE.format(what=what, reason=reason))
    return text


def says_something(text: str) -> bool:
    """True when ``text`` holds a letter or a digit: spaces, punctuation, control and zero-width characters alone
    say nothing (they would make a run retrieve and ship claims about nothing the user asked)."""
    return any(c.isalnum() for c in text)


def shown(text: str, limit: int = 80) -> str:
    """``text`` safe to echo in a message: at most ``limit`` characters, any lone surrogate replaced."""
    return _SURROGATE_RE.sub("\ufffd", text[:limit])


def parse_cursor(value: str | None) -> int:
    """A resume cursor (``Last-Event-ID``, ``?after=``): 0 when absent or blank, else a whole number of ASCII
    digits from 0 to ``MAX_CURSOR``; ``BadInput`` otherwise."""
    if value is None or value.strip() == "":
        return 0
    value = value.strip()
    if not _CURSOR_RE.fullmatch(value) or int(value) > MAX_CURSOR:
        raise BadInput(messages.LAST_EVENT_ID_MALFORMED.format(value=shown(value, 40), limit=MAX_CURSOR))
    return int(value)


def loads_json(line: str) -> Any:
    """One JSON value from ``line``; ``ValueError`` with a reason a user can act on when it is not JSON or is
    nested too deeply for the parser (it recurses: a line of 100,000 ``[`` raises RecursionError) or holds a number
    too long for ``int``."""
    try:
        return json.loads(line)
    except json.JSONDecodeError as exc:
        raise ValueError(f"not JSON ({exc.msg})") from exc
    except ValueError:  # int() refuses a number of more than 4,300 digits
        raise ValueError("JSON with a number too long to read (over 4,300 digits)") from None
    except RecursionError:
        raise ValueError("JSON nested too deeply to read") from None


def read_yaml(text: str) -> Any:
    """A YAML document's data, safe types only (a template, a policy pack, a domain trust file): PyYAML's C
    parser when its wheel has libyaml (about ten times faster; every app and CLI process reads the templates),
    else its Python one. Raises ``yaml.YAMLError`` as ``yaml.safe_load`` does."""
    import yaml

    return yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))  # noqa: S506 (a safe loader)
