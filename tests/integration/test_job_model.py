"""A job may name the model its turns run on (seed 004: the agent's model, globally and per job)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import timedelta

import httpx
import pytest
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from agentcron.app import AgentCron
from agentcron.domain.states import RunState
from agentcron.server import create_app
from agentcron.testing import FakeClock, wait_settled
from tests.conftest import CronFactory

KEY = "api:models"
TOKEN = "t"
MIN = timedelta(minutes=1)


def default_model() -> FunctionModel:
    def answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        return ModelResponse(parts=[TextPart("the default model answers")])

    async def stream(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[str]:
        yield "the default model answers"

    return FunctionModel(answer, stream_function=stream, model_name="house")


@pytest.fixture
async def app(make_cron: CronFactory) -> AgentCron:
    cron = await make_cron(runner=None, model=default_model())
    await cron.sessions.create(KEY)
    return cron


async def test_a_jobs_model_runs_its_turns_and_others_keep_the_default(
    app: AgentCron, clock: FakeClock
) -> None:
    own = await app.jobs.create(name="own", when="in 1m", message="stretch", session_key=KEY,
                                model="offline")  # fmt: skip
    plain = await app.jobs.create(name="plain", when="in 2m", message="drink", session_key=KEY)
    assert (own.model, plain.model) == ("offline", None)
    assert (await app.jobs.get(own.id)).model == "offline"  # stored
    clock.advance(MIN)
    await wait_settled(app.engine)
    clock.advance(MIN)
    await wait_settled(app.engine)
    (own_run,) = await app.runs.list(own.id)
    (plain_run,) = await app.runs.list(plain.id)
    assert own_run.state is RunState.SUCCEEDED
    assert own_run.output == "(offline model) Reminder: stretch."
    assert own_run.usage is not None
    assert own_run.usage["model"] == "offline"
    assert plain_run.output == "the default model answers"
    assert plain_run.usage is not None
    assert plain_run.usage["model"] == "function:house"
    # No table knows that model: its cost is unknown ("unpriced"), never 0; the offline one is free.
    assert plain_run.usage["cost_usd"] is None
    assert own_run.usage["cost_usd"] == 0.0
    plain_usage = await app.jobs.usage(plain.id)
    assert (plain_usage["counted"], plain_usage["unpriced"], plain_usage["cost_usd"]) == (1, 1, 0.0)
    assert (await app.jobs.usage(own.id))["unpriced"] == 0


async def test_a_model_that_cannot_be_resolved_fails_the_run_with_the_reason(
    app: AgentCron, clock: FakeClock
) -> None:
    job = await app.jobs.create(name="x", when="in 1m", message="m", session_key=KEY,
                                model="no-such-provider:model-9")  # fmt: skip
    clock.advance(MIN)
    await wait_settled(app.engine)
    (run,) = await app.runs.list(job.id)
    assert run.state is RunState.FAILED
    assert run.error is not None
    assert "no-such-provider" in run.error


async def test_the_api_sets_changes_and_clears_a_jobs_model(app: AgentCron) -> None:
    asgi = httpx.ASGITransport(app=create_app(app, token=TOKEN, hook_token="h"))
    headers = {"Authorization": f"Bearer {TOKEN}"}
    async with httpx.AsyncClient(transport=asgi, base_url="http://t", headers=headers) as api:
        body = {"name": "n", "when": "every 1h", "message": "m", "session_key": KEY,
                "model": "openai:gpt-4o"}  # fmt: skip
        created = await api.post("/api/jobs", json=body)
        assert created.status_code == 201, created.text
        job = created.json()
        assert job["model"] == "openai:gpt-4o"
        changed = await api.patch(f"/api/jobs/{job['id']}", json={"model": "offline"})
        assert changed.json()["model"] == "offline"
        untouched = await api.patch(f"/api/jobs/{job['id']}", json={"name": "renamed"})
        assert untouched.json()["model"] == "offline"
        cleared = await api.patch(f"/api/jobs/{job['id']}", json={"model": None})
        assert cleared.json()["model"] is None
        for bad in ("two words", "x" * 201):
            refused = await api.post("/api/jobs", json={**body, "model": bad})
            assert refused.status_code == 422, refused.text
    assert [j.model for j in await app.jobs.list()] == [None]


async def test_a_bad_zone_on_update_is_a_clear_422_not_a_500(app: AgentCron) -> None:
    asgi = httpx.ASGITransport(app=create_app(app, token=TOKEN, hook_token="h"))
    headers = {"Authorization": f"Bearer {TOKEN}"}
    async with httpx.AsyncClient(transport=asgi, base_url="http://t", headers=headers) as api:
        body = {"name": "n", "when": "every 1h", "message": "m", "session_key": KEY}
        job = (await api.post("/api/jobs", json=body)).json()
        for tz in ("Nope/Zone", ""):
            answer = await api.patch(f"/api/jobs/{job['id']}", json={"tz": tz})
            assert answer.status_code == 422, answer.text
            assert answer.json()["error"] == "invalid_schedule"
            assert "unknown time zone" in answer.json()["detail"]
