"""The router's screen: is this message a research question, a request for personal advice, or a crisis?

Two layers, both local and free (no search, no model call), the same on every template: a template chooses the
answer text, never whether the asker is protected, so each spec's own phrases are joined by every policy pack's.

1. **Patterns.** The crisis lexicon (→ ``crisis``) and the escalation phrases (→ ``escalate``): case-insensitive
   regular expressions matched at word boundaries, compiled once per policy. They catch the obvious phrasings
   ("kill myself", "my client", "should I invest") instantly.

2. **The learned screen** (:mod:`veracity.guards.screen_model`): small networks (or logistic models, whichever won
   out of fold) over the message's meaning (the semantic model's sentence embedding and, by default, the
   cross-encoder's reading of it with "The writer wants to harm or kill themselves."; an advice model is averaged
   with one fitted without the reading) and general cues, fitted on
   material written for the purpose, with cross-validated figures shipped beside the weights. It catches what the
   patterns do not know: forum language, oblique despair, method questions, a personal legal, medical or financial
   question in any wording.

Order: a crisis phrase, then the learned crisis model (a crisis outranks an escalation phrase around it: "should I
... tonight is the night"), then an escalation phrase, then the learned advice models (the likeliest domain over its
cut-off). Every decision names its layer, its score and, with the semantic model, the nearest training examples.
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from functools import cache
from typing import Literal

from veracity.guards.cues import SHOWN, normalise
from veracity.guards.screen_features import ADVICE, CRISIS
from veracity.guards.screen_model import Example, LearnedScreen, ScreenScore, process_screen
from veracity.semantic.model import process_semantics
from veracity.settings import get_settings
from veracity.specs.models import Policy

Route = Literal["proceed", "escalate", "crisis"]
Layer = Literal["pattern", "classifier", "none"]


@dataclass(frozen=True)
class RouteDecision:
    route: Route
    reason: str
    """One human sentence, e.g. "crisis phrase matched: 'kill myself'"."""
    matched: list[str]
    """The phrases, or the classifier's cues, that fired."""
    layer: Layer
    score: float
    """The classifier's probability for the route taken, 1.0 for a pattern hit, its highest one for proceed."""
    domain: str | None = None
    """crisis, legal, medical or financial: what the route is about (None for proceed)."""
    probabilities: dict[str, float] = field(default_factory=dict)
    """Every class's probability from the learned screen (empty when a crisis phrase decided alone)."""
    nearest: list[Example] = field(default_factory=list)
    """The training examples closest in meaning (semantic mode only)."""
    mode: str = ""
    """``semantic+reader``, ``semantic`` or ``lexical``: which learned models scored the message."""


@dataclass(frozen=True)
class _PackPhrases:
    crisis: tuple[str, ...]
    escalation: tuple[str, ...]
    domain_of: dict[str, str]
    """Escalation phrase → the domain of the pack it came from."""


@cache
def _pack_phrases() -> _PackPhrases:
    from veracity.specs.policy import load_packs  # the specs import this module's types at load time

    crisis: list[str] = []
    escalation: list[str] = []
    domain_of: dict[str, str] = {}
    for pack in load_packs().values():
        crisis += pack.crisis_lexicon
        escalation += pack.escalation_phrases
        domains = [name for name in pack.classifier_domains if name in ADVICE]
        for phrase in pack.escalation_phrases:
            if domains:
                domain_of.setdefault(phrase.lower(), domains[0])
    return _PackPhrases(tuple(dict.fromkeys(crisis)), tuple(dict.fromkeys(escalation)), domain_of)


# ------------------------------------------------------------------------------------------------ compiling


def _bounded(pattern: str) -> str:
    return f"(?<!\\w)(?:{pattern})(?!\\w)"


@dataclass(frozen=True)
class _Compiled:
    crisis: tuple[re.Pattern[str], ...]
    escalation: tuple[re.Pattern[str], ...]
    escalation_phrases: tuple[str, ...]
    """The escalation phrases as written, in the order of ``escalation`` (to name the pack's domain)."""
    crisis_any: re.Pattern[str] | None
    escalation_any: re.Pattern[str] | None
    """All patterns of a list in one expression: one scan to learn whether any of them matches at all."""


_Key = tuple[tuple[str, ...], tuple[str, ...]]


def _compile_key(key: _Key) -> _Compiled:
    crisis, escalation = key
    return _Compiled(
        crisis=tuple(_policy_rx(p) for p in crisis),
        escalation=tuple(_policy_rx(p) for p in escalation),
        escalation_phrases=escalation,
        crisis_any=_any_rx(crisis),
        escalation_any=_any_rx(escalation),
    )


_BACKREFERENCE = re.compile(r"\\[1-9]|\(\?P=")


def _any_rx(patterns: tuple[str, ...]) -> re.Pattern[str] | None:
    """None when the list is empty or cannot be joined safely (a back-reference would be renumbered)."""
    if not patterns or any(_BACKREFERENCE.search(p) for p in patterns):
        return None
    joined = "|".join(f"(?:{p})" for p in patterns)
    return re.compile(_bounded(joined), 0 if joined == joined.lower() else re.I)


def _policy_rx(pattern: str) -> re.Pattern[str]:
    """A policy pattern, run on the lower-cased message: case-insensitive by construction when the pattern is
    lower case, with re.IGNORECASE kept for any pattern that is not (an upper-case escape such as \\W)."""
    return re.compile(_bounded(pattern), 0 if pattern == pattern.lower() else re.I)


