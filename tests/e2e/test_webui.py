"""The web UI in a real browser: a chat whose reminders come back as turns, automations, the
recall banner, two-step delete, and a reload in the middle of a streamed scheduled turn.
"""

from __future__ import annotations

import asyncio
import re
from datetime import timedelta

import pytest
from playwright.async_api import Locator, Page, WebSocketRoute, expect

from agentcron.agent.offline import OfflineModel
from tests.e2e.conftest import StartServer, StreamGate, log_in, new_chat, say, screenshot

pytestmark = pytest.mark.e2e

TEN_MINUTES = timedelta(minutes=10)


def transcript(page: Page) -> Locator:
    return page.get_by_role("log", name="Messages")


def panel(page: Page) -> Locator:
    return page.get_by_role("complementary", name="Automations")


def sidebar_clock(page: Page, key: str) -> Locator:
    """The clock icon of a chat in the sidebar (automations or a pending recall)."""
    chats = page.get_by_role("navigation", name="Chat list")
    return chats.locator(f'li[data-key="{key}"]').get_by_role("img", name=re.compile("^Scheduled"))


def automation(page: Page, name: str) -> Locator:
    return panel(page).get_by_role("listitem", name=f"Automation {name}")


@pytest.mark.timeout(30)
async def test_a_reminder_comes_back_as_a_turn_of_the_chat(
    start_server: StartServer, page: Page
) -> None:
    ui = await start_server()
    await page.goto(ui.url)
    # A wrong token is refused with a clear error; the right one logs in.
    await page.get_by_label("Access token").fill("not-the-token")
    await page.get_by_role("button", name="Log in").click()
    await expect(page.get_by_role("alert")).to_contain_text("Wrong token")
    await screenshot(page, "login")
    await page.get_by_label("Access token").fill(ui.token)
    await page.get_by_role("button", name="Log in").click()
    await expect(page.locator("#conn-status")).to_have_text("Live")
    assert await page.evaluate("localStorage.getItem('agentcron.token')") == ui.token
    assert ui.token not in await page.content()

    key = await new_chat(page)
    await say(page, "remind me in 10 minutes to stretch")
    log = transcript(page)
    await expect(log.locator("article.role-user").first).to_have_text(
        re.compile("remind me in 10 minutes to stretch")
    )
    reply = log.locator("article.role-assistant").last
    await expect(reply).to_contain_text("(offline model) Done: Scheduled “stretch”")
    await expect(reply.locator(".tool")).to_contain_text("cron · add · stretch")
    stretch = automation(page, "stretch")
    await expect(stretch).to_contain_text("once at 2026-11-23 08:10 (Europe/Berlin)")
    await expect(stretch.locator(".next-run")).to_have_text("Mon, Nov 23, 08:10 (Europe/Berlin)")
    await expect(stretch.locator(".state-badge")).to_have_text("Active")
    # A recurring one too: it stays in the panel after the one-shot is gone.
    await say(page, "every weekday at 9 check the build")
    await expect(automation(page, "check the build")).to_contain_text("Mon, Nov 23, 09:00")
    await expect(sidebar_clock(page, key)).to_have_attribute(
        "aria-label", "Scheduled: 2 automations"
    )

    # Ten minutes later the reminder fires: a turn of this chat, streamed like any other.
    ui.clock.advance(TEN_MINUTES)
    trigger = log.locator("article.trigger")
    await expect(trigger).to_have_count(1)
    await expect(trigger).to_contain_text("Scheduled automation triggered: stretch")
    await expect(trigger.locator(".clock-badge")).to_have_text("Scheduled")
    await expect(trigger.locator(".msg-body")).to_have_text("stretch")
    answer = log.locator("article.trigger + article.role-assistant")
    await expect(answer.locator(".msg-body")).to_have_text("(offline model) Reminder: stretch.")
    await expect(answer).to_have_class(re.compile("scheduled-reply"))
    # Styled apart from what the user typed.
    look = "el => [getComputedStyle(el).color, getComputedStyle(el).backgroundColor]"
    user_look = await log.locator("article.role-user:not(.trigger)").first.evaluate(look)
    trigger_look = await trigger.evaluate(look)
    assert user_look[0] != trigger_look[0]
    assert user_look[1] != trigger_look[1]
    # A one-shot is gone once it ran; the recurring one stays.
    await expect(stretch).to_have_count(0)
    await expect(automation(page, "check the build")).to_be_visible()
    await expect(sidebar_clock(page, key)).to_have_attribute(
        "aria-label", "Scheduled: 1 automation"
    )
    await expect(log.locator("article.streaming")).to_have_count(0)
    await screenshot(page, "chat")

    # Logging out forgets the token.
    await page.get_by_role("button", name="Log out").click()
    await expect(page.get_by_label("Access token")).to_be_visible()
    assert await page.evaluate("localStorage.getItem('agentcron.token')") is None


