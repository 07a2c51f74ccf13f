"""An automation's detail in a real browser: next fires and policy in words, its run history
with the chart, a run's turn shown in the chat; every time named with its zone; a failed tool
call shown as failed.
"""

from __future__ import annotations

import re
from datetime import timedelta
from zoneinfo import ZoneInfo

import pytest
from playwright.async_api import Locator, Page, expect

from agentcron.domain.cadence import CadenceBounds
from agentcron.schedule import describe
from tests.e2e.conftest import OpenPage, StartServer, log_in, new_chat, say, screenshot

pytestmark = pytest.mark.e2e

HALF_HOUR = timedelta(minutes=30)
UTC_TITLE = re.compile(
    r"^2026-11-2\d \d\d:\d\d:\d\d UTC \((in \d+ (s|min|h|d)|\d+ (s|min|h|d) ago|now)\)$"
)


def automation(page: Page, name: str) -> Locator:
    panel = page.get_by_role("complementary", name="Automations")
    return panel.get_by_role("listitem", name=f"Automation {name}")


async def add_automation(page: Page, name: str, message: str, when: str) -> Locator:
    form = page.get_by_role("form", name="New automation")
    await form.get_by_label("Name").fill(name)
    await form.get_by_label("What to do").fill(message)
    await form.get_by_label("When").fill(when)
    await form.get_by_role("button", name="Add automation").click()
    item = automation(page, name)
    await expect(item).to_be_visible()
    return item


@pytest.mark.timeout(60)
async def test_the_detail_shows_next_fires_policy_and_the_run_history_with_its_chart(
    start_server: StartServer, page: Page
) -> None:
    ui = await start_server()
    await log_in(page, ui)
    key = await new_chat(page)
    item = await add_automation(page, "log check", "check the logs", "every 30 minutes")
    # A run now, then three fires on its schedule (08:30, 09:00, 09:30 in Berlin).
    await item.get_by_role("button", name="Run log check now").click()
    await expect(item.locator(".last-run")).to_contain_text("succeeded")
    for minute in ("08:30", "09:00", "09:30"):
        ui.clock.advance(HALF_HOUR)
        await expect(item.locator(".last-run")).to_have_text(
            f"succeeded · Mon, Nov 23, {minute} (Europe/Berlin)"
        )
    (job,) = await ui.cron.jobs.list(session_key=key)
    runs = await ui.cron.runs.list(job.id)
    assert len(runs) == 4

    await item.get_by_role("button", name="Details of log check").click()
    dialog = page.get_by_role("dialog", name="log check")
    await expect(dialog).to_be_visible()
    await expect(dialog.locator(".job-schedule")).to_have_text(describe(job.spec))
    await expect(dialog.locator(".job-zone")).to_have_text("Europe/Berlin")
    await expect(dialog.locator(".job-spec")).to_contain_text("every 30 min")
    fires = dialog.locator(".next-fires li")
    await expect(fires).to_have_text(
        [f"Mon, Nov 23, {t} (Europe/Berlin)" for t in ("10:00", "10:30", "11:00", "11:30", "12:00")]
    )
    policy = dialog.locator(".policy")
    await expect(policy).to_contain_text("Pauses itself after 5 failures in a row.")
    await expect(policy).to_contain_text("Kept under Done after its last run.")
    # Its notify policy in words (the default: every result, unless the agent marks it silent).
    await expect(policy).to_contain_text("Sends every result, except one the agent marks silent.")
    await expect(policy).not_to_contain_text("{")
    await expect(dialog.locator(".job-usage")).to_contain_text("4 runs counted")

    history = dialog.get_by_role("region", name="Run history")
    rows = history.locator("tbody tr")
    await expect(rows).to_have_count(4)
    await expect(history.locator("th").first).to_have_text("Fire time (Europe/Berlin)")
    newest = rows.first
    await expect(newest.locator("td.fire time")).to_have_text("Mon, Nov 23, 09:30")
    await expect(newest.locator(".state-badge")).to_have_text("succeeded")
    await expect(newest.locator("td.late")).to_have_text(re.compile(r"^\+\d+ ms$"))
    await expect(newest.locator("td.delivery")).to_have_text("in the chat")
    await expect(rows.last.locator(".badge.manual")).to_have_text("run now")
    await expect(newest.locator("td.fire time")).to_have_attribute("title", UTC_TITLE)

    chart = dialog.get_by_role("img", name="Outcome and duration of the last 4 runs")
    await expect(chart.locator("rect.bar.state-succeeded")).to_have_count(4)
    await expect(dialog.get_by_role("img", name=re.compile(r"^Cost per day"))).to_be_visible()
    await screenshot(page, "history")

    # "Show in chat": the dialog closes and the chat shows that run's reply.
    await newest.get_by_role("button", name="Show in chat").click()
    await expect(dialog).to_be_hidden()
    shown = page.locator(f'article[data-id="{runs[0].message_id}"]')
    await expect(shown).to_have_class(re.compile(r"\brevealed\b"))
    await expect(shown).to_be_in_viewport()


