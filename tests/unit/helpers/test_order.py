"""tests/helpers/order.py: the files holding slow tests go first, each file whole and in order."""

from __future__ import annotations

from tests.helpers.order import slow_files_first

# (file, test, slow)
ITEMS = [
    ("a.py", "a1", False),
    ("a.py", "a2", False),
    ("b.py", "b1", False),
    ("b.py", "b2", True),
    ("c.py", "c1", False),
    ("d.py", "d1", True),
    ("d.py", "d2", False),
]


def order(items: list[tuple[str, str, bool]]) -> list[str]:
    return [test for _, test, _ in slow_files_first(items, lambda i: i[0], lambda i: i[2])]


def test_files_with_a_slow_test_go_first_whole_and_in_their_order() -> None:
    assert order(ITEMS) == ["b1", "b2", "d1", "d2", "a1", "a2", "c1"]


def test_without_slow_tests_the_order_is_kept() -> None:
    plain = [(f, t, False) for f, t, _ in ITEMS]
    assert order(plain) == [t for _, t, _ in ITEMS]


def test_an_empty_run() -> None:
    assert order([]) == []
