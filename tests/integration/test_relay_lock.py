"""Two relays on one database (PostgreSQL, and one SQLite file) change one agent's arms at once:
each change is one transaction under the agent's database lock, so none is lost or doubled.
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from agentcron.app import AgentCron
from agentcron.config import EngineSettings
from agentcron.domain.jobs import JobKind
from agentcron.relay.agents import Agent
from agentcron.relay.callbacks import CallbackGuard
from agentcron.relay.service import Relay
from agentcron.relay.signing_keys import SigningKeys

AGENT = Agent("one", "agent:one", frozenset({"http://agent.test"}))
CALLBACK = "http://agent.test"
JOBS = [f"job-{i}" for i in range(30)]
T1 = datetime(2030, 1, 1, tzinfo=UTC)
T2, T3 = T1 + timedelta(minutes=1), T1 + timedelta(minutes=2)


@pytest.fixture
async def relays(store_url: str, tmp_path: Path) -> AsyncIterator[tuple[Relay, Relay]]:
    keys = SigningKeys(tmp_path / "keys")
    keys.load_or_create()
    pair: list[Relay] = []
    crons: list[AgentCron] = []
    try:
        for _ in range(2):
            relay = Relay(keys, issuer="http://relay.test", guard=CallbackGuard(True))
            cron = AgentCron(
                url=store_url,
                runner=relay.deliver,
                settings=EngineSettings(max_jobs=None, history_window=0),
            )
            relay.cron = cron
            crons.append(cron)
            await cron.start()
            pair.append(relay)
        yield pair[0], pair[1]
    finally:
        for cron in crons:
            await cron.close(grace=1.0)


async def arms_by_job(relay: Relay) -> dict[str, list[str]]:
    """Every stored arm of AGENT, read from the store directly: job id -> its fire_ats."""
    if relay.cron is None:
        raise AssertionError("no AgentCron")
    found: dict[str, list[str]] = {}
    for job in await relay.cron.store.list_jobs(kind=JobKind.AGENT_TURN):
        data = json.loads(job.message)
        found.setdefault(data["job_id"], []).append(data["fire_at"])
    return found


def wire(at: datetime) -> str:
    return at.isoformat(timespec="seconds")


async def test_two_relays_never_double_an_arm_or_lose_a_cancel(
    relays: tuple[Relay, Relay],
) -> None:
    a, b = relays
    # Both arm every job at once, each at its own fire_at: exactly one arm per job survives.
    await asyncio.gather(
        *(a.provision(AGENT, j, T1, CALLBACK) for j in JOBS),
        *(b.provision(AGENT, j, T2, CALLBACK) for j in JOBS),
    )
    stored = await arms_by_job(a)
    assert sorted(stored) == sorted(JOBS)
    assert {j: len(f) for j, f in stored.items()} == dict.fromkeys(JOBS, 1)
    assert {f for fires in stored.values() for f in fires} <= {wire(T1), wire(T2)}
    assert len(await b.list(AGENT)) == len(JOBS)

    # One moves every arm while the other cancels it: an arm exists at every instant until
    # the cancel, so every cancel finds one; after both, at most the moved arm is left.
    results = await asyncio.gather(
        *(b.cancel(AGENT, j) for j in JOBS), *(a.provision(AGENT, j, T3, CALLBACK) for j in JOBS)
    )
    cancelled = results[: len(JOBS)]
    assert cancelled == [True] * len(JOBS)
    stored = await arms_by_job(a)
    assert all(fires == [wire(T3)] for fires in stored.values()), stored

    # Two cancels of one arm at once: exactly one of them removed it.
    for j in JOBS:
        await a.provision(AGENT, j, T1, CALLBACK)
    both = await asyncio.gather(
        *(a.cancel(AGENT, j) for j in JOBS), *(b.cancel(AGENT, j) for j in JOBS)
    )
    per_job = Counter(j for j, hit in zip(JOBS + JOBS, both, strict=True) if hit)
    assert per_job == Counter(dict.fromkeys(JOBS, 1))
    assert await arms_by_job(a) == {}
    assert await a.list(AGENT) == [] == await b.list(AGENT)


async def test_the_same_fire_from_two_relays_is_one_arm(relays: tuple[Relay, Relay]) -> None:
    a, b = relays
    ids = await asyncio.gather(*(r.provision(AGENT, j, T1, CALLBACK) for j in JOBS for r in (a, b)))
    # Idempotent across processes: both answers for a job name the one arm stored.
    assert all(ids[i] == ids[i + 1] for i in range(0, len(ids), 2))
    assert sorted(v.schedule_id for v in await a.list(AGENT)) == sorted(set(ids))


HOLDER_PG = """
import sys, time, psycopg
conn = psycopg.connect(sys.argv[1])
conn.execute("SELECT pg_advisory_xact_lock(%s, hashtext(%s))", (int(sys.argv[2]), "one"))
print("locked", flush=True)
time.sleep(60)
"""
HOLDER_SQLITE = """
import sys, time, sqlite3
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("BEGIN IMMEDIATE")
print("locked", flush=True)
time.sleep(60)
"""


async def test_a_killed_lock_holder_frees_the_agent(
    relays: tuple[Relay, Relay], store_url: str
) -> None:
    """A relay process killed (-9) inside an arm change holds the agent's lock as a database
    transaction: the database frees it with the connection, and the other relay goes on.
    """
    import signal
    import sys

    import sqlalchemy as sa

    from agentcron.store.relay_arms import _LOCK_NAMESPACE

    a, _ = relays
    url = sa.make_url(store_url)
    if url.get_backend_name() == "postgresql":
        args = [HOLDER_PG, url.set(drivername="postgresql").render_as_string(False)]
    else:
        args = [HOLDER_SQLITE, str(url.database)]
    holder = await asyncio.create_subprocess_exec(
        sys.executable, "-c", args[0], args[1], str(_LOCK_NAMESPACE),
        stdout=asyncio.subprocess.PIPE,
    )  # fmt: skip
    try:
        if holder.stdout is None:
            raise AssertionError("no pipe")
        assert await asyncio.wait_for(holder.stdout.readline(), 20) == b"locked\n"
        provision = asyncio.ensure_future(a.provision(AGENT, "j", T1, CALLBACK))
        done, _ = await asyncio.wait({provision}, timeout=0.5)
        assert not done  # waits for the holder's lock
        holder.send_signal(signal.SIGKILL)
        schedule_id = await asyncio.wait_for(provision, 20)
    finally:
        if holder.returncode is None:
            holder.kill()
        await holder.wait()
    assert [v.schedule_id for v in await a.list(AGENT)] == [schedule_id]
