"""The model side of runs, from settings: who drafts, who judges, who reviews (one client and one circuit
shared)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from veracity.models.local import MODEL_ALIAS, LocalModelServer
from veracity.ports import Composer, GroundingJudge, Planner, Reviewer
from veracity.settings import Settings

if TYPE_CHECKING:
    import openai

    from veracity.runs.providers import Providers


@dataclass
class ModelSet:
    composer: Composer | None = None
    judge: GroundingJudge | None = None
    reviewer: Reviewer | None = None
    planner: Planner | None = None
    clients: list[openai.AsyncOpenAI] = field(default_factory=list)
    local: LocalModelServer | None = None

    def providers(self) -> Providers:
        """A run's providers: these models, and the offline composer and judge for roles without one."""
        from veracity.compose.extractive import ExtractiveComposer
        from veracity.guards.judge import make_judge
        from veracity.runs.providers import Providers

        return Providers(
            composer=self.composer or ExtractiveComposer(),
            judge=self.judge or make_judge(),
            reviewer=self.reviewer,
            planner=self.planner,
        )

    async def aclose(self) -> None:
        for client in self.clients:
            await client.close()
        if self.local is not None:
            self.local.stop()


def build_models(settings: Settings) -> ModelSet:
    """Nothing for ``extractive``; for ``openai`` a model composer, judge and reviewer behind one client; for
    ``local`` the same after starting the bundled model on 127.0.0.1 (every role is that model)."""
    cfg = settings.model
    if cfg.provider == "extractive":
        return ModelSet()
    local = None
    if cfg.provider == "local":
        local = LocalModelServer().start()
        cfg = cfg.model_copy(
            update={
                "base_url": local.base_url,
                "composer_model": MODEL_ALIAS,
                "judge_model": MODEL_ALIAS,
                "reviewer_model": MODEL_ALIAS,
                "planner_model": MODEL_ALIAS,
                "composer_max_tokens": min(cfg.composer_max_tokens, cfg.local_max_tokens),
            }
        )
    from veracity.compose.model import CONTRACT_SCHEMA, ModelComposer
    from veracity.guards.model import ModelJudge, ModelReviewer
    from veracity.models.chat import DEFAULT_MAX_TOKENS, ChatModel, client
    from veracity.models.usage import Circuit

    answer_cap = cfg.local_max_tokens if local is not None else DEFAULT_MAX_TOKENS
    shared = client(
        cfg.base_url, cfg.api_key, cfg.timeout_seconds, cfg.max_retries, connect_timeout=cfg.connect_timeout_seconds
    )
    # One server, one circuit: failures seen by any role count for every role.
    circuit = Circuit()
    composer = ModelComposer(
        prose=ChatModel(
            cfg.composer_model, shared, role="composer", max_tokens=cfg.composer_max_tokens, circuit=circuit
        ),
        contract=ChatModel(
            cfg.composer_model,
            shared,
            "answer",
            CONTRACT_SCHEMA,
            role="composer",
            max_tokens=cfg.composer_max_tokens,
            circuit=circuit,
        ),
        refine=cfg.refine,
    )
    from veracity.compose.planner import ModelPlanner

    planner = ModelPlanner(
        ChatModel(cfg.planner_model, shared, "plan", role="planner", max_tokens=answer_cap, circuit=circuit)
    )
    return ModelSet(
        planner=planner,
        composer=composer,
        judge=ModelJudge(
            cfg.judge_model,
            client=shared,
            max_tokens=answer_cap,
            circuit=circuit,
            # The bundled server has one slot: calls sent at once would only queue there, their timeouts running.
            concurrency=1 if local is not None else cfg.judge_concurrency,
        ),
        reviewer=ModelReviewer(cfg.reviewer_model, client=shared, max_tokens=answer_cap, circuit=circuit),
        clients=[shared],
        local=local,
    )
