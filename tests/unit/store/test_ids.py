"""The store's ids: ULIDs that python-ulid reads back, unique and in the order they were made."""

from __future__ import annotations

import itertools
import os
import threading
from datetime import UTC, datetime

import pytest
from ulid import ULID

from agentcron.store import ids
from agentcron.store.ids import new_id


def test_an_id_is_a_ulid_of_now() -> None:
    before = datetime.now(UTC)
    made = new_id()
    after = datetime.now(UTC)
    assert len(made) == 26
    parsed = ULID.from_str(made)
    assert str(parsed) == made
    # ULIDs carry milliseconds
    assert before.replace(microsecond=before.microsecond // 1000 * 1000) <= parsed.datetime
    assert parsed.datetime <= after


def test_ids_of_one_millisecond_count_up_and_a_step_back_of_the_clock_keeps_the_order(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    now = [1_800_000_000_000 * 1_000_000]
    monkeypatch.setattr(ids.time, "time_ns", lambda: now[0])
    first = [new_id() for _ in range(1000)]  # one millisecond
    now[0] -= 5_000_000_000  # the wall clock steps back 5 s
    later = [new_id() for _ in range(10)]
    made = first + later
    assert made == sorted(made)
    assert len(set(made)) == len(made)
    values = [int(ULID.from_str(m)) for m in first]
    assert [b - a for a, b in itertools.pairwise(values)] == [1] * 999
    assert {ULID.from_str(m).milliseconds for m in made} == {1_800_000_000_000}


def test_the_random_part_running_over_moves_to_the_next_millisecond(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(ids.time, "time_ns", lambda: 1_800_000_000_000 * 1_000_000)
    new_id()
    monkeypatch.setattr(ids, "_last_random", (1 << 80) - 1)
    overflow = new_id()
    assert ULID.from_str(overflow).milliseconds == 1_800_000_000_001
    assert new_id() > overflow


def test_threads_never_make_the_same_id() -> None:
    made: list[list[str]] = [[] for _ in range(4)]

    def make(out: list[str]) -> None:
        out.extend(new_id() for _ in range(20_000))

    threads = [threading.Thread(target=make, args=(out,)) for out in made]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    every = [i for out in made for i in out]
    assert len(set(every)) == len(every)
    for out in made:
        assert out == sorted(out)  # each thread sees its own ids in creation order


def test_a_forked_child_does_not_repeat_its_parents_ids() -> None:
    new_id()  # the parent has drawn randomness for this millisecond
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: its ids, to the parent
        os.close(read)
        os.write(write, "".join(new_id() for _ in range(50)).encode())
        os._exit(0)
    os.close(write)
    mine = [new_id() for _ in range(50)]
    with os.fdopen(read, "rb") as pipe:
        text = pipe.read().decode()
    os.waitpid(pid, 0)
    theirs = [text[i : i + 26] for i in range(0, len(text), 26)]
    assert len(theirs) == 50
    assert not set(mine) & set(theirs)
