"""The memory scope: which sessions are one memory (and whose recalls a turn may manage)."""

from __future__ import annotations

import pytest

from agentcron.domain.sessions import MemoryScope


def test_a_scope_includes_its_keys_and_the_keys_under_its_prefixes() -> None:
    scope = MemoryScope(keys=("unified:default",), prefixes=("websocket:",))
    assert scope.includes("unified:default")
    assert scope.includes("websocket:abc")
    assert not scope.includes("telegram:7")
    assert not scope.includes("unified:other")


def test_a_scope_needs_keys_or_prefixes() -> None:
    with pytest.raises(ValueError, match="needs keys or key prefixes"):
        MemoryScope()
