"""A job's pre-check gate through REST and the library, on SQLite and PostgreSQL: real
subprocesses (exit codes, a timeout, output past its bound), an HTTP GET against a real local
server, a Python entry point; a gated-out fire is a `skipped` run without a transcript entry
(unless a notice is asked for), the gate's output reaches the prompt, a `no_llm` job is the
gate alone; requests out of bounds, or a code gate where the setting is off, are a 422.
"""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import AsyncIterator, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest

from agentcron.app import AgentCron
from agentcron.config.engine import EngineSettings
from agentcron.domain.gates import MAX_TIMEOUT_S
from agentcron.server import create_app
from agentcron.testing import wait_settled
from tests.conftest import BACKENDS, CronFactory, Recorder
from tests.integration.test_cli_commands import cli, home  # noqa: F401 (fixture)

TOKEN = "test-token"
KEY = "websocket:gate"
PY = sys.executable


@pytest.fixture(params=BACKENDS)
def cron_backend(request: pytest.FixtureRequest) -> str:
    """On SQLite and on PostgreSQL."""
    return str(request.param)


@pytest.fixture
async def cron(make_cron: CronFactory) -> AgentCron:
    return await make_cron(settings=EngineSettings(gates=True))


@pytest.fixture
async def api(cron: AgentCron) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(cron, token=TOKEN, hook_token="hook")
    transport = httpx.ASGITransport(app=app)
    headers = {"Authorization": f"Bearer {TOKEN}"}
    async with httpx.AsyncClient(transport=transport, base_url="http://t", headers=headers) as c:
        yield c


def answer(response: httpx.Response, status: int = 200) -> Any:
    assert response.status_code == status, response.text
    return response.json()


async def a_job(api: httpx.AsyncClient, gate: dict[str, Any], **kw: Any) -> dict[str, Any]:
    answer(await api.post("/api/sessions", json={"key": KEY}), 201)
    body = {"session_key": KEY, "name": "watch", "message": "look", "when": "every day at 9"}
    return answer(await api.post("/api/jobs", json=body | {"gate": gate} | kw), 201)  # type: ignore[no-any-return]


async def fire(api: httpx.AsyncClient, cron: AgentCron, job_id: str) -> dict[str, Any]:
    """Run the job now, to its end; its run as the API shows it."""
    run = answer(await api.post(f"/api/jobs/{job_id}/run"), 202)
    await wait_settled(cron.engine)
    return answer(await api.get(f"/api/runs/{run['id']}"))  # type: ignore[no-any-return]


async def transcript(api: httpx.AsyncClient) -> list[dict[str, Any]]:
    return answer(await api.get(f"/api/sessions/{KEY}/messages"))["messages"]  # type: ignore[no-any-return]


def command(code: str) -> dict[str, Any]:
    return {"kind": "command", "target": [PY, "-c", code]}


async def test_a_passing_command_gate_runs_the_turn_with_its_output_in_the_prompt(
    api: httpx.AsyncClient, cron: AgentCron, recorder: Recorder
) -> None:
    job = await a_job(api, command("print('3 new orders')"))
    assert job["policy"]["gate"]["kind"] == "command"
    run = await fire(api, cron, job["id"])
    assert run["state"] == "succeeded"
    assert recorder.names() == ["watch"]
    assert run["delivery"] == {"gate": {"verdict": "run"}}
    assert run["prompt_vars"]["gate_output"] == "3 new orders\n"
    assert "What the pre-check reported:\n3 new orders" in run["prompt"]


