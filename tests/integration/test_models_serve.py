"""docs/agents.md's commands for any OpenAI-compatible model and for Anthropic, run as written: a real
`agentcron serve` process on a fake server of both APIs (`tests.helpers.fake_llm`) schedules a
reminder from a sentence through the API, and the reminder's fire is a turn on the same model.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path

import httpx
import pytest

from tests.helpers.fake_llm import INPUT_TOKENS, OUTPUT_TOKENS, FakeLLM, fake_llm

PAGE = Path(__file__).resolve().parents[2] / "docs" / "agents.md"
HEADING = "## Any OpenAI-compatible model (Ollama, vLLM, llama.cpp, LiteLLM) and Anthropic"
# The hosts the page names, and what each is in the fake's terms.
HOSTS = ("http://localhost:11434", "https://api.anthropic.com")


def page_commands() -> list[str]:
    """The `agentcron serve` lines of the section's first shell block, as written."""
    section = PAGE.read_text("utf-8").split(HEADING, 1)[1]
    block = re.search(r"```sh\n(.*?)```", section, re.DOTALL)
    assert block is not None, "the section has no shell block"
    return [line for line in block.group(1).splitlines() if line.endswith("agentcron serve")]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_the_page_names_both_apis() -> None:
    commands = page_commands()
    assert len(commands) == 2
    assert "AGENTCRON_MODEL=anthropic:" in commands[1]


def run_command(line: str, fake: FakeLLM, tmp_path: Path) -> tuple[str, dict[str, object]]:
    """Serve `line` (its env assignments, the fake's URL for the page's host) and schedule a
    reminder through the API; returns the model id and the reminder's fired turn.
    """
    *assignments, program, command = shlex.split(line)
    assert (program, command) == ("agentcron", "serve")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AGENTCRON_", "ANTHROPIC_"))}
    for assignment in assignments:
        name, value = assignment.split("=", 1)
        for host in HOSTS:
            value = value.replace(host, fake.url)
        env[name] = value
    model = env["AGENTCRON_MODEL"]
    model_id = model if model.startswith("anthropic:") else f"openai:{model}"
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps({model_id: {"input_per_mtok": 1.0, "output_per_mtok": 2.0}}))
    env |= {"AGENTCRON_HOME": str(tmp_path), "AGENTCRON_PRICES": str(prices)}
    port = free_port()
    script = Path(sys.executable).with_name("agentcron")
    with subprocess.Popen(
        [str(script), "serve", "--port", str(port), "--log-level", "warning"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    ) as proc:  # fmt: skip
        try:
            assert proc.stdout is not None
            lines = []
            for printed in proc.stdout:
                lines.append(printed)
                if printed.startswith("token: "):
                    break
            token = lines[-1].removeprefix("token: ").strip()
            headers = {"Authorization": f"Bearer {token}"}
            with httpx.Client(base_url=f"http://127.0.0.1:{port}", headers=headers) as http:
                key = "api:models"
                assert http.post("/api/sessions", json={"key": key}).status_code == 201
                sent = http.post(f"/api/sessions/{key}/messages",
                                 json={"content": "remind me in 2 seconds to stretch"})  # fmt: skip
                assert sent.status_code == 202, sent.text
                (turn,) = http.get(f"/api/sessions/{key}/turns").json()["turns"]
                done = http.get(f"/api/turns/{turn['id']}?wait=10").json()
                assert done["state"] == "succeeded", done
                assert done["reply"].startswith("Done: Scheduled “stretch”")
                assert done["usage"]["model"] == model_id
                assert done["usage"]["cost_usd"] == pytest.approx(
                    2 * (INPUT_TOKENS + 2 * OUTPUT_TOKENS) / 1e6
                )
                (job,) = http.get(f"/api/jobs?session_key={key}").json()["jobs"]
                assert job["name"] == "stretch"
                assert job["spec"]["kind"] == "at"
                fired: dict[str, object] = {}
                for _ in range(100):  # the fire is 2 s away on the real clock: at most 10 s
                    turns = http.get(f"/api/sessions/{key}/turns").json()["turns"]
                    if len(turns) == 2:
                        fired = http.get(f"/api/turns/{turns[1]['id']}?wait=10").json()
                        break
                    threading.Event().wait(0.1)
                return model_id, fired
        finally:
            proc.send_signal(signal.SIGINT)
            assert proc.wait(15) == 0


@pytest.mark.slow
@pytest.mark.timeout(60)
@pytest.mark.parametrize("index", [0, 1], ids=["openai-compatible", "anthropic"])
def test_the_command_schedules_and_fires_on_the_model(index: int, tmp_path: Path) -> None:
    line = page_commands()[index]
    with fake_llm() as fake:
        model_id, fired = run_command(line, fake, tmp_path)
        api = "anthropic" if model_id.startswith("anthropic:") else "openai"
        assert fired["source"] == "automation"
        assert fired["state"] == "succeeded", fired
        assert str(fired["reply"]).startswith("Handled: [scheduled]")
        requests = fake.of(api)
        assert len(requests) == 3  # the call, the tool's result, the fire
        assert len(fake.requests) == 3  # nothing went to the other API
        history = json.dumps(requests[2].body["messages"], ensure_ascii=False)
        assert "remind me in 2 seconds to stretch" in history
        assert "Done: Scheduled “stretch”" in history
