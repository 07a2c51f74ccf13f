"""Settings that depend on the backend: a PostgreSQL store claims further ahead by default."""

from __future__ import annotations

from datetime import timedelta

import pytest

from agentcron.app import AgentCron
from agentcron.config import PG_CLAIM_AHEAD, EngineSettings


async def _runner(trigger: object) -> str:
    return "ok"


@pytest.mark.parametrize("cron_backend", ["sqlite", "postgresql"], indirect=True)
def test_the_default_claim_ahead_follows_the_backend(cron_url: str) -> None:
    cron = AgentCron(url=cron_url, runner=_runner)
    expected = PG_CLAIM_AHEAD if cron.store.dialect == "postgresql" else timedelta(milliseconds=25)
    assert cron.settings.claim_ahead == expected
    assert cron.engine.settings.claim_ahead == expected
    own = AgentCron(url=cron_url, runner=_runner, settings=EngineSettings(claim_ahead=timedelta(0)))
    assert own.settings.claim_ahead == timedelta(0)  # a value of one's own is kept


@pytest.fixture
def cron_backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)