async def test_a_gate_that_says_no_skips_the_fire_without_a_transcript_entry(
    api: httpx.AsyncClient, cron: AgentCron, recorder: Recorder
) -> None:
    job = await a_job(api, command("print('nothing'); raise SystemExit(1)"))
    run = await fire(api, cron, job["id"])
    assert (run["state"], run["error"], run["output"]) == ("skipped", "gate", "nothing\n")
    assert run["delivery"] == {"gate": {"verdict": "skip"}}
    assert recorder.triggers == []
    assert await transcript(api) == []
    # With a notice, the skip leaves one short entry, and still no turn.
    answer(await api.patch(f"/api/jobs/{job['id']}", json={
        "gate": command("print('queue empty'); raise SystemExit(1)") | {"notice": True},
    }))  # fmt: skip
    again = await fire(api, cron, job["id"])
    assert again["state"] == "skipped"
    (entry,) = await transcript(api)
    assert entry["role"] == "system"
    assert "did not run" in entry["content"]
    assert "queue empty" in entry["content"]
    assert recorder.triggers == []


async def test_a_failing_a_slow_and_a_loud_gate_are_bounded(
    api: httpx.AsyncClient, cron: AgentCron, recorder: Recorder
) -> None:
    job = await a_job(api, command("import sys; sys.stderr.write('disk not mounted'); sys.exit(3)"))
    failed = await fire(api, cron, job["id"])
    assert failed["state"] == "failed"
    assert failed["error"] == "the gate failed: exit code 3: disk not mounted"
    slow = command("import time; time.sleep(60)") | {"timeout_s": 0.3}
    answer(await api.patch(f"/api/jobs/{job['id']}", json={"gate": slow}))
    timed_out = await fire(api, cron, job["id"])
    assert (timed_out["state"], timed_out["error"]) == (
        "failed",
        "the gate failed: timed out after 0.3 s",
    )
    loud = command("print('x' * 100000)") | {"max_output": 1000}
    answer(await api.patch(f"/api/jobs/{job['id']}", json={"gate": loud}))
    cut = await fire(api, cron, job["id"])
    assert cut["state"] == "succeeded"
    assert cut["delivery"] == {"gate": {"verdict": "run", "truncated": True}}
    assert cut["prompt_vars"]["gate_output"] == "x" * 1000
    assert recorder.names() == ["watch"]  # only the loud one reached the agent


class _Answers(BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # the path is the status to answer
        status = int(self.path.strip("/"))
        body = f"status {status}".encode()
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def http_server() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Answers)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()
    thread.join()


async def test_an_http_gate_reads_the_status(
    api: httpx.AsyncClient, cron: AgentCron, recorder: Recorder, http_server: str
) -> None:
    job = await a_job(api, {"kind": "http", "target": f"{http_server}/200"})
    ran = await fire(api, cron, job["id"])
    assert (ran["state"], ran["prompt_vars"]["gate_output"]) == ("succeeded", "status 200")
    answer(await api.patch(f"/api/jobs/{job['id']}", json={
        "gate": {"kind": "http", "target": f"{http_server}/204"}
    }))  # fmt: skip
    assert (await fire(api, cron, job["id"]))["state"] == "skipped"
    answer(await api.patch(f"/api/jobs/{job['id']}", json={
        "gate": {"kind": "http", "target": f"{http_server}/503"}
    }))  # fmt: skip
    failed = await fire(api, cron, job["id"])
    assert failed["error"] == "the gate failed: HTTP 503: status 503"
    assert recorder.names() == ["watch"]


def gate_sync() -> tuple[bool, str]:
    """A Python gate (sync): run, with a text."""
    return True, "two files changed"


async def gate_async() -> int:
    """A Python gate (async): falsy, skip."""
    return 0


