"""executemany for the hot path, without SQLAlchemy's per-row parameter machinery.

A burst writes thousands of rows a second through a handful of statements. SQLAlchemy Core
builds and post-processes a parameter dictionary per row (construct_params), which cost more
than running the statements. Here a statement is compiled once per dialect and set of columns,
and each value goes through its column type's own bind processor — the very conversion Core
applies — so what is stored is exactly what Core would store. Only for statements without
RETURNING, whose parameters are plain bind parameters (no expanding IN lists).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from sqlalchemy import exc as sa_exc
from sqlalchemy.engine import Connection, CursorResult
from sqlalchemy.sql import ClauseElement
from sqlalchemy.sql.compiler import SQLCompiler

_Row = Callable[[dict[str, Any]], tuple[Any, ...]]
_Plan = tuple[str, tuple[str, ...], _Row]
"""SQL text; the parameter names in order; the function that makes one row's parameters."""

_plans: dict[tuple[int, str, tuple[str, ...]], tuple[ClauseElement, _Plan]] = {}


def _row_function(params: Sequence[tuple[str, Any, bool]]) -> _Row:
    """A function that turns a row into its statement parameters, in order: per parameter the
    row's value, through its column's bind processor when it has one, or a fixed value.

    Built once per statement as one tuple expression (generated source, evaluated with only
    the processors and fixed values in scope): a row costs one call, not a loop over its
    columns with a branch per value, which was most of the writer's Python per row.
    """
    scope: dict[str, Any] = {}
    parts = []
    for i, (name, value, from_row) in enumerate(params):
        if not from_row:
            scope[f"v{i}"] = value  # the fixed value, already processed
            parts.append(f"v{i}")
        elif value is None:
            parts.append(f"row[{name!r}]")
        else:
            scope[f"p{i}"] = value
            parts.append(f"p{i}(row[{name!r}])")
    source = f"lambda row: ({', '.join(parts)}{',' if len(parts) == 1 else ''})"
    # The names are the statement's own column keys (repr-quoted), never outside input; the
    # processors are the lambda's globals (a lambda made by eval sees no eval locals).
    function: _Row = eval(source, {"__builtins__": {}, **scope})
    return function


def _plan(conn: Connection, stmt: ClauseElement, keys: tuple[str, ...]) -> _Plan:
    dialect = conn.dialect
    cache_key = (id(stmt), dialect.name, keys)
    found = _plans.get(cache_key)
    if found is not None and found[0] is stmt:
        return found[1]
    compiled = stmt.compile(dialect=dialect, column_keys=list(keys))
    if not isinstance(compiled, SQLCompiler):
        raise TypeError(f"not a SQL statement: {stmt!r}")
    names = tuple(compiled.positiontup or ()) if compiled.positional else tuple(compiled.binds)
    processors: dict[str, Any] = dict(compiled._bind_processors)
    params: list[tuple[str, Any, bool]] = []
    for name in names:
        process = processors.get(name)
        if name in keys:
            params.append((name, process, True))
        else:  # a value written into the statement (`.values(consecutive_failures=0)`)
            value = compiled.binds[name].effective_value
            params.append((name, value if process is None else process(value), False))
    plan: _Plan = (compiled.string, names if not compiled.positional else (), _row_function(params))
    if len(_plans) > 1024:  # statements are built once; this only bounds a misuse
        _plans.clear()
    _plans[cache_key] = (stmt, plan)  # the statement is kept, so its id stays its own
    return plan


def executemany(
    conn: Connection, stmt: ClauseElement, rows: Sequence[dict[str, Any]]
) -> CursorResult[Any] | None:
    """Run `stmt` once per row (all rows with the same keys); returns the result (its
    rowcount is the total), or None when there are no rows.
    """
    if not rows:
        return None
    sql, names, values_of = _plan(conn, stmt, tuple(rows[0]))
    if names:  # a named paramstyle: one dict per row
        values: list[Any] = [dict(zip(names, values_of(row), strict=True)) for row in rows]
    else:
        values = [values_of(row) for row in rows]
    return conn.exec_driver_sql(sql, values)


@contextlib.contextmanager
def pipelined(conn: Connection) -> Iterator[None]:
    """On PostgreSQL, the statements run inside are sent without waiting for each answer
    (psycopg's pipeline mode): a group commit's writes cost one round trip, not one per
    statement. Writes only: SQLAlchemy reads a statement's answer as soon as it is sent,
    and inside a pipeline there is none yet (a read returns no rows). Elsewhere: nothing.
    """
    if conn.dialect.name != "postgresql":
        yield
        return
    import psycopg  # only on PostgreSQL: SQLite installs need no psycopg

    driver = conn.connection.driver_connection
    try:
        with driver.pipeline():  # type: ignore[union-attr]
            yield
    except psycopg.Error as exc:
        # An answer read at the pipeline's end (its sync), outside SQLAlchemy's statement
        # wrapping: wrapped as SQLAlchemy would, so that a lost connection is an outage
        # (`is_transient`) and a refusal stays a refusal.
        lost = conn.dialect.is_disconnect(exc, driver, None)  # type: ignore[arg-type]
        if lost:
            conn.invalidate(exc)
        raise sa_exc.DBAPIError.instance(
            None, None, exc, psycopg.Error, connection_invalidated=lost, ismulti=False
        ) from exc