@pytest.mark.timeout(40)
async def test_times_name_their_zone_with_the_browser_in_new_york_and_a_job_in_berlin(
    start_server: StartServer, open_page: OpenPage
) -> None:
    ui = await start_server()
    page = await open_page(timezone_id="America/New_York")
    await log_in(page, ui)
    key = await new_chat(page)
    (session,) = [s for s in await ui.cron.sessions.list() if s.key == key]
    assert session.tz == "America/New_York"  # the chat took the browser's zone
    await expect(page.locator("#chat-zone")).to_have_text("Times in America/New_York")
    await ui.cron.jobs.create(
        name="berlin standup",
        when="every weekday at 9",
        message="post the standup notes",
        session_key=key,
        tz="Europe/Berlin",
    )
    item = automation(page, "berlin standup")
    await expect(item.locator(".next-run")).to_have_text("Mon, Nov 23, 09:00 (Europe/Berlin)")
    await expect(item.locator(".next-run time")).to_have_attribute(
        "title", re.compile(r"^2026-11-23 08:00:00 UTC ")
    )
    await expect(item.locator(".next-run time")).to_have_attribute("title", UTC_TITLE)

    # The chat's own times: in its zone (New York), which the header names; no seconds.
    await say(page, "hello there")
    mine = page.get_by_role("log", name="Messages").locator("article.role-user").first
    await expect(mine.locator("time.when")).to_have_text("Mon, Nov 23, 02:00")
    await expect(mine.locator("time.when")).to_have_attribute(
        "title", re.compile(r"^2026-11-23 07:00:00 UTC ")
    )

    await item.get_by_role("button", name="Details of berlin standup").click()
    dialog = page.get_by_role("dialog", name="berlin standup")
    await expect(dialog.locator(".next-fires li").first).to_have_text(
        "Mon, Nov 23, 09:00 (Europe/Berlin)"
    )
    await expect(dialog.locator(".job-zone")).to_have_text("Europe/Berlin")


