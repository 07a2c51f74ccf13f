"""The lane's queue (sessions/lane_queue.py): order, the current turn, and hand-back at a stop."""

from __future__ import annotations

from datetime import UTC, datetime

from agentcron.agent.runner import TurnSource
from agentcron.domain.jobs import CreatedBy, Job, JobKind, JobPolicy
from agentcron.domain.runs import ClaimedFire
from agentcron.schedule import EverySpec
from agentcron.turns.lane_queue import LaneQueue, Pending

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def _pending(turn_id: str, *, fire: bool = False) -> Pending:
    claimed = None
    if fire:
        job = Job(
            id="j1",
            name="job",
            kind=JobKind.AGENT_TURN,
            session_key="web:1",
            spec=EverySpec(seconds=60, anchor=T0),
            message="tick",
            enabled=True,
            paused_reason=None,
            paused_at=None,
            created_by=CreatedBy.API,
            policy=JobPolicy(),
            next_fire_at=None,
            next_run_at=None,
            last_run_at=None,
            last_status=None,
            consecutive_failures=0,
            run_count=0,
            remaining_runs=None,
            idempotency_key=None,
            lease_owner=None,
            lease_expires_at=None,
            version=1,
            created_at=T0,
            updated_at=T0,
        )
        claimed = ClaimedFire(run_id=f"run-{turn_id}", job=job, fire_at=T0, turn_id=turn_id)
    source = TurnSource.AUTOMATION if fire else TurnSource.USER
    return Pending(turn_id, source, f"content of {turn_id}", fire=claimed)


def _lane(*turn_ids: str) -> tuple[LaneQueue, list[Pending]]:
    lane = LaneQueue("web:1")
    pending = [_pending(t) for t in turn_ids]
    for p in pending:
        lane.push(p)
    return lane, pending


def test_a_new_lane_is_idle_and_has_nothing_to_begin() -> None:
    lane = LaneQueue("web:1")
    assert not lane.busy
    assert lane.waiting == 0
    assert lane.begin() is None
    assert lane.current is None
    assert lane.take_waiting() == []


def test_turns_begin_in_the_order_they_were_pushed() -> None:
    lane, _ = _lane("a", "b", "c")
    begun = []
    while (p := lane.begin()) is not None:
        begun.append(p.turn_id)
        lane.end(p)
    assert begun == ["a", "b", "c"]
    assert not lane.busy


def test_a_pushed_turn_waits_and_makes_the_lane_busy() -> None:
    lane, _ = _lane("a")
    assert lane.busy
    assert lane.current is None
    assert lane.waiting == 1  # nothing current: every queued turn waits


def test_begin_makes_the_head_current_without_taking_it_off_the_queue() -> None:
    lane, (a, b) = _lane("a", "b")
    assert lane.begin() is a
    assert lane.current is a
    assert lane.waiting == 1  # only b waits behind a
    assert lane.begin() is a  # the head stays the head until it ends
    assert list(lane.queue) == [a, b]


def test_end_lets_the_next_turn_begin() -> None:
    lane, (a, b) = _lane("a", "b")
    lane.begin()
    lane.end(a)
    assert lane.current is None
    assert lane.busy  # b still waits
    assert lane.waiting == 1
    assert lane.begin() is b


def test_the_lane_is_busy_while_its_last_turn_is_current_and_idle_after_it_ends() -> None:
    lane, (a,) = _lane("a")
    lane.begin()
    assert lane.busy
    assert lane.waiting == 0
    lane.end(a)
    assert not lane.busy
    assert lane.waiting == 0


def test_a_turn_pushed_while_another_runs_waits_behind_it() -> None:
    lane, (a,) = _lane("a")
    lane.begin()
    late = _pending("late")
    lane.push(late)
    assert lane.current is a
    assert lane.waiting == 1
    lane.end(a)
    assert lane.begin() is late


def test_ending_a_turn_that_is_not_the_head_leaves_the_queue_alone() -> None:
    lane, (a, b) = _lane("a", "b")
    lane.begin()
    stray = _pending("stray")
    lane.end(stray)
    assert lane.current is None
    assert list(lane.queue) == [a, b]


def test_take_waiting_hands_back_every_unstarted_turn_in_order() -> None:
    lane, (a, b, c) = _lane("a", "b", "c")
    taken = lane.take_waiting()
    assert taken == [a, b, c]
    assert not lane.busy
    assert lane.begin() is None


def test_take_waiting_keeps_the_current_turn() -> None:
    lane = LaneQueue("web:1")
    a, fire, c = _pending("a"), _pending("f", fire=True), _pending("c")
    for p in (a, fire, c):
        lane.push(p)
    lane.begin()
    taken = lane.take_waiting()
    assert taken == [fire, c]  # the fire's turn goes back with its run (lane.py releases both)
    assert taken[0].fire is not None
    assert taken[0].fire.run_id == "run-f"
    assert lane.current is a
    assert list(lane.queue) == [a]
    assert lane.busy
    assert lane.waiting == 0


def test_a_started_turn_is_never_handed_back_and_ends_normally() -> None:
    lane, (a, b) = _lane("a", "b")
    current = lane.begin()
    assert current is a
    current.started = True  # its start is committed (TurnStart written)
    assert lane.take_waiting() == [b]
    assert lane.take_waiting() == []  # asked again: still not handed back
    assert lane.current is a
    assert a.started
    lane.end(a)
    assert not lane.busy


def test_a_current_turn_not_yet_started_stays_current_for_the_lane_to_hand_back() -> None:
    # lane.py's shutdown releases a current turn only when `started` is False; the queue keeps
    # it current (not in take_waiting) so that it is handed back once, not twice.
    lane, (a, b) = _lane("a", "b")
    lane.begin()
    assert not a.started
    assert lane.take_waiting() == [b]
    assert lane.current is a


def test_pending_turns_compare_by_identity() -> None:
    # Two turns with equal fields are still two turns: `end` must not drop the other one.
    first, twin = _pending("same"), _pending("same")
    lane = LaneQueue("web:1")
    lane.push(first)
    lane.push(twin)
    lane.begin()
    lane.end(twin)  # not the head: the head stays
    assert list(lane.queue) == [first, twin]
    assert first != twin
