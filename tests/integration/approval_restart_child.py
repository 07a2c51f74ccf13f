"""Child process for test_approval_restart.py: turns waiting for a person's approval, killed.

    python approval_restart_child.py DB DIR

Runs AgentCron (SQLite file, real clock, the offline model) with one user tool, `touch`,
that needs approval and creates the file it is given. A bound job fires once, 200 ms after
start, with "call touch with path=DIR/fire"; a chat message says "call touch with
path=DIR/chat". Once both calls wait for a decision it prints `ready PID CHAT_TURN_ID` and
waits for the SIGKILL.
"""

from __future__ import annotations

import asyncio
import os
import sys
from datetime import timedelta

from agentcron.agent.gate import UserTool
from agentcron.agent.offline import OfflineModel
from agentcron.app import AgentCron
from agentcron.config import EngineSettings
from agentcron.schedule import AtSpec

CHAT = "websocket:chat-1"
SCHEDULED = "api:sched"


def touch(path: str) -> str:
    """Create a file."""
    with open(path, "w") as f:
        f.write("ran")
    return f"touched {path}"


async def main(db: str, folder: str) -> None:
    cron = AgentCron(
        db=db,
        model=OfflineModel(0),
        tools=[UserTool(touch, requires_approval=True)],
        settings=EngineSettings(stop_timeout=1.0),
    )
    await cron.start()
    await cron.jobs.create(
        name="daily",
        spec=AtSpec(at=cron.clock.now() + timedelta(milliseconds=200)),
        message=f"call touch with path={folder}/fire",
        session_key=SCHEDULED,
    )
    chat = await cron.sessions.send(CHAT, f"call touch with path={folder}/chat")
    for _ in range(1000):
        if len(await cron.approvals.list()) == 2:
            break
        await asyncio.sleep(0.01)
    else:
        raise SystemExit("the two calls never asked for approval")
    print(f"ready {os.getpid()} {chat.id}", flush=True)
    await asyncio.Event().wait()  # until the kill


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
