"""The pause between tries while the database is unreachable: 0.1 s, doubling, at most 5 s."""

from __future__ import annotations

import asyncio

FIRST_S = 0.1
MOST_S = 5.0


class Backoff:
    """Pauses that double from `first` to at most `most` seconds, and start again from
    `first` once a try lands (`reset`). The journal's batch retry and a lane's history read
    wait out an outage with it.
    """

    __slots__ = ("_next", "first", "most")

    def __init__(self, first: float = FIRST_S, most: float = MOST_S) -> None:
        if first <= 0 or most < first:
            raise ValueError(f"a backoff needs 0 < first <= most, not {first} and {most}")
        self.first, self.most = first, most
        self._next = first

    def pause(self) -> float:
        """The pause before the next try; the one after it is twice as long (up to `most`)."""
        pause = self._next
        self._next = min(pause * 2, self.most)
        return pause

    def reset(self) -> None:
        """A try landed: the next outage starts from `first` again."""
        self._next = self.first

    async def sleep(self) -> None:
        """Wait the next pause."""
        await asyncio.sleep(self.pause())
