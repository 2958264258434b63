"""The composition root: ``open_runtime`` assembles the process the server, the CLI and the evals run (migrated
database, bundled corpora, graph, models, run service), and takes it down in order."""

from __future__ import annotations

from pathlib import Path

from conftest import make_settings, sqlite_url
from veracity.db import runs_repo
from veracity.runs.model_set import ModelSet
from veracity.runs.runtime import open_runtime
from veracity.specs.registry import SpecRegistry


async def test_a_runtime_runs_a_question_end_to_end_and_closes_in_order(tmp_path: Path) -> None:
    settings = make_settings(sqlite_url(tmp_path / "runtime.db"), event_delay_ms=0)
    async with open_runtime(settings) as runtime:
        assert runtime.models is None  # nothing built before a run needs it
        service = runtime.service
        assert runtime.service is service and runtime.models is not None and runtime.models.composer is None
        # The parts the web takes from the runtime are the ones the service runs with.
        assert runtime.registry is service.registry and runtime.semantics is service.semantics
        assert type(runtime.providers().judge) is type(service.providers().judge)
        run_id = await service.start(question="How long do I have to ask for a refund?", template="support_answer")
        await service.wait(run_id)
        async with runtime.sessionmaker() as session:
            run = await runs_repo.get_run(session=session, run_id=run_id)
            events = [e.name for e in await runs_repo.events_after(session=session, run_id=run_id)]
            artifact = await runs_repo.latest_artifact(session=session, run_id=run_id)
        # The bundled support corpus answered: a report was stored (shipped, or handed off with its label).
        assert run is not None and run.outcome in ("shipped", "handoff"), (run and run.outcome, run and run.error)
        assert artifact is not None and artifact.report["sections"]
        assert events[0] == "run_started" and events[-1] == "complete"
        other = runtime.service_for(
            registry=SpecRegistry({"support_answer": SpecRegistry.load().get("support_answer")})
        )
        assert other is not service and (other.search, other.graph, other.semantics) == (
            service.search,
            service.graph,
            service.semantics,
        )
        second = await other.start(question="Can I change my plan?", template="support_answer")
        assert other.leases.upkeep_running  # its run keeps a lease
        await other.wait(second)
    assert not service.leases.upkeep_running and not other.leases.upkeep_running  # leases no longer renewed


async def test_a_serving_runtime_renews_leases_from_the_start_and_stops_at_close(tmp_path: Path) -> None:
    settings = make_settings(sqlite_url(tmp_path / "serve.db"))
    async with open_runtime(settings, serve=True, models=ModelSet()) as runtime:
        assert runtime.service.leases.upkeep_running  # the server renews leases from the start
    assert not runtime.service.leases.upkeep_running


async def test_leaving_on_an_error_cancels_running_runs_at_once_and_records_them_interrupted(tmp_path: Path) -> None:
    """Ctrl-C in ``veracity ask`` must not wait for the run: the runtime closes at once and the run is not lost."""
    import time

    import pytest

    from veracity import messages
    from veracity.db.engine import make_engine, make_sessionmaker

    url = sqlite_url(tmp_path / "cancel.db")
    settings = make_settings(url, event_delay_ms=2000)  # every event takes two seconds: a long run
    started = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        async with open_runtime(settings, models=ModelSet()) as runtime:
            run_id = await runtime.service.start(question="How do refunds work?", template="support_answer")
            raise KeyboardInterrupt
    assert time.monotonic() - started < 15  # not the 30 s a clean exit would grant the run
    engine = make_engine(url)
    try:
        async with make_sessionmaker(engine)() as session:
            run = await runs_repo.get_run(session=session, run_id=run_id)
            events = [e.name for e in await runs_repo.events_after(session=session, run_id=run_id)]
    finally:
        await engine.dispose()
    assert run is not None and run.status == "failed" and run.error == messages.RUN_INTERRUPTED
    assert events[-1] == "error"