_BY_KEY: OrderedDict[_Key, _Compiled] = OrderedDict()
_BY_ID: OrderedDict[int, tuple[Policy, _Compiled]] = OrderedDict()
_CACHE_SIZE = 128
_CACHE_LOCK = threading.Lock()


def _compiled(policy: Policy) -> _Compiled:
    """Compile once per policy: looked up by identity first (no work at all), then by the patterns themselves.
    Runs in worker threads (the screen is CPU work kept off the event loop), so the caches change under a lock."""
    with _CACHE_LOCK:
        return _compiled_locked(policy)


def _compiled_locked(policy: Policy) -> _Compiled:
    entry = _BY_ID.get(id(policy))
    if entry is not None and entry[0] is policy:
        return entry[1]
    # Every template is screened with every pack's phrases: a template chooses the answer, not the protection.
    packs = _pack_phrases()
    key: _Key = (
        tuple(dict.fromkeys([*policy.crisis_lexicon, *packs.crisis])),
        tuple(dict.fromkeys([*policy.escalation_phrases, *packs.escalation])),
    )
    compiled = _BY_KEY.get(key)
    if compiled is None:
        compiled = _compile_key(key)
        _BY_KEY[key] = compiled
        if len(_BY_KEY) > _CACHE_SIZE:
            _BY_KEY.popitem(last=False)
    # The entry holds the policy itself, so its id cannot be reused by another object while the entry exists.
    _BY_ID[id(policy)] = (policy, compiled)
    if len(_BY_ID) > _CACHE_SIZE:
        _BY_ID.popitem(last=False)
    return compiled


def default_screener() -> LearnedScreen:
    """The process's learned screen: semantic when the process's model is loaded (reading with the cross-encoder when
    the settings allow it), lexical otherwise."""
    return process_screen(process_semantics().model, get_settings().semantic.screen_reader)


def _label(domain: str) -> str:
    return domain.replace("_", " ")


def _cue_hits(score: ScreenScore) -> list[str]:
    """The text the shown cues matched, each once (two cues may match the same words: "tonight" is urgent and
    imminent)."""
    return list(dict.fromkeys(hit for name, hit in score.cues.items() if name in SHOWN))


def _learned(route: Route, domain: str, score: ScreenScore, what: str, extra: str = "") -> RouteDecision:
    p = score.probabilities[domain]
    reason = f"classifier: {what} (p {p:.2f} >= {score.thresholds[domain]:.2f}, {score.mode})" + extra
    matched = ([score.sentence] if score.sentence else []) + _cue_hits(score)
    return RouteDecision(
        route, reason, matched, "classifier", round(p, 4), domain, _rounded(score), score.nearest, score.mode
    )


def _rounded(score: ScreenScore) -> dict[str, float]:
    return {k: round(v, 4) for k, v in score.probabilities.items()}


def screen(text: str, policy: Policy, screener: LearnedScreen | None = None, *, explain: bool = True) -> RouteDecision:
    """Route one incoming message: crisis phrases, the learned crisis model, escalation phrases, the learned
    advice models. ``screener`` defaults to the process's learned screen; ``explain=False`` skips the nearest
    training examples (for callers that read only the route)."""
    text = normalise(text)
    if not text:
        return RouteDecision("proceed", "empty message", [], "none", 0.0)
    compiled = _compiled(policy)
    low = text.lower()
    crisis_hits = _hits(compiled.crisis, compiled.crisis_any, low)
    if crisis_hits:
        return RouteDecision(
            "crisis", f"crisis phrase matched: {crisis_hits[0]!r}", crisis_hits, "pattern", 1.0, CRISIS
        )
    score = (screener or default_screener()).score(text, explain=explain)
    escalation_hits = _hits(compiled.escalation, compiled.escalation_any, low)
    if score.fired(CRISIS):
        extra = f"; escalation phrase also matched: {escalation_hits[0]!r}" if escalation_hits else ""
        return _learned("crisis", CRISIS, score, "crisis language", extra)
    if escalation_hits:
        domain = next((d for h in escalation_hits if (d := _domain_of(h, compiled)) is not None), None)
        domain = domain or max(ADVICE, key=lambda d: score.probabilities[d])
        reason = f"escalation phrase matched: {escalation_hits[0]!r}"
        return RouteDecision(
            "escalate", reason, escalation_hits, "pattern", 1.0, domain, _rounded(score), score.nearest, score.mode
        )
    fired = sorted((d for d in ADVICE if score.fired(d)), key=lambda d: score.probabilities[d], reverse=True)
    if fired:
        return _learned("escalate", fired[0], score, f"personal {_label(fired[0])} question")
    top = max(score.probabilities, key=lambda k: score.probabilities[k])
    reason = (
        f"no policy phrase matched; classifier below every cut-off "
        f"(highest: {_label(top)} {score.probabilities[top]:.2f}, {score.mode})"
    )
    return RouteDecision(
        "proceed",
        reason,
        [],
        "none",
        round(score.probabilities[top], 4),
        None,
        _rounded(score),
        score.nearest,
        score.mode,
    )


def _hits(patterns: tuple[re.Pattern[str], ...], any_of: re.Pattern[str] | None, low: str) -> list[str]:
    if any_of is not None and any_of.search(low) is None:
        return []
    return list(dict.fromkeys(m.group(0) for p in patterns if (m := p.search(low))))


def _domain_of(hit: str, compiled: _Compiled) -> str | None:
    domain_of = _pack_phrases().domain_of
    for phrase, pattern in zip(compiled.escalation_phrases, compiled.escalation, strict=True):
        if phrase.lower() in domain_of and pattern.search(hit):
            return domain_of[phrase.lower()]
    return None
