"""A runner URL per session and per job: their turns go to their own agent over HTTP (a real
server of the tests'), the other turns to the process's runner (the built-in offline agent).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI, Request
from standardwebhooks import Webhook
from typer.testing import CliRunner

from agentcron.agent.offline import OfflineModel
from agentcron.app import AgentCron
from agentcron.cli import app as cli_app
from agentcron.domain.states import RunState, TurnState
from agentcron.server import create_app
from agentcron.server.serve import ServeOptions, build
from agentcron.tokens import new_runner_secret
from tests.conftest import BACKENDS, CronFactory
from tests.helpers.ws import TOKEN, listening

pytestmark = pytest.mark.slow

SECRET = new_runner_secret()
AUTH = {"Authorization": f"Bearer {TOKEN}"}


def own_agent(name: str, bodies: list[dict[str, Any]]) -> FastAPI:
    """An agent that checks the signature, keeps each request and answers with its name."""
    app = FastAPI()
    signed = Webhook(SECRET)

    @app.post("/turn")
    async def turn(request: Request) -> dict[str, str]:
        raw = await request.body()
        body = signed.verify(raw, dict(request.headers))
        bodies.append(body)
        return {"text": f"{name} answered {body['turn_id']}"}

    return app


@asynccontextmanager
async def agent(name: str) -> AsyncIterator[tuple[str, list[dict[str, Any]]]]:
    bodies: list[dict[str, Any]] = []
    async with listening(own_agent(name, bodies)) as port:
        yield f"http://127.0.0.1:{port}/turn", bodies


async def offline_cron(make_cron: CronFactory) -> AgentCron:
    """The built-in agent (offline model) runs the turns; the secret signs the own URLs."""
    return await make_cron(runner=None, model=OfflineModel(0), runner_secret=SECRET)


async def _said(cron: AgentCron, key: str, text: str) -> str:
    turn = await cron.sessions.send(key, text)
    done = await cron.sessions.wait_turn(turn.id, 10)
    assert done.state is TurnState.SUCCEEDED, done.error
    return [m.content for m in await cron.sessions.messages(key)][-1]


@pytest.mark.parametrize("cron_backend", BACKENDS)
async def test_a_session_with_its_own_url_runs_its_turns_there_and_another_does_not(
    make_cron: CronFactory,
) -> None:
    async with agent("mine") as (url, bodies):
        cron = await offline_cron(make_cron)
        own = await cron.sessions.create("api:own", runner_url=url)
        assert own.runner_url == url
        assert (await cron.sessions.get("api:own")).runner_url == url  # stored
        await cron.sessions.create("api:plain")

        answer = await _said(cron, "api:own", "hello")
        assert answer.startswith("mine answered ")
        [sent] = bodies
        assert sent["session_key"] == "api:own"
        assert sent["prompt"] == "hello"

        other = await _said(cron, "api:plain", "hello")
        assert not other.startswith("mine answered")  # the built-in agent
        assert len(bodies) == 1


@pytest.mark.parametrize("cron_backend", BACKENDS)
async def test_a_job_with_its_own_url_fires_there_while_its_session_does_not(
    make_cron: CronFactory,
) -> None:
    async with agent("job's") as (job_url, job_bodies), agent("session's") as (url, bodies):
        cron = await offline_cron(make_cron)
        await cron.sessions.create("api:ops", runner_url=url)
        job = await cron.jobs.create(
            name="check", when="in 1h", message="check it", session_key="api:ops",
            runner_url=job_url,
        )  # fmt: skip
        assert (await cron.jobs.get(job.id)).runner_url == job_url
        run = await cron.runs.wait((await cron.runs.run_now(job.id)).id, 10)
        assert run.state is RunState.SUCCEEDED, run.error
        assert run.output is not None
        assert run.output.startswith("job's answered ")
        [fired] = job_bodies
        assert fired["trigger"]["job_id"] == job.id

        answer = await _said(cron, "api:ops", "and you?")
        assert answer.startswith("session's answered ")  # the session's own, not the job's
        assert len(job_bodies) == 1
        [said] = bodies
        assert said["prompt"] == "and you?"

        # Back to the session's runner once the job's URL is taken away.
        await cron.jobs.update(job.id, runner_url=None)
        run = await cron.runs.wait((await cron.runs.run_now(job.id)).id, 10)
        assert run.output is not None
        assert run.output.startswith("session's answered ")
        assert len(job_bodies) == 1


async def test_the_api_sets_shows_and_refuses_runner_urls(make_cron: CronFactory) -> None:
    cron = await offline_cron(make_cron)
    async with (
        listening(create_app(cron, token=TOKEN)) as port,
        httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", headers=AUTH) as client,
    ):
        for bad in (
            "ftp://agent.example/turn",
            "not a url",
            "http:///turn",
            "http://a/" + "x" * 2100,
        ):
            for path, body in (
                ("/api/sessions", {"key": "api:bad", "runner_url": bad}),
                ("/api/jobs", {"session_key": "api:x", "name": "n", "message": "m",
                               "when": "in 1h", "runner_url": bad}),
            ):  # fmt: skip
                answer = await client.post(path, json=body)
                assert answer.status_code == 422, (bad, answer.text)
                assert "runner_url" in answer.text

        url = "https://agent.example/turn"
        made = await client.post("/api/sessions", json={"key": "api:x", "runner_url": url})
        assert made.status_code == 201
        assert made.json()["runner_url"] == url
        again = await client.post("/api/sessions", json={"key": "api:x", "runner_url": url + "2"})
        assert again.status_code == 409
        assert (await client.get("/api/sessions/api:x")).json()["runner_url"] == url

        job = await client.post(
            "/api/jobs", json={"session_key": "api:x", "name": "n", "message": "m", "when": "in 1h"}
        )
        assert job.status_code == 201
        assert job.json()["runner_url"] is None
        path = f"/api/jobs/{job.json()['id']}"
        patched = await client.patch(path, json={"runner_url": "http://10.0.0.1:8080/turn"})
        assert patched.json()["runner_url"] == "http://10.0.0.1:8080/turn"
        refused = await client.patch(path, json={"runner_url": "gopher://x"})
        assert refused.status_code == 422
        cleared = await client.patch(path, json={"runner_url": None})
        assert cleared.json()["runner_url"] is None


def test_serve_keeps_a_secret_for_own_urls_when_the_built_in_agent_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("AGENTCRON_RUNNER_SECRET", raising=False)
    monkeypatch.delenv("AGENTCRON_RUNNER_URL", raising=False)
    server = build(ServeOptions(db=tmp_path / "a.db", home=tmp_path, model=OfflineModel(0)))
    routes = server.cron.http_runner
    assert routes is not None  # the approval callback answers the own URLs' agents
    assert routes.main is None  # the built-in agent runs the other turns
    assert routes.secret == (tmp_path / "runner_secret").read_text().strip()


def test_the_cli_flags_set_runner_urls(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENTCRON_HOME", str(tmp_path))
    for name in ("AGENTCRON_TOKEN", "AGENTCRON_URL", "AGENTCRON_DB"):
        monkeypatch.delenv(name, raising=False)
    db = str(tmp_path / "cli.db")
    cli = CliRunner()

    def run(*args: str) -> Any:
        return cli.invoke(cli_app, [*args, "--db", db], catch_exceptions=False)

    url = "http://127.0.0.1:9/turn"
    made = run("sessions", "add", "api:ops", "--runner-url", url, "--json")
    assert made.exit_code == 0, made.output
    assert json.loads(made.stdout)["runner_url"] == url
    added = run("jobs", "add", "--session", "api:ops", "--name", "n", "--message", "m",
                "--when", "in 1h", "--runner-url", url + "/job", "--json")  # fmt: skip
    assert added.exit_code == 0, added.output
    assert json.loads(added.stdout)["runner_url"] == url + "/job"
    bad = run("sessions", "add", "api:bad", "--runner-url", "ftp://x")
    assert bad.exit_code != 0
    assert "runner_url" in bad.output
    bad = run("jobs", "add", "--session", "api:ops", "--name", "n", "--message", "m",
              "--when", "in 1h", "--runner-url", "nope")  # fmt: skip
    assert bad.exit_code != 0
    assert "runner_url" in bad.output
