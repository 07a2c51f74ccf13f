"""Long tests: the stress instances of a property (issue-size bursts, a second seed) that a
smaller default instance already proves; deselected unless AGENTCRON_LONG_TESTS=1.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import TypeVar

# `AGENTCRON_LONG_TESTS=1 pytest` runs them too (the README's testing section says which).
LONG_ENV = "AGENTCRON_LONG_TESTS"
LONG_MARKER = "long"

Item = TypeVar("Item")


def long_tests_on(env: Mapping[str, str] = os.environ) -> bool:
    """Whether this run includes the tests marked `long`."""
    return env.get(LONG_ENV, "").strip() not in ("", "0")


def split_long(
    items: Sequence[Item], is_long: Sequence[bool], on: bool
) -> tuple[list[Item], list[Item]]:
    """(kept, deselected): every item when `on`, else those not marked `long`."""
    kept = [item for item, long in zip(items, is_long, strict=True) if on or not long]
    dropped = [item for item, long in zip(items, is_long, strict=True) if not on and long]
    return kept, dropped