@pytest.mark.timeout(30)
async def test_automations_form_pause_resume_and_inline_errors(
    start_server: StartServer, page: Page
) -> None:
    ui = await start_server()
    # The token may come once in the address's fragment; it leaves the address bar at once.
    await page.goto(f"{ui.url}#token={ui.token}")
    await expect(page.locator("#conn-status")).to_have_text("Live")
    assert "token" not in page.url
    assert ui.token not in page.url
    key = await new_chat(page)
    form = page.get_by_role("form", name="New automation")
    error = form.get_by_role("alert")
    await form.get_by_label("Name").fill("build check")
    await form.get_by_label("What to do").fill("check the build and report failures")
    await form.get_by_label("When").fill("every blursday")
    await form.get_by_role("button", name="Add automation").click()
    # The API's own message (422, what is accepted) appears next to the form.
    await expect(error).to_contain_text("cannot read 'every blursday' as a time")
    await expect(error).to_contain_text("every weekday at 9")
    await expect(panel(page).get_by_role("listitem")).to_have_count(0)

    await form.get_by_label("When").fill("every weekday at 9")
    await form.get_by_role("button", name="Add automation").click()
    item = automation(page, "build check")
    await expect(item).to_contain_text("every weekday at 09:00 (Europe/Berlin)")
    await expect(item.locator(".next-run")).to_have_text("Mon, Nov 23, 09:00 (Europe/Berlin)")
    await expect(item.locator(".state-badge")).to_have_text("Active")
    await expect(error).to_be_hidden()
    await expect(form.get_by_label("Name")).to_have_value("")
    await expect(sidebar_clock(page, key)).to_have_attribute(
        "aria-label", "Scheduled: 1 automation"
    )

    await item.get_by_role("button", name="Pause build check").click()
    await expect(item.locator(".state-badge")).to_have_text("Paused")
    await expect(item.locator(".next-run")).to_have_text("paused")
    (job,) = await ui.cron.jobs.list(session_key=key)
    assert not job.enabled

    await item.get_by_role("button", name="Resume build check").click()
    await expect(item.locator(".state-badge")).to_have_text("Active")
    await expect(item.locator(".next-run")).to_have_text("Mon, Nov 23, 09:00 (Europe/Berlin)")
    (job,) = await ui.cron.jobs.list(session_key=key)
    assert job.enabled


@pytest.mark.timeout(30)
async def test_a_finished_one_shot_moves_to_done_unless_the_form_said_delete_after_run(
    start_server: StartServer, page: Page
) -> None:
    ui = await start_server()
    await log_in(page, ui)
    key = await new_chat(page)
    form = page.get_by_role("form", name="New automation")
    for name, delete in (("kept note", False), ("gone note", True)):
        await form.get_by_label("Name").fill(name)
        await form.get_by_label("What to do").fill("stretch")
        await form.get_by_label("When").fill("in 10 minutes")
        if delete:
            await form.get_by_label("Delete after its last run").check()
        await form.get_by_role("button", name="Add automation").click()
        await expect(automation(page, name)).to_be_visible()
    await expect(form.get_by_label("Delete after its last run")).not_to_be_checked()  # reset
    jobs = {j.name: j for j in await ui.cron.jobs.list(session_key=key)}
    assert not jobs["kept note"].policy.delete_after_run
    assert jobs["gone note"].policy.delete_after_run
    done = panel(page).get_by_role("region", name="Done automations")
    await expect(done).to_be_hidden()

    ui.clock.advance(TEN_MINUTES)
    kept = done.get_by_role("listitem", name="Automation kept note")
    await expect(kept.locator(".state-badge")).to_have_text("Done")
    await expect(kept.locator(".finished")).to_have_text("Mon, Nov 23, 08:10 (Europe/Berlin)")
    await expect(kept.get_by_role("button", name="Resume kept note")).to_have_count(0)
    await expect(automation(page, "gone note")).to_have_count(0)
    listed = panel(page).get_by_role("list", name="Automations of this chat", exact=True)
    await expect(listed).to_be_empty()
    await screenshot(page, "done-automations")


