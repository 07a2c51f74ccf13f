"""The hot path's statement helpers: `executemany` and `pipelined` (PostgreSQL's pipeline
mode). Inside a pipeline the errors are those of plain statements: a refusal stays a refusal,
a lost connection is an outage, and nothing of the transaction is kept.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import Connection

from agentcron.store.bulk import executemany, pipelined
from agentcron.store.database import Database
from agentcron.store.errors import StoreUnavailableError

_METADATA = sa.MetaData()
_T = sa.Table(
    "t",
    _METADATA,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("note", sa.Text),
)
_INSERT = _T.insert()
_UPDATE = _T.update().where(_T.c.id == sa.bindparam("b_id")).values(note=sa.bindparam("note"))


@pytest.fixture
async def database(store_url: str) -> AsyncIterator[Database]:
    db = Database(store_url)
    db.open()
    await db.write(lambda conn: _METADATA.create_all(conn))
    try:
        yield db
    finally:
        db.close()


def _rows(conn: Connection) -> list[tuple[int, str]]:
    return [(r.id, r.note) for r in conn.execute(sa.select(_T).order_by(_T.c.id))]


async def test_statements_in_a_pipeline_land_in_order(database: Database) -> None:
    def op(conn: Connection) -> list[tuple[int, str]]:
        with pipelined(conn):
            executemany(conn, _INSERT, [{"id": i, "note": "new"} for i in range(5)])
            executemany(conn, _UPDATE, [{"b_id": i, "note": "changed"} for i in (1, 3)])
        return _rows(conn)  # after the pipeline: its writes are seen in the transaction

    seen = await database.write(op)
    after = await database.read(_rows)
    assert seen == after
    assert after == [(0, "new"), (1, "changed"), (2, "new"), (3, "changed"), (4, "new")]


async def test_a_refused_statement_in_a_pipeline_is_a_refusal_and_nothing_is_kept(
    database: Database,
) -> None:
    await database.write(lambda conn: executemany(conn, _INSERT, [{"id": 1, "note": "kept"}]))

    def op(conn: Connection) -> None:
        with pipelined(conn):
            executemany(conn, _INSERT, [{"id": 2, "note": "lost"}])
            executemany(conn, _INSERT, [{"id": 1, "note": "duplicate"}])  # the primary key

    with pytest.raises(sa.exc.IntegrityError):
        await database.write(op)
    assert await database.read(_rows) == [(1, "kept")]
    # The writer's connection is usable again.
    await database.write(lambda conn: executemany(conn, _INSERT, [{"id": 3, "note": "next"}]))
    assert await database.read(_rows) == [(1, "kept"), (3, "next")]


@pytest.mark.postgres
@pytest.mark.parametrize("store_url", ["postgresql"], indirect=True)
async def test_a_connection_lost_inside_a_pipeline_is_an_outage(database: Database) -> None:
    def op(conn: Connection) -> None:
        with pipelined(conn):
            executemany(conn, _INSERT, [{"id": 1, "note": "lost"}])
            # The server ends this session, as a restart or a network cut would.
            conn.exec_driver_sql("SELECT pg_terminate_backend(pg_backend_pid())")
            executemany(conn, _INSERT, [{"id": 2, "note": "lost"}])

    with pytest.raises(StoreUnavailableError):
        await database.write(op)
    # Nothing landed, and the next write gets a working connection.
    assert await database.read(_rows) == []
    await database.write(lambda conn: executemany(conn, _INSERT, [{"id": 3, "note": "next"}]))
    assert await database.read(_rows) == [(3, "next")]


@pytest.mark.postgres
@pytest.mark.parametrize("store_url", ["postgresql"], indirect=True)
async def test_a_writer_connection_that_died_between_writes_costs_one_outage_answer(
    database: Database, store_url: str
) -> None:
    """The writer's connection is not pinged before each transaction (a round trip each): one
    that died meanwhile fails its next write as an outage, with nothing written, and the
    write after it gets a new connection.
    """
    import psycopg

    pid = await database.write(
        lambda conn: conn.exec_driver_sql("SELECT pg_backend_pid()").scalar()
    )
    admin_url = store_url.replace("postgresql+psycopg://", "postgresql://")
    with psycopg.connect(admin_url, autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
    with pytest.raises(StoreUnavailableError):
        await database.write(lambda conn: executemany(conn, _INSERT, [{"id": 1, "note": "x"}]))
    await database.write(lambda conn: executemany(conn, _INSERT, [{"id": 2, "note": "y"}]))
    assert await database.read(_rows) == [(2, "y")]
