"""Wake-ups for callers waiting on a record to finish (a run or a turn), by id."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager


class Waiters:
    """`with waiters.watch(id) as done: ... await done.wait()`; `notify(id)` sets every watcher."""

    def __init__(self) -> None:
        self._events: dict[str, set[asyncio.Event]] = {}

    @contextmanager
    def watch(self, key: str) -> Iterator[asyncio.Event]:
        event = asyncio.Event()
        self._events.setdefault(key, set()).add(event)
        try:
            yield event
        finally:
            watchers = self._events.get(key)
            if watchers is not None:
                watchers.discard(event)
                if not watchers:
                    del self._events[key]

    def notify(self, key: str) -> None:
        for event in self._events.get(key, ()):
            event.set()

    def notify_all(self) -> None:
        for watchers in self._events.values():
            for event in watchers:
                event.set()

    def __bool__(self) -> bool:
        return bool(self._events)