@pytest.mark.timeout(30)
async def test_recall_banner_skip_cancel_and_the_sidebar_clock(
    start_server: StartServer, page: Page
) -> None:
    ui = await start_server()
    await log_in(page, ui)
    plain = await new_chat(page)
    # Message text is shown as text, never as markup.
    markup = '<b>hello</b> <img src=x onerror="document.title=1">'
    await say(page, markup)
    await expect(transcript(page).locator("article.role-user .msg-body")).to_have_text(markup)
    await expect(transcript(page).locator("article.role-assistant")).to_contain_text(
        f'You said: "{markup}"'
    )
    await expect(page.locator(f'li[data-key="{plain}"] .session-title')).to_have_text(markup)
    assert await page.locator("#app b, #app img").count() == 0
    await expect(transcript(page).locator("article.streaming")).to_have_count(0)
    key = await new_chat(page)
    await say(page, "follow up every 10 minutes and check the logs")
    await expect(transcript(page).locator("article.role-assistant")).to_contain_text(
        "Recall scheduled"
    )
    await expect(transcript(page).locator("article.streaming")).to_have_count(0)
    banner = page.get_by_role("region", name="Pending recall")
    await expect(banner).to_be_visible()
    await expect(banner.locator("time")).to_have_text("Mon, Nov 23, 08:10 (Europe/Berlin)")
    await expect(banner).to_contain_text("every 10 minutes")
    await expect(banner).to_contain_text("check the logs")
    await expect(sidebar_clock(page, key)).to_have_attribute(
        "aria-label", "Scheduled: recall pending"
    )
    await expect(sidebar_clock(page, plain)).to_have_count(0)

    # The seed's filter shows only chats with a pending recall: not a chat with an automation.
    await ui.cron.jobs.create(
        name="build", when="every weekday at 9", message="check the build", session_key=plain
    )
    await expect(sidebar_clock(page, plain)).to_have_attribute(
        "aria-label", "Scheduled: 1 automation"
    )
    chats = page.get_by_role("navigation", name="Chat list").get_by_role("listitem")
    await expect(chats).to_have_count(2)
    only_recalls = page.get_by_role("button", name="Pending recalls only")
    await only_recalls.click()
    await expect(only_recalls).to_have_attribute("aria-pressed", "true")
    await expect(chats).to_have_count(1)
    await expect(chats.first).to_have_attribute("data-key", key)
    await only_recalls.click()
    await expect(chats).to_have_count(2)

    # Skip moves the recall's time by one interval.
    await banner.get_by_role("button", name="Skip next recall").click()
    await expect(banner.locator("time")).to_have_text("Mon, Nov 23, 08:20 (Europe/Berlin)")
    await screenshot(page, "recall-banner")

    await banner.get_by_role("button", name="Cancel recall").click()
    await expect(banner).to_be_hidden()
    await expect(sidebar_clock(page, key)).to_have_count(0)
    assert await ui.cron.jobs.list(session_key=key) == []
    # The cancelled recall stays readable (seed 003).
    (cancelled,) = await ui.cron.jobs.recalls(key)
    assert cancelled.state.value == "cancelled"
    await only_recalls.click()
    await expect(chats).to_have_count(0)
    await expect(page.locator("#session-empty")).to_have_text("No chats with a pending recall.")


