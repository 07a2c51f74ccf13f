"""Run records and turns, optionally waiting (bounded) for a terminal state."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agentcron.views import run_view, turn_view

if TYPE_CHECKING:
    from agentcron.app import AgentCron


async def get_run(cron: AgentCron, run_id: str, *, wait: float = 0.0) -> dict[str, Any]:
    """The full run record: rendered prompt, variables, usage, error details, delivery."""
    run = await cron.runs.wait(run_id, wait) if wait else await cron.runs.get(run_id)
    return run_view(run, full=True)


async def get_turn(cron: AgentCron, turn_id: str, *, wait: float = 0.0) -> dict[str, Any]:
    turn = (
        await cron.sessions.wait_turn(turn_id, wait) if wait else await cron.sessions.turn(turn_id)
    )
    view = turn_view(turn)
    if turn.reply_message_id is not None:
        reply = await cron.store.sessions.get_message(turn.reply_message_id)
        view["reply"] = None if reply is None else reply.content
    return view
