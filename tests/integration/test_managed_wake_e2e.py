"""Managed wake end to end: `agentcron relay serve` and `agentcron serve --wake managed` as
real processes on loopback.

A recurring bound job fires through the relay on time and re-arms; an agent stopped across
a fire gets it once from the relay's retries; the same fire delivered twice runs once;
pausing and deleting cancel the arm; a relay that is down when the agent starts is healed
into; `managed` without its settings runs on `local` and says so. The delay fire_at -> turn
started through the relay is measured and printed (p50/p99): over 4 fires of the recurring job
by default, over 8 (the README's measurement) with AGENTCRON_LONG_TESTS=1. Everything polls,
with generous deadlines, for a loaded machine.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

from agentcron.relay.agents import AgentRegistry
from agentcron.relay.signing_keys import SigningKeys
from agentcron.wake.arms import wire_text
from tests.helpers.long import long_tests_on

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]

START_S = 30.0
FIRES = 8 if long_tests_on() else 4  # of the job every 2 s: each one after the first re-armed
AUD = "agent:e2e"
BIN = str(Path(sys.executable).with_name("agentcron"))
DELAYS: list[float] = []  # fire_at -> turn started, seconds, over every fire of this module
# armed fire_at (the nominal time rounded up to the wire's whole second) -> turn started
ARMED_DELAYS: list[float] = []


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def poll(check: Callable[[], Any], what: str, timeout: float = 45.0) -> Any:
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        try:
            last = check()
        except httpx.HTTPError as exc:
            last = exc
        else:
            if last:
                return last
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}; last: {last!r}")


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTCRON_")}
    env.update(extra)
    return env


class Proc:
    """A child process whose output goes to a file; waits for a line."""

    def __init__(self, args: list[str], env: dict[str, str], log: Path, ready: str) -> None:
        self.log = log
        self.offset = log.stat().st_size if log.exists() else 0  # this start's output from here
        with log.open("ab") as out:
            self.proc = subprocess.Popen(
                args, env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT
            )
        poll(lambda: self._ready(ready) or self._dead(), f"{ready!r} in {log.name}", START_S)
        if self.proc.poll() is not None:
            raise AssertionError(f"{args[1]} exited {self.proc.returncode}:\n{self.output()}")

    def _dead(self) -> bool:
        return self.proc.poll() is not None

    def _ready(self, ready: str) -> bool:
        """The ready line is there whole (its value, such as the token, may be read next)."""
        out = self.output()
        at = out.find(ready)
        return at >= 0 and "\n" in out[at:]

    def output(self) -> str:
        return self.log.read_bytes()[self.offset :].decode(errors="replace")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)


class Relay:
    def __init__(self, tmp: Path, port: int | None = None) -> None:
        self.home = tmp / "relay"
        self.port = port or free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.token = AgentRegistry(self.home).add("e2e", AUD)
        self.proc: Proc | None = None
        self.client = httpx.Client(
            base_url=self.base, headers={"Authorization": f"Bearer {self.token}"}, timeout=10
        )

    def start(self) -> Relay:
        # the agents are on loopback: the operator allows private callbacks
        env = clean_env(AGENTCRON_RELAY_DELIVERY_DEADLINE="120", AGENTCRON_RELAY_ALLOW_PRIVATE="1")
        self.proc = Proc(
            [BIN, "relay", "serve", "--home", str(self.home), "--port", str(self.port),
             "--log-level", "warning"],
            env, self.home.parent / "relay.log", "relay ready",
        )  # fmt: skip
        return self

    def arms(self) -> dict[str, dict[str, Any]]:
        rows = self.client.get("/list").raise_for_status().json()["arms"]
        return {row["job_id"]: row for row in rows}

    def metric(self, name: str) -> float:
        return metric(self.client.get("/metrics").text, name)

    def keys(self) -> SigningKeys:
        keys = SigningKeys(self.home / "keys")
        keys.load_or_create()
        return keys


class Agent:
    def __init__(self, tmp: Path, relay: Relay | None, *, wake: str = "managed") -> None:
        self.tmp = tmp
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.relay = relay
        self.wake = wake
        self.proc: Proc | None = None
        self.client: httpx.Client | None = None

    def start(self) -> Agent:
        env = clean_env(
            AGENTCRON_HOME=str(self.tmp / "agent"),
            AGENTCRON_OFFLINE_WPS="0",
            AGENTCRON_MIN_INTERVAL="1",  # its jobs run every few seconds
        )
        if self.relay is not None:
            # the relay calls this agent back only on an origin allowed for it
            AgentRegistry(self.relay.home).allow_origins("e2e", [self.base])
            env.update(
                AGENTCRON_WAKE_RELAY_URL=self.relay.base,
                AGENTCRON_WAKE_RELAY_TOKEN=self.relay.token,
                AGENTCRON_WAKE_CALLBACK_URL=self.base,
                AGENTCRON_WAKE_AUDIENCE=AUD,
            )
        self.proc = Proc(
            [BIN, "serve", "--db", str(self.tmp / "agent.db"), "--port", str(self.port),
             "--log-level", "warning", "--wake", self.wake],
            env, self.tmp / "agent.log", "token: ",
        )  # fmt: skip
        token = self.proc.output().split("token: ")[-1].split()[0]
        self.client = httpx.Client(
            base_url=self.base, headers={"Authorization": f"Bearer {token}"}, timeout=10
        )
        return self

    def stop(self) -> None:
        if self.client is not None:
            self.client.close()
        if self.proc is not None:
            self.proc.stop()

    @property
    def api(self) -> httpx.Client:
        if self.client is None:
            raise AssertionError("the agent is not started")
        return self.client

    def wake_status(self) -> dict[str, Any]:
        status: dict[str, Any] = self.api.get("/readyz").json()["wake"]
        return status

    def job(self, when: str, key: str = "api:e2e") -> dict[str, Any]:
        if self.api.get(f"/api/sessions/{key}").status_code == 404:
            self.api.post("/api/sessions", json={"key": key}).raise_for_status()
        body = {"session_key": key, "name": f"job {when}", "message": "tick", "when": when}
        job: dict[str, Any] = self.api.post("/api/jobs", json=body).raise_for_status().json()
        return job

    def get_job(self, job_id: str) -> dict[str, Any]:
        job: dict[str, Any] = self.api.get(f"/api/jobs/{job_id}").raise_for_status().json()
        return job

    def runs(self, job_id: str) -> list[dict[str, Any]]:
        runs: list[dict[str, Any]] = (
            self.api.get(f"/api/jobs/{job_id}/runs").raise_for_status().json()["runs"]
        )
        return runs

    def succeeded(self, job_id: str) -> list[dict[str, Any]]:
        return [r for r in self.runs(job_id) if r["state"] == "succeeded"]

    def metric(self, name: str) -> float:
        return metric(self.api.get("/metrics").text, name)


def metric(text: str, name: str) -> float:
    """The sum of every series of `name` (labelled or not)."""
    total = 0.0
    for line in text.splitlines():
        series = line.split(" ")[0]
        if series == name or series.startswith(name + "{"):
            total += float(line.rsplit(" ", 1)[1])
    return total


def at(text: str) -> datetime:
    return datetime.fromisoformat(text)


def record_delays(runs: list[dict[str, Any]]) -> None:
    for run in runs:
        if run["started_at"]:
            started = at(run["started_at"])
            DELAYS.append((started - at(run["fire_at"])).total_seconds())
            ARMED_DELAYS.append((started - at(wire_text(at(run["fire_at"])))).total_seconds())


@pytest.fixture
def procs() -> Iterator[list[Relay | Agent]]:
    started: list[Relay | Agent] = []
    yield started
    for item in reversed(started):
        if isinstance(item, Agent):
            item.stop()
        elif item.proc is not None:
            item.proc.stop()
            item.client.close()


def managed_pair(tmp_path: Path, procs: list[Relay | Agent]) -> tuple[Relay, Agent]:
    """A relay and an agent woken by it, both running, the agent on the managed wake."""
    relay = Relay(tmp_path).start()
    procs.append(relay)
    agent = Agent(tmp_path, relay).start()
    procs.append(agent)
    poll(lambda: agent.wake_status()["provider"] == "managed", "managed wake")
    return relay, agent


def test_a_recurring_job_fires_through_the_relay_and_re_arms(
    tmp_path: Path, procs: list[Relay | Agent]
) -> None:
    relay, agent = managed_pair(tmp_path, procs)
    job = agent.job("every 2 seconds")
    job_id = job["id"]
    poll(lambda: job_id in relay.arms(), "the job's arm")
    runs = poll(
        lambda: (r := agent.succeeded(job_id)) and len(r) >= FIRES and r, f"{FIRES} fires", 120
    )
    # each fire is a turn of the session, on time; the arm moved on to the next fire
    assert len({r["fire_at"] for r in runs}) == len(runs)
    record_delays(runs)
    assert max(DELAYS) < 10, DELAYS
    report_delays()

    def re_armed() -> bool:
        arm = relay.arms().get(job_id)
        nxt = agent.get_job(job_id)["next_run_at"]
        return arm is not None and nxt is not None and at(arm["fire_at"]) >= at(nxt)

    poll(re_armed, "the arm at the job's next fire")
    assert agent.metric("agentcron_managed_fires_total") >= 4
    text = agent.api.get("/metrics").text
    assert 'agentcron_wake_provider{configured="managed",provider="managed"} 1.0' in text
    assert 'agentcron_managed_fires_total{outcome="claimed"}' in text
    # pausing cancels the arm, resuming re-arms it, deleting cancels it
    agent.api.post(f"/api/jobs/{job_id}/pause").raise_for_status()
    poll(lambda: job_id not in relay.arms(), "no arm while paused")
    agent.api.post(f"/api/jobs/{job_id}/resume").raise_for_status()
    poll(lambda: job_id in relay.arms(), "armed again after resume")
    agent.api.delete(f"/api/jobs/{job_id}").raise_for_status()
    poll(lambda: job_id not in relay.arms(), "no arm after delete")
    assert agent.api.get(f"/api/jobs/{job_id}").status_code == 404  # the job is gone


def test_an_agent_stopped_across_a_fire_gets_it_once_and_a_replay_runs_nothing(
    tmp_path: Path, procs: list[Relay | Agent]
) -> None:
    relay, agent = managed_pair(tmp_path, procs)
    job = agent.job("every 1 hour")
    job_id = job["id"]
    poll(lambda: job_id in relay.arms(), "the job's arm")
    # move the fire close: a one-time skip is not it; re-create as an hourly job whose first
    # fire is in a few seconds, through the PATCH of its schedule (the agent stops well within
    # them; had it not, the fire's first attempt would not fail, and the test would)
    agent.api.patch(f"/api/jobs/{job_id}", json={"when": "every 4 seconds"}).raise_for_status()
    first = at(poll(lambda: agent.get_job(job_id)["next_run_at"], "next run"))
    poll(lambda: (a := relay.arms().get(job_id)) and at(a["fire_at"]) >= first, "re-armed")
    agent.stop()  # asleep across the fire
    poll(lambda: relay.metric("agentcron_relay_delivery_attempts_total") >= 1, "an attempt", 60)
    # Started at once: it takes seconds to answer, and the relay retries 0.5 s after its first
    # attempt (backoff 0.5 s doubling), so that retry fails too; a later one delivers the fire.
    agent.start()
    failed = relay.metric('agentcron_relay_delivery_attempts_total{result="failed"}')
    assert failed >= 2, f"{failed} failed attempts before the agent was back"
    runs = poll(lambda: agent.succeeded(job_id), "the delivered fire", 90)
    fire_at = runs[-1]["fire_at"]
    # the same fire delivered twice more (a replay of the relay's POST): accepted, runs no more
    keys = relay.keys()
    wire = wire_text(at(fire_at))  # as the relay armed it: UTC, up to the whole second
    for _ in range(2):
        token = keys.mint(audience=AUD, issuer=relay.base, job_id=job_id, fire_at=wire)
        answer = httpx.post(
            f"{agent.base}/api/cron/fire",
            json={"job_id": job_id, "fire_at": wire},
            headers={"Authorization": f"Bearer {token}"},
        )
        assert answer.status_code == 202, answer.text
    poll(lambda: 'outcome="duplicate"} 2.0' in agent.api.get("/metrics").text, "duplicates")
    assert [r["fire_at"] for r in agent.succeeded(job_id)].count(fire_at) == 1
    # a forged token: 401, nothing runs
    bad = httpx.post(
        f"{agent.base}/api/cron/fire", json={"job_id": job_id},
        headers={"Authorization": "Bearer " + token[:-4] + "AAAA"},
    )  # fmt: skip
    assert bad.status_code == 401
    assert "unauthorized:" in agent.api.get("/metrics").text


def test_a_relay_killed_mid_delivery_delivers_after_its_restart(
    tmp_path: Path, procs: list[Relay | Agent]
) -> None:
    """kill -9 while the relay retries a fire to a stopped agent: the restarted relay arms the
    cut delivery again, and the agent, started later, runs the fire once.
    """
    relay, agent = managed_pair(tmp_path, procs)
    job_id = agent.job("every 1 hour")["id"]
    agent.api.patch(f"/api/jobs/{job_id}", json={"when": "every 5 seconds"}).raise_for_status()
    first = at(poll(lambda: agent.get_job(job_id)["next_run_at"], "next run"))
    poll(lambda: (a := relay.arms().get(job_id)) and at(a["fire_at"]) >= first, "re-armed")
    agent.stop()
    poll(lambda: relay.metric("agentcron_relay_delivery_attempts_total") >= 1, "an attempt", 60)
    assert relay.proc is not None
    relay.proc.proc.kill()  # mid-delivery: its run is cut
    relay.proc.proc.wait(10)
    relay.start()
    assert "re-armed 1 arm(s)" in relay.proc.output()
    agent.start()
    runs = poll(lambda: agent.succeeded(job_id), "the fire, delivered after the restart", 90)
    assert len({r["fire_at"] for r in runs}) == len(runs)


def test_a_relay_down_at_agent_start_is_healed_when_it_is_back(
    tmp_path: Path, procs: list[Relay | Agent]
) -> None:
    relay = Relay(tmp_path)
    procs.append(relay)
    agent = Agent(tmp_path, relay).start()
    procs.append(agent)
    status = agent.wake_status()
    assert status["provider"] == "local"
    assert status["configured"] == "managed"
    assert "JWKS" in status["reason"]
    job = agent.job("every 1 hour")
    relay.start()
    poll(lambda: agent.wake_status()["provider"] == "managed", "managed once the relay is up", 90)
    poll(lambda: job["id"] in relay.arms(), "the job armed by reconcile", 60)


def test_managed_without_its_settings_runs_local_and_says_so(
    tmp_path: Path, procs: list[Relay | Agent]
) -> None:
    agent = Agent(tmp_path, None).start()
    procs.append(agent)
    assert "wake: local (managed wake needs wake.relay_url" in agent.proc.output()  # type: ignore[union-attr]
    status = agent.wake_status()
    assert (status["provider"], status["configured"]) == ("local", "managed")
    text = agent.api.get("/metrics").text
    assert 'agentcron_wake_provider{configured="managed",provider="local"} 1.0' in text
    job = agent.job("every 1 seconds")
    poll(lambda: agent.succeeded(job["id"]), "a fire by the local timer")
    assert agent.api.post("/api/cron/fire", json={"job_id": job["id"]}).status_code == 404


def report_delays() -> None:
    """Print (with -s) the fire delay through the relay, fire_at -> turn started, p50/p99;
    with AGENTCRON_E2E_DELAY_FILE also write it there.
    """

    def summary(delays: list[float]) -> str:
        ordered = sorted(delays)
        p99 = ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]
        return (
            f"p50 {statistics.median(ordered) * 1000:.0f} ms, p99 {p99 * 1000:.0f} ms, "
            f"max {ordered[-1] * 1000:.0f} ms"
        )

    line = (
        f"managed fire delay over {len(DELAYS)} fires: fire_at -> turn started "
        f"{summary(DELAYS)}; armed (whole-second) fire_at -> turn started {summary(ARMED_DELAYS)}"
    )
    print(line)
    out = os.environ.get("AGENTCRON_E2E_DELAY_FILE")
    if out:
        Path(out).write_text(json.dumps({"delays": DELAYS, "armed": ARMED_DELAYS, "summary": line}))
