"""The fire ledger's recovery: fires of gone owners reaped, unstarted fires released and adopted."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Row

from agentcron.domain.jobs import Job
from agentcron.domain.runs import ClaimedFire, Run, SessionZone
from agentcron.domain.states import DIED_MID_TURN, RunState, TurnState
from agentcron.store.fire_store import FireClaimsMixin
from agentcron.store.owners import LiveWork, OrphanSettlement
from agentcron.store.rows import ACTIVE, WAITING, _chunks, _job, _run
from agentcron.store.schema import jobs, runs, sessions, turns
from agentcron.store.signals import Topic, announce
from agentcron.store.turn_store import OPEN_TURN, WAITING_TURN


class FireLedgerMixin(FireClaimsMixin):
    """The whole `FireLedger`: the claims (`FireClaimsMixin`) and the recovery of fires whose
    engine is gone: reap, release, adopt.
    """

    async def reap(self, now: datetime, owner: str, is_dead: Callable[[str], bool]) -> list[Run]:
        """Settle the active runs of owners that are gone (lease expired or process dead).

        A `running` one may have done part of its turn: it becomes `interrupted` and is never
        run again silently. One that never started is released for `adopt_released`.
        Returns the interrupted runs.
        """
        return await self._db.write(lambda conn: self._reap_op(conn, now, owner, is_dead))

    def _reap_op(
        self, conn: Connection, now: datetime, owner: str, is_dead: Callable[[str], bool]
    ) -> list[Run]:
        rows = (
            conn.execute(
                sa.select(runs).where(
                    runs.c.state.in_(ACTIVE), runs.c.owner.is_not(None), runs.c.owner != owner
                )
            )
        ).all()
        gone = [
            _run(r)
            for r in rows
            if (r.lease_expires_at is not None and r.lease_expires_at <= now) or is_dead(r.owner)
        ]
        started = [r for r in gone if r.state is RunState.RUNNING]
        unstarted = [r for r in gone if r.state is not RunState.RUNNING]
        if unstarted:
            # Their turn never began (RUNNING is committed before a turn starts): hand them
            # back, like a graceful stop does, for an engine to adopt and run once.
            conn.execute(
                runs.update()
                .where(
                    runs.c.id == sa.bindparam("b_id"),
                    runs.c.owner == sa.bindparam("b_owner"),
                    runs.c.state.in_([sa.literal_column(f"'{s}'") for s in WAITING]),
                )
                .values(owner=None, lease_expires_at=None),
                [{"b_id": r.id, "b_owner": r.owner} for r in unstarted],
            )
            announce(conn, Topic.RUNS)  # another process may adopt them now
        return self._interrupt_runs_op(conn, now, started)

    def _interrupt_runs_op(self, conn: Connection, now: datetime, started: list[Run]) -> list[Run]:
        """Close runs whose process is gone mid-way as `interrupted` (never re-run). Each
        update is a compare-and-set on (running, owner): when two replicas reap at once, each
        run is closed by one of them, and only that one returns it.
        """
        done: list[Run] = []
        for r in started:
            result = conn.execute(
                runs.update()
                .where(
                    runs.c.id == r.id,
                    runs.c.state == RunState.RUNNING.value,
                    runs.c.owner == r.owner,
                )
                .values(
                    state=RunState.INTERRUPTED.value,
                    finished_at=now,
                    owner=None,
                    lease_expires_at=None,
                    error=DIED_MID_TURN,
                    error_details={"owner": r.owner, "was": r.state.value},
                )
            )
            if result.rowcount:
                done.append(replace(r, state=RunState.INTERRUPTED))
        if done:
            conn.execute(
                jobs.update()
                .where(jobs.c.id == sa.bindparam("b_id"))
                .values(
                    last_status=RunState.INTERRUPTED.value,
                    last_run_at=now,
                    lease_owner=None,
                    lease_expires_at=None,
                ),
                [{"b_id": job_id} for job_id in sorted({r.job_id for r in done})],
            )
        return done

    async def renew_held(
        self, owner: str, live: LiveWork, until: datetime, turn_until: datetime
    ) -> int:
        """Extend the leases of the work `owner` really holds: the active runs in `live.runs`
        to `until`, the session turn leases of `live.sessions` to `turn_until`. Runs and
        leases of `owner` outside `live` are orphans: left to expire (and to be settled).
        Returns how many runs it renewed.
        """
        return await self._db.write(
            lambda conn: self._renew_held_op(conn, owner, live, until, turn_until)
        )

    def _renew_held_op(
        self, conn: Connection, owner: str, live: LiveWork, until: datetime, turn_until: datetime
    ) -> int:
        renewed = 0
        for chunk in _chunks(sorted(live.runs)):
            result = conn.execute(
                runs.update()
                .where(runs.c.id.in_(chunk), runs.c.owner == owner, runs.c.state.in_(ACTIVE))
                .values(lease_expires_at=until)
            )
            renewed += int(result.rowcount)
        for chunk in _chunks(sorted(live.sessions)):
            conn.execute(
                sessions.update()
                .where(sessions.c.session_key.in_(chunk), sessions.c.turn_owner == owner)
                .values(turn_lease_expires_at=turn_until)
            )
        return renewed

    async def settle_orphans(
        self, owner: str, now: datetime, live: LiveWork, suspects: frozenset[str] = frozenset()
    ) -> OrphanSettlement:
        """Settle `owner`'s own open work that no task of it holds (`live` says what does):

        - a run that never started is released (owner NULL, with its waiting turn) for
          `adopt_released`; one that started is `interrupted` (never re-run);
        - a running turn is handed back (owner NULL): `recover_turns` closes it interrupted,
          and its caller posts the visible notice;
        - a waiting turn is handed back (for `recover_turns` to adopt) only when it was
          already in `suspects`, i.e. seen without a task by the previous call too (one that
          is being opened right now is not in `live` yet); the others are returned as the
          next `suspects`;
        - a session turn lease held outside `live.sessions` is let go.
        """
        return await self._db.write(
            lambda conn: self._settle_orphans_op(conn, owner, now, live, suspects)
        )

    def _settle_orphans_op(
        self,
        conn: Connection,
        owner: str,
        now: datetime,
        live: LiveWork,
        suspects: frozenset[str],
    ) -> OrphanSettlement:
        rows = conn.execute(
            sa.select(runs).where(runs.c.owner == owner, runs.c.state.in_(ACTIVE))
        ).all()
        orphans = [_run(r) for r in rows if r.id not in live.runs]
        unstarted = [r.id for r in orphans if r.state is not RunState.RUNNING]
        released = self._release_op(conn, owner, unstarted) if unstarted else 0
        interrupted = self._interrupt_runs_op(
            conn, now, [r for r in orphans if r.state is RunState.RUNNING]
        )
        open_turns = conn.execute(
            sa.select(turns.c.id, turns.c.state).where(
                turns.c.owner == owner, turns.c.state.in_(OPEN_TURN)
            )
        ).all()
        loose = [t for t in open_turns if t.id not in live.turns]
        waiting = {t.id for t in loose if t.state != TurnState.RUNNING.value}
        disown = [t.id for t in loose if t.state == TurnState.RUNNING.value]
        disown += sorted(waiting & suspects)
        disowned = 0
        for chunk in _chunks(disown):
            result = conn.execute(
                turns.update()
                .where(turns.c.id.in_(chunk), turns.c.owner == owner, turns.c.state.in_(OPEN_TURN))
                .values(owner=None)
            )
            disowned += int(result.rowcount)
        held = conn.execute(
            sa.select(sessions.c.session_key).where(sessions.c.turn_owner == owner)
        ).scalars()
        freed: list[str] = []
        for chunk in _chunks(sorted(k for k in held if k not in live.sessions)):
            result = conn.execute(
                sessions.update()
                .where(sessions.c.session_key.in_(chunk), sessions.c.turn_owner == owner)
                .values(turn_owner=None, turn_id=None, turn_lease_expires_at=None)
                .returning(sessions.c.session_key)
            )
            freed.extend(result.scalars())
        if freed:
            announce(conn, Topic.SESSIONS, freed)
        return OrphanSettlement(
            released=released,
            interrupted=interrupted,
            disowned=disowned,
            freed=len(freed),
            suspects=frozenset(waiting - suspects),
        )

    async def earliest_foreign_lease(self, owner: str) -> datetime | None:
        """When the next lease of another owner's active run expires (to reap it then)."""
        return await self._db.read(lambda conn: self._earliest_foreign_lease_op(conn, owner))

    def _earliest_foreign_lease_op(self, conn: Connection, owner: str) -> datetime | None:
        value = (
            conn.execute(
                sa.select(sa.func.min(runs.c.lease_expires_at)).where(
                    runs.c.state.in_(ACTIVE), runs.c.owner.is_not(None), runs.c.owner != owner
                )
            )
        ).scalar_one()
        return value  # type: ignore[no-any-return]

    async def release(self, owner: str, run_ids: Sequence[str]) -> int:
        """Give back runs that never started (graceful stop), with their waiting turns, for
        the next engine to adopt.
        """
        return await self._db.write(lambda conn: self._release_op(conn, owner, run_ids))

    def _release_op(self, conn: Connection, owner: str, run_ids: Sequence[str]) -> int:
        released = 0
        for chunk in _chunks(list(run_ids)):
            result = conn.execute(
                runs.update()
                .where(runs.c.id.in_(chunk), runs.c.owner == owner, runs.c.state.in_(WAITING))
                .values(owner=None, lease_expires_at=None)
            )
            released += int(result.rowcount)
            conn.execute(
                turns.update()
                .where(
                    turns.c.run_id.in_(chunk),
                    turns.c.owner == owner,
                    turns.c.state.in_(WAITING_TURN),
                )
                .values(owner=None)
            )
        if released:
            announce(conn, Topic.RUNS)  # another process may adopt them now
        return released

    async def adopt_released(
        self, owner: str, lease_until: datetime, now: datetime
    ) -> list[ClaimedFire]:
        """Take over runs released by a graceful stop, or asked for by a person (a manual
        run); cancel those whose job is gone.
        """
        return await self._db.write(
            lambda conn: self._adopt_released_op(conn, owner, lease_until, now)
        )

    def _adopt_released_op(
        self, conn: Connection, owner: str, lease_until: datetime, now: datetime
    ) -> list[ClaimedFire]:
        released = sa.select(runs).where(runs.c.owner.is_(None), runs.c.state.in_(WAITING))
        if self.skip_locked:  # a replica adopting them at this moment keeps its rows
            released = released.with_for_update(skip_locked=True)
        rows = conn.execute(released).all()
        if not rows:
            return []
        job_rows: dict[str, Job] = {}
        for chunk in _chunks(list({r.job_id for r in rows})):
            for jr in conn.execute(sa.select(jobs).where(jobs.c.id.in_(chunk))):
                job_rows[jr.id] = _job(jr)
        # Compare-and-set: only the runs this update took are ours. Another replica adopting
        # at the same moment gets the others, never the same ones (a fire runs once).
        won: set[str] = set()
        for chunk in _chunks([r.id for r in rows]):
            won.update(
                conn.execute(
                    runs.update()
                    .where(runs.c.id.in_(chunk), runs.c.owner.is_(None), runs.c.state.in_(WAITING))
                    .values(owner=owner, lease_expires_at=lease_until)
                    .returning(runs.c.id)
                ).scalars()
            )
        rows = [r for r in rows if r.id in won]
        adopted = [r for r in rows if r.job_id in job_rows]
        orphaned = [r for r in rows if r.job_id not in job_rows]
        if orphaned:
            conn.execute(
                runs.update()
                .where(runs.c.id == sa.bindparam("b_id"), runs.c.owner == owner)
                .values(
                    state=RunState.CANCELLED.value,
                    finished_at=now,
                    owner=None,
                    lease_expires_at=None,
                    error="cancelled: the job was deleted before this fire ran",
                ),
                [{"b_id": r.id} for r in orphaned],
            )
        fire_turns = self._adopt_fire_turns(conn, adopted, job_rows, owner, now)
        fires = []
        for r in adopted:
            job = job_rows[r.job_id]
            if r.id in fire_turns:
                turn_id, deferred, zone = fire_turns[r.id]
                fires.append(
                    ClaimedFire(
                        run_id=r.id,
                        job=job,
                        fire_at=r.fire_at,
                        turn_id=turn_id,
                        deferred=deferred,
                        session_tz=zone.tz,
                        session_quiet=zone.quiet_hours,
                        manual=r.manual,
                        event_id=r.event_id,
                        event=r.event,
                    )
                )
            else:
                fires.append(
                    ClaimedFire(
                        run_id=r.id,
                        job=job,
                        fire_at=r.fire_at,
                        manual=r.manual,
                        event_id=r.event_id,
                        event=r.event,
                    )
                )
        return sorted(fires, key=lambda c: (c.fire_at, c.run_id))

    def _adopt_fire_turns(
        self,
        conn: Connection,
        adopted: Sequence[Row[Any]],
        job_rows: Mapping[str, Job],
        owner: str,
        now: datetime,
    ) -> dict[str, tuple[str, bool, SessionZone]]:
        """The waiting turns of adopted session-turn fires, taken over by `owner` (opened
        anew where none is left): run id -> (turn id, deferred, the session's zone and quiet
        hours).
        """
        bound = [r for r in adopted if job_rows[r.job_id].session_turn]
        if not bound:
            return {}
        out: dict[str, tuple[str, bool, SessionZone]] = {}
        missing: list[Row[Any]] = []
        for chunk in _chunks(bound):
            ids = [r.id for r in chunk]
            found = {
                t.run_id: t
                for t in conn.execute(
                    sa.select(
                        turns.c.id,
                        turns.c.run_id,
                        turns.c.state,
                        sessions.c.tz,
                        sessions.c.quiet_hours,
                    )
                    .join(sessions, sessions.c.session_key == turns.c.session_key)
                    .where(turns.c.run_id.in_(ids), turns.c.state.in_(WAITING_TURN))
                )
            }
            conn.execute(
                turns.update()
                .where(turns.c.run_id.in_(ids), turns.c.state.in_(WAITING_TURN))
                .values(owner=owner)
            )
            for r in chunk:
                t = found.get(r.id)
                if t is None:
                    missing.append(r)
                else:
                    zone = SessionZone(t.tz, t.quiet_hours)
                    out[r.id] = (t.id, t.state == TurnState.DEFERRED.value, zone)
        if missing:
            # A run claimed before fires opened their turns at claim time: open one now.
            claimed = {r.id: (job_rows[r.job_id], r.fire_at) for r in missing}
            rows = [
                {"id": r.id, "session_key": r.session_key, "fire_at": r.fire_at} for r in missing
            ]
            opened = self._open_fire_turns(conn, rows, claimed, now, owner)
            if opened:
                conn.execute(turns.insert(), [t for t, _ in opened.values()])
                # The run says what its new turn is: queued, or deferred behind an open one.
                for row in rows:
                    state = row["state"]
                    stamp = "deferred_at" if state == RunState.DEFERRED.value else "queued_at"
                    conn.execute(
                        runs.update()
                        .where(runs.c.id == row["id"], runs.c.state == RunState.CLAIMED.value)
                        .values({"state": state, stamp: now})
                    )
            for run_id, (turn, zone) in opened.items():
                out[run_id] = (turn["id"], turn["state"] == TurnState.DEFERRED.value, zone)
        return out
