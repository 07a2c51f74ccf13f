"""The demo: a session where the offline agent schedules a reminder that comes back as a turn."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from agentcron.agent.offline import OfflineModel, parse_wps
from agentcron.app import AgentCron
from agentcron.config import Settings
from agentcron.config.database import where
from agentcron.config.server import local_zone
from agentcron.domain.events import Event, StreamEnd, StreamStart, TextDelta, ToolStarted
from agentcron.store.ids import new_id

Echo = Callable[..., None]
_GRACE_S = 30.0  # how long past its due time the demo waits for the reminder turn


class _Printer:
    """Prints a session's turns as they stream; tells the demo when a scheduled turn ended."""

    def __init__(self, key: str, echo: Echo) -> None:
        self.key = key
        self.echo = echo
        self.user_done = asyncio.Event()
        self.scheduled_done = asyncio.Event()
        self._source: str | None = None

    types = (StreamStart, TextDelta, ToolStarted, StreamEnd)

    def __call__(self, event: Event) -> None:
        if event.session_key != self.key:
            return
        if isinstance(event, StreamStart):
            self._source = event.source
            if self._source != "user":
                self.echo(f"\n[{datetime.now(UTC):%H:%M:%S} UTC] a scheduled turn starts")
            self.echo("agent> ", nl=False)
        elif isinstance(event, TextDelta):
            self.echo(event.text, nl=False)
        elif isinstance(event, ToolStarted):
            self.echo(f"[calls {event.name} {event.args}] ", nl=False)
        elif isinstance(event, StreamEnd):
            self.echo("")
            if self._source in ("automation", "recall"):
                self.scheduled_done.set()
            else:
                self.user_done.set()


async def run_demo(
    db: str | Path,
    sentence: str,
    echo: Echo,
    wps: float | None = None,
    settings: Settings | None = None,
) -> int:
    """Open a session, say `sentence`, wait for the reminder it schedules to run as a turn.
    `wps`: the offline model's words per second (None: the settings'; `settings` None: the
    environment's).

    Returns a process exit code: 0 when the reminder arrived as a turn of the session.
    """
    config = Settings.load() if settings is None else settings
    pace = parse_wps(config.provider().offline_wps if wps is None else wps)
    async with AgentCron(db=db, model=OfflineModel(pace), config=config) as cron:
        session = await cron.sessions.create(
            f"demo:{new_id()}", title="agentcron demo", tz=local_zone()
        )
        printer = _Printer(session.key, echo)
        cron.subscribe(printer, types=printer.types)
        echo(f"database: {where(cron.store.url)}\nsession:  {session.key} (offline model)\n")
        echo(f"you> {sentence}")
        await cron.sessions.send(session.key, sentence)
        await asyncio.wait_for(printer.user_done.wait(), _GRACE_S)
        jobs = await cron.jobs.for_session(session.key)
        pending = [j for j in jobs if j.next_run_at is not None]
        if not pending:
            echo(
                "\nThe agent scheduled nothing from that sentence; try one like "
                '"remind me in 10 seconds to stretch".'
            )
            return 1
        due = min(j.next_run_at for j in pending if j.next_run_at is not None)
        wait = max(0.0, (due - cron.clock.now()).total_seconds())
        echo(f"\nwaiting {wait:.0f} s for “{pending[0].name}” (due {due:%H:%M:%S} UTC) ...")
        try:
            await asyncio.wait_for(printer.scheduled_done.wait(), wait + _GRACE_S)
        except TimeoutError:
            echo("the reminder did not arrive in time")
            return 1
        echo(f"\ntranscript of {session.key}:")
        for message in await cron.sessions.messages(session.key):
            text = message.content
            if message.role == "tool":  # a tool call the agent made, with its result
                text = f"{message.meta.get('name', 'tool')} -> {text}"
            first, *more = text.splitlines() or [""]
            echo(f"  {message.seq:>2} {message.role:<9} {first}{' …' if more else ''}")
        for job in pending:
            for run in await cron.runs.list(job.id, limit=1):
                run = await cron.runs.wait(run.id, _GRACE_S)
                echo(f"run {run.id}: {run.state.value}, prompt {run.prompt_ref}")
        return 0