@pytest.mark.timeout(30)
async def test_deleting_a_chat_with_an_automation_asks_first(
    start_server: StartServer, page: Page
) -> None:
    ui = await start_server()
    await log_in(page, ui)
    other = await new_chat(page)
    key = await new_chat(page)
    form = page.get_by_role("form", name="New automation")
    await form.get_by_label("Name").fill("daily monitor")
    await form.get_by_label("What to do").fill("check the monitor")
    await form.get_by_label("When").fill("every day at 7:30")
    await form.get_by_role("button", name="Add automation").click()
    await expect(automation(page, "daily monitor")).to_be_visible()

    await page.get_by_role("button", name="Delete chat").click()
    dialog = page.get_by_role("dialog")
    await expect(dialog).to_be_visible()
    listed = dialog.get_by_role("list", name="Automations that will be deleted")
    await expect(listed.get_by_role("listitem")).to_have_text(["daily monitor"])
    confirm = dialog.get_by_role("button", name="Delete chat and 1 automation")
    await expect(confirm).to_be_visible()
    await screenshot(page, "delete-confirmation")

    # Cancel keeps everything.
    await dialog.get_by_role("button", name="Cancel").click()
    await expect(dialog).to_be_hidden()
    await expect(page.locator(f'li[data-key="{key}"]')).to_be_visible()
    await expect(automation(page, "daily monitor")).to_be_visible()
    assert len(await ui.cron.jobs.list(session_key=key)) == 1

    # Confirming deletes the chat and its automation.
    await page.get_by_role("button", name="Delete chat").click()
    await dialog.get_by_role("button", name="Delete chat and 1 automation").click()
    await expect(dialog).to_be_hidden()
    await expect(page.locator(f'li[data-key="{key}"]')).to_have_count(0)
    await expect(page.locator("#chat-key")).to_have_text(other)
    await expect(page.get_by_role("alert").filter(has_text="deleted")).to_have_count(0)
    assert await ui.cron.jobs.list(session_key=key) == []
    assert [s.key for s in await ui.cron.sessions.list()] == [other]


@pytest.mark.timeout(30)
async def test_a_reload_mid_turn_replays_the_partial_reply_then_streams_the_rest(
    start_server: StartServer, page: Page
) -> None:
    gate = StreamGate()
    ui = await start_server(model=OfflineModel(sleep=gate.sleep))
    ui.gates.append(gate)
    # Every WebSocket of the page goes through a route the test can cut.
    sockets: asyncio.Queue[WebSocketRoute] = asyncio.Queue()

    def through(route: WebSocketRoute) -> None:
        route.connect_to_server()
        sockets.put_nowait(route)

    await page.route_web_socket(re.compile(r"/api/ws$"), through)
    await log_in(page, ui)
    await asyncio.wait_for(sockets.get(), 10)
    key = await new_chat(page)
    await say(page, "remind me in 10 minutes to drink water and stretch your legs")
    await expect(automation(page, "drink water and stretch your legs")).to_be_visible()
    log = transcript(page)
    # The scheduling turn's reply has ended (not merely not yet started streaming): only then
    # is the gate armed, or it would hold this reply instead of the reminder's.
    done = log.locator("article:not(.streaming)").filter(has_text="Done: Scheduled")
    await expect(done).to_have_count(1)
    await expect(log.locator("article.streaming")).to_have_count(0)

    # The reminder fires; its reply is held after three words.
    gate.hold_after(3)
    ui.clock.advance(TEN_MINUTES)
    await asyncio.wait_for(gate.held.wait(), 10)
    live = log.locator("article.streaming")
    stop = page.get_by_role("button", name="Stop")
    await expect(live.locator(".msg-body")).to_have_text("(offline model) Reminder:")
    await expect(stop).to_be_visible()

    # A reload mid-turn: the transcript so far, then the partial reply from the replay.
    await page.reload()
    socket = await asyncio.wait_for(sockets.get(), 10)
    await expect(page.locator("#conn-status")).to_have_text("Live")
    await expect(page.locator("#chat-key")).to_have_text(key)
    await expect(log.locator("article.trigger")).to_contain_text(
        "Scheduled automation triggered: drink water and stretch your legs"
    )
    await expect(live.locator(".msg-body")).to_have_text("(offline model) Reminder:")
    await expect(stop).to_be_visible()
    # ... and the stream goes on live on the new connection.
    gate.step()
    await expect(live.locator(".msg-body")).to_have_text("(offline model) Reminder: drink")

    # The connection drops: the page reconnects by itself and replays the turn once.
    await socket.close(code=1012, reason="test: connection lost")
    await asyncio.wait_for(sockets.get(), 10)  # the page opened a new one (after its backoff)
    await expect(page.locator("#conn-status")).to_have_text("Live")
    await expect(live.locator(".msg-body")).to_have_text("(offline model) Reminder: drink")

    gate.release()
    final = "(offline model) Reminder: drink water and stretch your legs."
    answer = log.locator("article.trigger + article.role-assistant")
    await expect(answer.locator(".msg-body")).to_have_text(final)
    await expect(live).to_have_count(0)
    await expect(log.locator("article", has_text="Reminder:")).to_have_count(1)
    await expect(stop).to_be_hidden()
    await expect(automation(page, "drink water and stretch your legs")).to_have_count(0)
    await expect(page.locator("#conn-status")).to_have_text("Live")


