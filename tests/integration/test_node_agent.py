"""examples/node_agent as a real Node process: it verifies a turn signed the way agentcron's HTTP
runner signs it (Standard Webhooks, /work/briefs/wire27.md), refuses a forged one, and answers
both forms (JSON, Server-Sent Events).
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
from standardwebhooks import Webhook

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "node_agent"
NODE, NPM = shutil.which("node"), shutil.which("npm")
SECRET = "whsec_" + base64.b64encode(b"node-agent-test-key-of-32-bytes!").decode()
RUNNER_ACCEPT = "application/json, text/event-stream"  # what the runner sends with every turn

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(NODE is None or NPM is None, reason="needs node and npm on PATH"),
]


@dataclass
class Answer:
    status: int
    form: str  # "json" | "sse" | "" (an error)
    text: str | None = None
    usage: dict[str, Any] | None = None
    events: list[tuple[str, dict[str, Any]]] = field(default_factory=list)


def sse_events(raw: str) -> list[tuple[str, dict[str, Any]]]:
    """`event:` / `data:` blocks of a text/event-stream body, each data parsed as JSON."""
    events = []
    for block in raw.replace("\r\n", "\n").split("\n\n"):
        fields = dict(line.split(": ", 1) for line in block.splitlines() if ": " in line)
        if "event" in fields:
            events.append((fields["event"], json.loads(fields.get("data", "{}"))))
    return events


def run_turn(url: str, secret: str, turn: dict[str, Any], accept: str = RUNNER_ACCEPT) -> Answer:
    """One turn sent to the agent at `url` the way agentcron's HTTP runner sends it, and its
    answer read per the wire protocol's two forms. (To swap for the runner itself once it is
    merged: run `turn` through it with `runner_secret=secret` and return its outcome.)
    """
    body = json.dumps(turn, ensure_ascii=False, separators=(",", ":"))
    now = datetime.now(UTC)
    headers = {
        "content-type": "application/json",
        "accept": accept,
        "webhook-id": turn["turn_id"],
        "webhook-timestamp": str(int(now.timestamp())),
        "webhook-signature": Webhook(secret).sign(turn["turn_id"], now, body),
    }
    response = httpx.post(url, content=body.encode(), headers=headers, timeout=10)
    kind = response.headers.get("content-type", "").split(";")[0]
    if response.status_code >= 300:
        return Answer(response.status_code, "")
    if kind == "text/event-stream":
        events = sse_events(response.text)
        done = next(data for event, data in events if event == "done")
        deltas = "".join(data["text"] for event, data in events if event == "delta")
        return Answer(200, "sse", done.get("text", deltas), done.get("usage"), events)
    data = response.json()
    return Answer(response.status_code, "json", data.get("text"), data.get("usage"))


@pytest.fixture(scope="module")
def agent(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The example installed into a temp copy (npm; its cache when offline) and started: its URL."""
    assert NODE is not None
    assert NPM is not None
    home = tmp_path_factory.mktemp("node_agent") / "agent"
    shutil.copytree(EXAMPLE, home, ignore=shutil.ignore_patterns("node_modules"))
    subprocess.run(
        [NPM, "install", "--prefer-offline", "--no-audit", "--no-fund", "--loglevel=error"],
        cwd=home, check=True, timeout=120, capture_output=True,
    )  # fmt: skip
    env = {**os.environ, "PORT": "0", "AGENTCRON_RUNNER_SECRET": SECRET}
    with subprocess.Popen(
        [NODE, "server.js"], cwd=home, env=env, stdout=subprocess.PIPE, text=True
    ) as proc:
        try:
            assert proc.stdout is not None
            line = proc.stdout.readline()  # printed once it listens
            assert line.startswith("listening on http://127.0.0.1:"), line
            yield line.removeprefix("listening on ").strip()
        finally:
            proc.terminate()
            proc.wait(10)


def a_turn(prompt: str, **extra: Any) -> dict[str, Any]:
    return {
        "session_key": "websocket:abc", "turn_id": "01JTURNNODEAGENT0000000001", "run_id": None,
        "source": "user", "prompt": prompt, "trigger": None, "system_context": None,
        "history": [{"role": "user", "content": "before", "at": "2026-11-26T01:00:00+00:00"}],
    } | extra  # fmt: skip


@pytest.mark.timeout(180)  # the first test waits for npm install
def test_a_signed_turn_is_answered_as_sse_to_the_runner_and_as_json_when_only_json_is_asked(
    agent: str,
) -> None:
    trigger = {"job_id": "job_1", "name": "morning", "fire_at": "2026-11-26T07:00:00+00:00",
               "prompt_ref": {}}  # fmt: skip
    streamed = run_turn(agent, SECRET, a_turn("good morning ☀", source="automation",
                                              trigger=trigger))  # fmt: skip
    assert (streamed.status, streamed.form) == (200, "sse")
    assert streamed.text == "[morning] You said: good morning ☀"
    assert [event for event, _ in streamed.events] == ["delta"] * 6 + ["done"]
    assert streamed.usage == {"input_tokens": 14, "output_tokens": 34}

    plain = run_turn(agent, SECRET, a_turn("hi"), accept="application/json")
    assert (plain.status, plain.form, plain.text) == (200, "json", "You said: hi")
    assert plain.usage == {"input_tokens": 2, "output_tokens": 12}


def test_a_forged_turn_is_refused(agent: str) -> None:
    forged = "whsec_" + base64.b64encode(b"not-the-runner-secret-32-bytes!!").decode()
    assert run_turn(agent, forged, a_turn("hi")) == Answer(401, "")
    # and a signature whose timestamp is more than 5 minutes old
    body = json.dumps(a_turn("hi"))
    then = datetime.fromtimestamp(datetime.now(UTC).timestamp() - 600, UTC)
    stale = {"webhook-id": "01JTURNNODEAGENT0000000001",
             "webhook-timestamp": str(int(then.timestamp())),
             "webhook-signature": Webhook(SECRET).sign("01JTURNNODEAGENT0000000001", then, body),
             "content-type": "application/json"}  # fmt: skip
    assert httpx.post(agent, content=body, headers=stale, timeout=10).status_code == 401


async def test_the_http_runner_runs_a_turn_on_the_node_agent(agent: str) -> None:
    from agentcron.agent.http_runner import HttpRunner
    from agentcron.agent.runner import SessionInfo, TurnInput, TurnSource

    seen: list[dict[str, Any]] = []

    class Events:
        async def emit(self, event: dict[str, Any]) -> None:
            seen.append(event)

    turn = TurnInput("01JTURNNODEAGENT0000000002", TurnSource.USER, "hello there")
    outcome = await HttpRunner(agent, SECRET).run_turn(SessionInfo("websocket:abc"), turn, Events())
    assert outcome.text == "You said: hello there"
    assert "".join(e["text"] for e in seen if e["type"] == "text_delta") == outcome.text
    assert len(seen) > 1  # streamed in pieces
    assert outcome.usage == {"input_tokens": 11, "output_tokens": 21}
