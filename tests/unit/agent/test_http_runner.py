"""The HTTP runner against a local agent of the test's own: the request it signs, and each
answer form and failure as an outcome.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import pytest
from fastapi import FastAPI, Request, Response
from fastapi.responses import PlainTextResponse, StreamingResponse
from standardwebhooks import Webhook

from agentcron.agent.http_runner import (
    HttpRunner,
    RunnerRequest,
    RunnerRoutes,
    RunnerTurnNotFoundError,
    request_of,
    runner_schema,
)
from agentcron.agent.runner import (
    HistoryEntry,
    Outcome,
    OutcomeStatus,
    SessionInfo,
    Trigger,
    TurnInput,
    TurnSource,
)
from agentcron.tokens import new_runner_secret
from tests.helpers.ws import listening

SECRET = new_runner_secret()
SESSION = SessionInfo("chat:1", channel="chat", chat_id="1")
AT = datetime(2026, 1, 2, 3, 4, tzinfo=UTC)


class Events:
    def __init__(self) -> None:
        self.seen: list[dict[str, Any]] = []

    async def emit(self, event: dict[str, Any]) -> None:
        self.seen.append(event)


def sse(*events: tuple[str, dict[str, Any]]) -> StreamingResponse:
    body = "".join(f"event: {name}\ndata: {json.dumps(data)}\n\n" for name, data in events)
    return StreamingResponse(iter([body]), media_type="text/event-stream")


def agent(received: list[tuple[dict[str, str], bytes]]) -> FastAPI:
    app = FastAPI()

    @app.post("/{kind}")
    async def answer(kind: str, request: Request) -> Response:
        received.append((dict(request.headers), await request.body()))
        if kind == "empty":
            return Response(status_code=204)
        if kind == "blank":
            return Response(b'{"text": "  "}', media_type="application/json")
        if kind == "garbled":
            return Response(b'{"text": 5}', media_type="application/json")
        if kind == "teapot":
            return PlainTextResponse("short and stout", status_code=418)
        if kind == "stream":
            return sse(
                ("thinking", {"text": "hm"}),
                ("delta", {"text": "Hel"}),
                ("ping", {}),
                ("tool", {"name": "look", "args": {"q": 1}, "result": "seen"}),
                ("delta", {"text": "lo"}),
                ("done", {"usage": {"input_tokens": 3, "output_tokens": 2, "model": "mine"}}),
            )
        if kind == "error":
            return sse(("delta", {"text": "x"}), ("error", {"message": "out of ideas"}))
        if kind == "cut":
            return sse(("delta", {"text": "x"}))
        return Response(b'{"text": "hi"}', media_type="application/json")

    return app


@pytest.fixture
async def base() -> AsyncIterator[tuple[str, list[tuple[dict[str, str], bytes]]]]:
    received: list[tuple[dict[str, str], bytes]] = []
    async with listening(agent(received)) as port:
        yield f"http://127.0.0.1:{port}", received


def turn(
    prompt: str = "hello", source: TurnSource = TurnSource.USER, turn_id: str = "t-1", **kw: Any
) -> TurnInput:
    return TurnInput(turn_id, source, prompt, now=AT, **kw)


async def test_the_request_is_signed_with_the_turn_id_and_carries_the_turn(
    base: tuple[str, list[tuple[dict[str, str], bytes]]],
) -> None:
    url, received = base
    trigger = Trigger("r-1", "j-1", "stretch", "agent_turn", "chat:1", "stand up", AT)
    history = (HistoryEntry("user", "before", {}, AT), HistoryEntry("assistant", "after"))
    outcome = await HttpRunner(f"{url}/json", SECRET).run_turn(
        SESSION,
        turn(
            trigger=trigger,
            history=history,
            source=TurnSource.AUTOMATION,
            prompt_ref={"id": "cron.agent_turn.reminder", "version": 1, "sha256": "ab"},
        ),
        Events(),
    )
    assert (outcome.status, outcome.text) == (OutcomeStatus.SUCCEEDED, "hi")
    [(headers, body)] = received
    assert headers["webhook-id"] == "t-1"
    assert headers["accept"] == "application/json, text/event-stream"
    sent = Webhook(SECRET).verify(body, headers)
    assert RunnerRequest.model_validate(sent).trigger is not None
    assert sent["run_id"] == "r-1"
    assert sent["source"] == "automation"
    assert sent["trigger"] == {"job_id": "j-1", "name": "stretch", "kind": "agent_turn",
                               "fire_at": AT.isoformat(), "prompt_ref": {
                                   "id": "cron.agent_turn.reminder", "version": 1, "sha256": "ab"}
                               }  # fmt: skip
    assert sent["history"] == [
        {"role": "user", "content": "before", "at": AT.isoformat()},
        {"role": "assistant", "content": "after"},  # when: not known
    ]
    assert sent["system_context"] is None  # null, not absent
    assert "attachments" not in sent  # absent, not null


async def test_a_stream_is_relayed_as_it_comes_and_its_tools_reported(
    base: tuple[str, list[tuple[dict[str, str], bytes]]],
) -> None:
    url, _ = base
    events = Events()
    outcome = await HttpRunner(f"{url}/stream", SECRET).run_turn(SESSION, turn(), events)
    assert (outcome.status, outcome.text) == (OutcomeStatus.SUCCEEDED, "Hello")
    assert outcome.usage == {"input_tokens": 3, "output_tokens": 2, "model": "mine"}
    assert [e["type"] for e in events.seen] == [
        "thinking_delta",
        "text_delta",
        "tool_call",
        "text_delta",
    ]
    [tool] = outcome.tools
    assert (tool.name, tool.args, tool.result, tool.ok) == ("look", {"q": 1}, "seen", True)


@pytest.mark.parametrize(
    ("path", "status", "error"),
    [
        ("empty", OutcomeStatus.EMPTY, None),
        ("blank", OutcomeStatus.EMPTY, None),
        ("garbled", OutcomeStatus.FAILED, "the runner's answer is not the protocol's JSON"),
        ("teapot", OutcomeStatus.FAILED, "the runner answered 418: short and stout"),
        ("error", OutcomeStatus.FAILED, "out of ideas"),
        ("cut", OutcomeStatus.FAILED, "the runner's stream ended without a done event"),
    ],
)
async def test_each_other_answer_is_an_outcome(
    base: tuple[str, list[tuple[dict[str, str], bytes]]],
    path: str,
    status: OutcomeStatus,
    error: str | None,
) -> None:
    url, _ = base
    outcome = await HttpRunner(f"{url}/{path}", SECRET).run_turn(SESSION, turn(), Events())
    assert (outcome.status, outcome.error) == (status, error)


async def test_at_most_concurrency_requests_are_open_to_the_url() -> None:
    release, arrived = asyncio.Event(), asyncio.Event()
    app = FastAPI()

    @app.post("/held")
    async def held() -> dict[str, str]:
        arrived.set()
        await release.wait()
        return {"text": "hi"}

    async with listening(app) as port:
        runner = HttpRunner(f"http://127.0.0.1:{port}/held", SECRET, concurrency=1)
        first = asyncio.ensure_future(runner.run_turn(SESSION, turn(), Events()))
        await asyncio.wait_for(arrived.wait(), 5)
        arrived.clear()
        second = asyncio.ensure_future(runner.run_turn(SESSION, turn(turn_id="t-2"), Events()))
        done, _ = await asyncio.wait({second}, timeout=0.2)  # it waits for the first's answer
        assert not done
        assert not arrived.is_set()
        release.set()
        outcomes = await asyncio.gather(first, second)
    assert [o.text for o in outcomes] == ["hi", "hi"]
    assert arrived.is_set()  # the second went once the first was answered


async def test_a_refused_connection_is_a_failure_once_the_retries_are_spent() -> None:
    runner = HttpRunner("http://127.0.0.1:1/turn", SECRET, retries=0)
    outcome = await runner.run_turn(SESSION, turn(), Events())
    assert outcome.status is OutcomeStatus.FAILED
    assert outcome.error is not None
    assert outcome.error.startswith("the runner could not be reached")
    assert outcome.error_details == {"url": "http://127.0.0.1:1/turn", "attempts": 1}


async def test_an_approval_is_asked_only_for_a_turn_whose_request_is_open() -> None:
    runner = HttpRunner("http://127.0.0.1:1/turn", SECRET)
    with pytest.raises(RunnerTurnNotFoundError, match="t-9"):
        await runner.ask(turn_id="t-9", tool="shell", args={})


class Default:
    """The process's runner: says so."""

    async def run_turn(self, session: SessionInfo, turn: TurnInput, events: Events) -> Outcome:
        return Outcome.succeeded("the default")


