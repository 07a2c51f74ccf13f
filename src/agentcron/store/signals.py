"""Cross-process signals: a change is announced by the transaction that makes it, and heard by
every other process on the database (PostgreSQL LISTEN/NOTIFY; SQLite's change counter).

Sending: a store operation calls `announce(conn, topic, keys)` inside its write transaction.
On PostgreSQL the notices go out with `pg_notify` in that same transaction, so they are
delivered if and only if it commits. On SQLite nothing is sent: several processes on one file
share one machine, and every other process sees `PRAGMA data_version` move on its kept writer
connection (a commit by any other connection), then re-reads what it waits for.

Hearing: `SignalHub` runs one task per process. PostgreSQL: a dedicated connection LISTENs on
one channel per topic, reconnects with backoff after a fault, and tells every listener to
re-read everything (`keys=None`) after a reconnect and every `fallback` seconds, so a notice
lost in a fault costs latency, never correctness. SQLite: the database's files are looked at
from outside (`os.stat` of the file and its WAL, on the loop: a few microseconds) every `poll`
seconds while other processes are changing it (and for `quiet_after` seconds after the last
change heard, or after the start), every `idle_poll` seconds once they are quiet; only when
the files changed, or every `recheck` seconds whatever they say, is the change counter read
(one PRAGMA on the writer thread, a thread hop). Reading the counter every 50 ms cost an idle
process ~12 ms of CPU a second, and on this kind of machine every wake-up of the loop costs
~0.15 ms: so an idle process looks twice a second, and the first change after a quiet spell
is heard within `idle_poll`, the ones after it within `poll`. A process ignores its own
notices: it acted on its own changes when it made them.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
from collections.abc import Callable, Iterable, Sequence
from enum import StrEnum
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection
from ulid import ULID

log = logging.getLogger(__name__)

_NOTES = "agentcron.signals"  # pending notices of a transaction, in its connection's info
_CHANNEL = "agentcron_"  # + topic: one LISTEN channel per topic
_MAX_PAYLOAD = 7_000  # bytes; PostgreSQL's limit is 8,000
_NOTIFY = sa.text("SELECT pg_notify(:channel, :payload)")


def file_stamp(path: str) -> tuple[tuple[int, int, int] | None, ...]:
    """How a SQLite database's file and its WAL look from outside (size, change time in ns,
    inode; None for a missing file): a commit by any process changes it.
    """
    out: list[tuple[int, int, int] | None] = []
    for name in (path, f"{path}-wal"):
        try:
            st = os.stat(name)
        except OSError:
            out.append(None)
        else:
            out.append((st.st_size, st.st_mtime_ns, st.st_ino))
    return tuple(out)


class Topic(StrEnum):
    """What changed (the keys of a notice say which ones; none: re-read all of it)."""

    JOBS = "jobs"  # a job was created, changed, paused, resumed or deleted: re-read the schedule
    SESSIONS = "sessions"  # sessions' turn leases were let go (keys: session keys)
    APPROVALS = "approvals"  # approvals were decided or expired (keys: approval ids)
    RUNS = "runs"  # fires were handed back unstarted, or a person asked for one: adopt them
    EVENTS = "events"  # live turn events relayed between replicas (payload: JSON lines)


_RAW_TOPICS = frozenset({Topic.EVENTS})  # payload topics (`publish`), not notices

Listener = Callable[[Topic, Sequence[str] | None], None]
"""Called on the event loop with a topic and its keys: a notice (an empty list: the whole
topic changed); or None: something may have changed unannounced (a reconnect, the fallback
tick, SQLite's counter): re-read everything you wait for.
"""


def announce(conn: Connection, topic: Topic, keys: Iterable[str] = ()) -> None:
    """Queue a notice of `topic` (for `keys`, or for the whole topic) in the transaction of
    `conn`; it is sent when the transaction commits. A no-op on SQLite (see the module).
    """
    if conn.dialect.name != "postgresql":
        return
    notes: dict[Topic, set[str]] = conn.info.setdefault(_NOTES, {})
    notes.setdefault(topic, set()).update(keys)


def send_announced(conn: Connection, origin: str) -> None:
    """Send the notices queued by `announce` in this transaction (called just before commit)."""
    notes: dict[Topic, set[str]] | None = conn.info.pop(_NOTES, None)
    if not notes:
        return
    params = [
        {"channel": _CHANNEL + topic.value, "payload": payload}
        for topic, keys in notes.items()
        for payload in _payloads(origin, sorted(keys))
    ]
    conn.execute(_NOTIFY, params)


def drop_announced(conn: Connection) -> None:
    """Forget the notices of a transaction that did not commit."""
    conn.info.pop(_NOTES, None)


def _payloads(origin: str, keys: list[str]) -> list[str]:
    """`{"o": origin, "k": [...]}` documents under PostgreSQL's payload limit (several when the
    keys do not fit in one; an empty list means the whole topic).
    """
    if not keys:
        return [json.dumps({"o": origin, "k": []})]
    out: list[str] = []
    batch: list[str] = []
    size = 0
    for key in keys:
        cost = len(key.encode()) + 4
        if batch and size + cost > _MAX_PAYLOAD:
            out.append(json.dumps({"o": origin, "k": batch}))
            batch, size = [], 0
        batch.append(key)
        size += cost
    out.append(json.dumps({"o": origin, "k": batch}))
    return out


def _parse(payload: str) -> tuple[str, list[str]] | None:
    try:
        doc = json.loads(payload)
        origin, keys = doc["o"], doc["k"]
    except (ValueError, KeyError, TypeError):
        return None
    if not isinstance(origin, str) or not isinstance(keys, list):
        return None
    return origin, [k for k in keys if isinstance(k, str)]


class SignalHub:
    """This process's ear for other processes' changes, and its mouth for relayed events.

    `subscribe(topic, listener)` registers a listener; `start()` begins hearing, `stop()` ends
    it. `publish(topic, payload)` sends a payload outside any transaction (PostgreSQL only; the
    live-event relay): best effort, a fault drops it (what it carries is also durable).
    """

    def __init__(
        self,
        url: sa.URL,
        *,
        origin: str | None = None,
        data_version: Callable[[], Any] | None = None,
        fallback: float = 10.0,
        poll: float = 0.05,
        idle_poll: float = 0.5,
        quiet_after: float = 5.0,
        recheck: float = 5.0,
        connect_timeout: float = 5.0,
    ) -> None:
        self._url = url
        self.dialect = url.get_backend_name()
        self.origin = origin or str(ULID())
        self._data_version = data_version  # SQLite: an awaitable read of the change counter
        self.fallback = fallback
        self.poll = poll
        self.idle_poll = idle_poll  # SQLite: the files looked at this often once quiet
        self.quiet_after = quiet_after  # ... after this long without another's change
        self.recheck = recheck  # SQLite: the counter read at least this often
        self.counter_reads = 0  # SQLite: reads of the change counter (tests, idle cost)
        self._connect_timeout = connect_timeout
        self._listeners: dict[Topic, list[Listener]] = {}
        self._raw: dict[Topic, list[Callable[[str, str], None]]] = {}
        self._task: asyncio.Task[None] | None = None
        self._publisher: Any = None  # psycopg.AsyncConnection, opened on first publish
        self._publish_lock = asyncio.Lock()
        self._stopped = False  # after stop(): publish sends nothing (no connection reopened)
        self.connected = asyncio.Event()  # PostgreSQL: LISTENing now (tests wait on it)
        self.heard = 0  # notices heard from other processes (metrics, tests)

    # -- listeners -------------------------------------------------------------------------

    def subscribe(self, topic: Topic, listener: Listener) -> Callable[[], None]:
        """Call `listener(topic, keys)` for every notice of `topic` from another process."""
        self._listeners.setdefault(topic, []).append(listener)
        return lambda: self._listeners.get(topic, []).remove(listener)

    def subscribe_raw(
        self, topic: Topic, listener: Callable[[str, str], None]
    ) -> Callable[[], None]:
        """Call `listener(origin, payload)` for every payload `publish`ed on `topic` by
        another process (the live-event relay; no re-read ticks); returns unsubscribe.

        A raw topic is LISTENed only by a process that has a raw listener for it (a process
        without one, such as the library, is not sent the relay's traffic): subscribe before
        `start()`; a later subscription is LISTENed from the next fallback tick.
        """
        self._raw.setdefault(topic, []).append(listener)
        return lambda: self._raw.get(topic, []).remove(listener)

    def _wanted(self) -> set[Topic]:
        """The topics to LISTEN on: every notice topic; a raw topic only with a listener."""
        return {t for t in Topic if t not in _RAW_TOPICS or self._raw.get(t)}

    def _tell(self, topic: Topic, keys: Sequence[str] | None) -> None:
        for listener in list(self._listeners.get(topic, ())):
            try:
                listener(topic, keys)
            except Exception:
                log.exception("a signal listener failed", extra={"topic": topic.value})

    def resync(self) -> None:
        """Tell every listener to re-read everything (something may have been missed)."""
        for topic in Topic:
            self._tell(topic, None)

    def _heard(self, channel: str, payload: str) -> None:
        topic_name = channel.removeprefix(_CHANNEL)
        try:
            topic = Topic(topic_name)
        except ValueError:
            return
        raw = self._raw.get(topic)
        if raw:
            origin, _, body = payload.partition("\n")
            if origin != self.origin:
                self.heard += 1
                for listener in list(raw):
                    try:
                        listener(origin, body)
                    except Exception:
                        log.exception("a relay listener failed")
            return
        parsed = _parse(payload)
        if parsed is None or parsed[0] == self.origin:
            return
        self.heard += 1
        self._tell(topic, parsed[1])

    # -- lifecycle -------------------------------------------------------------------------

    async def start(self) -> None:
        """Begin hearing. Returns once listening (PostgreSQL: LISTEN is in place, or the
        connect timeout passed and it goes on trying in the background; SQLite: the counter's
        first value is read), so that no change committed after `start` goes unheard.
        """
        if self._task is not None:
            return
        self._stopped = False
        if self.dialect == "postgresql":
            self._task = asyncio.create_task(self._listen(), name="agentcron-signals")
            try:
                async with asyncio.timeout(self._connect_timeout):
                    await self.connected.wait()
            except TimeoutError:
                log.warning("cross-process signals: not connected yet; trying in the background")
        elif self._data_version is not None:
            first = await self._data_version()
            self._task = asyncio.create_task(self._watch(first), name="agentcron-signals")

    async def stop(self) -> None:
        self._stopped = True
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        if self._publisher is not None:
            with contextlib.suppress(Exception):
                await self._publisher.close()
            self._publisher = None
        self.connected.clear()

    # -- PostgreSQL ------------------------------------------------------------------------

    def _conninfo(self) -> str:
        return self._url.set(drivername="postgresql").render_as_string(hide_password=False)

    async def _connect(self) -> Any:
        import psycopg

        # The keepalives and the user timeout make a stalled connection fail in seconds.
        return await psycopg.AsyncConnection.connect(
            self._conninfo(),
            autocommit=True,
            connect_timeout=max(1, int(self._connect_timeout)),
            keepalives=1,
            keepalives_idle=5,
            keepalives_interval=2,
            keepalives_count=3,
            tcp_user_timeout=int(self._connect_timeout * 2000),
        )

    async def _listen(self) -> None:
        backoff = 0.1
        first = True
        while True:
            conn = None
            try:
                conn = await self._connect()
                listening: set[Topic] = set()
                for topic in self._wanted():
                    await conn.execute(f"LISTEN {_CHANNEL}{topic.value}")
                    listening.add(topic)
                self.connected.set()
                backoff = 0.1
                if not first:
                    log.info("cross-process signals reconnected; re-reading")
                    self.resync()  # notices sent while we were away are lost: re-read
                first = False
                while True:
                    async for notice in conn.notifies(timeout=self.fallback):
                        self._heard(notice.channel, notice.payload)
                    # The fallback tick: prove the connection lives, and re-read anyway.
                    async with asyncio.timeout(self._connect_timeout):
                        await conn.execute("SELECT 1")
                        for topic in self._wanted() - listening:  # subscribed since
                            await conn.execute(f"LISTEN {_CHANNEL}{topic.value}")
                            listening.add(topic)
                    self.resync()
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                self.connected.clear()
                log.warning(
                    "cross-process signals: connection lost (%s); reconnecting in %.1f s",
                    type(exc).__name__,
                    backoff,
                )
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, 5.0)
            finally:
                if conn is not None:
                    with contextlib.suppress(Exception):
                        await conn.close()

    async def publish(self, topic: Topic, payload: str) -> bool:
        """Send `payload` (under 7,000 bytes) to the other processes' `subscribe_raw`
        listeners of `topic`. PostgreSQL only; False when it could not be sent (or the hub
        was stopped).
        """
        if self.dialect != "postgresql" or self._stopped:
            return False
        message = f"{self.origin}\n{payload}"
        async with self._publish_lock:
            for attempt in range(2):
                if self._stopped:  # stopped while this waited for the lock
                    return False
                try:
                    if self._publisher is None:
                        self._publisher = await self._connect()
                    async with asyncio.timeout(self._connect_timeout):
                        await self._publisher.execute(
                            "SELECT pg_notify(%s, %s)", (_CHANNEL + topic.value, message)
                        )
                    return True
                except Exception as exc:
                    if self._publisher is not None:
                        with contextlib.suppress(Exception):
                            await self._publisher.close()
                    self._publisher = None
                    if attempt:
                        log.warning("relaying an event failed (%s)", type(exc).__name__)
        return False

    # -- SQLite ----------------------------------------------------------------------------

    async def _watch(self, last: object) -> None:
        read = self._data_version
        if read is None:
            return
        path = self._url.database or ""
        loop = asyncio.get_running_loop()
        seen, read_at = file_stamp(path), loop.time()
        lively = read_at  # when another process's change was last heard (or the start)
        while True:
            now = loop.time()
            await asyncio.sleep(self.poll if now - lively < self.quiet_after else self.idle_poll)
            # A commit by any process writes the WAL (its size, change time or inode move).
            # The time kept is coarse (a clock tick), so a rewrite of a WAL just restarted
            # to the same size within one tick could look unchanged: the counter is read
            # every `recheck` seconds whatever the files say.
            stamp, now = file_stamp(path), loop.time()
            if stamp == seen and now - read_at < self.recheck:
                continue
            seen, read_at = stamp, now
            self.counter_reads += 1
            try:
                version = await read()
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.debug("reading the change counter failed (%s)", exc)
                version = None
            if version is not None:
                if last is not None and version != last:
                    self.heard += 1
                    lively = loop.time()
                    self.resync()
                last = version
