"""Over HTTP against a real `agentcron serve --unified`: web chats share one memory (seed 001).

The sessions are created and the messages sent as the web UI does (`POST /api/sessions`,
`POST /api/sessions/{key}/messages`, then the turn long-polled); the offline model answers
"what did I just say" from the history it is given.
"""

from __future__ import annotations

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
