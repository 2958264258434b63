"""The floor: a deterministic, per-spec answer that needs no model — an honest note plus the evidence
digest with anchors. It replaces any result that is not shippable."""

from __future__ import annotations

from typing import Literal

from veracity import messages
from veracity.domain import Claim, Evidence, Report, ReportSection
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
        "not_verified": "Not written: the draft could not be verified.",
        "digest_title": "Evidence digest",
        "digest_note": "Verbatim sentences retrieved for this question, best-scored first; not a written answer.",
        "floor_note": DEFAULT_FLOOR_NOTE,
        "reason": "{note} Reason: {reason}.",
        "nothing_note": "{reason}.",
        "handoff_note": "This answer needs a person before it can be given: {why}.",
    },
    "ms": {
        "handoff": "Tidak dihantar: keyakinan terlalu rendah; seseorang akan menyemaknya.",
        "nothing_relevant": "Tidak ditulis: tiada apa-apa yang diperoleh menjawab soalan ini.",
        "search_failed": "Tidak ditulis: carian gagal, jadi tiada bahan untuk ditulis.",
        "not_verified": "Tidak ditulis: draf tidak dapat disahkan.",
        "digest_title": "Ringkasan bukti",
        "digest_note": (
            "Ayat yang diperoleh untuk soalan ini, disalin kata demi kata, yang terbaik dahulu; bukan jawapan bertulis."
        ),
        "floor_note": (
            "Veracity tidak dapat menghasilkan laporan yang boleh dipertanggungjawabkan untuk soalan ini, jadi ia "
            "menunjukkan apa yang ditemuinya."
        ),
        "reason": "{note} Sebab: {reason}.",
        "nothing_note": "Tiada apa-apa yang diperoleh menjawab soalan ini ({reason}).",
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


NOTHING_PREFIX = messages.NOTHING_RELEVANT.split("{")[0]
SEARCH_FAILED_PREFIX = messages.SEARCH_FAILED.split("{")[0]
FallbackKind = Literal["nothing_relevant", "search_failed", "not_verified"]


def fallback_kind(reason: str | None) -> FallbackKind:
    """Why a fallback has nothing written, read from its reason: nothing retrieved answers the question, the
    search failed, or a draft was made and could not be verified. The floor, the run page's banner and its
    status line all say it from this one rule."""
    reason = reason or ""
    if reason.startswith(NOTHING_PREFIX):
        return "nothing_relevant"
    if reason.startswith(SEARCH_FAILED_PREFIX):
        return "search_failed"
    return "not_verified"


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
) -> Report:
    """The honest note plus the evidence digest. Also the body of a ``handoff``: a person gets the evidence,
    the reader gets no unverified prose. Its notes and disclaimer are in the answer's language (``language``,
    else the question's); the reason, written by the checks, is quoted as it is."""
    digest = evidence[:DIGEST_SIZE]
    lang = floor_language(spec, question, language)
    text = FLOOR_TEXT[lang]
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
    sections.append(
        ReportSection(
            id="evidence_digest",
            title=text["digest_title"],
            required=False,
            status="supported" if digest else "not_found",
            claims=[Claim(text=ev.quote, evidence_ids=[ev.id], label="supported") for ev in digest],
            note=text["digest_note"],
        )
    )
    floor_note = text["floor_note"] if spec.policy.floor_note == DEFAULT_FLOOR_NOTE else spec.policy.floor_note
    note = text["reason"].format(note=floor_note, reason=reason)
    if fallback_kind(reason) == "nothing_relevant":  # said plainly: the corpus does not hold an answer
        note = text["nothing_note"].format(reason=reason)
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
        evidence=report_evidence(digest),
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
