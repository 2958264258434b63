"""The floor: a deterministic, per-spec answer that needs no model — an honest note plus the evidence
digest with anchors. It replaces any result that is not shippable."""

from __future__ import annotations

from typing import Literal

from veracity import messages
from veracity.domain import CLOSEST_SHOWN, DIGEST_ID, Claim, Evidence, Report, ReportSection
from veracity.runs.report import report_evidence
from veracity.specs.models import Policy, Spec
from veracity.specs.policy import escalation_answer

DIGEST_SIZE = 8
DEFAULT_FLOOR_NOTE = Policy.model_fields["floor_note"].default

# What the floor says, in each language it speaks (the answer's, else the question's); English otherwise. A
# template's own floor note is shown as written (templates write it in the language of their readers).
FLOOR_TEXT: dict[str, dict[str, str]] = {
    "en": {
        "handoff": "Not shipped: confidence is too low; a person will review it.",
        "nothing_relevant": "Not written: nothing retrieved answers the question.",
        "search_failed": "Not written: the search failed, so there was nothing to write from.",
        "model_failed": "Not written: the model failed before it wrote a draft.",
        "not_verified": "Not written: the draft could not be verified.",
        "digest_title": "Evidence digest",
        "digest_note": "Verbatim sentences retrieved for this question, best-scored first; not a written answer.",
        "closest_title": "Closest passages",
        "closest_note": (
            "Nothing retrieved answers the question. These came closest, quoted as retrieved, most relevant first: "
            "they were not checked as an answer and may not answer it."
        ),
        "floor_note": DEFAULT_FLOOR_NOTE,
        "reason": "{note} Reason: {reason}.",
        "nothing_note": "{reason}.",
        "search_note": "The search could not be reached, so nothing was written. Reason: {reason}.",
        "model_note": "The model failed, so nothing was written. Reason: {reason}.",
        "found_nothing": "Nothing was found to show.",
        "handoff_note": "This answer needs a person before it can be given: {why}.",
    },
    "ms": {
        "handoff": "Tidak dihantar: keyakinan terlalu rendah; seseorang akan menyemaknya.",
        "nothing_relevant": "Tidak ditulis: tiada apa-apa yang diperoleh menjawab soalan ini.",
        "search_failed": "Tidak ditulis: carian gagal, jadi tiada bahan untuk ditulis.",
        "model_failed": "Tidak ditulis: model gagal sebelum menulis draf.",
        "not_verified": "Tidak ditulis: draf tidak dapat disahkan.",
        "digest_title": "Ringkasan bukti",
        "closest_title": "Petikan terdekat",
        "closest_note": (
            "Tiada apa-apa yang diperoleh menjawab soalan ini. Ayat-ayat ini paling hampir, disalin seperti yang "
            "diperoleh, yang paling relevan dahulu: ia tidak disemak sebagai jawapan dan mungkin tidak menjawabnya."
        ),
        "digest_note": (
            "Ayat yang diperoleh untuk soalan ini, disalin kata demi kata, yang terbaik dahulu; bukan jawapan bertulis."
        ),
        "floor_note": (
            "Veracity tidak dapat menghasilkan laporan yang boleh dipertanggungjawabkan untuk soalan ini, jadi ia "
            "menunjukkan apa yang ditemuinya."
        ),
        "reason": "{note} Sebab: {reason}.",
        "nothing_note": "Tiada apa-apa yang diperoleh menjawab soalan ini ({reason}).",
        "search_note": "Carian tidak dapat dicapai, jadi tiada apa-apa ditulis. Sebab: {reason}.",
        "model_note": "Model gagal, jadi tiada apa-apa ditulis. Sebab: {reason}.",
        "found_nothing": "Tiada apa-apa ditemui untuk ditunjukkan.",
        "handoff_note": "Jawapan ini perlu disemak oleh seseorang sebelum boleh diberikan: {why}.",
    },
}


def floor_language(spec: Spec, question: str, language: str | None = None) -> str:
    """The language the floor speaks: the answer's when the run got that far and the floor speaks it, else the
    question's among the floor's languages and the template's disclaimer languages."""
    if language in FLOOR_TEXT:
        return language
    from veracity.guards.language import detect

    candidates = list(dict.fromkeys([*FLOOR_TEXT, *spec.policy.disclaimer]))
    detected = detect(question, candidates)
    return detected if detected in FLOOR_TEXT else "en"


def _prefix(message: str) -> str:
    return message.split("{")[0]