@pytest.mark.timeout(30)
async def test_a_turn_stopped_after_a_tool_ran_still_shows_the_call(
    start_server: StartServer, page: Page
) -> None:
    gate = StreamGate()
    ui = await start_server(model=OfflineModel(sleep=gate.sleep))
    ui.gates.append(gate)
    await log_in(page, ui)
    await new_chat(page)
    log = transcript(page)
    # The cron tool runs; the reply after it is held after its first word, and stopped.
    gate.hold_after(1)
    await say(page, "remind me in 10 minutes to stretch")
    await asyncio.wait_for(gate.held.wait(), 10)
    live = log.locator("article.streaming")
    await expect(live.locator("details.tool .tool-status")).to_have_text("ok")
    await page.get_by_role("button", name="Stop").click()

    def stopped_card() -> Locator:
        return log.get_by_role("article", name="Stopped")

    await expect(stopped_card()).to_contain_text("This turn was stopped.")
    await expect(live).to_have_count(0)
    await expect(stopped_card().locator("details.tool")).to_contain_text("cron · add · stretch")
    await expect(stopped_card().locator("details.tool .tool-status")).to_have_text("ok")
    # Saved with the turn's end: after a reload the card still shows the call.
    await page.reload()
    await expect(page.locator("#conn-status")).to_have_text("Live")
    await expect(stopped_card().locator("details.tool")).to_contain_text("cron · add · stretch")
    await expect(stopped_card().locator("details.tool .tool-status")).to_have_text("ok")
    await expect(log.locator("article.role-tool")).to_have_count(0)


@pytest.mark.timeout(30)
async def test_a_call_still_running_when_its_turn_is_stopped_shows_it_has_no_result(
    start_server: StartServer, page: Page
) -> None:
    running = asyncio.Event()

    async def deploy(env: str) -> str:
        """Deploy the app to an environment.

        Args:
            env: staging or production
        """
        running.set()
        await asyncio.Event().wait()  # until the turn is stopped
        return "never"

    ui = await start_server(model=OfflineModel(), tools=[deploy])
    await log_in(page, ui)
    await new_chat(page)
    log = transcript(page)
    await say(page, "use deploy with env=production")
    await asyncio.wait_for(running.wait(), 10)
    await expect(log.locator("article.streaming details.tool")).to_contain_text("running…")
    await page.get_by_role("button", name="Stop").click()
    card = log.get_by_role("article", name="Stopped")
    await expect(card).to_contain_text("This turn was stopped.")
    # Not an error, not running: it may have done its work, nobody knows.
    await expect(card.locator("details.tool .tool-status")).to_have_text("no result")
    await page.reload()
    await expect(page.locator("#conn-status")).to_have_text("Live")
    await expect(card.locator("details.tool .tool-status")).to_have_text("no result")
    await card.locator("details.tool summary").click()
    await expect(card.locator("pre.tool-result")).to_have_text(
        "(no result: the turn ended before the tool answered)"
    )


