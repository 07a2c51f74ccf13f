"""The scratch PostgreSQL databases (tests/helpers/scratch_pg.py): each taken one is new and
the caller's only, each given back is dropped, close() drops what is left; a `migrated` one is
a copy of one template, prepared once; a failure says so."""

from __future__ import annotations

import re
import threading

import pytest

from tests.helpers.scratch_pg import PREFIX, ScratchDatabases


class FakeServer:
    """Records the statements; the databases that exist; can be told to fail."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.statements: list[str] = []
        self.databases: set[str] = set()
        self.fail_on: str | None = None
        self.connections = 0
        self.prepared: list[str] = []

    def prepare(self, name: str) -> None:
        assert name in self.databases
        self.prepared.append(name)

    def connect(self) -> FakeAdmin:
        with self.lock:
            self.connections += 1
        return FakeAdmin(self)


class FakeAdmin:
    def __init__(self, server: FakeServer) -> None:
        self.server = server

    def execute(self, query: str) -> object:
        server = self.server
        if server.fail_on is not None and query.startswith(server.fail_on):
            raise OSError("the server said no")
        name = re.findall(r'"([^"]+)"', query)[0]
        if " TEMPLATE " in query:
            assert re.findall(r'"([^"]+)"', query)[1] in server.prepared
        with server.lock:
            server.statements.append(query)
            if query.startswith("CREATE DATABASE"):
                server.databases.add(name)
            else:
                server.databases.discard(name)
        return None

    def close(self) -> None:
        pass


def test_each_database_taken_is_fresh_and_each_given_back_is_dropped() -> None:
    server = FakeServer()
    pool = ScratchDatabases(server.connect, ahead=2)
    taken = [pool.take(timeout=5) for _ in range(5)]
    assert len(set(taken)) == 5
    assert all(name.startswith(PREFIX) and name in server.databases for name in taken)
    for name in taken:
        pool.give_back(name)
    assert pool.close(timeout=5) == []
    assert server.databases == set()  # those given back and those made ahead: all dropped
    creates = [s for s in server.statements if s.startswith("CREATE DATABASE")]
    drops = [s for s in server.statements if s.startswith("DROP DATABASE")]
    assert len(creates) == len(drops) >= 5
    assert all(s.endswith("WITH (FORCE)") for s in drops)
    assert server.connections == 1  # one connection, in the thread


def test_nothing_is_made_before_the_first_take() -> None:
    server = FakeServer()
    pool = ScratchDatabases(server.connect)
    assert pool.close(timeout=5) == []
    assert server.statements == []
    with pytest.raises(RuntimeError, match="closed"):
        pool.take(timeout=5)


def test_a_database_that_cannot_be_made_fails_the_take_with_the_reason() -> None:
    server = FakeServer()
    server.fail_on = "CREATE"
    pool = ScratchDatabases(server.connect)
    with pytest.raises(RuntimeError, match="could not make a scratch database: the server said"):
        pool.take(timeout=5)
    assert pool.close(timeout=5) == []


def test_a_drop_that_fails_is_reported_by_close() -> None:
    server = FakeServer()
    pool = ScratchDatabases(server.connect, ahead=0)
    name = pool.take(timeout=5)
    server.fail_on = "DROP"
    pool.give_back(name)
    (failure,) = pool.close(timeout=5)
    assert failure.startswith(f"DROP DATABASE {name}: the server said no")


def test_migrated_databases_copy_one_template_prepared_once() -> None:
    server = FakeServer()
    pool = ScratchDatabases(server.connect, prepare=server.prepare, ahead=1)
    fresh = pool.take("fresh", timeout=5)
    copies = [pool.take("migrated", timeout=5) for _ in range(3)]
    (template,) = server.prepared
    assert template not in [fresh, *copies]
    made = {s.split('"')[1]: s for s in server.statements if s.startswith("CREATE DATABASE")}
    assert made[fresh] == f'CREATE DATABASE "{fresh}"'
    assert all(made[c] == f'CREATE DATABASE "{c}" TEMPLATE "{template}"' for c in copies)
    for name in [fresh, *copies]:
        pool.give_back(name)
    assert pool.close(timeout=5) == []
    assert server.databases == set()  # the template too


def test_a_template_that_cannot_be_prepared_fails_the_take_and_is_dropped() -> None:
    server = FakeServer()

    def prepare(name: str) -> None:
        raise OSError("no schema")

    pool = ScratchDatabases(server.connect, prepare=prepare)
    assert pool.take("fresh", timeout=5)
    with pytest.raises(RuntimeError, match="could not make a scratch database: no schema"):
        pool.take("migrated", timeout=5)
    pool.close(timeout=5)
    assert len(server.databases) == 1  # only the fresh one taken (the caller's), not given back


def test_without_prepare_only_fresh_databases() -> None:
    pool = ScratchDatabases(FakeServer().connect)
    with pytest.raises(ValueError, match="prepare"):
        pool.take("migrated", timeout=5)
