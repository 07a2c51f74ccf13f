"""The order files are handed out in: those holding slow tests first, so that in a parallel run
a long file does not start last and keep one worker busy while the others are done.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

Item = TypeVar("Item")


def slow_files_first(
    items: Sequence[Item], file_of: Callable[[Item], str], is_slow: Callable[[Item], bool]
) -> list[Item]:
    """`items` with the files that hold a slow test first; files keep their order among their
    kind, and the tests of a file stay together and in their order.
    """
    slow = {file_of(item) for item in items if is_slow(item)}
    return sorted(items, key=lambda item: file_of(item) not in slow)  # sorted() is stable
