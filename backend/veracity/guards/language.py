"""The language of a text, chosen among the languages a policy has a disclaimer for (py3langid, offline)."""

from __future__ import annotations

from veracity.checks import ANCHOR_RE


def _rank(text: str) -> list[tuple[str, float]]:
    import py3langid  # the model ships inside the wheel; loaded on first use (~0.7 s), then kept

    return list(py3langid.rank(text))


def detect(text: str, candidates: list[str] | tuple[str, ...] = ()) -> str:
    """Best-ranked language code of ``text``, restricted to ``candidates`` when given (their first entry when
    the text has no letters to go on)."""
    text = ANCHOR_RE.sub(" ", text).strip()
    if not any(ch.isalpha() for ch in text):
        return candidates[0] if candidates else "en"
    ranked = [code for code, _ in _rank(text)]
    if candidates:
        allowed = set(candidates)
        return next((code for code in ranked if code in allowed), candidates[0])
    return str(ranked[0])
