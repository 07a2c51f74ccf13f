"""Quiet hours in a real browser: a chat's quiet hours are set in its info (a wrong form is
refused readably), seen in its header after a reload, and turned off; the automation form sets a
job's quiet choice and its detail says it in words, the default not at all.
"""

from __future__ import annotations

import pytest
from playwright.async_api import Page, expect

from agentcron.domain.quiet import QuietMode
from tests.e2e.conftest import StartServer, log_in, new_chat
from tests.e2e.test_history import add_automation, automation

pytestmark = pytest.mark.e2e


@pytest.mark.timeout(60)
async def test_a_chat_s_quiet_hours_are_set_seen_and_turned_off(
    start_server: StartServer, page: Page
) -> None:
    ui = await start_server()
    await log_in(page, ui)
    key = await new_chat(page)
    header = page.locator("#chat-quiet")
    await expect(header).to_be_hidden()  # none yet
    await page.locator(".chat-info summary").click()
    form = page.get_by_role("form", name="Quiet hours")
    await expect(form.get_by_role("button", name="Turn off")).to_be_hidden()

    await form.get_by_label("Quiet hours").fill("22:00")
    await form.get_by_role("button", name="Set").click()
    await expect(form.get_by_role("alert")).to_contain_text("HH:MM-HH:MM")
    assert (await ui.cron.sessions.get(key)).quiet_hours is None

    await form.get_by_label("Quiet hours").fill("22:00-07:00")
    await form.get_by_role("button", name="Set").click()
    await expect(header).to_have_text("Quiet 22:00-07:00")
    await expect(form.get_by_role("alert")).to_be_hidden()
    assert (await ui.cron.sessions.get(key)).quiet_hours == "22:00-07:00"

    # Seen from the server: the chat opens again with them (the same chat, remembered).
    await page.reload()
    await expect(page.locator("#chat-key")).to_have_text(key)
    await expect(header).to_have_text("Quiet 22:00-07:00")
    await page.locator(".chat-info summary").click()
    await expect(form.get_by_label("Quiet hours")).to_have_value("22:00-07:00")

    await form.get_by_role("button", name="Turn off").click()
    await expect(header).to_be_hidden()
    await expect(form.get_by_role("button", name="Turn off")).to_be_hidden()
    await expect(form.get_by_label("Quiet hours")).to_have_value("")
    assert (await ui.cron.sessions.get(key)).quiet_hours is None


@pytest.mark.timeout(60)
async def test_the_form_sets_a_job_s_quiet_choice_and_the_detail_says_it(
    start_server: StartServer, page: Page
) -> None:
    ui = await start_server()
    await log_in(page, ui)
    key = await new_chat(page)
    form = page.get_by_role("form", name="New automation")
    await form.get_by_label("Name").fill("night report")
    await form.get_by_label("What to do").fill("write the report")
    await form.get_by_label("When").fill("every day at 23:30")
    await form.get_by_text("Quiet hours", exact=True).click()
    await form.get_by_label("In the chat's quiet hours").select_option("wait")
    await form.get_by_role("button", name="Add automation").click()
    item = automation(page, "night report")
    await expect(item).to_be_visible()
    (job,) = await ui.cron.jobs.list(session_key=key)
    assert job.policy.quiet is QuietMode.WAIT

    await item.get_by_role("button", name="Details of night report").click()
    dialog = page.get_by_role("dialog", name="night report")
    await expect(dialog.locator(".policy")).to_contain_text(
        "A fire in its chat's quiet hours waits until they end, then runs."
    )
    await dialog.get_by_role("button", name="Close automation details").click()

    # silent, set elsewhere (the API), is said too; the default (hold) says nothing of them.
    await ui.cron.jobs.update(job.id, quiet=QuietMode.SILENT)
    await item.get_by_role("button", name="Details of night report").click()
    await expect(dialog.locator(".policy")).to_contain_text(
        "In its chat's quiet hours it runs, and its result is never sent (it stays in the chat)."
    )
    await dialog.get_by_role("button", name="Close automation details").click()
    await add_automation(page, "morning", "say hello", "every day at 9")
    plain = next(j for j in await ui.cron.jobs.list(session_key=key) if j.name == "morning")
    assert plain.policy.quiet is QuietMode.HOLD
    await automation(page, "morning").get_by_role("button", name="Details of morning").click()
    morning = page.get_by_role("dialog", name="morning")
    await expect(morning.locator(".policy")).to_contain_text("Kept under Done")
    await expect(morning.locator(".policy")).not_to_contain_text("quiet hours")
