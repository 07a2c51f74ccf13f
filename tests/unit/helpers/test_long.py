"""The long-test gate (tests/helpers/long.py): deselected by default, run with the variable."""

from __future__ import annotations

from tests.helpers.long import long_tests_on, split_long


def test_the_variable_turns_the_long_tests_on() -> None:
    assert not long_tests_on({})
    assert not long_tests_on({"AGENTCRON_LONG_TESTS": ""})
    assert not long_tests_on({"AGENTCRON_LONG_TESTS": "0"})
    assert long_tests_on({"AGENTCRON_LONG_TESTS": "1"})


def test_by_default_only_the_long_tests_are_deselected_in_order() -> None:
    items = ["a", "b", "c", "d"]
    long = [False, True, False, True]
    assert split_long(items, long, on=False) == (["a", "c"], ["b", "d"])
    assert split_long(items, long, on=True) == (items, [])
