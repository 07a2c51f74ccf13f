"""A job's trigger in a real browser: the automation's detail turns it on and shows the secret
once, rotates it (the old one refused, the new one shown fires the job), and turns it off.
"""

from __future__ import annotations

import httpx
import pytest
from playwright.async_api import Page, expect
from standardwebhooks import Webhook

from tests.e2e.conftest import StartServer, log_in, new_chat
from tests.e2e.test_history import add_automation

pytestmark = pytest.mark.e2e


@pytest.mark.timeout(60)
async def test_enable_rotate_and_disable_a_trigger_from_the_detail(
    start_server: StartServer, page: Page
) -> None:
    ui = await start_server()
    await log_in(page, ui)
    key = await new_chat(page)
    item = await add_automation(page, "deploys", "sum up the deploy", "every day at 9")
    (job,) = await ui.cron.jobs.list(session_key=key)
    await item.get_by_role("button", name="Details of deploys").click()
    dialog = page.get_by_role("dialog", name="deploys")
    trigger = dialog.locator(".job-trigger")
    await expect(trigger.locator(".trigger-state")).to_have_text("Off: only its schedule runs it.")

    await trigger.get_by_role("button", name="Enable trigger").click()
    url = f"{ui.url}hooks/jobs/{job.id}"
    await expect(trigger.locator(".trigger-state")).to_have_text(
        f"On: signed events posted to {url} run it."
    )
    first = await trigger.locator(".trigger-secret code").text_content()
    assert first is not None
    assert first == (await ui.cron.jobs.get(job.id)).trigger_secret

    await trigger.get_by_role("button", name="Rotate secret").click()
    await expect(trigger.locator(".trigger-secret code")).not_to_have_text(first)
    second = await trigger.locator(".trigger-secret code").text_content()
    assert second is not None
    assert second.startswith("whsec_")

    async def post(secret: str, event_id: str) -> int:
        at, body = ui.clock.now(), '{"service": "api"}'
        headers = {
            "webhook-id": event_id,
            "webhook-timestamp": str(int(at.timestamp())),
            "webhook-signature": Webhook(secret).sign(event_id, at, body),
        }
        async with httpx.AsyncClient() as client:
            return (await client.post(url, content=body, headers=headers)).status_code

    assert await post(first, "e1") == 401
    assert await post(second, "e1") == 202
    await expect(dialog.locator(".job-runs .badge.manual")).to_have_text("event")
    # Closed and opened again: the secret is not shown any more.
    await page.locator("#job-close").click()
    await item.get_by_role("button", name="Details of deploys").click()
    await expect(trigger.locator(".trigger-state")).to_contain_text("On:")
    await expect(trigger.locator(".trigger-secret")).to_have_count(0)
    await trigger.get_by_role("button", name="Disable trigger").click()
    await expect(trigger.locator(".trigger-state")).to_have_text("Off: only its schedule runs it.")
    assert await post(second, "e2") == 404
