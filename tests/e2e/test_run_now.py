"""Run now in a real browser: the automation's button makes a manual run, a turn of the chat
streamed like a scheduled one; a second press while it runs says why it cannot.
"""

from __future__ import annotations

import asyncio

import pytest
from playwright.async_api import Locator, Page, expect

from agentcron.agent.offline import OfflineModel
from tests.e2e.conftest import StartServer, StreamGate, log_in, new_chat


def automation(page: Page, name: str) -> Locator:
    panel = page.get_by_role("complementary", name="Automations")
    return panel.get_by_role("listitem", name=f"Automation {name}")


pytestmark = pytest.mark.e2e


@pytest.mark.timeout(30)
async def test_run_now_from_the_automations_panel(start_server: StartServer, page: Page) -> None:
    gate = StreamGate()
    ui = await start_server(model=OfflineModel(sleep=gate.sleep))
    ui.gates.append(gate)
    await log_in(page, ui)
    key = await new_chat(page)
    form = page.get_by_role("form", name="New automation")
    await form.get_by_label("Name").fill("build check")
    await form.get_by_label("What to do").fill("check the build and report failures")
    await form.get_by_label("When").fill("every weekday at 9")
    await form.get_by_role("button", name="Add automation").click()
    item = automation(page, "build check")
    await expect(item.locator(".next-run")).to_have_text("Mon, Nov 23, 09:00 (Europe/Berlin)")
    await expect(item.locator(".last-run")).to_have_text("never ran")

    # Pressed: a manual run, the same turn as a fire; its reply is held mid-stream.
    gate.hold_after(2)
    await item.get_by_role("button", name="Run build check now").click()
    await asyncio.wait_for(gate.held.wait(), 10)
    log = page.get_by_role("log", name="Messages")
    trigger = log.locator("article.trigger")
    await expect(trigger).to_have_count(1)
    await expect(trigger.locator(".clock-badge")).to_have_text("Run now")
    await expect(trigger).to_contain_text("Scheduled automation triggered: build check")
    await expect(item.locator(".state-badge")).to_have_text("Running now")
    # Pressed again while it runs: refused, and the chat says why.
    await item.get_by_role("button", name="Run build check now").click()
    await expect(page.locator("#chat-error")).to_contain_text("Could not run “build check”: job")
    await expect(page.locator("#chat-error")).to_contain_text("has a manual run that has not ended")

    gate.release()
    answer = log.locator("article.trigger + article.role-assistant")
    await expect(answer).to_contain_text("(offline model)")
    await expect(log.locator("article.streaming")).to_have_count(0)
    await expect(item.locator(".last-run")).to_contain_text("succeeded")
    await expect(item.locator(".state-badge")).to_have_text("Active")
    # Its schedule did not move.
    await expect(item.locator(".next-run")).to_have_text("Mon, Nov 23, 09:00 (Europe/Berlin)")
    (job,) = await ui.cron.jobs.list(session_key=key)
    (run,) = await ui.cron.runs.list(job.id)
    assert (run.manual, run.state.value) == (True, "succeeded")
