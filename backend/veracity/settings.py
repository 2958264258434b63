"""Settings: one nested BaseSettings reached through a cached ``get_settings()``.

Every field has a description and a default that works offline. Environment variables use the
``VERACITY_`` prefix and ``__`` between levels, e.g. ``VERACITY_DATABASE__URL``. The README's table and
``.env.example`` are checked against these fields by a test.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

REPO_ROOT = Path(__file__).resolve().parents[2]


class DatabaseSettings(BaseModel):
    url: str = Field(
        default="sqlite+aiosqlite:///./data/veracity.db",
        description="SQLAlchemy async URL. SQLite (aiosqlite) by default; postgresql+asyncpg://… at scale.",
    )
    echo: bool = Field(default=False, description="Log every SQL statement (debugging only).")

    @field_validator("url")
    @classmethod
    def _known_driver(cls, value: str) -> str:
        if not (value.startswith("sqlite+aiosqlite://") or value.startswith("postgresql+asyncpg://")):
            raise ValueError("database url must start with sqlite+aiosqlite:// or postgresql+asyncpg://")
        return value


class ServerSettings(BaseModel):
    host: str = Field(default="127.0.0.1", description="Address `veracity serve` binds to.")
    port: int = Field(default=8000, ge=1, le=65535, description="Port `veracity serve` listens on.")


class CorpusSettings(BaseModel):
    default: str = Field(default="wiki", description="Corpus searched when a run names none.")
    autoload_wiki: bool = Field(
        default=True,
        description="Load the bundled Wikipedia lead sections into the `wiki` corpus when it is empty.",
    )
    chunk_chars: int = Field(
        default=1200, ge=200, le=20000, description="Target passage size when documents are chunked."
    )


class LimitSettings(BaseModel):
    max_question_chars: int = Field(default=2000, ge=10, description="Longest question accepted.")
    search_k: int = Field(default=6, ge=1, le=100, description="Passages fetched per search query.")
    evidence_per_subtask: int = Field(
        default=8, ge=1, le=100, description="Most evidence sentences one retrieve branch keeps."
    )
    claims_per_section: int = Field(
        default=5, ge=1, le=50, description="Most claims the extractive composer writes in one section."
    )
    event_delay_ms: float = Field(
        default=0.0,
        ge=0,
        le=5000,
        description="Pause after each persisted event, to watch a run unfold in demos and live-view tests; 0 = none.",
    )
    sse_ping_seconds: float = Field(default=15.0, gt=0, description="Keep-alive comment interval on SSE streams.")


class ModelSettings(BaseModel):
    provider: Literal["none", "openai"] = Field(
        default="none",
        description=(
            "Who judges and reviews: `none` = the offline lexical judge and rule reviewer only; `openai` = a model "
            "judge (L2) and a model reviewer behind any OpenAI-compatible chat completions endpoint."
        ),
    )
    base_url: str | None = Field(
        default=None,
        description=(
            "OpenAI-compatible API base URL, e.g. `http://127.0.0.1:8080/v1` for a local server; unset = OpenAI's."
        ),
    )
    api_key: str = Field(
        default="not-needed",
        repr=False,
        description="API key sent to the model server (local servers ignore it). Never logged.",
    )
    judge_model: str = Field(default="gpt-4.1-mini", description="Model that labels each claim against its sources.")
    reviewer_model: str = Field(
        default="gpt-4.1-mini", description="Model that reviews a checked draft before it ships."
    )
    timeout_seconds: float = Field(default=30.0, gt=0, le=600, description="Timeout of one model request, in seconds.")
    max_retries: int = Field(
        default=2, ge=0, le=10, description="Retries of a failed model request (rate limits, 5xx, timeouts)."
    )

    @field_validator("base_url")
    @classmethod
    def _http_url(cls, value: str | None) -> str | None:
        value = (value or "").strip()
        if not value:
            return None
        if not value.startswith(("http://", "https://")):
            raise ValueError("model base_url must start with http:// or https://")
        return value


class Settings(BaseSettings):
    """Veracity's configuration. Defaults are fully offline."""

    model_config = SettingsConfigDict(
        env_prefix="VERACITY_",
        env_nested_delimiter="__",
        env_file=".env",
        extra="ignore",
    )

    database: DatabaseSettings = Field(default_factory=DatabaseSettings)
    server: ServerSettings = Field(default_factory=ServerSettings)
    corpus: CorpusSettings = Field(default_factory=CorpusSettings)
    limits: LimitSettings = Field(default_factory=LimitSettings)
    model: ModelSettings = Field(default_factory=ModelSettings)
    log_level: str = Field(default="INFO", description="Python logging level for the server and CLI.")

    @field_validator("log_level")
    @classmethod
    def _level(cls, value: str) -> str:
        value = value.upper()
        if value not in {"DEBUG", "INFO", "WARNING", "ERROR"}:
            raise ValueError("log_level must be DEBUG, INFO, WARNING or ERROR")
        return value


@lru_cache
def get_settings() -> Settings:
    return Settings()


def flat_fields(model: type[BaseModel] = Settings, prefix: str = "VERACITY_") -> list[tuple[str, object, str]]:
    """(ENV_NAME, default, description) for every leaf setting; used by docs tests."""
    rows: list[tuple[str, object, str]] = []
    for name, field in model.model_fields.items():
        annotation = field.annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            rows.extend(flat_fields(annotation, f"{prefix}{name.upper()}__"))
        else:
            rows.append((f"{prefix}{name.upper()}", field.default, field.description or ""))
    return rows
