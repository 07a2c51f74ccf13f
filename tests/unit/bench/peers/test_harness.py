"""bench/peers/harness.py: the herd's counts from the body calls."""

from __future__ import annotations

from bench.peers.harness import herd_checks


def test_every_job_once_in_creation_order_counts_nothing() -> None:
    assert herd_checks([0, 1, 2, 3, 4, 5], 6, 3) == {
        "unrun": 0,
        "twice": 0,
        "lost_or_twice": 0,
        "against_order": 0,
    }


def test_a_lost_job_a_repeat_and_a_session_out_of_order_are_counted() -> None:
    # job 4 never ran, job 1 ran twice, session 0 ran job 3 before job 0
    found = herd_checks([3, 0, 1, 1, 2, 5], 6, 3)
    assert found == {"unrun": 1, "twice": 1, "lost_or_twice": 2, "against_order": 1}