async def test_routes_send_a_turn_with_its_own_url_there_and_the_rest_to_the_default(
    base: tuple[str, list[tuple[dict[str, str], bytes]]],
) -> None:
    url, received = base
    routes = RunnerRoutes(Default(), SECRET, retries=0)
    assert (await routes.run_turn(SESSION, turn(), Events())).text == "the default"
    assert not received
    own = await routes.run_turn(SESSION, turn(runner_url=f"{url}/json"), Events())
    assert own.text == "hi"
    assert len(received) == 1
    assert routes.runner_for(f"{url}/json") is routes.runner_for(f"{url}/json")  # one per URL
    with pytest.raises(RunnerTurnNotFoundError):
        await routes.ask(turn_id="t-1", tool="shell", args={})  # its request is closed


async def test_routes_without_a_secret_fail_a_turn_with_its_own_url() -> None:
    routes = RunnerRoutes(Default(), None)
    outcome = await routes.run_turn(SESSION, turn(runner_url="http://127.0.0.1:1/t"), Events())
    assert outcome.status is OutcomeStatus.FAILED
    assert outcome.error is not None
    assert "secret" in outcome.error


def test_bad_settings_are_refused() -> None:
    with pytest.raises(ValueError, match="http"):
        HttpRunner("ftp://x", SECRET)
    with pytest.raises(ValueError, match="concurrency"):
        HttpRunner("http://x", SECRET, concurrency=0)
    with pytest.raises(ValueError, match="secret"):
        HttpRunner("http://x", "whsec_!!not base64!!")


def test_the_schema_names_every_answer_form() -> None:
    schema = runner_schema()
    assert set(schema["answer"]) == {"json", "sse"}
    assert set(schema["answer"]["sse"]) == {"delta", "thinking", "tool", "done", "error"}
    assert schema["request"]["properties"]["turn_id"]["type"] == "string"
    assert request_of(SESSION, turn()).history is None
