"""Domain trust: a data table of host suffixes, bundled and upgradeable per deployment (see the YAML file)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path

from veracity.errors import BadInput
from veracity.inputs import read_yaml


@dataclass(frozen=True)
class DomainTrust:
    default: float
    domains: dict[str, float]

    def of(self, host: str) -> float:
        """Trust of ``host``: the longest matching suffix in the table, else the default."""
        labels = host.lower().strip(".").split(".")
        for i in range(len(labels)):
            suffix = ".".join(labels[i:])
            if suffix in self.domains:
                return self.domains[suffix]
        return self.default


def _read(text: str, origin: str) -> dict[str, object]:
    data = read_yaml(text) or {}
    if not isinstance(data, dict) or not isinstance(data.get("domains", {}), dict):
        raise BadInput(f"domain trust file {origin} must be a mapping with a `domains` mapping")
    for host, value in data.get("domains", {}).items():
        if not isinstance(value, int | float) or not 0.0 <= float(value) <= 1.0:
            raise BadInput(f"domain trust of {host} in {origin} must be a number from 0 to 1")
    return data


@lru_cache(maxsize=8)
def load_domain_trust(override: str | None = None) -> DomainTrust:
    """The bundled table, with ``override`` (a YAML path of the same shape) merged over it."""
    bundled = _read(resources.files("veracity.rank").joinpath("data/domain_trust.yaml").read_text(), "bundled")
    domains = {str(k).lower(): float(v) for k, v in dict(bundled["domains"]).items()}  # type: ignore[call-overload]
    default = float(bundled.get("default", 0.5))  # type: ignore[arg-type]
    if override:
        path = Path(override)
        if not path.is_file():
            raise BadInput(f"domain trust file not found: {override}")
        extra = _read(path.read_text(encoding="utf-8"), str(path))
        domains.update({str(k).lower(): float(v) for k, v in dict(extra.get("domains", {})).items()})  # type: ignore[call-overload]
        default = float(extra.get("default", default))  # type: ignore[arg-type]
    return DomainTrust(default=default, domains=domains)
