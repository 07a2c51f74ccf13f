"""Store contract: the behaviour every backend must have (parametrized over BACKENDS).

The fire ledger's methods are called through `FireLedger` (store/interface.py), the protocol the
engine is typed against; the job and run methods the tests also use are not in a protocol yet,
so those go through `SqlStore`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

import pytest
import sqlalchemy as sa
from alembic.script import ScriptDirectory

from agentcron.config import EngineSettings
from agentcron.domain.jobs import Catchup, CreatedBy, Job, JobKind, JobPolicy, NewJob, Overlap
from agentcron.domain.runs import ClaimedFire, FirePlan
from agentcron.domain.sessions import Entry, Role
from agentcron.domain.states import RunState, TurnState
from agentcron.engine.policies import arm, finish_job, plan_fires
from agentcron.errors import InvalidInputError
from agentcron.schedule import AtSpec, CronSpec, DaysSpec, EverySpec, next_fire
from agentcron.store import (
    ArmedJob,
    JobLimitError,
    JobNotFoundError,
    JobOutcome,
    ProtectedJobError,
    RunNotFoundError,
    SessionNotFoundError,
    SqlStore,
    Transition,
    VersionConflictError,
    new_id,
)
from agentcron.store.interface import FireLedger
from agentcron.store.migrate import alembic_config
from agentcron.store.writes import (
    InsertJobs,
    InSession,
    JobFinish,
    JobsInserted,
    RunEnd,
    TurnFinish,
    TurnFinished,
    TurnStart,
    TurnStarted,
)
from tests.conftest import T0
from tests.helpers.store_setup import insert_jobs, record_runs

MIN = timedelta(minutes=1)
SHARED = "unified:default"
SETTINGS = EngineSettings()


def planner(job: Job, now: datetime, active: int, waiting: int) -> FirePlan:
    return plan_fires(job, now, active, waiting, SETTINGS)


def finisher(job: Job, outcome: JobOutcome) -> JobFinish:
    return finish_job(job, outcome, SETTINGS)


def armed(name: str = "j", spec: Any = None, **kw: Any) -> ArmedJob:
    spec = spec or EverySpec(seconds=60, anchor=T0)
    job_id = new_id()
    policy = kw.pop("policy", JobPolicy())
    fire, due = arm(spec, policy, job_id, T0)
    return ArmedJob(job_id, NewJob(name=name, spec=spec, policy=policy, **kw), fire, due)


@pytest.fixture
def ledger(store: SqlStore) -> FireLedger:
    """The store as the engine sees it."""
    return store


async def claim(ledger: FireLedger, now: datetime, owner: str = "me:1:A") -> list[ClaimedFire]:
    fires, *_ = await ledger.claim_due(
        now, owner=owner, lease_until=now + MIN, limit=100, planner=planner
    )
    return fires


async def test_an_inserted_job_is_what_a_read_returns(store: SqlStore) -> None:
    # insert_jobs builds its answer from its input; it must equal the stored row, field for field
    full = armed(
        "full", spec=CronSpec(expr="0 9 * * 1-5", tz="Europe/Berlin"), session_key="web:9",
        kind=JobKind.AGENT_TURN, created_by=CreatedBy.USER, idempotency_key="k9",
        policy=JobPolicy(overlap=Overlap.DEFER, catchup=Catchup.ALL,
                         catchup_window=timedelta(hours=2), max_failures=3, max_runs=4,
                         end_at=T0 + timedelta(days=30), delete_after_run=True, jitter=True),
        message="Check", deliver=True, channel="telegram", to="42", channel_meta={"a": 1},
    )  # fmt: skip
    paused = armed("paused", enabled=False)
    created = await insert_jobs(store, [full, paused], T0)
    assert created == [await store.get_job(full.id), await store.get_job(paused.id)]


async def test_a_days_spec_round_trips(store: SqlStore) -> None:
    spec = DaysSpec(
        step=2,
        unit="week",
        on=(2, 4),
        time="10:00",
        start=T0.date() + timedelta(days=1),
        tz="Europe/Berlin",
    )
    (job,) = await insert_jobs(store, [armed("steps", spec=spec)], T0)
    got = await store.get_job(job.id)
    assert got.spec == spec
    assert got.next_fire_at == next_fire(spec, T0)


async def test_insert_get_list_and_filters(store: SqlStore) -> None:
    a, b, c = (
        armed("a", session_key="web:1"),
        armed("b", session_key="web:2", kind=JobKind.RECALL, created_by=CreatedBy.AGENT),
        armed("c", enabled=False),
    )
    created = await insert_jobs(store, [a, b, c], T0)
    assert [j.name for j in created] == ["a", "b", "c"]
    got = await store.get_job(a.id)
    assert got == created[0]
    assert got.spec == EverySpec(seconds=60, anchor=T0)
    assert got.next_fire_at == T0 + MIN
    assert got.created_at == T0
    assert got.version == 1
    assert [j.name for j in await store.list_jobs(session_key="web:2")] == ["b"]
    assert [j.name for j in await store.list_jobs(kind=JobKind.RECALL)] == ["b"]
    assert [j.name for j in await store.list_jobs(enabled=False)] == ["c"]
    disabled = await store.get_job(c.id)
    assert disabled.next_run_at is None  # created paused: not armed
    assert await store.count_jobs() == 3
    ids = [j.id for j in await store.list_jobs()]
    assert ids == sorted(ids)  # ULIDs sort by creation


async def test_ids_are_sortable_and_unique() -> None:
    ids = [new_id() for _ in range(2000)]
    assert len(set(ids)) == 2000
    assert all(len(i) == 26 for i in ids)


async def test_missing_rows_raise_typed_errors(store: SqlStore) -> None:
    with pytest.raises(JobNotFoundError, match="no job with id 'nope'"):
        await store.get_job("nope")
    with pytest.raises(RunNotFoundError, match="no run with id 'nope'"):
        await store.get_run("nope")
    with pytest.raises(JobNotFoundError):
        await store.update_job("nope", {"name": "x"}, T0, expected_version=1)
    with pytest.raises(JobNotFoundError):
        await store.delete_job("nope")


async def test_idempotency_key_is_unique_per_session(store: SqlStore) -> None:
    first = armed("a", session_key="web:1", idempotency_key="k")
    (a,) = await insert_jobs(store, [first], T0)
    (again,) = await insert_jobs(store, [armed("b", session_key="web:1", idempotency_key="k")], T0)
    (other,) = await insert_jobs(store, [armed("c", session_key="web:2", idempotency_key="k")], T0)
    (legacy1,) = await insert_jobs(store, [armed("d", idempotency_key="k")], T0)
    (legacy2,) = await insert_jobs(store, [armed("e", idempotency_key="k")], T0)
    assert again.id == a.id
    assert other.id != a.id
    assert legacy2.id == legacy1.id  # unbound jobs share one idempotency scope
    assert await store.count_jobs() == 3


async def test_compare_and_set_update(store: SqlStore) -> None:
    (job,) = await insert_jobs(store, [armed("a")], T0)
    updated = await store.update_job(
        job.id, {"name": "b", "spec": CronSpec(expr="@daily")}, T0 + MIN, expected_version=1
    )
    assert updated.name == "b"
    assert updated.spec == CronSpec(expr="0 0 * * *")
    assert updated.version == 2
    assert updated.updated_at == T0 + MIN
    with pytest.raises(VersionConflictError, match="is at version 2, not 1"):
        await store.update_job(job.id, {"name": "c"}, T0, expected_version=1)
    assert (await store.get_job(job.id)).name == "b"


async def test_system_jobs_are_protected_from_deletion(store: SqlStore) -> None:
    (system,) = await insert_jobs(store, [armed("hb", kind=JobKind.SYSTEM_EVENT)], T0)
    with pytest.raises(ProtectedJobError):
        await store.delete_job(system.id)
    await store.delete_job(system.id, allow_system=True)
    assert await store.count_jobs() == 0


async def test_next_due_is_the_earliest_armed_job(store: SqlStore, ledger: FireLedger) -> None:
    async def next_due() -> datetime | None:  # a claim with nothing due claims nothing
        result = await ledger.claim_due(
            T0, owner="me:1:A", lease_until=T0 + MIN, limit=100, planner=planner
        )
        assert result.fires == []
        return result.next_due_at

    assert await next_due() is None
    await insert_jobs(
        store,
        [
            armed("late", spec=AtSpec(at=T0 + 10 * MIN)),
            armed("paused", spec=AtSpec(at=T0 + MIN), enabled=False),
            armed("soon", spec=AtSpec(at=T0 + 3 * MIN)),
        ],
        T0,
    )
    assert await next_due() == T0 + 3 * MIN


async def test_claim_advances_the_job_in_the_same_transaction(
    store: SqlStore, ledger: FireLedger
) -> None:
    (job,) = await insert_jobs(store, [armed("a", policy=JobPolicy(max_runs=5))], T0)
    assert await claim(ledger, T0 + 30 * timedelta(seconds=1)) == []  # not due yet
    (fire,) = await claim(ledger, T0 + MIN)
    assert fire.fire_at == T0 + MIN
    assert fire.job.next_fire_at == T0 + 2 * MIN
    stored = await store.get_job(job.id)
    assert stored.next_fire_at == T0 + 2 * MIN
    assert stored.remaining_runs == 4
    assert stored.run_count == 1
    assert stored.version == 2
    assert stored.lease_owner == "me:1:A"
    run = await store.get_run(fire.run_id)
    assert run.state is RunState.CLAIMED
    assert run.owner == "me:1:A"
    assert run.lease_expires_at == T0 + 2 * MIN
    assert run.claimed_at == T0 + MIN


async def test_a_second_claim_of_the_same_fire_loses(store: SqlStore, ledger: FireLedger) -> None:
    (job,) = await insert_jobs(store, [armed("a")], T0)
    (first,) = await claim(ledger, T0 + MIN, owner="a:1:A")
    assert await claim(ledger, T0 + MIN, owner="b:1:B") == []  # already advanced
    # even if the job is rewound to the same fire, the unique (job_id, fire_at) wins
    current = await store.get_job(job.id)
    await store.update_job(
        job.id,
        {"next_fire_at": T0 + MIN, "next_run_at": T0 + MIN},
        T0 + MIN,
        expected_version=current.version,
    )
    assert await claim(ledger, T0 + MIN, owner="b:1:B") == []
    runs = await store.list_runs(job_id=job.id)
    assert [r.id for r in runs] == [first.run_id]


async def test_a_claim_keeps_the_fires_that_land_beside_one_recorded_already(
    store: SqlStore, ledger: FireLedger
) -> None:
    """In one claim, a fire whose run exists already loses and opens no turn; the fires
    beside it in the same batch are claimed as usual.
    """
    (a,) = await insert_jobs(store, [armed("a", session_key="api:s")], T0)
    (first,) = await claim(ledger, T0 + MIN, owner="a:1:A")
    current = await store.get_job(a.id)
    await store.update_job(  # rewound to the fire it had, as an edit racing a claim might
        a.id,
        {"next_fire_at": T0 + MIN, "next_run_at": T0 + MIN},
        T0 + MIN,
        expected_version=current.version,
    )
    (b,) = await insert_jobs(store, [armed("b", session_key="api:s")], T0)
    fires = await claim(ledger, T0 + MIN, owner="b:1:B")
    assert [(f.job.name, f.deferred) for f in fires] == [("b", True)]  # behind a's open turn
    assert [r.id for r in await store.list_runs(job_id=a.id)] == [first.run_id]
    assert [r.id for r in await store.list_runs(job_id=b.id)] == [fires[0].run_id]
    turns = [await store.sessions.get_turn(f.turn_id or "") for f in (first, fires[0])]
    assert [t.run_id for t in turns] == [first.run_id, fires[0].run_id]


async def test_insert_jobs_keeps_the_job_limit(store: SqlStore) -> None:
    """Past `max_jobs` an insert stores nothing; system jobs do not count; duplicates add none."""
    await insert_jobs(store, [armed("sys", kind=JobKind.SYSTEM_EVENT)], T0, max_jobs=2)
    keyed = armed("k", idempotency_key="once")
    await insert_jobs(store, [armed("a"), keyed], T0, max_jobs=2)
    with pytest.raises(JobLimitError) as refused:
        await insert_jobs(store, [armed("b")], T0, max_jobs=2)
    assert (refused.value.limit, refused.value.stored, refused.value.adding) == (2, 2, 1)
    with pytest.raises(JobLimitError):
        await insert_jobs(store, [armed("c"), armed("d")], T0, max_jobs=3)
    assert sorted(j.name for j in await store.list_jobs()) == ["a", "k", "sys"]
    again = armed("k", idempotency_key="once")
    (found,) = await insert_jobs(store, [again], T0, max_jobs=2)
    assert found.id == keyed.id
    await insert_jobs(store, [armed("e")], T0)  # no limit given: none applies


async def test_an_in_session_insert_reads_its_session_in_the_transaction(store: SqlStore) -> None:
    """`InSession`: the session's zone read and the job armed inside the write; a missing
    session or a request its `arm` refuses is that write's answer, the batch goes on.
    """
    await store.sessions.ensure_session("api:a", T0, tz="Europe/Berlin")
    zones: list[str] = []

    def arming(name: str) -> Callable[[str], ArmedJob]:
        def arm_in(tz: str) -> ArmedJob:
            zones.append(tz)
            return armed(name, spec=CronSpec(expr="0 9 * * *", tz=tz), session_key=SHARED)

        return arm_in

    def refuse(tz: str) -> ArmedJob:
        raise InvalidInputError(f"not in {tz}")

    writes = [
        InsertJobs([], T0, in_session=InSession("api:a", arming("ok"), SHARED, "Shared")),
        InsertJobs([], T0, in_session=InSession("api:missing", arming("never"))),
        InsertJobs([], T0, in_session=InSession("api:a", refuse)),
        InsertJobs([armed("plain")], T0, in_session=InSession("api:a", arming("more"))),
    ]
    ok, missing, wrong, both = await store.apply(writes, finisher)
    assert zones == ["Europe/Berlin", "Europe/Berlin"]  # never called for a missing session
    assert isinstance(ok, JobsInserted)
    assert ok.refused is None
    assert [j.spec for j in ok.jobs] == [CronSpec(expr="0 9 * * *", tz="Europe/Berlin")]
    assert ok.jobs == [await store.get_job(ok.jobs[0].id)]
    assert isinstance(missing, JobsInserted)
    assert missing.jobs == []
    assert isinstance(missing.refused, SessionNotFoundError)
    assert isinstance(wrong, JobsInserted)
    assert wrong.jobs == []
    assert isinstance(wrong.refused, InvalidInputError)
    assert str(wrong.refused) == "not in Europe/Berlin"
    assert isinstance(both, JobsInserted)
    assert [j.name for j in both.jobs] == ["plain", "more"]
    assert sorted(j.name for j in await store.list_jobs()) == ["more", "ok", "plain"]
    shared = await store.sessions.get_session(SHARED)  # created with the job, titled
    assert (shared.title, shared.tz) == ("Shared", "UTC")


async def test_concurrent_claims_split_the_fires(store: SqlStore, ledger: FireLedger) -> None:
    await insert_jobs(store, [armed(f"j{i}") for i in range(40)], T0)
    results = await asyncio.gather(*(claim(ledger, T0 + MIN, owner=f"o:{i}:X") for i in range(6)))
    fires = [(f.job.id, f.fire_at) for batch in results for f in batch]
    assert len(fires) == 40
    assert len(set(fires)) == 40


async def test_a_claim_opens_turns_in_existing_and_missing_sessions(
    store: SqlStore, ledger: FireLedger
) -> None:
    """A fire's session is read with its zone; one that does not exist (yet) is made with the
    defaults, and a session that exists is left as it was.
    """
    await store.sessions.ensure_session("api:kept", T0, tz="Europe/Berlin", title="Kept")
    await insert_jobs(
        store, [armed("kept", session_key="api:kept"), armed("new", session_key="api:new")], T0
    )
    fires = {f.job.name: f for f in await claim(ledger, T0 + MIN)}
    assert fires.keys() == {"kept", "new"}
    assert (fires["kept"].session_tz, fires["new"].session_tz) == ("Europe/Berlin", "UTC")
    assert all(f.turn_id is not None and not f.deferred for f in fires.values())
    kept, made = (
        await store.sessions.get_session("api:kept"),
        await store.sessions.get_session("api:new"),
    )
    assert (kept.tz, kept.title, kept.created_at) == ("Europe/Berlin", "Kept", T0)
    assert (made.channel, made.chat_id, made.tz) == ("api", "new", "UTC")
    for f in fires.values():
        turn = await store.sessions.get_turn(f.turn_id or "")
        assert (turn.session_key, turn.state) == (f.job.session_key, TurnState.QUEUED)


async def test_jobs_due_at_one_instant_are_claimed_in_the_order_they_were_made(
    store: SqlStore, ledger: FireLedger
) -> None:
    # ids grow with time; stored last-made first, so neither backend's storage order helps
    made = [armed(f"j{i}", spec=AtSpec(at=T0 + MIN), session_key="api:herd") for i in range(12)]
    await insert_jobs(store, list(reversed(made)), T0)
    pages = []
    for _ in range(3):
        fires, *_ = await ledger.claim_due(
            T0 + MIN, owner="o:1:A", lease_until=T0 + 2 * MIN, limit=5, planner=planner
        )
        pages.append([f.job.name for f in fires])
    assert pages == [[f"j{i}" for i in range(5)], [f"j{i}" for i in range(5, 10)], ["j10", "j11"]]


async def test_claim_work_is_proportional_to_due_jobs(store: SqlStore, ledger: FireLedger) -> None:
    await insert_jobs(
        store, [armed(f"far{i}", spec=AtSpec(at=T0 + timedelta(days=9))) for i in range(300)], T0
    )
    await insert_jobs(store, [armed("due", spec=AtSpec(at=T0 + MIN))], T0)
    fires, examined, next_due, _ = await ledger.claim_due(
        T0 + MIN, owner="o:1:A", lease_until=T0 + 2 * MIN, limit=100, planner=planner
    )
    assert examined == 1
    assert [f.job.name for f in fires] == ["due"]
    assert next_due == T0 + timedelta(days=9)


async def test_transitions_merge_and_terminal_states_are_final(
    store: SqlStore, ledger: FireLedger
) -> None:
    (job,) = await insert_jobs(store, [armed("a")], T0)
    (fire,) = await claim(ledger, T0 + MIN)
    t = T0 + MIN
    # through the group commit, in one transaction, as the journal writes them
    await store.apply(
        [
            RunEnd(Transition(fire.run_id, RunState.QUEUED, t)),
            RunEnd(Transition(fire.run_id, RunState.RUNNING, t + timedelta(seconds=1))),
            RunEnd(
                Transition(
                    fire.run_id,
                    RunState.SUCCEEDED,
                    t + timedelta(seconds=5),
                    output="hello",
                    usage={"input_tokens": 10},
                    prompt="rendered",
                    prompt_ref={"id": "p", "version": 1, "sha256": "x"},
                ),
                JobOutcome(job.id, RunState.SUCCEEDED, t + timedelta(seconds=5)),
            ),
        ],
        finisher,
    )
    run = await store.get_run(fire.run_id)
    assert run.state is RunState.SUCCEEDED
    assert (run.queued_at, run.started_at, run.finished_at) == (
        t,
        t + timedelta(seconds=1),
        t + timedelta(seconds=5),
    )
    assert run.output == "hello"
    assert run.usage == {"input_tokens": 10}
    assert run.prompt_ref == {"id": "p", "version": 1, "sha256": "x"}
    assert run.owner is None
    assert run.lease_expires_at is None
    await record_runs(store, [Transition(fire.run_id, RunState.RUNNING, t + MIN)])
    assert (await store.get_run(fire.run_id)).state is RunState.SUCCEEDED
    stored = await store.get_job(job.id)
    assert stored.last_status is RunState.SUCCEEDED
    assert stored.last_run_at == t + timedelta(seconds=5)
    assert stored.lease_owner is None


async def test_reap_settles_runs_of_expired_and_dead_owners_only(
    store: SqlStore, ledger: FireLedger
) -> None:
    await insert_jobs(store, [armed(f"j{i}") for i in range(4)], T0)
    now = T0 + MIN
    owners = {
        "gone:1:A": now + MIN,  # lease runs out
        "dead:2:B": now + timedelta(hours=1),  # process provably gone
        "dead:3:C": now + timedelta(hours=1),
        "alive:4:D": now + timedelta(hours=1),
    }
    run_of: dict[str, str] = {}
    for owner, until in owners.items():
        (fire,) = (
            await ledger.claim_due(now, owner=owner, lease_until=until, limit=1, planner=planner)
        ).fires
        run_of[owner] = fire.run_id
    # A and B had started their turns; C had not
    await record_runs(
        store, [Transition(run_of[o], RunState.RUNNING, now) for o in ("gone:1:A", "dead:2:B")]
    )
    assert await ledger.earliest_foreign_lease("me") == now + MIN
    reaped = await ledger.reap(now + 2 * MIN, "me", lambda owner: owner.startswith("dead:"))
    assert {r.id for r in reaped} == {run_of["gone:1:A"], run_of["dead:2:B"]}
    assert all(r.state is RunState.INTERRUPTED for r in reaped)
    after = {r.id: r for r in await store.list_runs()}
    assert after[run_of["gone:1:A"]].state is RunState.INTERRUPTED
    assert after[run_of["dead:2:B"]].state is RunState.INTERRUPTED
    # never started: released (no owner) for adoption, not interrupted
    assert (after[run_of["dead:3:C"]].state, after[run_of["dead:3:C"]].owner) == (
        RunState.CLAIMED,
        None,
    )
    assert (after[run_of["alive:4:D"]].state, after[run_of["alive:4:D"]].owner) == (
        RunState.CLAIMED,
        "alive:4:D",
    )
    adopted = await ledger.adopt_released("me", now + 3 * MIN, now + 2 * MIN)
    assert [f.run_id for f in adopted] == [run_of["dead:3:C"]]


async def test_release_and_adopt(store: SqlStore, ledger: FireLedger) -> None:
    (job, gone) = await insert_jobs(store, [armed("kept"), armed("gone")], T0)
    fires = await claim(ledger, T0 + MIN, owner="old:1:A")
    assert await ledger.release("old:1:A", [f.run_id for f in fires]) == 2
    await store.delete_job(gone.id)
    adopted = await ledger.adopt_released("new:1:B", T0 + 3 * MIN, T0 + 2 * MIN)
    assert [f.job.id for f in adopted] == [job.id]
    run = await store.get_run(adopted[0].run_id)
    assert (run.owner, run.state) == ("new:1:B", RunState.CLAIMED)
    orphan = (await store.list_runs(job_id=gone.id))[0]
    assert orphan.state is RunState.CANCELLED


async def test_prune_keeps_the_newest_per_job_and_drops_old_ones(
    store: SqlStore, ledger: FireLedger
) -> None:
    (job,) = await insert_jobs(store, [armed("a")], T0)
    now = T0
    for _ in range(8):
        now += MIN
        (fire,) = await claim(ledger, now)
        await record_runs(store, [Transition(fire.run_id, RunState.SUCCEEDED, now)])
    removed = await ledger.prune_runs(
        now, keep_per_job=3, max_age=timedelta(days=1), job_ids=[job.id]
    )
    assert removed == 5
    kept = await store.list_runs(job_id=job.id)
    assert [r.fire_at for r in kept] == [now, now - MIN, now - 2 * MIN]
    assert (
        await ledger.prune_runs(now + timedelta(days=2), keep_per_job=3, max_age=timedelta(days=1))
        == 3
    )


@pytest.mark.fresh_db  # an empty database: the store's first open creates the schema
async def test_schema_is_migrated_and_sqlite_is_configured(store: SqlStore, store_url: str) -> None:
    engine = sa.create_engine(store_url)
    with engine.connect() as conn:
        version = conn.execute(sa.text("select version_num from alembic_version")).scalar()
        tables = set(sa.inspect(conn).get_table_names())
        if store.dialect == "sqlite":
            assert conn.execute(sa.text("pragma journal_mode")).scalar() == "wal"
    engine.dispose()
    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    assert await store.schema_revision() == version == head
    assert {"jobs", "runs", "sessions", "messages", "turns", "owners"} <= tables
    # opening again is a no-op upgrade
    again = SqlStore(store_url)
    await again.open()
    await again.close()


async def test_concurrent_writers_do_not_hit_database_is_locked(
    store: SqlStore, ledger: FireLedger
) -> None:
    async def writer(i: int) -> None:
        for k in range(20):
            (job,) = await insert_jobs(store, [armed(f"w{i}-{k}", spec=AtSpec(at=T0 + MIN))], T0)
            while True:  # a claim may bump the version between our read and write
                current = await store.get_job(job.id)
                try:
                    await store.update_job(
                        job.id, {"name": f"w{i}-{k}!"}, T0, expected_version=current.version
                    )
                    break
                except VersionConflictError:
                    continue

    async def claimer() -> None:
        for _ in range(20):
            await claim(ledger, T0 + MIN, owner="c:1:C")
            await asyncio.sleep(0)

    await asyncio.gather(*(writer(i) for i in range(10)), claimer(), claimer())
    assert await store.count_jobs() == 200
    while await claim(ledger, T0 + MIN, owner="c:1:C"):
        pass
    assert await store.count_runs() == 200


def test_naive_datetimes_are_refused_by_the_store() -> None:
    from agentcron.store.schema import UTCDateTime

    with pytest.raises(ValueError, match="naive datetime"):
        UTCDateTime().process_bind_param(
            datetime(2026, 1, 1), sa.create_engine("sqlite://").dialect
        )


async def test_an_unreadable_job_is_paused_and_the_others_still_fire(
    store: SqlStore, ledger: FireLedger
) -> None:
    good, bad = await insert_jobs(store, [armed("good"), armed("bad")], T0)
    # a row written by something else with a spec this version cannot read
    from agentcron.store.schema import jobs as jobs_table

    await store._db.write(
        lambda conn: conn.execute(
            jobs_table.update()
            .where(jobs_table.c.id == bad.id)
            .values(spec={"kind": "cron", "expr": "H H * * *"})
        )
    )
    fires = await claim(ledger, T0 + MIN)
    assert [f.job.id for f in fires] == [good.id]
    row = await store._db.read(
        lambda conn: conn.execute(sa.select(jobs_table).where(jobs_table.c.id == bad.id)).one()
    )
    assert not row.enabled
    assert row.next_run_at is None
    assert row.paused_reason.startswith("auto-paused: cannot plan this job: invalid cron")


async def test_migrations_produce_exactly_the_declared_schema(
    store: SqlStore, store_url: str
) -> None:
    import warnings

    from alembic.autogenerate import compare_metadata
    from alembic.migration import MigrationContext

    from agentcron.store.schema import metadata

    engine = sa.create_engine(store_url.replace("postgresql://", "postgresql+psycopg://"))
    with engine.connect() as conn, warnings.catch_warnings():
        # SQLite cannot reflect expression indexes; alembic warns and skips that one index
        warnings.simplefilter("ignore", UserWarning)
        warnings.simplefilter("ignore", sa.exc.SAWarning)
        diff = compare_metadata(
            MigrationContext.configure(conn, opts={"compare_type": True}), metadata
        )
    engine.dispose()
    assert diff == []


async def test_at_most_one_pending_recall_per_session(store: SqlStore) -> None:
    from agentcron.store import ConflictError

    await insert_jobs(store, [armed("r1", session_key="web:1", kind=JobKind.RECALL)], T0)
    with pytest.raises(ConflictError, match="already has a pending recall"):
        await insert_jobs(store, [armed("r2", session_key="web:1", kind=JobKind.RECALL)], T0)
    await insert_jobs(store, [armed("r3", session_key="web:2", kind=JobKind.RECALL)], T0)
    await insert_jobs(store, [armed("plain", session_key="web:1")], T0)
    assert await store.count_jobs() == 3


async def test_a_turn_never_starts_before_the_previous_turn_of_its_session_ended(
    store: SqlStore,
) -> None:
    """The replica race: a start stamped at 1.466 s waits in its group commit while the turn
    before it (another process's) ends, stamped 1.587 s, and lets go of the session. The start
    then takes the lease: its stored start is the previous turn's end, not 1.466 s, so the
    stored turns of a session never overlap.
    """
    key = "api:race"
    t0 = T0 + timedelta(seconds=0.952)
    first = await store.sessions.open_turn(key, "user", "one", t0, owner="replica-a")
    second = await store.sessions.open_turn(key, "user", "two", t0, owner="replica-b")

    def finish(job: Job, outcome: JobOutcome) -> JobFinish:
        raise AssertionError("no job outcome in this test")

    def start(turn_id: str, owner: str, at: datetime) -> TurnStart:
        entry = Entry(Role.USER, "go", {})
        return TurnStart(key, turn_id, owner, at, at + timedelta(minutes=5), entry)

    ended_at = T0 + timedelta(seconds=1.587)
    (began,) = await store.apply([start(first.id, "replica-a", t0)], finish)
    assert isinstance(began, TurnStarted)
    assert began.message is not None
    # B's start, stamped while A's turn still ran, is refused: A holds the session.
    early = T0 + timedelta(seconds=1.466)
    (refused,) = await store.apply([start(second.id, "replica-b", early)], finish)
    assert isinstance(refused, TurnStarted)
    assert refused.busy_until is not None
    end = TurnFinish(
        key, first.id, "replica-a", ended_at, TurnState.SUCCEEDED, Entry(Role.ASSISTANT, "ok", {})
    )
    await store.apply([end], finish)
    # Its retry carries the same stamp (made before it learned the session was free).
    (began,) = await store.apply([start(second.id, "replica-b", early)], finish)
    assert isinstance(began, TurnStarted)
    assert began.message is not None
    one, two = await store.sessions.get_turn(first.id), await store.sessions.get_turn(second.id)
    assert one.finished_at == ended_at
    assert two.started_at is not None
    assert two.started_at >= ended_at  # no overlap on the stored records
    assert began.message.created_at >= ended_at  # nor in the transcript's times


async def test_a_late_finish_of_a_turn_closed_by_recovery_writes_no_second_closure(
    store: SqlStore,
) -> None:
    """A process declared dead (fenced) may still finish a turn that a live replica already
    closed as interrupted, with its own notice: the late finish closes nothing twice.
    """
    key = "api:fenced"
    turn = await store.sessions.open_turn(key, "user", "one", T0, owner="replica-a")

    def finish(job: Job, outcome: JobOutcome) -> JobFinish:
        raise AssertionError("no job outcome in this test")

    start = TurnStart(key, turn.id, "replica-a", T0, T0 + MIN, Entry(Role.USER, "go", {}))
    await store.apply([start], finish)
    found = await store.sessions.recover_turns(T0 + MIN, "replica-b", lambda o: o == "replica-a")
    assert [t.id for t in found.interrupted] == [turn.id]
    late = TurnFinish(
        key, turn.id, "replica-a", T0 + MIN, TurnState.SUCCEEDED, Entry(Role.ASSISTANT, "ok", {})
    )
    (result,) = await store.apply([late], finish)
    assert isinstance(result, TurnFinished)
    assert result.message is None
    assert [m.role for m in await store.sessions.list_messages(key)] == [Role.USER]
    assert (await store.sessions.get_turn(turn.id)).state is TurnState.INTERRUPTED


async def test_run_history_pages_break_ties_on_the_fire_time_by_id(
    store: SqlStore, ledger: FireLedger
) -> None:
    jobs = await insert_jobs(
        store, [armed(f"j{i}", session_key=f"web:{i % 2}") for i in range(6)], T0
    )
    fires = await claim(ledger, T0 + MIN)  # one fire of each job, all at the same instant
    assert {f.fire_at for f in fires} == {T0 + MIN}
    assert len(fires) == 6
    every = await store.list_runs(limit=None)
    assert [r.id for r in every] == sorted((f.run_id for f in fires), reverse=True)
    assert {r.job_name for r in every} == {j.name for j in jobs}  # stored with the run
    seen: list[str] = []
    before = None
    while True:
        page = await store.list_runs(limit=4, before=before)
        seen += [r.id for r in page]
        if len(page) < 4:
            break
        before = (page[-1].fire_at, page[-1].id)
    assert seen == [r.id for r in every]  # each once, in order
    of_one = await store.list_runs(session_key="web:1", limit=None)
    assert [r.session_key for r in of_one] == ["web:1"] * 3
    assert await store.list_runs(since=T0 + 2 * MIN) == []
    gone = await store.delete_job(jobs[0].id)
    (kept,) = await store.list_runs(job_id=gone.id)
    assert kept.job_name == "j0"
    assert await store.has_runs(gone.id)
    assert not await store.has_runs("01NOSUCHJOB")


async def test_session_pages_and_search(store: SqlStore) -> None:
    titles = {"api:a": "Groceries", "api:b": "100% sure", "api:c": "snake_case", "api:d": None}
    for key, title in titles.items():  # one instant for all: the key breaks the tie
        await store.sessions.ensure_session(key, T0, title=title)
    await store.sessions.ensure_session("api:e", T0 + MIN)
    first = await store.sessions.list_sessions(limit=2)
    assert [s.key for s in first] == ["api:e", "api:d"]
    rest = await store.sessions.list_sessions(
        limit=10, before=(first[-1].updated_at, first[-1].key)
    )
    assert [s.key for s in rest] == ["api:c", "api:b", "api:a"]
    assert [s.key for s in await store.sessions.list_sessions(search="GROCER")] == ["api:a"]
    assert [s.key for s in await store.sessions.list_sessions(search="%")] == ["api:b"]  # literal
    assert [s.key for s in await store.sessions.list_sessions(search="_")] == ["api:c"]
    assert [s.key for s in await store.sessions.list_sessions(search="API:D")] == ["api:d"]


async def test_a_transcript_reads_back_from_any_seq(store: SqlStore) -> None:
    await store.sessions.ensure_session("api:t", T0)
    for i in range(5):
        await store.sessions.append_message("api:t", Role.USER, f"m{i}", T0)
    seqs = [m.seq for m in await store.sessions.list_messages("api:t", before=2**53, limit=2)]
    assert seqs == [4, 5]  # the newest, in order
    assert [m.seq for m in await store.sessions.list_messages("api:t", before=4, limit=2)] == [2, 3]
    assert [m.seq for m in await store.sessions.list_messages("api:t", before=2)] == [1]
    assert await store.sessions.list_messages("api:t", after=2**40) == []
