"""Alerts in a real browser: a job about to end is badged on its card and in its detail, which
says when it ends; Renew gives it more runs and the badge goes.
"""

from __future__ import annotations

import pytest
from playwright.async_api import Page, expect

from tests.e2e.conftest import StartServer, log_in, new_chat

pytestmark = pytest.mark.e2e


@pytest.mark.timeout(30)
async def test_an_ending_job_is_badged_and_renewed(start_server: StartServer, page: Page) -> None:
    ui = await start_server()
    await log_in(page, ui)
    key = await new_chat(page)
    job = await ui.cron.jobs.create(
        name="ping", when="every day at 9", message="ping", session_key=key, max_runs=1
    )
    panel = page.get_by_role("complementary", name="Automations")
    item = panel.get_by_role("listitem", name="Automation ping")
    await expect(item).to_be_visible()
    await expect(item.locator(".alert-badge")).to_have_count(0)
    sweep = await ui.cron.alerts.sweep()  # what the engine's periodic reap runs
    assert sweep.ending == (job.id,)
    await expect(item.locator(".alert-ending")).to_have_text("ends soon")

    await item.get_by_role("button", name="Details of ping").click()
    dialog = page.get_by_role("dialog", name="ping")
    await expect(dialog.locator(".job-alerts")).to_contain_text("ends soon")
    await expect(dialog.locator(".ends-text")).to_have_text("Ends after 1 more run")
    await dialog.locator("input[name=runs]").fill("3")
    await dialog.get_by_role("button", name="Renew").click()
    await expect(dialog.locator(".ends-text")).to_have_text("Ends after 4 more runs")
    await expect(dialog.locator(".job-alerts")).to_have_count(0)
    renewed = await ui.cron.jobs.get(job.id)
    assert (renewed.policy.max_runs, renewed.remaining_runs) == (4, 4)
    assert renewed.ending_warned_at is None
