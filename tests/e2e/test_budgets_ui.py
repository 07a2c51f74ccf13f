"""A job's budget in a real browser: the caps in words, its spend against them, the spend per
UTC day drawn against the cap per day, and "paused: budget reached" shown as it happens.
"""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from playwright.async_api import Page, expect

from agentcron.domain.budgets import Budget
from agentcron.domain.states import RunState
from tests.e2e.conftest import StartServer, log_in, new_chat
from tests.e2e.test_history import add_automation

pytestmark = pytest.mark.e2e


@pytest.mark.timeout(60)
async def test_the_detail_shows_spend_against_the_budget_and_the_pause_at_its_cap(
    start_server: StartServer, page: Page
) -> None:
    ui = await start_server()
    await log_in(page, ui)
    key = await new_chat(page)
    item = await add_automation(page, "digest", "sum up the news", "every 30 minutes")
    (job,) = await ui.cron.jobs.list(session_key=key)
    # 100 tokens a day: the first fire runs (no estimate yet) and its use reaches the cap.
    await ui.cron.jobs.update(job.id, budget=Budget(tokens_day=100, usd_month=5.0))

    await item.get_by_role("button", name="Details of digest").click()
    dialog = page.get_by_role("dialog", name="digest")
    budget = dialog.get_by_role("region", name="Budget")
    await expect(budget.locator(".budget-caps")).to_have_text(
        "At most $5.00 a month and 100 tokens a day (days and months in UTC)."
    )
    day = ui.clock.now().date().isoformat()
    spent = budget.locator(".budget-spent li")
    await expect(spent.first).to_have_text(f"Today ({day}, UTC): $0, 0 of 100 tokens.")
    await expect(spent.nth(1)).to_have_text("This month (2026-11): $0 of $5.00, 0 tokens.")
    await expect(spent.nth(2)).to_have_text(
        "No run yet: its first fire runs, and sets the estimate."
    )
    await expect(budget.locator(".budget-paused")).to_have_count(0)
    chart = budget.get_by_role("img", name=re.compile(r"^Tokens per UTC day over 30 days"))
    await expect(chart).to_have_attribute(
        "aria-label", "Tokens per UTC day over 30 days, against 100 tokens a day"
    )
    await expect(chart.locator("rect.bar.spend.over")).to_have_count(0)
    await expect(chart.locator("line.cap")).to_have_count(1)

    # The fire: the open detail hears the job's budget event and shows the pause.
    ui.clock.advance(timedelta(minutes=30))
    paused = budget.locator(".budget-paused")
    await expect(paused).to_contain_text("Paused: budget reached")
    stored = await ui.cron.jobs.get(job.id)
    assert not stored.enabled
    assert stored.spend is not None
    used = stored.spend.day_tokens
    assert used >= 100
    (run,) = await ui.cron.runs.list(job.id)
    assert run.state is RunState.SUCCEEDED
    await expect(paused).to_have_text(
        f"Paused: budget reached budget reached: {used:,} of 100 tokens per day. "
        "It stays paused until someone resumes it."
    )
    await expect(spent.first).to_have_text(f"Today ({day}, UTC): $0, {used:,} of 100 tokens.")
    await expect(spent.nth(2)).to_have_text(
        f"One run is estimated at $0, {used:,} tokens (the mean of its last 1 run)."
    )
    today = chart.locator(f'rect.bar.spend.over[data-day="{day}"]')
    await expect(today).to_have_attribute("data-value", str(used))
    await expect(today.locator("title")).to_have_text(
        f"{day} (UTC): {used:,} tokens of 100 tokens, 1 run"
    )
    # The automations list says why it is paused, too.
    await expect(item).to_contain_text("Paused")