@pytest.mark.timeout(40)
async def test_the_phone_layout_goes_list_chat_automations_with_the_box_on_the_first_screen(
    start_server: StartServer, open_page: OpenPage
) -> None:
    ui = await start_server()
    page = await open_page(width=390, height=844)
    await log_in(page, ui)
    sidebar = page.get_by_role("complementary", name="Chats")
    chat = page.get_by_role("region", name="Chat")
    panel = page.get_by_role("complementary", name="Automations")
    await expect(sidebar).to_be_visible()
    await expect(chat).to_be_hidden()

    key = await new_chat(page)
    await expect(chat).to_be_visible()
    await expect(sidebar).to_be_hidden()
    title = "please remind me in 10 minutes to stretch my legs and drink a glass of water"
    await say(page, title)
    log = page.get_by_role("log", name="Messages")
    await expect(log.locator("article.role-assistant").last).to_contain_text("Scheduled")
    await expect(log.locator("article.streaming")).to_have_count(0)
    box = await page.get_by_role("textbox", name="Message").bounding_box()
    assert box is not None
    assert box["y"] >= 0, box
    assert box["y"] + box["height"] <= 844, box
    width = await page.evaluate("document.documentElement.scrollWidth")
    assert width <= 390, f"the page scrolls sideways: {width} px wide"
    await screenshot(page, "phone")

    await page.get_by_role("button", name="Show automations").click()
    await expect(panel).to_be_visible()
    await expect(chat).to_be_hidden()
    await expect(automation(page, "stretch my legs and drink")).to_be_visible()
    await page.get_by_role("button", name="Back to chat").click()
    await expect(chat).to_be_visible()
    await page.get_by_role("button", name="Back to chats").click()
    await expect(sidebar).to_be_visible()
    # The chat list: the title (whole on hover), no raw key under it.
    entry = sidebar.locator(f'li[data-key="{key}"]')
    await expect(entry.locator(".session-key")).to_have_count(0)
    await expect(entry).not_to_contain_text(key)
    button = entry.get_by_role("button")
    await expect(button).to_have_attribute("title", re.compile(re.escape(key)))
    await button.click()
    await expect(chat).to_be_visible()


@pytest.mark.timeout(30)
async def test_a_tool_call_that_answered_an_error_is_not_a_green_ok(
    start_server: StartServer, page: Page
) -> None:
    ui = await start_server()
    await log_in(page, ui)
    await new_chat(page)
    await say(page, "remove the reminder called ghost")
    log = page.get_by_role("log", name="Messages")
    reply = log.locator("article.role-assistant").last
    await expect(log.locator("article.streaming")).to_have_count(0)
    row = reply.locator(".tool")
    await expect(row).to_have_attribute("data-status", "error")
    await expect(row.locator(".tool-status")).to_have_text("error")
    await expect(row.locator(".tool-result")).to_contain_text("Error: no automation 'ghost'")
    await page.reload()
    await expect(page.locator("#conn-status")).to_have_text("Live")
    row = page.get_by_role("log", name="Messages").locator(".tool")
    await expect(row).to_have_attribute("data-status", "error")


