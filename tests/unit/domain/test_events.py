"""Typed events: the bus and runner dicts as events (pure)."""

from __future__ import annotations

import logging

import pytest

from agentcron.domain.events import (
    Event,
    EventBus,
    RunnerEvent,
    SessionDeleted,
    SessionSync,
    StreamEnd,
    TextDelta,
    ToolCalled,
    ToolStarted,
    runner_event,
)

KEY = "websocket:abc"


# -- the bus ----------------------------------------------------------------------------------


async def test_every_subscriber_gets_every_event_in_order_of_subscription() -> None:
    bus = EventBus()
    seen: list[tuple[str, Event]] = []
    bus.subscribe(lambda e: seen.append(("first", e)))
    bus.subscribe(lambda e: seen.append(("second", e)))
    event = SessionSync(session_key=KEY)
    await bus.publish(event)
    assert seen == [("first", event), ("second", event)]


async def test_a_type_filter_passes_only_those_types_and_their_subclasses() -> None:
    class Special(SessionSync):
        pass

    bus = EventBus()
    seen: list[Event] = []
    bus.subscribe(seen.append, types=[SessionSync, StreamEnd])
    sync, special = SessionSync(session_key=KEY), Special(session_key=KEY)
    await bus.publish(TextDelta(session_key=KEY, turn_id="t", text="x"))
    await bus.publish(sync)
    await bus.publish(SessionDeleted(session_key=KEY))
    await bus.publish(special)
    assert seen == [sync, special]


async def test_unsubscribe_stops_delivery_and_leaves_the_others() -> None:
    bus = EventBus()
    kept: list[Event] = []
    dropped: list[Event] = []
    bus.subscribe(kept.append)
    unsubscribe = bus.subscribe(dropped.append)
    await bus.publish(SessionSync(session_key="a"))
    unsubscribe()
    unsubscribe()  # twice is harmless
    await bus.publish(SessionSync(session_key="b"))
    assert [e.session_key for e in kept] == ["a", "b"]
    assert [e.session_key for e in dropped] == ["a"]


async def test_a_subscriber_may_unsubscribe_while_an_event_is_delivered() -> None:
    bus = EventBus()
    seen: list[str] = []

    def once(event: Event) -> None:
        seen.append("once")
        unsubscribe()

    unsubscribe = bus.subscribe(once)
    bus.subscribe(lambda e: seen.append("other"))
    await bus.publish(SessionSync(session_key=KEY))
    await bus.publish(SessionSync(session_key=KEY))
    assert seen == ["once", "other", "other"]


async def test_async_callbacks_are_awaited_before_publish_returns() -> None:
    bus = EventBus()
    seen: list[str] = []

    async def slow(event: Event) -> None:
        seen.append(f"async {event.type}")

    bus.subscribe(slow)
    bus.subscribe(lambda e: seen.append(f"sync {e.type}"))
    await bus.publish(SessionDeleted(session_key=KEY))
    assert seen == ["async session_deleted", "sync session_deleted"]


async def test_a_failing_subscriber_is_logged_and_does_not_stop_the_others(
    caplog: pytest.LogCaptureFixture,
) -> None:
    bus = EventBus()
    seen: list[Event] = []

    def broken(event: Event) -> None:
        raise RuntimeError("boom")

    async def broken_async(event: Event) -> None:
        raise ValueError("bang")

    bus.subscribe(broken)
    bus.subscribe(broken_async)
    bus.subscribe(seen.append)
    event = SessionSync(session_key=KEY)
    with caplog.at_level(logging.ERROR, logger="agentcron.domain.events"):
        await bus.publish(event)  # does not raise
    assert seen == [event]
    failures = [r for r in caplog.records if r.getMessage() == "event subscriber failed"]
    assert len(failures) == 2
    assert [type(r.exc_info[1]) for r in failures if r.exc_info] == [RuntimeError, ValueError]
    assert {getattr(r, "session_key", None) for r in failures} == {KEY}


def test_a_bus_without_subscribers_is_still_a_bus() -> None:
    # `bus or EventBus()` must keep the bus it was given even before anyone subscribed.
    bus = EventBus()
    assert (bus or EventBus()) is bus


# -- runner dicts -----------------------------------------------------------------------------


def test_runner_dicts_become_typed_events() -> None:
    assert runner_event(KEY, "t1", {"type": "text_delta", "text": "hi"}) == TextDelta(
        session_key=KEY, turn_id="t1", text="hi"
    )
    started = runner_event(KEY, "t1", {"type": "tool_started", "name": "jobs", "args": {"a": 1}})
    assert started == ToolStarted(session_key=KEY, turn_id="t1", name="jobs", args={"a": 1})
    called = runner_event(
        KEY, "t1", {"type": "tool_call", "name": "jobs", "args": None, "result": "ok"}
    )
    assert called == ToolCalled(session_key=KEY, turn_id="t1", name="jobs", args={}, result="ok")
    other = runner_event(KEY, "t1", {"type": "thinking", "text": "hmm", "step": 2})
    assert other == RunnerEvent(
        session_key=KEY, turn_id="t1", name="thinking", data={"text": "hmm", "step": 2}
    )


def test_runner_dicts_with_missing_fields_get_empty_values() -> None:
    assert runner_event(KEY, "t", {"type": "text_delta"}) == TextDelta(
        session_key=KEY, turn_id="t", text=""
    )
    assert runner_event(KEY, "t", {"type": "tool_call"}) == ToolCalled(
        session_key=KEY, turn_id="t", name="", args={}, result=""
    )