async def test_a_python_gate_and_a_gate_only_job(
    api: httpx.AsyncClient, cron: AgentCron, recorder: Recorder
) -> None:
    job = await a_job(api, {"kind": "python", "target": f"{__name__}:gate_sync"})
    ran = await fire(api, cron, job["id"])
    assert ran["prompt_vars"]["gate_output"] == "two files changed"
    answer(await api.patch(f"/api/jobs/{job['id']}", json={
        "gate": {"kind": "python", "target": f"{__name__}:gate_async"}
    }))  # fmt: skip
    assert (await fire(api, cron, job["id"]))["state"] == "skipped"
    assert recorder.names() == ["watch"]
    # no_llm: the gate is the whole job; its run ends on the gate, no turn, no entry.
    answer(await api.patch(f"/api/jobs/{job['id']}", json={
        "gate": command("print('pruned 12 files')") | {"no_llm": True}
    }))  # fmt: skip
    before = len(await transcript(api))
    done = await fire(api, cron, job["id"])
    assert (done["state"], done["output"]) == ("succeeded", "pruned 12 files\n")
    assert len(await transcript(api)) == before
    answer(await api.patch(f"/api/jobs/{job['id']}", json={
        "gate": command("raise SystemExit(2)") | {"no_llm": True}
    }))  # fmt: skip
    assert (await fire(api, cron, job["id"]))["state"] == "failed"
    assert recorder.names() == ["watch"]


async def test_gate_requests_are_bounded_and_code_gates_need_the_setting(
    api: httpx.AsyncClient, make_cron: CronFactory, cron: AgentCron
) -> None:
    answer(await api.post("/api/sessions", json={"key": KEY}), 201)
    body = {"session_key": KEY, "name": "watch", "message": "look", "when": "every day at 9"}
    bad = [
        {"kind": "shell", "target": "ls"},
        {"kind": "command", "target": []},
        {"kind": "command", "target": ["true"], "timeout_s": MAX_TIMEOUT_S + 1},
        {"kind": "command", "target": ["true"], "max_output": 0},
        {"kind": "http", "target": "file:///etc/passwd"},
        {"kind": "python", "target": "os.system"},
        {"kind": "http", "target": "http://x", "extra": 1},
    ]
    for gate in bad:
        response = await api.post("/api/jobs", json=body | {"gate": gate})
        assert response.status_code == 422, (gate, response.text)
    job = answer(await api.post("/api/jobs", json=body), 201)
    assert job["policy"]["gate"] is None
    patched = answer(await api.patch(f"/api/jobs/{job['id']}", json={"gate": command("1")}))
    assert patched["policy"]["gate"]["target"] == [PY, "-c", "1"]
    removed = answer(await api.patch(f"/api/jobs/{job['id']}", json={"gate": None}))
    assert removed["policy"]["gate"] is None
    # A server with gates off (the default) refuses gates that run code, not an HTTP one.
    off = await make_cron()
    app = create_app(off, token=TOKEN, hook_token="hook")
    headers = {"Authorization": f"Bearer {TOKEN}"}
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://t", headers=headers) as c:
        for gate in (command("1"), {"kind": "python", "target": f"{__name__}:gate_sync"}):
            refused = await c.post("/api/jobs", json=body | {"gate": gate})
            assert refused.status_code == 422
            assert "[engine] gates" in refused.text
        http = {"kind": "http", "target": "http://127.0.0.1:9/x"}
        answer(await c.post("/api/jobs", json=body | {"gate": http}), 201)


def test_the_cli_adds_a_job_with_a_gate(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    db = str(tmp_path / "cli.db")
    assert cli("sessions", "add", "api:ops", "--db", db).exit_code == 0
    add = ("jobs", "add", "--session", "api:ops", "--name", "orders", "--message", "sum up",
           "--when", "every day at 9", "--db", db, "--json")  # fmt: skip
    http = json.dumps({"kind": "http", "target": "https://shop.example/new", "timeout_s": 5})
    added = cli(*add, "--gate", http)
    assert added.exit_code == 0, added.output
    assert json.loads(added.stdout)["policy"]["gate"]["timeout_s"] == 5
    assert cli(*add, "--gate", "{not json").exit_code == 2
    code = json.dumps({"kind": "command", "target": ["true"]})
    refused = cli(*add, "--gate", code)  # gates that run code are off by default
    assert refused.exit_code != 0
    assert "[engine] gates" in refused.output
    monkeypatch.setenv("AGENTCRON_GATES", "1")
    assert cli(*add, "--gate", code).exit_code == 0
