"""Shared policy packs and their merge into a spec's policy: one source for router, composer, checks and floor."""

from __future__ import annotations

from functools import cache
from pathlib import Path

import yaml
from pydantic import ValidationError

from veracity.inputs import read_yaml
from veracity.specs.models import Policy, PolicyPack

PACKS = Path(__file__).parent / "packs"
_LISTS = ("escalation_phrases", "advice_phrases", "crisis_lexicon", "forbidden_patterns")
_SCALARS = ("citation_pattern", "escalation_answer", "crisis_answer", "floor_note")


class PackError(ValueError):
    """A policy pack is malformed or unknown; raised at load time, never mid-run."""


@cache
def load_packs(folder: Path = PACKS) -> dict[str, PolicyPack]:
    packs: dict[str, PolicyPack] = {}
    for path in sorted(folder.glob("*.yaml")):
        try:
            pack = PolicyPack.model_validate(read_yaml(path.read_text(encoding="utf-8")))
        except (yaml.YAMLError, ValidationError) as exc:
            raise PackError(f"{path}: {exc}") from exc
        if pack.id != path.stem:
            raise PackError(f"{path}: pack id '{pack.id}' does not match the file name")
        packs[pack.id] = pack
    return packs


def resolve(policy: Policy, packs: dict[str, PolicyPack] | None = None) -> Policy:
    """The spec's policy with its packs merged in: list entries of the packs first, then the spec's own;
    for single values the spec's explicit setting wins, then the last pack that sets it, then the default."""
    packs = load_packs() if packs is None else packs
    unknown = [p for p in policy.packs if p not in packs]
    if unknown:
        raise PackError(f"unknown policy pack(s) {', '.join(unknown)}; known: {', '.join(sorted(packs))}")
    chosen = [packs[p] for p in policy.packs]
    merged: dict[str, object] = {"packs": list(policy.packs)}
    for name in _LISTS:
        items: list[str] = [x for pack in chosen for x in getattr(pack, name)] + list(getattr(policy, name))
        merged[name] = list(dict.fromkeys(items))
    merged["classifier_domains"] = {
        **{name: d for pack in chosen for name, d in pack.classifier_domains.items()},
        **policy.classifier_domains,
    }
    disclaimer: dict[str, str] = {}
    for pack in chosen:
        disclaimer.update(pack.disclaimer)
    merged["disclaimer"] = {**disclaimer, **policy.disclaimer}
    for name in _SCALARS:
        value = getattr(policy, name)
        if name not in policy.model_fields_set:
            for pack in chosen:
                if name in pack.model_fields_set:
                    value = getattr(pack, name)
        merged[name] = value
    return Policy.model_validate(merged)


def all_packs_policy() -> Policy:
    """Every pack at once: what ``veracity screen`` applies when no template is named."""
    return resolve(Policy(packs=sorted(load_packs())))


def escalation_answer(policy: Policy, domain: str | None) -> str:
    """The answer to an escalated question: the template's, unless the template never chose one (it carries the
    default) and a pack covers the question's domain — then that pack's, so a personal legal question asked on any
    template still points to a lawyer."""
    if domain is None or policy.escalation_answer != Policy.model_fields["escalation_answer"].default:
        return policy.escalation_answer
    for pack in load_packs().values():
        if domain in pack.classifier_domains and "escalation_answer" in pack.model_fields_set:
            return pack.escalation_answer
    return policy.escalation_answer
