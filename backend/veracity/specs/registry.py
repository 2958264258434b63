"""The spec registry: every ``*.yaml`` in the bundled folder (and any extra folders), validated at load."""

from __future__ import annotations

import hashlib
from pathlib import Path

import yaml
from pydantic import ValidationError

from veracity import messages
from veracity.errors import BadInput
from veracity.inputs import read_yaml
from veracity.specs.models import Spec
from veracity.specs.policy import PackError, resolve

BUNDLED = Path(__file__).parent / "data"


class SpecError(ValueError):
    """A spec file is malformed; raised at load time, never mid-run."""


class SpecRegistry:
    def __init__(self, specs: dict[str, Spec]) -> None:
        self._specs = dict(sorted(specs.items()))

    @classmethod
    def load(cls, *folders: Path) -> SpecRegistry:
        specs: dict[str, Spec] = {}
        for folder in folders or (BUNDLED,):
            for path in sorted(folder.glob("*.yaml")):
                spec = load_spec_file(path)
                if spec.id in specs:
                    raise SpecError(f"{path}: spec id '{spec.id}' is defined twice")
                specs[spec.id] = spec
        return cls(specs)

    def get(self, spec_id: str) -> Spec:
        try:
            return self._specs[spec_id]
        except KeyError:
            raise BadInput(messages.TEMPLATE_UNKNOWN.format(template=spec_id, known=", ".join(self._specs))) from None

    def ids(self) -> list[str]:
        return list(self._specs)

    def all(self) -> list[Spec]:
        return list(self._specs.values())


_LOADED: dict[tuple[Path, str], Spec] = {}
"""Templates read by this process, by the path they were read at and their bytes' SHA-256."""


def load_spec_file(path: Path) -> Spec:
    """A template file, validated and its policy packs resolved; parsed once per process while its bytes stay the
    same (every app and CLI run loads the registry, and parsing and validating one costs about 0.1 s; reading and
    hashing it, well under a millisecond). A file that fails is read again next time."""
    raw = path.read_bytes()
    key = (path.absolute(), hashlib.sha256(raw).hexdigest())
    if (spec := _LOADED.get(key)) is None:
        spec = _LOADED[key] = _read_spec_file(path, raw)
    return spec


def _read_spec_file(path: Path, raw: bytes) -> Spec:
    try:
        data = read_yaml(raw.decode("utf-8"))
    except yaml.YAMLError as exc:
        raise SpecError(f"{path}: not valid YAML: {exc}") from exc
    if not isinstance(data, dict):
        raise SpecError(f"{path}: a spec file holds one mapping")
    try:
        spec = Spec.model_validate(data)
    except ValidationError as exc:
        raise SpecError(f"{path}: {exc}") from exc
    if spec.id != path.stem:
        raise SpecError(f"{path}: spec id '{spec.id}' does not match the file name")
    try:
        return spec.model_copy(update={"policy": resolve(spec.policy)})
    except PackError as exc:
        raise SpecError(f"{path}: {exc}") from exc
