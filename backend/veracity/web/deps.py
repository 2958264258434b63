"""Request dependencies as ``Annotated`` aliases; long-lived objects live on ``app.state``, set by the lifespan from
the runtime. A handler takes the parts it needs from here; the run service is for run operations (start, tail)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Annotated, TypeVar

from fastapi import Depends, Request
from fastapi.templating import Jinja2Templates
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from veracity.ports import GroundingJudge
from veracity.runs.service import RunService
from veracity.settings import Settings
from veracity.specs.registry import SpecRegistry
from veracity.web.topology import GraphShape

T = TypeVar("T")


def _part(request: Request, name: str, kind: type[T]) -> T:
    """A long-lived part the lifespan set on ``app.state``, checked to be what it should be."""
    value = getattr(request.app.state, name)
    if not isinstance(value, kind):
        raise TypeError(f"app.state.{name} is a {type(value).__name__}, not a {kind.__name__}")
    return value


def _service(request: Request) -> RunService:
    return _part(request, "service", RunService)


def _settings(request: Request) -> Settings:
    return _part(request, "settings", Settings)


def _templates(request: Request) -> Jinja2Templates:
    return _part(request, "templates", Jinja2Templates)


def _shape(request: Request) -> GraphShape:
    return _part(request, "graph_shape", GraphShape)


def _registry(request: Request) -> SpecRegistry:
    return _part(request, "registry", SpecRegistry)


def _judge(request: Request) -> GroundingJudge:
    # A run's providers are made per run; so is the judge of one /v1/verify request.
    judge: GroundingJudge = request.app.state.providers().judge  # a protocol: checked by its use
    return judge


def _sessionmaker(request: Request) -> async_sessionmaker[AsyncSession]:
    return _part(request, "sessionmaker", async_sessionmaker)


async def _session(request: Request) -> AsyncIterator[AsyncSession]:
    async with request.app.state.sessionmaker() as session:
        yield session


ServiceDep = Annotated[RunService, Depends(_service)]
SettingsDep = Annotated[Settings, Depends(_settings)]
TemplatesDep = Annotated[Jinja2Templates, Depends(_templates)]
ShapeDep = Annotated[GraphShape, Depends(_shape)]
RegistryDep = Annotated[SpecRegistry, Depends(_registry)]
"""The templates the runs of this process use."""
JudgeDep = Annotated[GroundingJudge, Depends(_judge)]
"""The grounding judge runs use: the configured model judge, else the offline one."""
SessionDep = Annotated[AsyncSession, Depends(_session)]
"""The request's short session."""
SessionmakerDep = Annotated[async_sessionmaker[AsyncSession], Depends(_sessionmaker)]
"""For a stream that outlives the request's session: it opens a short session per read."""
