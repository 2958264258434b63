"""The screen's cues: general regular expressions for how people ask for personal advice and how they speak of
crisis, run on the lower-cased message (a ``cased`` cue, ``named_person``, on the message as written).

The cues are data, ``guards/data/cues.toml``; this module is the small engine that reads and compiles them. They
carry no hand-set weights: each cue is one binary feature of the learned screen
(:mod:`veracity.guards.screen_model`), whose weights are fitted on the training material in ``training/screen``,
and the cues' order in the file is the order of that feature vector. The matched text is what ``veracity screen``
shows as the cue's evidence (for the ``shown`` cues; the rest are pronouns or negatives).

The file's syntax, kept to what the expressions need:

- ``[fragments]``: shared pieces of expressions, used inside a cue (or another fragment) as ``{NAME}`` (upper case,
  so a quantifier like ``{0,2}`` is never read as one) and pasted in as they stand;
- ``[cues.NAME]``: ``alternatives``, compiled into one expression as :func:`_alternation` says, or a ``pattern``
  compiled as written; ``cased`` and ``shown`` as above;
- ``[owned]``: what :func:`owned_term` reads, the ``my``/``our`` window and the roles that are relations.

Any expression may be written as a list of pieces, joined as they stand (how a long one keeps to short lines).
"""

from __future__ import annotations

import re
import tomllib
from importlib import resources

from pydantic import BaseModel, ConfigDict, model_validator

Pieces = str | list[str]
"""An expression written whole, or in pieces joined as they stand."""

_REFERENCE = re.compile(r"\{([A-Z][A-Z_]*)\}")


class _Cue(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    alternatives: list[Pieces] = []
    pattern: Pieces | None = None
    cased: bool = False
    shown: bool = False

    @model_validator(mode="after")
    def _one_form(self) -> _Cue:
        if bool(self.alternatives) == (self.pattern is not None):
            raise ValueError("a cue has either alternatives or a pattern")
        return self


class _Owned(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    window: Pieces
    roles: list[str]


class _CueFile(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    fragments: dict[str, Pieces]
    cues: dict[str, _Cue]
    owned: _Owned


def _joined(pieces: Pieces) -> str:
    return pieces if isinstance(pieces, str) else "".join(pieces)


def _expand(text: str, fragments: dict[str, Pieces], seen: tuple[str, ...] = ()) -> str:
    """``text`` with every ``{NAME}`` replaced by its fragment, itself expanded."""

    def one(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in fragments:
            raise ValueError(f"cues.toml: unknown fragment {{{name}}}")
        if name in seen:
            raise ValueError(f"cues.toml: fragment {{{name}}} refers to itself")
        return _expand(_joined(fragments[name]), fragments, (*seen, name))

    return _REFERENCE.sub(one, text)


def _alternation(alternatives: list[str]) -> re.Pattern[str]:
    """Cues are written in lower case and run on the lower-cased message (much faster than re.IGNORECASE).
    Alternatives that start at a word boundary share one ``(?<!\\w)`` guard, which lets the engine skip
    positions inside words without trying every alternative there."""
    at_word = [a for a in alternatives if a.startswith(r"\b")]
    others = [a for a in alternatives if not a.startswith(r"\b")]
    parts = ([r"(?<!\w)(?:" + "|".join(f"(?:{a})" for a in at_word) + ")"] if at_word else []) + [
        f"(?:{a})" for a in others
    ]
    return re.compile("|".join(parts))


def _compile(cue: _Cue, fragments: dict[str, Pieces]) -> re.Pattern[str]:
    if cue.pattern is not None:
        return re.compile(_expand(_joined(cue.pattern), fragments))
    return _alternation([_expand(_joined(a), fragments) for a in cue.alternatives])


def _read() -> _CueFile:
    text = resources.files("veracity.guards").joinpath("data", "cues.toml").read_text(encoding="utf-8")
    return _CueFile.model_validate(tomllib.loads(text))


_FILE = _read()
CUES: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (name, _compile(cue, _FILE.fragments)) for name, cue in _FILE.cues.items()
)
"""name → pattern, in the order of the learned screen's feature vector."""
CUE_NAMES = tuple(name for name, _ in CUES)
_CASED = frozenset(name for name, cue in _FILE.cues.items() if cue.cased)
SHOWN = frozenset(name for name, cue in _FILE.cues.items() if cue.shown)
"""Cues whose matched text is worth showing."""
_OWNER = re.compile(_expand(_joined(_FILE.owned.window), _FILE.fragments))
ROLES = frozenset(_FILE.owned.roles)
"""Owning a professional ("my doctor", "my lawyer") is a relation, counted by ``own_relation``, not an owned
matter."""

_QUOTES = str.maketrans({"\u2019": "'", "\u2018": "'", "\u02bc": "'", "\u201c": '"', "\u201d": '"'})


def normalise(text: str) -> str:
    """Straight apostrophes and single spaces, so "I’m" and "I'm" match the same patterns."""
    return " ".join(text.translate(_QUOTES).split())


def _first(pattern: re.Pattern[str], text: str) -> str | None:
    found = pattern.search(text)
    if found is None:
        return None
    return found.group(0).strip(" .,;:!?") or found.group(0)


def find_cues(text: str) -> dict[str, str]:
    """Each cue that fires on the (normalised) message → the text it matched."""
    low = text.lower()
    found: dict[str, str] = {}
    for name, pattern in CUES:
        hit = _first(pattern, text if name in _CASED else low)
        if hit is not None:
            found[name] = hit
    return found


def owned_term(terms: re.Pattern[str], low: str) -> str | None:
    """``my``/``our`` followed within three words by a domain term that is not a person's role ("my tax return")."""
    for window in _OWNER.finditer(low):
        for term in terms.finditer(window.group(0)):
            if term.group(0) not in ROLES:
                return window.group(0)[: term.end()]
    return None
