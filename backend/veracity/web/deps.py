"""Request dependencies as ``Annotated`` aliases; long-lived objects live on ``app.state``."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Annotated

from fastapi import Depends, Request
from fastapi.templating import Jinja2Templates
from sqlalchemy.ext.asyncio import AsyncSession

from veracity.runs.service import RunService
from veracity.settings import Settings
from veracity.web.topology import GraphShape


def _service(request: Request) -> RunService:
    return request.app.state.service


def _settings(request: Request) -> Settings:
    return request.app.state.settings


def _templates(request: Request) -> Jinja2Templates:
    return request.app.state.templates


def _shape(request: Request) -> GraphShape:
    return request.app.state.graph_shape


async def _session(request: Request) -> AsyncIterator[AsyncSession]:
    async with request.app.state.sessionmaker() as session:
        yield session


ServiceDep = Annotated[RunService, Depends(_service)]
SettingsDep = Annotated[Settings, Depends(_settings)]
TemplatesDep = Annotated[Jinja2Templates, Depends(_templates)]
ShapeDep = Annotated[GraphShape, Depends(_shape)]
SessionDep = Annotated[AsyncSession, Depends(_session)]
