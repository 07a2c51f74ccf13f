"""Python function calls per fire on the main path, counted (not timed): the same every run.

    PYTHONPATH=src python -m bench calls [--fires N] [--sessions S ...] [--top K] [--pg]
                                         [--floor ROUNDS]

A burst of N one-shots due at once on a FakeClock (bound to S sessions; 0 = unbound), the
bench's no-op runner, default settings. Over the burst only (not the set-up), cProfile counts
the calls on the store's writer thread (inside each write transaction) and on the event loop;
the SQL counter counts transactions, statements and the rows they bind (an executemany's
parameter sets). Prints one row per workload and, with `--top`, the writer's and the loop's K
functions with the most calls per fire (where a change to the hot path shows first).
Wall-clock rates move with the machine's load; these do not.

`--floor` (SQLite only) also records every statement the writer sent during the burst, with
its bound parameters and transaction boundaries, and replays them with plain `sqlite3` on a
copy of the database as it was when the burst began (same pragmas): the median of ROUNDS
replays is what SQLite itself needs for this burst's writes, with no Python above the driver,
so fires / that time is the fastest any code could go with the rows the path writes today
(two columns: fires per second of SQLite's CPU time, steady on a busy machine, and per second
of wall time, which adds the disk's waits and a busy machine's).
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import pstats
import shutil
import sqlite3
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import Engine as SaEngine

from agentcron.store import database
from bench import bench_engine
from bench.bench_engine import DEFAULT_PG_URL, SqlCounter, Where, fake_clock_burst, pg_problem

WRITER_THREAD = "agentcron-db-write"  # database.Database's writer pool's thread names

# One recorded step of the writer: ("sql", statement, parameters, executemany) or ("commit",).
Step = tuple[Any, ...]


class _Profiles:
    """A writer-thread profile (enabled inside each write transaction) and a loop profile."""

    def __init__(self) -> None:
        self.writer = cProfile.Profile()
        self.loop = cProfile.Profile()
        self.active = False
        self._lock = threading.Lock()

    def wrap(self, transaction: Callable[..., Any]) -> Callable[..., Any]:
        def profiled(*args: Any) -> Any:
            if not self.active:
                return transaction(*args)
            with self._lock:  # one writer thread; the lock only guards a stray caller
                self.writer.enable()
                try:
                    return transaction(*args)
                finally:
                    self.writer.disable()

        return profiled


class _Statements:
    """The writer's statements over the burst: the rows they bind and, to replay them, the
    statements themselves with their parameters and commits.
    """

    def __init__(self, record: bool) -> None:
        self.rows = 0
        self.record = record
        self.steps: list[Step] = []
        self.snapshot: Path | None = None

    def statement(
        self, conn: Any, cursor: Any, statement: str, params: Any, ctx: Any, many: bool
    ) -> None:
        if not threading.current_thread().name.startswith(WRITER_THREAD):
            return
        if (
            many
            and params
            and (isinstance(params, dict) or not isinstance(params[0], tuple | list | dict))
        ):
            # SQLAlchemy's "insertmanyvalues": one INSERT of several VALUES groups (flat
            # parameters: a tuple on SQLite, a dict of numbered names on PostgreSQL), reported
            # as part of an executemany
            many = False
            self.rows += statement.count("), (") + 1
        else:
            self.rows += len(params) if many else 1
        if self.record:
            self.steps.append(("sql", statement, params, many))

    def commit(self, conn: Any) -> None:
        if self.record and threading.current_thread().name.startswith(WRITER_THREAD):
            self.steps.append(("commit",))


@contextmanager
def _over_the_burst(enter: Callable[[], None], leave: Callable[[], None]) -> Iterator[None]:
    """Run `enter` as the burst begins and `leave` as it ends: fake_clock_burst enters its
    SqlCounter around the burst only (not the set-up), so a subclass of it marks both.
    """

    class Counter(SqlCounter):
        def __enter__(self) -> SqlCounter:
            enter()
            return super().__enter__()

        def __exit__(self, *exc: object) -> None:
            leave()
            super().__exit__(*exc)

    bench_engine.SqlCounter = Counter  # type: ignore[misc]
    try:
        yield
    finally:
        bench_engine.SqlCounter = SqlCounter  # type: ignore[misc]


@contextmanager
def _profiled() -> Iterator[_Profiles]:
    """Profile the writer thread and the loop over the burst."""
    profiles = _Profiles()
    transaction = database._transaction

    def enter() -> None:
        profiles.active = True
        profiles.loop.enable()

    def leave() -> None:
        profiles.loop.disable()
        profiles.active = False

    database._transaction = profiles.wrap(transaction)
    try:
        with _over_the_burst(enter, leave):
            yield profiles
    finally:
        database._transaction = transaction


@contextmanager
def _recorded(db: Path | None) -> Iterator[_Statements]:
    """Count the writer's rows over the burst; with `db` (the burst's SQLite file) record its
    statements too, and copy the database as the burst begins.
    """
    seen = _Statements(record=db is not None)

    def enter() -> None:
        if db is not None:  # everything before the burst has settled (and committed)
            seen.snapshot = _copy(db, db.with_suffix(".before"))
        event.listen(SaEngine, "before_cursor_execute", seen.statement)
        event.listen(SaEngine, "commit", seen.commit)

    def leave() -> None:
        event.remove(SaEngine, "before_cursor_execute", seen.statement)
        event.remove(SaEngine, "commit", seen.commit)

    with _over_the_burst(enter, leave):
        yield seen


def _copy(src: Path, dest: Path) -> Path:
    """A consistent copy of a live SQLite database (the online backup API)."""
    with sqlite3.connect(src) as source, sqlite3.connect(dest) as target:
        source.backup(target)
    source.close()
    target.close()
    return dest


def _replay(snapshot: Path, steps: Sequence[Step], rounds: int) -> tuple[float, float, Path]:
    """The median CPU time and wall time plain sqlite3 takes to run the recorded steps on
    copies of the snapshot, with the store's pragmas; and the last copy (the burst's writes,
    replayed). The CPU time is SQLite's own work (the loop around it is a few calls per
    statement); the wall time adds waiting for the disk and, on a busy machine, for a core.
    """
    cpu_times, times = [], []
    for i in range(rounds):
        path = snapshot.with_suffix(f".replay{i}")
        shutil.copyfile(snapshot, path)
        conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        for pragma in ("journal_mode = WAL", "synchronous = NORMAL", "foreign_keys = ON"):
            conn.execute(f"PRAGMA {pragma}")
        cur = conn.cursor()
        cpu_began, began = time.process_time(), time.perf_counter()
        for step in steps:  # the store's own BEGIN IMMEDIATE is one of the statements
            if step[0] == "commit":
                cur.execute("COMMIT")
                continue
            _, statement, params, many = step
            if many:
                cur.executemany(statement, params)
            else:
                cur.execute(statement, params).fetchall()
        if conn.in_transaction:
            cur.execute("COMMIT")
        times.append(time.perf_counter() - began)
        cpu_times.append(time.process_time() - cpu_began)
        conn.close()
    return statistics.median(cpu_times), statistics.median(times), path


def _calls(profile: cProfile.Profile) -> tuple[int, list[tuple[int, str]]]:
    stats = pstats.Stats(profile)
    total = 0
    rows = []
    for (file, line, name), (_cc, nc, _tt, _ct, _callers) in stats.stats.items():  # type: ignore[attr-defined]
        total += nc
        rows.append((nc, f"{Path(file).name}:{line}({name})"))
    rows.sort(reverse=True)
    return total, rows


async def _measure(where: Where, fires: int, sessions: int, top: int, floor: int) -> list[str]:
    # Two bursts alike: one profiled, one whose statements are seen (a listener inside the
    # profile would add its own calls to the writer's).
    with _profiled() as profiles:
        burst = await fake_clock_burst(
            where, f"calls{sessions}", fires, sessions=sessions, limit=300, count_sql=True
        )
    name = f"rows{sessions}"
    db = where.tmp / f"{name}.db" if floor and where.pg_url is None else None
    with _recorded(db) as seen:
        again = await fake_clock_burst(
            where, name, fires, sessions=sessions, limit=300, count_sql=True
        )
    if min(burst.done, again.done) != fires:
        raise SystemExit(f"not all {fires:,} fires ended within the limit")
    writer, writer_rows = _calls(profiles.writer)
    loop, loop_rows = _calls(profiles.loop)
    counts = burst.counts
    statements = counts["execute"] + counts["executemany"]
    label = f"{fires:,} {'bound over ' + format(sessions, ',') if sessions else 'unbound'}"
    cell = "- | -"
    if seen.snapshot is not None:
        cpu, wall, _ = _replay(seen.snapshot, seen.steps, floor)
        cell = f"{fires / cpu:,.0f} | {fires / wall:,.0f}"
    lines = [
        f"| {label} ({where.label}) | {writer / fires:,.0f} | {loop / fires:,.0f} "
        f"| {counts['commit'] / fires:.3f} | {statements / fires:.2f} "
        f"| {seen.rows / fires:.1f} | {cell} |"
    ]
    for title, rows, total in (("writer", writer_rows, writer), ("loop", loop_rows, loop)):
        if top:
            lines.append(f"\n{title}: the {top} functions with the most calls per fire")
            lines += [f"  {nc / fires:7.1f}  {nc / total:6.1%}  {name}" for nc, name in rows[:top]]
    return lines


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench calls", description=__doc__)
    parser.add_argument("--fires", type=int, default=2_000)
    parser.add_argument("--sessions", type=int, nargs="+", default=[200, 10, 0])
    parser.add_argument("--top", type=int, default=0)
    parser.add_argument("--pg", action="store_true", help="on PostgreSQL (AGENTCRON_BENCH_PG_URL)")
    parser.add_argument(
        "--floor",
        type=int,
        default=0,
        metavar="ROUNDS",
        help="SQLite: replay the writer's statements with plain sqlite3 (median of ROUNDS)",
    )
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        where = Where("SQLite", Path(tmp))
        if args.pg:
            problem = pg_problem(DEFAULT_PG_URL)
            if problem:
                raise SystemExit(problem)
            where = Where("PostgreSQL", Path(tmp), DEFAULT_PG_URL)
        print(
            "| per fire | writer thread: Python calls | event loop: Python calls "
            "| commits | SQL statements | rows bound "
            "| floor: sqlite3 replay, fires/s of CPU | ... of wall time |"
            "\n| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
        )
        for sessions in args.sessions:
            for line in asyncio.run(_measure(where, args.fires, sessions, args.top, args.floor)):
                print(line, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