@pytest.mark.timeout(40)
async def test_the_deliveries_view_shows_the_channel_and_re_sends_a_failed_delivery(
    start_server: StartServer, page: Page, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.integration.test_channels_webhook import HttpStub, scripted

    async with HttpStub(scripted(400)) as receiver:  # refuses the first request only
        monkeypatch.setenv("AGENTCRON_WEBHOOK_URL", receiver.url)
        monkeypatch.setenv("AGENTCRON_WEBHOOK_SECRET", "s3cret-for-the-browser-test")
        ui = await start_server()
        await log_in(page, ui)
        await new_chat(page)
        await say(page, "hello there")
        log = page.get_by_role("log", name="Messages")
        reply = log.locator("article.role-assistant:not(.streaming)").filter(has_text="You said")
        await expect(reply.locator(".undelivered-badge")).to_have_text("not delivered")

        await page.get_by_role("button", name="Deliveries", exact=True).click()
        dialog = page.get_by_role("dialog", name="Deliveries")
        status = dialog.get_by_role("region", name="Channel status")
        await expect(status.get_by_role("listitem", name="webhook: failing")).to_be_visible()
        await expect(status).to_contain_text("last error: HTTP 400")
        records = dialog.get_by_role("region", name="Delivery records")
        row = records.locator("tbody tr")
        await expect(row).to_have_count(1)
        await expect(row.locator(".state-badge")).to_have_text("failed")
        await expect(row).to_contain_text("webhook")
        await expect(records.locator("th").first).to_have_text("Sent (Europe/Berlin)")
        await row.get_by_role("button", name=re.compile(r"^Retry delivery")).click()
        await expect(row.locator(".state-badge")).to_have_text("delivered")
        await expect(row.get_by_role("button")).to_have_count(0)
        await receiver.wait_for(lambda r: len(r) == 2)
        # The filter asks the server for one state only.
        await dialog.get_by_label("Show deliveries").select_option("failed")
        await expect(records).to_contain_text("No deliveries.")


@pytest.mark.timeout(60)
async def test_load_more_pages_through_a_long_run_history(
    start_server: StartServer, page: Page
) -> None:
    ui = await start_server()
    await log_in(page, ui)
    key = await new_chat(page)
    item = await add_automation(page, "pulse", "say hi", "every 10 minutes")
    # Four hours at once: the fires the engine finds due are each recorded (the latest runs,
    # the others are missed: its catch-up policy).
    ui.clock.advance(timedelta(hours=4))
    await expect(item.locator(".last-run")).to_contain_text("Mon, Nov 23, 12:00 (Europe/Berlin)")
    (job,) = await ui.cron.jobs.list(session_key=key)
    runs = await ui.cron.runs.list(job.id)
    assert len(runs) == 24, [(r.fire_at, r.state) for r in runs]

    await item.get_by_role("button", name="Details of pulse").click()
    dialog = page.get_by_role("dialog", name="pulse")
    rows = dialog.get_by_role("region", name="Run history").locator("tbody tr")
    await expect(rows).to_have_count(20)
    await expect(rows.first.locator("td.fire time")).to_have_text("Mon, Nov 23, 12:00")
    await dialog.get_by_role("button", name="Load more").click()
    await expect(rows).to_have_count(24)
    await expect(rows.last.locator("td.fire time")).to_have_text("Mon, Nov 23, 08:10")
    await expect(dialog.get_by_role("button", name="Load more")).to_have_count(0)
    chart = dialog.get_by_role("img", name="Outcome and duration of the last 24 runs")
    await expect(chart.locator("rect.bar")).to_have_count(24)


@pytest.mark.timeout(60)
async def test_a_chat_shows_its_usage_per_day_under_its_automations(
    start_server: StartServer, page: Page
) -> None:
    ui = await start_server()
    await log_in(page, ui)
    key = await new_chat(page)
    usage = page.get_by_role("region", name="Usage per day")
    await expect(usage).to_be_hidden()  # nothing counted yet
    await say(page, "hello there")
    await say(page, "and once more")
    await expect(usage).to_be_visible()
    zone = (await ui.cron.sessions.get(key)).tz  # the browser's, as for every web chat
    rows = usage.locator("tbody tr")
    await expect(rows).to_have_count(1)
    cells = rows.first.locator("td")
    await expect(cells.nth(1)).to_have_text("2")  # two turns, on one day of the chat's zone
    await expect(cells.first).to_have_text(
        ui.clock.now().astimezone(ZoneInfo(zone)).date().isoformat()
    )
    await expect(cells.nth(2)).to_have_text(re.compile(r"^[\d,]+ / [\d,]+$"))
    await expect(usage.locator("tfoot td").first).to_have_text("2")
    await expect(usage.locator("caption")).to_have_text(f"Days in {zone}")


@pytest.mark.timeout(30)
async def test_the_form_sets_a_dst_policy_and_the_detail_says_it_in_words(
    start_server: StartServer, page: Page
) -> None:
    ui = await start_server()
    await log_in(page, ui)
    key = await new_chat(page)
    form = page.get_by_role("form", name="New automation")
    await form.get_by_label("Name").fill("night backup")
    await form.get_by_label("What to do").fill("back up the notes")
    await form.get_by_label("When").fill("every 2h")
    await form.get_by_text("Daylight saving time").click()
    await form.get_by_label("If the clocks skip its time").select_option("skip")
    await form.get_by_label("If the clocks repeat its time").select_option("both")
    await form.get_by_role("button", name="Add automation").click()
    # An interval runs in absolute time: the API's refusal shows next to the form.
    await expect(form.get_by_role("alert")).to_contain_text("an interval")
    await form.get_by_label("When").fill("every day at 2:30")
    await form.get_by_role("button", name="Add automation").click()
    item = automation(page, "night backup")
    await expect(item).to_contain_text("not on a day the clocks skip its time")
    (job,) = await ui.cron.jobs.list(session_key=key)
    assert (job.spec.dst_gap, job.spec.dst_fold) == ("skip", "both")  # type: ignore[union-attr]

    await item.get_by_role("button", name="Details of night backup").click()
    dialog = page.get_by_role("dialog", name="night backup")
    await expect(dialog.locator(".job-schedule")).to_have_text(describe(job.spec))
    policy = dialog.locator(".policy")
    await expect(policy).to_contain_text(
        "On a day the clocks skip its time (daylight saving time starts), it does not run."
    )
    await expect(policy).to_contain_text(
        "On a day the clocks repeat its time (daylight saving time ends), it runs both times."
    )
    await dialog.get_by_role("button", name="Close automation details").click()

    # The default says nothing of daylight saving time, and sends no policy.
    await add_automation(page, "morning", "say hello", "every day at 9")
    plain = next(j for j in await ui.cron.jobs.list(session_key=key) if j.name == "morning")
    assert "dst_gap" not in plain.spec.model_dump()
    await automation(page, "morning").get_by_role("button", name="Details of morning").click()
    morning = page.get_by_role("dialog", name="morning")
    await expect(morning.locator(".policy")).to_contain_text("Kept under Done")
    await expect(morning.locator(".policy")).not_to_contain_text("daylight saving")


@pytest.mark.timeout(60)
async def test_the_detail_shows_the_cadence_bounds_and_the_agents_move_of_the_next_run(
    start_server: StartServer, page: Page
) -> None:
    ui = await start_server()
    await log_in(page, ui)
    key = await new_chat(page)
    item = await add_automation(page, "inbox", "check the inbox", "every hour")
    (job,) = await ui.cron.jobs.list(session_key=key)
    await ui.cron.jobs.update(job.id, cadence=CadenceBounds.of("30m", "6h", "08:00-20:00"))
    await item.get_by_role("button", name="Run inbox now").click()
    await expect(item.locator(".last-run")).to_contain_text("succeeded")
    (run,) = await ui.cron.runs.list(job.id)
    # What the cron tool's reschedule does from that run's turn: 3 hours on, with its reason.
    now = ui.cron.clock.now()
    moved = await ui.cron.jobs.reschedule(
        job.id, now + timedelta(hours=3), reason="the inbox is quiet", run_id=run.id
    )
    to = f"{moved.next_fire_at.astimezone(ZoneInfo('Europe/Berlin')):%H:%M}"

    await item.get_by_role("button", name="Details of inbox").click()
    dialog = page.get_by_role("dialog", name="inbox")
    await expect(dialog).to_be_visible()
    await expect(dialog.locator(".job-moved")).to_contain_text("Next run moved by the agent from")
    await expect(dialog.locator(".job-moved")).to_contain_text(f"{to} (Europe/Berlin)")
    await expect(dialog.locator(".job-moved")).to_contain_text("the inbox is quiet")
    await expect(dialog.locator(".next-fires li").first).to_contain_text(to)
    await expect(dialog.locator(".policy")).to_contain_text(
        "The agent may move its next run at least 30m and at most 6h ahead, between "
        "08:00-20:00 local time."
    )
    history = dialog.get_by_role("region", name="Run history")
    await expect(history.locator(".badge.moved")).to_contain_text(
        re.compile(rf"moved a next run to .*{to}.*: the inbox is quiet")
    )
    await screenshot(page, "cadence")
