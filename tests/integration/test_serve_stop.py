"""`agentcron serve` as a real process: SIGINT with turns queued exits within the stop timeout.

Reported: SIGINT to `agentcron serve` with turns queued once did not exit within 20 s.

The server runs on the offline model, paced by AGENTCRON_OFFLINE_WPS so that each turn takes
several seconds; a few sessions get many messages at once through the HTTP API, so each has one
turn running and the rest queued behind it. Then SIGINT. A graceful stop lets running turns
finish (up to the stop timeout, EngineSettings.stop_timeout, 30 s: README "Crash safety") and
hands waiting turns back for the next start; so the process must exit 0 within that timeout plus
a few seconds, whatever is queued and whoever is waiting for it. Afterwards a fresh AgentCron on
the same database sees no turn left `running`, every queued message either answered or still
waiting (released, not lost), and the next start answers the rest.

Variants: nobody waiting, and a client long-polling (`GET /api/turns/{id}?wait=`) the last
queued turn of a session, as a script waiting for its answer does.
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from agentcron.agent.runner import Outcome, SessionInfo, TurnEvents, TurnInput
from agentcron.app import AgentCron
from agentcron.config import EngineSettings
from agentcron.domain.sessions import Turn
from agentcron.domain.states import TurnState

SESSIONS = 2
MESSAGES_PER_SESSION = 10
# The offline model's ~32-word reply at 8 words/s: ~4 s a turn (the running one is let finish
# after SIGINT), so a session's queue of ten takes ~40 s to drain, longer than the stop timeout
# and its slack: a stop that waited for the queue would miss the bound.
WPS = "8"
STOP_TIMEOUT_S = EngineSettings().stop_timeout  # the documented graceful-stop bound (30 s)
EXIT_SLACK_S = 5.0
START_TIMEOUT_S = 20.0

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Serve:
    """`agentcron serve` in a child process; its output goes to a file (never a full pipe)."""

    def __init__(
        self,
        tmp_path: Path,
        *,
        args: tuple[str, ...] = (),
        wps: str = WPS,
        settings: dict[str, str] | None = None,  # more environment, e.g. a lowered limit
    ) -> None:
        self.db = tmp_path / "serve.db"
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.log_path = tmp_path / "serve.log"
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith("AGENTCRON_") or k == "AGENTCRON_CRASH_SEED"
        }
        env.update(AGENTCRON_HOME=str(tmp_path), AGENTCRON_OFFLINE_WPS=wps, **(settings or {}))
        script = Path(sys.executable).with_name("agentcron")
        with self.log_path.open("wb") as log:
            self.proc = subprocess.Popen(
                [str(script), "serve", "--db", str(self.db), "--port", str(self.port),
                 "--log-level", "warning", *args],
                env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
            )  # fmt: skip
        self.token = self._wait_token()
        self.client = httpx.Client(
            base_url=self.base, headers={"Authorization": f"Bearer {self.token}"}, timeout=30
        )

    def output(self) -> str:
        return self.log_path.read_text(errors="replace")

    def _wait_token(self) -> str:
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            for line in self.output().splitlines():
                if line.startswith("token: "):
                    return line.removeprefix("token: ").strip()
            if self.proc.poll() is not None:
                raise AssertionError(f"serve exited {self.proc.returncode}:\n{self.output()}")
            time.sleep(0.05)
        raise AssertionError(f"serve printed no token in {START_TIMEOUT_S}s:\n{self.output()}")

    def turns(self, key: str) -> list[dict[str, Any]]:
        turns: list[dict[str, Any]] = self.client.get(f"/api/sessions/{key}/turns").json()["turns"]
        return turns

    def close(self) -> None:
        self.client.close()
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


class Quick:
    """The runner of the next start: answers at once."""

    async def run_turn(self, session: SessionInfo, turn: TurnInput, events: TurnEvents) -> Outcome:
        return Outcome.succeeded(f"after the restart: {turn.prompt}")


async def books(db: Path, keys: list[str]) -> dict[str, list[Turn]]:
    cron = AgentCron(db=db, runner=Quick())
    await cron.store.open()
    try:
        return {k: await cron.sessions.turns(k) for k in keys}
    finally:
        await cron.store.close()


async def restart_and_answer(db: Path, keys: list[str]) -> tuple[dict[str, list[Turn]], list[str]]:
    """Start AgentCron on the database; wait for every turn; return the turns and problems."""
    problems: list[str] = []
    async with AgentCron(db=db, runner=Quick()) as cron:
        for key in keys:
            for turn in await cron.sessions.turns(key):
                if not (await cron.sessions.wait_turn(turn.id, 10)).state.terminal:
                    problems.append(f"{key}: turn {turn.id} still {turn.state.value} after restart")
        turns = {k: await cron.sessions.turns(k) for k in keys}
        for key in keys:
            replies = {
                m.meta.get("turn_id"): m
                for m in await cron.sessions.messages(key)
                if m.role == "assistant"
            }
            for turn in turns[key]:
                reply = replies.get(turn.id)
                if turn.state is not TurnState.SUCCEEDED or reply is None:
                    problems.append(
                        f"{key}: message {turn.content!r} ended {turn.state.value} with reply "
                        f"{None if reply is None else reply.content!r}"
                    )
    return turns, problems


@pytest.mark.parametrize("waiting_client", [False, True], ids=["nobody-waiting", "long-poll"])
def test_sigint_with_turns_queued_exits_within_the_stop_timeout(
    tmp_path: Path, waiting_client: bool
) -> None:
    server = Serve(tmp_path)
    keys = [f"api:stop-{i}" for i in range(SESSIONS)]
    poll: dict[str, Any] = {}
    try:
        c = server.client
        for key in keys:
            assert c.post("/api/sessions", json={"key": key}).status_code == 201
        sent = {
            key: [
                c.post(f"/api/sessions/{key}/messages", json={"content": f"hello number {n}"})
                .raise_for_status()
                .json()["turn_id"]
                for n in range(MESSAGES_PER_SESSION)
            ]
            for key in keys
        }
        # every session has a turn running and the rest queued behind it
        deadline = time.monotonic() + 10
        while True:
            states = {k: [t["state"] for t in server.turns(k)] for k in keys}
            if all(s.count("running") == 1 for s in states.values()):
                break
            assert time.monotonic() < deadline, f"turns never started: {states}"
            time.sleep(0.05)
        assert all(s.count("queued") == MESSAGES_PER_SESSION - 1 for s in states.values()), states
        running_at_stop = {
            t["id"] for k in keys for t in server.turns(k) if t["state"] == "running"
        }

        if waiting_client:
            last = sent[keys[0]][-1]

            def long_poll() -> None:
                try:
                    r = httpx.get(
                        f"{server.base}/api/turns/{last}?wait=120",
                        headers={"Authorization": f"Bearer {server.token}"},
                        timeout=150,
                    )
                    poll["answer"] = f"HTTP {r.status_code} {r.text[:120]}"
                except Exception as exc:  # whatever it gets, the test only reports it
                    poll["answer"] = repr(exc)

            threading.Thread(target=long_poll, daemon=True).start()
            time.sleep(0.5)  # the request is in flight

        bound = STOP_TIMEOUT_S + EXIT_SLACK_S
        stopped_at = time.monotonic()
        server.proc.send_signal(signal.SIGINT)
        try:
            code = server.proc.wait(bound)
        except subprocess.TimeoutExpired:
            # (it no longer answers HTTP: read its database)
            now = asyncio.run(books(server.db, keys))
            left = {k: [t.state.value for t in ts] for k, ts in now.items()}
            raise AssertionError(
                f"agentcron serve did not exit within {bound:.0f}s of SIGINT (stop timeout "
                f"{STOP_TIMEOUT_S:.0f}s + {EXIT_SLACK_S:.0f}s); its turns now: {left}; "
                f"long poll: {poll or 'still waiting'}\n{server.output()[-3000:]}"
            ) from None
        took = time.monotonic() - stopped_at
        output = server.output()
        assert code == 0, f"exit code {code} after SIGINT\n{output[-3000:]}"
        print(f"exited {took:.1f}s after SIGINT; long poll: {poll or '-'}")
    finally:
        server.close()

    # the books right after the stop: nothing running, nothing lost
    after = asyncio.run(books(server.db, keys))
    for key in keys:
        assert [t.id for t in after[key]] == sent[key], "a message was lost or duplicated"
        for t in after[key]:
            assert t.state is not TurnState.RUNNING, f"left running: {t}"
            if t.id in running_at_stop:  # well inside the stop timeout: it may finish
                assert t.state is TurnState.SUCCEEDED, f"a running turn did not finish: {t}"
            else:  # ran before the stop, or handed back for the next start
                assert t.state in (TurnState.SUCCEEDED, TurnState.QUEUED), t
                if t.state is TurnState.QUEUED:
                    assert t.owner is None, f"a waiting turn was not released: {t}"

    # the next start answers what was handed back
    turns, problems = asyncio.run(restart_and_answer(server.db, keys))
    assert not problems, "\n".join(problems)
    assert sum(len(v) for v in turns.values()) == SESSIONS * MESSAGES_PER_SESSION