FallbackKind = Literal["nothing_relevant", "search_failed", "model_failed", "not_verified"]
KIND_PREFIXES: tuple[tuple[FallbackKind, str], ...] = (
    ("nothing_relevant", _prefix(messages.NOTHING_RELEVANT)),
    ("search_failed", _prefix(messages.SEARCH_FAILED)),
    ("search_failed", _prefix(messages.PAGES_UNREACHABLE)),
    ("model_failed", _prefix(messages.COMPOSER_FAILED)),
)
"""Each cause's reason begins with its message's fixed words (``graph/nodes/decide.py`` and ``compose.py`` write
them from ``messages``); any other reason is a draft that failed the checks."""


def fallback_kind(reason: str | None) -> FallbackKind:
    """Why a fallback has nothing written, read from its reason: nothing retrieved answers the question, the
    search (or every page it found) could not be reached, the model failed before it wrote a draft, or a draft
    was made and could not be verified. The floor and the run page's outcome statement say it from this one
    rule."""
    reason = reason or ""
    return next((kind for kind, prefix in KIND_PREFIXES if reason.startswith(prefix)), "not_verified")


def floor_report(
    *,
    run_id: str,
    spec: Spec,
    question: str,
    corpus: str,
    evidence: list[Evidence],
    reason: str,
    outcome: Literal["fallback", "handoff"] = "fallback",
    needs_human_reason: str | None = None,
    language: str | None = None,
    closest: list[Evidence] | None = None,
) -> Report:
    """The honest note plus the evidence digest. Also the body of a ``handoff``: a person gets the evidence,
    the reader gets no unverified prose. Its notes and disclaimer are in the answer's language (``language``,
    else the question's); the reason, written by the checks, is quoted as it is.

    When nothing answers the question (a ``nothing_relevant`` fallback: no sentence reached the relevance
    cut-off, or those that did were withheld as not answering it together), the digest holds the ``closest``
    sentences instead, titled and said to be so, unlabelled (no check judged them), each with
    its relevance and its anchor: the reader can open them, and nothing is passed off as an answer."""
    digest = evidence[:DIGEST_SIZE]
    lang = floor_language(spec, question, language)
    text = FLOOR_TEXT[lang]
    near = (
        closest[:CLOSEST_SHOWN]
        if closest and not digest and outcome == "fallback" and fallback_kind(reason) == "nothing_relevant"
        else []
    )
    unwritten = text["handoff"] if outcome == "handoff" else text[fallback_kind(reason)]
    sections = [
        ReportSection(
            id=s.id,
            title=s.title,
            required=s.required,
            status="not_found",
            claims=[],
            note=unwritten,
        )
        for s in spec.sections
    ]
    shown = "closest" if near else "digest"  # not answering and unlabelled, or verbatim and supported
    sections.append(
        ReportSection(
            id=DIGEST_ID,
            title=text[f"{shown}_title"],
            required=False,
            status="supported" if digest else "not_found",
            claims=[Claim(text=ev.quote, evidence_ids=[ev.id], relevance=ev.relevance) for ev in near]
            or [Claim(text=ev.quote, evidence_ids=[ev.id], label="supported") for ev in digest],
            note=text[f"{shown}_note"],
        )
    )
    floor_note = text["floor_note"] if spec.policy.floor_note == DEFAULT_FLOOR_NOTE else spec.policy.floor_note
    kind = fallback_kind(reason)
    if kind == "nothing_relevant":  # said plainly: the corpus does not hold an answer
        note = text["nothing_note"].format(reason=reason)
    elif kind == "search_failed":  # the template's note would say it "shows what it found": nothing was
        note = text["search_note"].format(reason=reason)
    elif kind == "model_failed":
        note = text["model_note"].format(reason=reason)
    else:
        note = text["reason"].format(note=floor_note, reason=reason)
        if not digest:
            note += " " + text["found_nothing"]
    if outcome == "handoff":
        note = text["handoff_note"].format(why=needs_human_reason or reason)
    disclaimers = spec.policy.disclaimer
    return Report(
        run_id=run_id,
        template=spec.id,
        question=question,
        corpus=corpus,
        outcome=outcome,
        outcome_reason=reason,
        needs_human_reason=needs_human_reason,
        sections=sections,
        evidence=report_evidence(digest or near),
        notes=[note],
        disclaimer=disclaimers.get(lang) or next(iter(disclaimers.values()), None),
        language=lang,
    )


def routed_report(
    *, run_id: str, spec: Spec, question: str, corpus: str, route: str, reason: str, domain: str | None = None
) -> Report:
    """The whole answer when the router stops a run: no search was made and no model was called."""
    outcome: Literal["crisis", "escalated"] = "crisis" if route == "crisis" else "escalated"
    answer = spec.policy.crisis_answer if route == "crisis" else escalation_answer(spec.policy, domain)
    return Report(
        run_id=run_id,
        template=spec.id,
        question=question,
        corpus=corpus,
        outcome=outcome,
        outcome_reason=reason,
        sections=[],
        evidence=[],
        notes=[answer],
    )
