"""Standing approvals in an automation's detail, in a real browser: a fire waiting for a person
shows as a badge with Approve; a standing approval is added, listed, lets the next fire run
the tool unattended, and is revoked.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from playwright.async_api import Page, expect

from agentcron.domain.approvals import ApprovalState
from tests.e2e.conftest import StartServer, log_in, new_chat, screenshot
from tests.e2e.test_approvals import Deployer, every_day_at_nine, start

pytestmark = pytest.mark.e2e

DAY = timedelta(days=1)


@pytest.mark.timeout(60)
async def test_the_waiting_badge_and_standing_approvals_list_add_revoke(
    start_server: StartServer, page: Page
) -> None:
    deployer = Deployer()
    ui = await start(start_server, page, deployer)
    await log_in(page, ui)
    key = await new_chat(page)
    await every_day_at_nine(page)
    (job,) = await ui.cron.jobs.list(session_key=key)
    item = page.get_by_role("listitem", name="Automation deploy staging")
    await item.get_by_role("button", name="Details of deploy staging").click()
    dialog = page.get_by_role("dialog", name="deploy staging")
    grants = dialog.get_by_role("region", name="Standing approvals")
    await expect(grants.locator(".no-grants")).to_have_text("None.")
    await expect(dialog.get_by_role("status", name="Waiting for approval")).to_have_count(0)

    # The fire at 09:00 waits for a person: the open detail shows it, and Approve decides it.
    ui.clock.advance(timedelta(hours=1))
    waiting = dialog.get_by_role("status", name="Waiting for approval")
    await expect(waiting).to_be_visible()
    await expect(waiting.locator(".waiting-call")).to_have_text('deploy {"env":"staging"}')
    await expect(waiting).to_contain_text("since Mon, Nov 23, 09:00")
    await screenshot(page, "grants-waiting")
    await waiting.get_by_role("button", name="Approve").click()
    await expect(waiting).to_have_count(0)
    assert deployer.done == ["staging"]

    # A standing approval for the deploys to staging, for 7 days.
    form = grants.get_by_role("form", name="New standing approval")
    await form.get_by_label("Tool").fill("deploy")
    await form.get_by_label("Arguments").fill('{"env": "stag*"}')
    await form.get_by_label("For").select_option("7 days")
    await form.get_by_role("button", name="Add standing approval").click()
    listed = grants.locator("li.grant")
    await expect(listed).to_have_count(1)
    await expect(listed.first).to_contain_text('deploy {"env":"stag*"}')
    await expect(listed.first).to_contain_text("until Mon, Nov 30, 09:")
    await expect(listed.first).to_contain_text("by web UI")
    (made,) = await ui.cron.approvals.grants(job.id)
    assert (made.tool, made.args, made.granted_by) == ("deploy", {"env": "stag*"}, "web UI")
    await screenshot(page, "grants")

    # The next fire runs the tool unattended; its approval names the grant.
    ui.clock.advance(DAY)
    for _ in range(400):
        if len(deployer.done) == 2:
            break
        await page.wait_for_timeout(25)
    assert deployer.done == ["staging", "staging"]
    await expect(dialog.get_by_role("status", name="Waiting for approval")).to_have_count(0)
    records = await ui.cron.approvals.list(key, pending_only=False)
    assert [(r.state, r.grant_id) for r in records] == [
        (ApprovalState.APPROVED, None),
        (ApprovalState.APPROVED, made.id),
    ]

    # Revoke: the list is empty again and the store agrees.
    await listed.first.get_by_role("button", name='Revoke deploy {"env":"stag*"}').click()
    await expect(grants.locator(".no-grants")).to_have_text("None.")
    assert await ui.cron.approvals.grants(job.id) == []
