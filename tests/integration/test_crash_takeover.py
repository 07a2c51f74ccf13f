"""Real processes, one real PostgreSQL database: kill -9 a replica "on another host" and
measure how long the survivor takes to take its work over.

Two engine processes (takeover_child.py) share one database, with small liveness settings
(heartbeat 0.2 s, takeover 1.5 s). The victim names another host in its owner (no pid check
can see it die) and holds, when it is killed: a running turn in each of its sessions (holding
the session leases) and fires it claimed but never started (bound ones deferred behind those
turns, an unbound one waiting for a slot). Every lease it holds is far from expiring (runs
60 s, sessions 5 min) and the survivor's periodic reap is 60 s away: only the victim's silent
heartbeat can tell the survivor it is gone.

Checked: within takeover + MARGIN of the kill (and not before the takeover time less one
heartbeat: it is the heartbeat that tells), the survivor has closed each running turn
`interrupted` with the visible notice, run each unstarted fire exactly once, freed every
session lease and deleted the victim's owner row; then a new message into each of the
victim's sessions is answered. The measured takeover is printed.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from agentcron.domain.states import ACTIVE_STATES, RunState, TurnState
from agentcron.store import SqlStore
from tests.conftest import _scratch_pg_database
from tests.helpers.store_setup import list_owners
from tests.integration.child_process import ChildProcess, journal_lines
from tests.integration.takeover_child import SETTINGS, VICTIM_HOST

CHILD = Path(__file__).with_name("takeover_child.py")
KEYS = ["victim:s0", "victim:s1", "victim:s2"]
TAKEOVER = SETTINGS.takeover.total_seconds()
HEARTBEAT = SETTINGS.owner_heartbeat.total_seconds()
# Detection comes at the first survivor beat after the victim's last beat + takeover (up to one
# heartbeat late), then one recovery pass and the adopted fires' turns: well under a second,
# with room for a machine shared with other work.
MARGIN = 1.0
READY_TIMEOUT = 30.0
POLL_S = 0.01
NOTICE = "This turn was interrupted because agentcron stopped."

pytestmark = [pytest.mark.slow, pytest.mark.postgres]


@pytest.fixture
def pg_url() -> Iterator[str]:
    yield from _scratch_pg_database()


@dataclass
class Seen:
    """The victim's work as the database has it now."""

    cut: list[str]  # its turns closed interrupted with the notice as their reply
    fires: dict[str, RunState]  # run id -> state, for every fire of the test's jobs
    leases: dict[str, str | None]  # session -> turn lease holder
    owners: list[str]

    def taken_over(self, victim_turns: int) -> bool:
        return (
            len(self.cut) == victim_turns
            and len(self.fires) == len(KEYS) + 1
            and all(s is RunState.SUCCEEDED for s in self.fires.values())
            and all(holder is None for holder in self.leases.values())
            and not any(o.startswith(f"{VICTIM_HOST}:") for o in self.owners)
        )


async def look(store: SqlStore) -> Seen:
    sessions = store.sessions
    cut = []
    leases = {}
    for key in KEYS:
        messages = {m.id: m for m in await sessions.list_messages(key)}
        for t in await sessions.list_turns(key):
            reply = messages.get(t.reply_message_id or "")
            if t.state is TurnState.INTERRUPTED and reply is not None and reply.content == NOTICE:
                cut.append(t.id)
        leases[key] = (await sessions.get_session(key)).turn_owner
    fires = {r.id: r.state for r in await store.list_runs(limit=None)}
    owners = [o.owner for o in await list_owners(store)]
    return Seen(cut, fires, leases, owners)


def read_journal(path: Path) -> tuple[list[tuple[str, str, int]], dict[str, str]]:
    """(starts: (turn id, run id, pid), probes: turn id -> session)."""
    starts, probes = [], {}
    for line in journal_lines(path):
        p = line.split()
        if p[0] == "start":
            starts.append((p[1], p[2], int(p[3])))
        elif p[0] == "probe":
            probes[p[1]] = p[2]
    return starts, probes


@pytest.mark.timeout(90)
def test_kill_9_of_a_replica_is_taken_over_within_the_takeover_time(
    tmp_path: Path, pg_url: str
) -> None:
    journal = tmp_path / "journal.txt"
    children: list[ChildProcess] = []

    def launch(mode: str) -> ChildProcess:
        args = [pg_url, str(journal), str(tmp_path), mode, *KEYS]
        child = ChildProcess.start(CHILD, args, tmp_path / f"{mode}.log", mode)
        children.append(child)
        child.wait_ready(READY_TIMEOUT)
        return child

    with asyncio.Runner() as loop:
        store = SqlStore(pg_url)
        loop.run(store.open())
        try:
            victim = launch("victim")
            before = loop.run(look(store))
            victim_owner = next(o for o in before.owners if o.startswith(f"{VICTIM_HOST}:"))
            runs = loop.run(store.list_runs(limit=None))
            unstarted = {r.id for r in runs}
            assert {(r.state, r.owner) for r in runs} == {
                (RunState.DEFERRED, victim_owner),
                (RunState.QUEUED, victim_owner),
            }, [(r.state, r.owner) for r in runs]
            held = {
                t.id
                for key in KEYS
                for t in loop.run(store.sessions.list_turns(key))
                if t.state is TurnState.RUNNING
            }
            assert len(held) == len(KEYS)
            assert set(before.leases.values()) == {victim_owner}

            survivor = launch("survivor")
            killed_at = time.monotonic()
            victim.kill9()
            seen = loop.run(look(store))
            while not seen.taken_over(len(held)):
                if time.monotonic() - killed_at > TAKEOVER + 10:
                    raise AssertionError(
                        f"not taken over {TAKEOVER + 10}s after the kill: {seen}\n"
                        f"{survivor.stderr_tail()}"
                    )
                time.sleep(POLL_S)
                seen = loop.run(look(store))
            took = time.monotonic() - killed_at
            print(
                f"takeover measured: {took:.2f}s after kill -9 (takeover {TAKEOVER}s, "
                f"heartbeat {HEARTBEAT}s)"
            )
            assert TAKEOVER - HEARTBEAT <= took <= TAKEOVER + MARGIN, took
            assert sorted(seen.cut) == sorted(held)

            # the sessions are free: a new message into each is answered
            (tmp_path / "probe").touch()
            deadline = time.monotonic() + 15
            while True:
                _, probes = read_journal(journal)
                done = [
                    loop.run(store.sessions.get_turn(t)).state is TurnState.SUCCEEDED
                    for t in probes
                ]
                if len(done) == len(KEYS) and all(done):
                    break
                assert time.monotonic() < deadline, f"probes not answered: {probes}"
                time.sleep(POLL_S)
            survivor.proc.terminate()
            survivor.wait_exit()
            assert survivor.tracebacks() is None, survivor.tracebacks()
            end = {r.id: r for r in loop.run(store.list_runs(limit=None))}
        finally:
            for c in children:
                c.close()
            loop.run(store.close())

    starts, probes = read_journal(journal)
    # each unstarted fire ran exactly once, by the survivor; no cut-off turn ran again
    by_run = Counter(run_id for _, run_id, _ in starts if run_id != "-")
    assert by_run == dict.fromkeys(unstarted, 1), by_run
    assert {pid for _, run_id, pid in starts if run_id != "-"} == {survivor.pid}
    assert Counter(turn_id for turn_id, _, _ in starts if turn_id in held) == dict.fromkeys(held, 1)
    assert all(r.state not in ACTIVE_STATES for r in end.values())
    assert sorted(probes.values()) == KEYS
