"""The slot pool (runtime/slots.py): taking and giving slots, the counts, the graceful stop's cut."""

from __future__ import annotations

import asyncio

from agentcron.runtime.slots import SlotCounts, SlotPool


def free(pool: SlotPool) -> int:
    return pool._free


async def test_a_take_waits_counted_until_a_slot_is_given_back() -> None:
    pool = SlotPool(1)
    await pool.take(pool.turns)
    assert (free(pool), pool.locked()) == (0, True)
    waiting = asyncio.create_task(pool.take(pool.runs))
    await asyncio.sleep(0)
    assert (pool.runs.awaiting_slot, pool.turns.awaiting_slot, pool.awaiting_slot) == (1, 0, 1)
    pool.give()
    await waiting
    assert (pool.awaiting_slot, free(pool)) == (0, 0)
    pool.give()
    assert (free(pool), pool.locked()) == (1, False)


async def test_a_cancelled_take_takes_nothing_and_leaves_the_counts_exact() -> None:
    pool = SlotPool(1)
    await pool.take(pool.turns)
    waiting = asyncio.create_task(pool.take(pool.turns))
    await asyncio.sleep(0)
    assert pool.turns.awaiting_slot == 1
    waiting.cancel()
    await asyncio.gather(waiting, return_exceptions=True)
    assert pool.turns.awaiting_slot == 0
    pool.give()
    assert free(pool) == 1


def test_the_waits_are_summed_over_turns_and_runs() -> None:
    pool = SlotPool(2)
    pool.turns.awaiting_approval, pool.runs.awaiting_approval = 2, 3
    pool.turns.awaiting_slot, pool.runs.awaiting_slot = 1, 4
    assert (pool.awaiting_approval, pool.awaiting_slot) == (5, 5)


def test_settled_counts_every_state_of_one_kind() -> None:
    counts = SlotCounts()
    assert counts.settled == 0
    counts.in_runner, counts.awaiting_slot, counts.awaiting_approval = 1, 2, 4
    assert counts.settled == 7


class Paused:
    def __init__(self) -> None:
        self.cuts = 0

    def cut_if_closing(self) -> None:
        self.cuts += 1


def test_close_cuts_the_paused_calls_once() -> None:
    pool = SlotPool(1)
    calls = [Paused(), Paused()]
    pool.paused.update(calls)
    assert not pool.closing
    pool.close()
    pool.close()  # a second stop (the lanes after the engine) cuts nothing again
    assert pool.closing
    assert [c.cuts for c in calls] == [1, 1]


async def test_try_take_takes_a_free_slot_but_never_one_ahead_of_a_waiter() -> None:
    pool = SlotPool(1)
    assert pool.try_take()
    assert free(pool) == 0
    assert not pool.try_take()
    waiting = asyncio.create_task(pool.take(pool.turns))
    await asyncio.sleep(0)
    pool.give()  # handed to the waiter at once: nothing is free for a try meanwhile
    assert not pool.try_take()
    assert free(pool) == 0
    await waiting
    pool.give()
    assert pool.try_take()


async def test_a_slot_handed_to_a_take_cancelled_before_it_went_on_passes_to_the_next() -> None:
    pool = SlotPool(1)
    await pool.take(pool.turns)
    first = asyncio.create_task(pool.take(pool.turns))
    second = asyncio.create_task(pool.take(pool.runs))
    await asyncio.sleep(0)
    pool.give()  # to `first`, which is cancelled before it runs again
    first.cancel()
    await asyncio.gather(first, return_exceptions=True)
    await asyncio.wait_for(second, 1)  # the slot went on to `second`
    assert (pool.awaiting_slot, free(pool)) == (0, 0)
    pool.give()
    assert free(pool) == 1


async def test_a_take_cancelled_just_before_a_give_leaves_the_pool_whole() -> None:
    pool = SlotPool(1)
    await pool.take(pool.turns)
    waiting = asyncio.create_task(pool.take(pool.turns))
    await asyncio.sleep(0)
    waiting.cancel()  # its wait is cancelled now; the task hears of it at its next step
    pool.give()  # before that step: the cancelled wait is passed over, the slot is free
    await asyncio.gather(waiting, return_exceptions=True)
    assert waiting.cancelled()
    assert (pool.turns.awaiting_slot, free(pool)) == (0, 1)
