"""Over HTTP against a real `agentcron serve --unified`: web chats share one memory (seed 001).

The sessions are created and the messages sent as the web UI does (`POST /api/sessions`,
`POST /api/sessions/{key}/messages`, then the turn long-polled); the offline model answers
"what did I just say" from the history it is given. Turns of the one memory never overlap, and
a shared automation's reply lands in the thread the person last talked in.
"""

from __future__ import annotations

import itertools
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.integration.test_serve_stop import Serve

pytestmark = [pytest.mark.slow, pytest.mark.timeout(90)]


def say(http: httpx.Client, key: str, content: str) -> dict[str, Any]:
    """Send a chat message as the web UI does and wait for the turn's reply."""
    sent = http.post(f"/api/sessions/{key}/messages", json={"content": content})
    assert sent.status_code == 202, sent.text
    turn: dict[str, Any] = http.get(
        f"/api/turns/{sent.json()['turn_id']}", params={"wait": 30}
    ).json()
    assert turn["state"] == "succeeded", turn
    messages = http.get(f"/api/sessions/{key}/messages").json()["messages"]
    (reply,) = [m for m in messages if m["id"] == turn["reply_message_id"]]
    return dict(reply)


def code_word_then_question(tmp_path: Path, *args: str) -> tuple[str, list[str]]:
    serve = Serve(tmp_path, args=args, wps="0")
    try:
        http = serve.client
        for key in ("websocket:a", "websocket:b"):
            created = http.post("/api/sessions", json={"key": key, "tz": "UTC"})
            assert created.status_code == 201, created.text
        say(http, "websocket:a", "the code word is walrus")
        answer = say(http, "websocket:b", "what did I just say")
        shown = [m["content"] for m in http.get("/api/sessions/websocket:b/messages").json()[
            "messages"]]  # fmt: skip
        return str(answer["content"]), shown
    finally:
        serve.close()


def test_unified_web_chats_share_memory_over_http(tmp_path: Path) -> None:
    answer, shown = code_word_then_question(tmp_path, "--unified")
    assert answer == '(offline model) Before this you said: "the code word is walrus"'
    # the thread still shows only its own entries
    assert shown == ["what did I just say", answer]


def test_without_unified_a_chat_does_not_know_another_chats_words(tmp_path: Path) -> None:
    answer, _ = code_word_then_question(tmp_path)
    assert "walrus" not in answer
    assert answer == "(offline model) You have not said anything before this in this session."


def _turn(http: httpx.Client, key: str, content: str) -> str:
    sent = http.post(f"/api/sessions/{key}/messages", json={"content": content})
    assert sent.status_code == 202, sent.text
    return str(sent.json()["turn_id"])


def _ended(http: httpx.Client, turn_id: str) -> dict[str, Any]:
    turn: dict[str, Any] = http.get(f"/api/turns/{turn_id}", params={"wait": 30}).json()
    assert turn["state"] == "succeeded", turn
    return turn


def _no_overlap(turns: list[dict[str, Any]]) -> None:
    spans = sorted((t["started_at"], t["finished_at"]) for t in turns)
    for (_, end), (start, _) in itertools.pairwise(spans):
        assert datetime.fromisoformat(end) <= datetime.fromisoformat(start), spans


def test_unified_turns_never_overlap_and_a_shared_fire_replies_in_the_last_thread(
    tmp_path: Path,
) -> None:
    serve = Serve(tmp_path, args=("--unified",), wps="8")  # each reply takes about a second
    try:
        http = serve.client
        for key in ("websocket:a", "websocket:b"):
            created = http.post("/api/sessions", json={"key": key, "tz": "UTC"})
            assert created.status_code == 201, created.text
        # two threads at once: the second thread's turn waits for the first's end
        first = _turn(http, "websocket:a", "the code word is walrus")
        second = _turn(http, "websocket:b", "what did I just say")
        _no_overlap([_ended(http, first), _ended(http, second)])
        # an automation made from a thread binds to the shared session ...
        body = {"session_key": "websocket:b", "name": "digest", "message": "summarise",
                "when": "in 2 seconds"}  # fmt: skip
        job = http.post("/api/jobs", json=body)
        assert job.status_code == 201, job.text
        assert job.json()["session_key"] == "unified:default"
        # ... and the person then talks in thread a: the fire's turn runs there, after it
        _ended(http, _turn(http, "websocket:a", "what did I just say"))
        deadline = time.monotonic() + 30
        runs: list[dict[str, Any]] = []
        while not any(r["state"] == "succeeded" for r in runs):
            assert time.monotonic() < deadline, runs
            time.sleep(0.05)  # polls the run's state (no event to wait on across processes)
            runs = http.get(f"/api/jobs/{job.json()['id']}/runs").json()["runs"]
        shown = http.get("/api/sessions/websocket:a/messages").json()["messages"]
        assert shown[-2]["content"] == "Scheduled automation triggered: digest\n\nsummarise"
        assert shown[-1]["role"] == "assistant"
        assert http.get("/api/sessions/unified:default/messages").json()["messages"] == []
        assert [t["source"] for t in serve.turns("websocket:a")][-1] == "automation"
        _no_overlap([*serve.turns("websocket:a"), *serve.turns("websocket:b")])
    finally:
        serve.close()
