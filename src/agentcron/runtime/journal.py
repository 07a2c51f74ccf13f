"""Group commit: every write submitted while a transaction runs goes into the next one."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from agentcron.runtime.backoff import Backoff
from agentcron.store.errors import StoreError, StoreUnavailableError
from agentcron.store.interface import Finisher, GroupCommit
from agentcron.store.writes import Write, WriteResult

log = logging.getLogger(__name__)

Listener = Callable[[Sequence[Write], Sequence[WriteResult]], None]
"""Called after each commit with the writes and their results (stats, waiters)."""

_RETRY_S = 1.0
_DETACHED_RETRIES = 5
STOP_RETRY_S = 5.0  # once a stop began, how long writes still wait for the database


@dataclass(eq=False)
class _Item:
    write: Write
    future: asyncio.Future[WriteResult]
    detached: bool  # nobody awaits it: a failure is retried, then logged
    tries: int = 0


@dataclass(eq=False)
class Journal:
    """Collects the writes of the fire -> turn path (turn starts and finishes, run changes)
    and applies them in one transaction per round: while one transaction runs, the next
    batch gathers, so a burst of N fires costs a few transactions instead of several per fire.

    `write()` waits until its write is committed (a turn starts only once its start is
    durable); `post()` does not wait.

    An outage (`StoreUnavailableError`: the database unreachable or locked, nothing committed)
    never drops a write nor turns it into a failure: the batch goes back to the head of the
    queue and is tried again, whole, after a pause (`backoff`: 0.1 s doubling to 5 s), until
    it lands.
    Only a stop ends the waiting (`begin_stop`: after `STOP_RETRY_S` the writes still
    unwritten fail with `StoreUnavailableError`; the next start's recovery settles them). A
    refusal (`StoreError`) is still the caller's answer.
    """

    store: GroupCommit
    finisher: Finisher
    max_batch: int = 2000
    listeners: list[Listener] = field(default_factory=list)
    backoff: Backoff = field(default_factory=Backoff)  # the pause while the database is down
    _queue: list[_Item] = field(default_factory=list)
    _wake: asyncio.Event = field(default_factory=asyncio.Event)
    _busy: bool = False
    _task: asyncio.Task[None] | None = None
    _outage: bool = False  # the last try failed: said once in the log, and once when it ends
    _stop_by: float | None = None  # loop time after which a stop gives up on the database
    _stopping: asyncio.Event = field(default_factory=asyncio.Event)

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name="agentcron-journal")

    def begin_stop(self, wait: float = STOP_RETRY_S) -> None:
        """A stop is coming: while the database is unreachable, writes wait for it at most
        `wait` more seconds, then fail (the next start recovers what they would have written).
        """
        if self._stop_by is None:
            self._stop_by = time.monotonic() + wait
            self._stopping.set()

    async def close(self) -> None:
        """Commit what is pending, then stop."""
        self.begin_stop()
        await self.drain()
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    @property
    def pending(self) -> bool:
        """Writes wait or a transaction is under way."""
        return bool(self._queue) or self._busy

    def submit(self, write: Write) -> asyncio.Future[WriteResult]:
        """Queue `write` for the next transaction; the future resolves once it is committed."""
        future: asyncio.Future[WriteResult] = asyncio.get_running_loop().create_future()
        self._queue.append(_Item(write, future, detached=False))
        self._wake.set()
        return future

    async def write(self, write: Write, then: Callable[[], object] | None = None) -> WriteResult:
        """Queue `write` and wait until it is committed (not started yet, as while the store
        is opened to create jobs before the engine starts: applied at once, alone). `then`
        runs right after `write` is queued, before any wait: what it submits goes into the
        same transaction, after `write` (not called when `write` is applied alone).
        """
        if self._task is None:
            (result,) = await self.store.apply([write], self.finisher)
            return result
        future = self.submit(write)
        if then is not None:
            then()
        return await future

    def post(self, write: Write) -> None:
        """Queue `write` without waiting (a failure is retried, then logged)."""
        future: asyncio.Future[WriteResult] = asyncio.get_running_loop().create_future()
        self._queue.append(_Item(write, future, detached=True))
        self._wake.set()

    async def drain(self) -> None:
        """Wait until every write queued so far is committed (or has failed)."""
        if self._task is None or self._task.done():
            while self._queue:  # not running (stopping): commit inline
                await self._flush()
            return
        while self.pending:
            futures = [i.future for i in self._queue]
            if futures:
                await asyncio.wait(futures)
            else:
                await asyncio.sleep(0.001)

    async def _run(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            while self._queue:
                await self._flush()

    async def _flush(self) -> None:
        batch = self._queue[: self.max_batch]
        del self._queue[: len(batch)]
        self._busy = True
        try:
            try:
                results = await self.store.apply([i.write for i in batch], self.finisher)
            except StoreUnavailableError as exc:
                await self._unavailable(batch, exc)
                return
            except Exception as exc:
                if len(batch) == 1:
                    raise
                # A refused write (a conflict, the job limit) is the caller's answer, not a fault.
                log.log(
                    logging.INFO if isinstance(exc, StoreError) else logging.ERROR,
                    "a group commit of %d writes failed; applying them one by one",
                    len(batch),
                    exc_info=not isinstance(exc, StoreError),
                )
                await self._one_by_one(batch)
                return
        except Exception as exc:
            await self._failed(batch[0], exc)
            return
        finally:
            self._busy = False
        self._landed()
        self._settle(batch, results)

    async def _one_by_one(self, batch: list[_Item]) -> None:
        for n, item in enumerate(batch):
            try:
                (result,) = await self.store.apply([item.write], self.finisher)
            except StoreUnavailableError as exc:
                await self._unavailable(batch[n:], exc)
                return
            except Exception as exc:
                await self._failed(item, exc)
                continue
            self._landed()
            self._settle([item], [result])

    async def _unavailable(self, batch: list[_Item], exc: StoreUnavailableError) -> None:
        """Nothing of `batch` was written (the store says so: a lost COMMIT answer is settled
        below, in the store): put it back first in line and try it again after a pause.
        """
        if self._stop_by is not None and time.monotonic() >= self._stop_by:
            log.warning(
                "stopping with the database unreachable: %d writes not recorded; the next "
                "start recovers their turns and runs",
                len(batch),
            )
            for item in batch:
                if not item.future.done():
                    if item.detached:
                        item.future.set_result(None)
                    else:
                        item.future.set_exception(StoreUnavailableError())
            return
        if not self._outage:
            self._outage = True
            log.warning(
                "the database is unreachable (%s); %d writes wait and are tried again",
                exc.reason,
                len(batch),
            )
        self._queue[:0] = batch
        pause = self.backoff.pause()
        if self._stop_by is not None:
            pause = min(pause, max(0.0, self._stop_by - time.monotonic()))
        with contextlib.suppress(TimeoutError):  # a stop cuts the pause short
            async with asyncio.timeout(pause):
                await (self._stopping.wait() if self._stop_by is None else asyncio.sleep(pause))

    def _landed(self) -> None:
        self.backoff.reset()
        if self._outage:
            self._outage = False
            log.warning("the database answers again; the writes that waited are recorded")

    async def _failed(self, item: _Item, exc: Exception) -> None:
        if item.detached and item.tries < _DETACHED_RETRIES:
            item.tries += 1
            log.warning("recording a run change failed (%s); retrying", exc)
            await asyncio.sleep(_RETRY_S)
            self._queue.insert(0, item)
            return
        if item.future.done():
            return
        if item.detached:  # nobody awaits it: done, so that drain() does not wait for ever
            log.error("recording a run change failed for good: %r", item.write, exc_info=exc)
            item.future.set_result(None)
        else:
            item.future.set_exception(exc)

    def _settle(self, batch: Sequence[_Item], results: Sequence[WriteResult]) -> None:
        for item, result in zip(batch, results, strict=True):
            if not item.future.done():
                item.future.set_result(result)
        for listener in self.listeners:
            try:
                listener([i.write for i in batch], results)
            except Exception:
                log.exception("a journal listener failed")