@pytest.mark.timeout(30)
async def test_saved_tool_calls_and_a_summary_are_folded_in_the_transcript(
    start_server: StartServer, page: Page, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AGENTCRON_HISTORY_BUDGET", "100")  # tokens: a few turns outgrow it
    ui = await start_server()
    await log_in(page, ui)
    await new_chat(page)
    log = transcript(page)

    def reply(text: str) -> Locator:
        return log.locator("article.role-assistant:not(.streaming)").filter(has_text=text)

    await say(page, "remind me in 10 minutes to stretch")
    await expect(reply("Done: Scheduled")).to_have_count(1)
    # The second turn's history (request, tool call, reply) is past the budget: the older
    # part is folded into a summary, shown folded.
    await say(page, "the code word is walrus " + "and then some more words " * 12)
    await expect(reply("You said")).to_have_count(1)
    summary = log.get_by_role("article", name="Summary")
    await expect(summary).to_have_count(1)
    await expect(summary.locator("summary")).to_contain_text(
        re.compile(r"Summary of \d+ earlier entries")
    )
    body = summary.locator(".msg-body")
    await expect(body).to_be_hidden()  # folded
    await summary.locator("summary").click()
    await expect(body).to_contain_text(re.compile(r"^\(offline model\) Summary of \d+ earlier"))

    # After a reload the saved tool call is folded into its turn's reply, not an entry of
    # its own; the summary is still there.
    await page.reload()
    await expect(page.locator("#conn-status")).to_have_text("Live")
    first = reply("Done: Scheduled")
    await expect(first.locator("details.tool")).to_contain_text("cron · add · stretch")
    await expect(first.locator("details.tool pre.tool-result")).to_be_hidden()
    await expect(log.locator("article.role-tool")).to_have_count(0)
    await expect(log.get_by_role("article", name="Summary")).to_have_count(1)


@pytest.mark.timeout(30)
async def test_a_reply_a_channel_could_not_deliver_is_marked_and_the_channel_shown_failing(
    start_server: StartServer, page: Page, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.integration.test_channels_webhook import HttpStub, scripted

    async with HttpStub(scripted(then=400)) as receiver:  # the receiver refuses everything
        monkeypatch.setenv("AGENTCRON_WEBHOOK_URL", receiver.url)
        monkeypatch.setenv("AGENTCRON_WEBHOOK_SECRET", "s3cret-for-the-browser-test")
        ui = await start_server()
        await log_in(page, ui)
        channels = page.get_by_role("region", name="Channels")
        await expect(channels.get_by_role("listitem", name="webhook: healthy")).to_be_visible()
        await new_chat(page)
        await say(page, "hello there")
        log = transcript(page)
        reply = log.locator("article.role-assistant:not(.streaming)").filter(has_text="You said")
        badge = reply.locator(".undelivered-badge")
        await expect(badge).to_have_text("not delivered")
        await expect(badge).to_have_attribute(
            "title", re.compile(r"^Not delivered: webhook: HTTP 400")
        )
        await expect(channels.get_by_role("listitem", name="webhook: failing")).to_be_visible()
        # From the delivery records after a reload, not only from the live event.
        await page.reload()
        await expect(page.locator("#conn-status")).to_have_text("Live")
        await expect(reply.locator(".undelivered-badge")).to_have_text("not delivered")
        assert len(receiver.received) == 1  # a permanent error is not retried


async def test_unified_a_shared_reminder_replies_in_the_chat_you_talk_in_and_system_events_show(
    start_server: StartServer, page: Page, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AGENTCRON_UNIFIED_SESSION", "1")
    ui = await start_server()
    assert ui.cron.unified_session is True
    await ui.cron.system.ensure(
        "heartbeat", "every 30 minutes", message="all good", handler=lambda _t: "ok"
    )
    await log_in(page, ui)
    await new_chat(page)
    await say(page, "remind me in 10 minutes to stretch")
    log = transcript(page)
    await expect(log.locator("article.role-assistant").last).to_contain_text("Done: Scheduled")
    await expect(automation(page, "stretch")).to_be_visible()  # a shared one, listed here
    # It fires in the chat the person talks in, not in the "Shared automations" chat.
    ui.clock.advance(TEN_MINUTES)
    trigger = log.locator("article.trigger")
    await expect(trigger).to_contain_text("Scheduled automation triggered: stretch")
    answer = log.locator("article.trigger + article.role-assistant")
    await expect(answer.locator(".msg-body")).to_have_text("(offline model) Reminder: stretch.")
    # A system job's event reaches the page, whatever chat is open.
    ui.clock.advance(timedelta(minutes=20))
    await expect(page.locator("#system-event")).to_have_text("System event “heartbeat”: all good")
    await expect(page.locator("#system-event")).to_have_attribute("title", "from cron")


@pytest.mark.timeout(30)
async def test_a_reply_not_delivered_is_re_sent_with_its_retry_button(
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
        log = transcript(page)
        replies = log.locator("article.role-assistant:not(.streaming)")
        reply = replies.filter(has_text="You said")
        await expect(reply.locator(".undelivered-badge")).to_have_text("not delivered")
        retry = reply.get_by_role("button", name="Retry")
        await retry.click()
        await expect(reply.locator(".undelivered-badge")).to_have_count(0)
        await expect(retry).to_have_count(0)
        await receiver.wait_for(lambda r: len(r) == 2)
        first, second = receiver.received
        delivery = "x-agentcron-delivery"
        assert first.headers[delivery] == second.headers[delivery]  # the same reply again
        # no new run: the transcript still has the one reply, and after a reload no mark
        await page.reload()
        await expect(page.locator("#conn-status")).to_have_text("Live")
        await expect(reply).to_have_count(1)
        await expect(replies).to_have_count(1)
        await expect(reply.locator(".undelivered-badge")).to_have_count(0)
