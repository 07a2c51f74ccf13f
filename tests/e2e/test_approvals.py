"""Approvals in the web UI: a scheduled turn's gated tool call shows a card with Approve / Deny
in the turn; the decision runs (or refuses) the tool and the turn goes on. Tool calls are folded
rows with their outcome.
"""

from __future__ import annotations

import asyncio
import json
import re
from datetime import timedelta

import pytest
from playwright.async_api import Locator, Page, Route, WebSocketRoute, expect

from agentcron.agent.gate import UserTool
from agentcron.agent.offline import OfflineModel
from tests.e2e.conftest import T0, StartServer, StreamGate, Ui, log_in, new_chat, say, screenshot
from tests.helpers.waiting import until

pytestmark = pytest.mark.e2e

TASK = "use deploy with env=staging"
NINE_AM = T0 + timedelta(hours=1)  # 09:00 in the browser's zone (Europe/Berlin)


class Deployer:
    """The gated tool: records each deploy it really made."""

    def __init__(self) -> None:
        self.done: list[str] = []

    def tool(self) -> UserTool:
        def deploy(env: str) -> str:
            """Deploy the app to an environment.

            Args:
                env: staging or production
            """
            self.done.append(env)
            return f"deployed {env} (build 42)"

        return UserTool(deploy, requires_approval=True)


def transcript(page: Page) -> Locator:
    return page.get_by_role("log", name="Messages")


def card(page: Page) -> Locator:
    return transcript(page).get_by_role("group", name="Approval for deploy")


async def every_day_at_nine(page: Page) -> None:
    """The bound job, made with the automations form as a user would."""
    form = page.get_by_role("form", name="New automation")
    await form.get_by_label("Name").fill("deploy staging")
    await form.get_by_label("What to do").fill(TASK)
    await form.get_by_label("When").fill("every day at 9")
    await form.get_by_role("button", name="Add automation").click()
    automation = page.get_by_role("listitem", name="Automation deploy staging")
    await expect(automation).to_contain_text("Mon, Nov 23, 09:00")


async def start(start_server: StartServer, page: Page, deployer: Deployer) -> Ui:
    ui = await start_server(model=OfflineModel(), tools=[deployer.tool()])
    # The browser's clock at the server's fake 09:00, so "expires in 5 minutes" reads true.
    await page.clock.set_fixed_time(NINE_AM)
    return ui


@pytest.mark.timeout(30)
async def test_a_scheduled_turn_waits_for_approval_in_the_chat_and_approve_runs_the_tool(
    start_server: StartServer, page: Page
) -> None:
    deployer = Deployer()
    ui = await start(start_server, page, deployer)
    await log_in(page, ui)
    await new_chat(page)
    await every_day_at_nine(page)
    log = transcript(page)

    # 09:00: the job fires; its turn streams in and stops at the gated call with a card.
    ui.clock.advance(timedelta(hours=1))
    await expect(log.locator("article.trigger")).to_contain_text(
        "Scheduled automation triggered: deploy staging"
    )
    live = log.locator("article.streaming.scheduled-reply")
    waiting = card(page)
    await expect(live.get_by_role("group", name="Approval for deploy")).to_contain_text(
        "Approval needed: deploy"
    )
    await expect(waiting.locator(".approval-args")).to_have_text('{\n  "env": "staging"\n}')
    await expect(waiting.locator(".approval-expiry")).to_have_text("expires in 5 minutes")
    await expect(live.locator("details.tool")).to_contain_text("running…")
    assert deployer.done == []  # nothing runs before a person says so
    job = page.get_by_role("listitem", name="Automation deploy staging")
    await expect(job.locator(".state-badge")).to_have_text("Running now")  # the fire waits
    await screenshot(page, "approval-card")

    # Approve from the keyboard: the card turns into its outcome, the tool runs, the turn ends.
    approve = waiting.get_by_role("button", name="Approve")
    await approve.focus()
    await page.keyboard.press("Enter")
    await expect(waiting.get_by_role("status")).to_have_text("Approved by web UI")
    await expect(waiting.get_by_role("button")).to_have_count(0)
    reply = log.locator("article.trigger + article.role-assistant:not(.streaming)")
    await expect(reply.locator(".msg-body")).to_contain_text("deployed staging (build 42)")
    assert deployer.done == ["staging"]
    # The finished turn: the saved call (ok, with its duration) and the card's outcome after it.
    row = reply.locator("details.tool")
    await expect(row.locator(".tool-status")).to_have_text("ok")
    await expect(row.locator(".tool-duration")).to_have_text(re.compile(r"^\d+(\.\d)? (ms|s)$"))
    await expect(reply.locator("details.tool + .approval")).to_have_text(
        re.compile("Approved by web UI")
    )
    await expect(row.locator("pre.tool-result")).to_be_hidden()  # folded
    await row.locator("summary").click()
    await expect(row.locator("pre.tool-result")).to_have_text("deployed staging (build 42)")
    await expect(row.locator("pre.tool-args")).to_have_text('{\n  "env": "staging"\n}')

    # After a reload the turn looks the same: the saved call, the decision after it.
    await page.reload()
    await expect(page.locator("#conn-status")).to_have_text("Live")
    reply = log.locator("article.trigger + article.role-assistant")
    await expect(reply.locator("details.tool .tool-status")).to_have_text("ok")
    await expect(reply.locator("details.tool .tool-duration")).to_be_visible()
    await expect(reply.locator("details.tool + .approval")).to_have_text(
        re.compile("Approved by web UI")
    )
    await expect(card(page).get_by_role("button")).to_have_count(0)


@pytest.mark.timeout(30)
async def test_deny_refuses_the_call_and_the_turn_goes_on(
    start_server: StartServer, page: Page
) -> None:
    deployer = Deployer()
    ui = await start(start_server, page, deployer)
    await log_in(page, ui)
    key = await new_chat(page)
    await every_day_at_nine(page)
    log = transcript(page)

    ui.clock.advance(timedelta(hours=1))
    waiting = card(page)
    deny = waiting.get_by_role("button", name="Deny")
    await deny.click()
    await expect(waiting.get_by_role("status")).to_have_text("Denied by web UI")
    reply = log.locator("article.trigger + article.role-assistant:not(.streaming)")
    await expect(reply.locator(".msg-body")).to_contain_text("Denied by web UI.")
    await expect(reply.locator("details.tool .tool-status")).to_have_text("denied")
    assert deployer.done == []
    (decided,) = await ui.cron.approvals.list(key, pending_only=False)
    assert (decided.state.value, decided.decided_by) == ("denied", "web UI")


@pytest.mark.timeout(30)
async def test_no_decision_in_time_times_the_call_out(
    start_server: StartServer, page: Page
) -> None:
    deployer = Deployer()
    ui = await start_server(model=OfflineModel(), tools=[deployer.tool()])
    await log_in(page, ui)
    await new_chat(page)
    await say(page, "use deploy with env=qa")
    waiting = card(page)
    await expect(waiting.get_by_role("button", name="Approve")).to_be_enabled()
    ui.clock.advance(timedelta(minutes=5))  # the default timeout passes on the server's clock
    await expect(waiting.get_by_role("status")).to_have_text("Timed out")
    await expect(waiting.get_by_role("button")).to_have_count(0)
    reply = transcript(page).locator("article.role-assistant:not(.streaming)")
    await expect(reply.locator(".msg-body")).to_contain_text("timed out")
    await expect(reply.locator("details.tool .tool-status")).to_have_text("denied")
    assert deployer.done == []


@pytest.mark.timeout(30)
async def test_a_pending_approval_shows_on_opening_and_a_late_click_shows_what_happened(
    start_server: StartServer, page: Page
) -> None:
    deployer = Deployer()
    ui = await start(start_server, page, deployer)

    # The page's socket loses every approval_decided frame: a card can learn of a decision
    # made elsewhere only from the 409 of a click that came too late.
    def without_decisions(route: WebSocketRoute) -> None:
        server = route.connect_to_server()

        def to_page(message: str | bytes) -> None:
            if json.loads(message).get("type") != "approval_decided":
                route.send(message)

        server.on_message(to_page)

    await page.route_web_socket(re.compile(r"/api/ws$"), without_decisions)
    await log_in(page, ui)
    key = await new_chat(page)
    await say(page, "use deploy with env=production")
    await expect(card(page)).to_be_visible()

    # Opening the chat again (a reload) shows the pending approval, read from the API.
    await page.reload()
    await expect(page.locator("#conn-status")).to_have_text("Live")
    waiting = card(page)
    await expect(waiting.get_by_role("button", name="Approve")).to_be_enabled()
    await expect(waiting.locator(".approval-args")).to_have_text('{\n  "env": "production"\n}')

    # Someone else approves while the click is on its way: the click gets a 409.
    answers: list[int] = []

    async def approved_elsewhere_first(route: Route) -> None:
        # While the request is on its way both buttons are disabled (no second click).
        await expect(waiting.get_by_role("button", name="Denying…")).to_be_disabled()
        await expect(waiting.get_by_role("button", name="Approve")).to_be_disabled()
        await expect(waiting).to_have_attribute("aria-busy", "true")
        (pending,) = await ui.cron.approvals.list(key)
        await ui.cron.approvals.decide(pending.id, "approve", by="ana")
        response = await route.fetch()
        answers.append(response.status)
        await route.fulfill(response=response)

    await page.route(re.compile(r"/api/approvals/[^/?]+$"), approved_elsewhere_first)
    await waiting.get_by_role("button", name="Deny").click()
    await expect(waiting.get_by_role("status")).to_have_text("Approved by ana")
    await expect(waiting.get_by_role("button")).to_have_count(0)
    await expect(waiting.get_by_role("alert")).to_be_hidden()
    assert answers == [409]
    reply = transcript(page).locator("article.role-assistant:not(.streaming)")
    await expect(reply.filter(has_text="deployed production (build 42)")).to_have_count(1)
    assert deployer.done == ["production"]


@pytest.mark.timeout(30)
async def test_a_card_read_before_its_turn_reached_the_page_moves_into_the_turn(
    start_server: StartServer, page: Page
) -> None:
    """The chat's subscription is confirmed late: its approvals are read (the card is shown)
    while the turn's start is still on its way. When the turn arrives the card moves into it.
    """
    deployer = Deployer()
    ui = await start(start_server, page, deployer)
    held: list[str | bytes] = []
    holding = False
    release = None

    def hold_after_subscribing(route: WebSocketRoute) -> None:
        nonlocal release
        server = route.connect_to_server()

        def to_page(message: str | bytes) -> None:
            nonlocal holding
            if json.loads(message).get("type") == "subscribed" and armed:
                holding = True
            if holding:
                held.append(message)
            else:
                route.send(message)

        def flush() -> None:
            nonlocal holding
            holding = False
            for message in held:
                route.send(message)
            held.clear()

        release = flush
        server.on_message(to_page)

    armed = False
    await page.route_web_socket(re.compile(r"/api/ws$"), hold_after_subscribing)
    await log_in(page, ui)
    await new_chat(page)
    await every_day_at_nine(page)
    armed = True
    await page.reload()  # the chat opens again and subscribes: that answer is held back
    await expect(page.locator("#conn-status")).to_have_text("Live")
    ui.clock.advance(timedelta(hours=1))  # the turn starts and waits for approval meanwhile
    for _ in range(200):
        if await ui.cron.approvals.list():
            break
        await asyncio.sleep(0.01)
    assert release is not None
    release()  # subscribed (the transcript is read: the approval is pending), then the turn
    live = transcript(page).locator("article.streaming.scheduled-reply")
    await expect(live.get_by_role("group", name="Approval for deploy")).to_be_visible()
    await expect(transcript(page).locator(".approval-holder")).to_have_count(0)
    await expect(live.locator("details.tool + .approval")).to_have_count(1)  # after its call
    await card(page).get_by_role("button", name="Approve").click()
    reply = transcript(page).locator("article.trigger + article.role-assistant:not(.streaming)")
    await expect(reply.locator(".msg-body")).to_contain_text("deployed staging (build 42)")
    assert deployer.done == ["staging"]


@pytest.mark.timeout(30)
async def test_a_reload_of_the_chat_keeps_the_card_of_a_click_on_its_way(
    start_server: StartServer, page: Page
) -> None:
    """The chat's list is read again (a subscription confirmed again) while a Deny is on its
    way: the card that was clicked is the one put back, still busy, and its answer settles it.
    """
    deployer = Deployer()
    ui = await start(start_server, page, deployer)
    socket: list[WebSocketRoute] = []
    confirmed: list[str | bytes] = []

    def keep_the_subscription(route: WebSocketRoute) -> None:
        server = route.connect_to_server()
        socket.append(route)

        def to_page(message: str | bytes) -> None:
            if json.loads(message).get("type") == "subscribed":
                confirmed.append(message)
            route.send(message)

        server.on_message(to_page)

    await page.route_web_socket(re.compile(r"/api/ws$"), keep_the_subscription)
    await log_in(page, ui)
    await new_chat(page)
    await say(page, "use deploy with env=production")
    waiting = card(page)
    await expect(waiting.get_by_role("button", name="Approve")).to_be_enabled()
    assert confirmed

    async def reloaded_while_on_its_way(route: Route) -> None:
        await expect(waiting.get_by_role("button", name="Denying…")).to_be_disabled()
        # The subscription is confirmed again: the list is read again, then the approvals.
        async with page.expect_response(
            lambda r: r.request.method == "GET" and "/approvals" in r.url
        ):
            socket[-1].send(confirmed[-1])
        await expect(waiting.get_by_role("button", name="Denying…")).to_be_disabled()
        await expect(waiting).to_have_attribute("aria-busy", "true")
        await route.continue_()

    await page.route(re.compile(r"/api/approvals/[^/?]+$"), reloaded_while_on_its_way)
    await waiting.get_by_role("button", name="Deny").click()
    await expect(waiting.get_by_role("status")).to_have_text("Denied by web UI")
    await expect(waiting.get_by_role("button")).to_have_count(0)
    await expect(transcript(page).get_by_role("group", name="Approval for deploy")).to_have_count(1)
    assert deployer.done == []


@pytest.mark.timeout(30)
async def test_a_card_decided_while_its_turn_runs_stays_through_a_read_of_the_list(
    start_server: StartServer, page: Page
) -> None:
    """The chat's list is read again after a Deny, while the turn still streams its reply but
    is not live on the page (a subscription answer from before the turn began): the settled
    card is held on its own, then goes after its call in the reply when the reply arrives.
    """
    deployer = Deployer()
    gate = StreamGate()
    ui = await start_server(model=OfflineModel(sleep=gate.sleep), tools=[deployer.tool()])
    ui.gates.append(gate)
    await page.clock.set_fixed_time(NINE_AM)
    socket: list[WebSocketRoute] = []
    confirmed: list[dict[str, object]] = []

    def keep_the_subscription(route: WebSocketRoute) -> None:
        server = route.connect_to_server()
        socket.append(route)

        def to_page(message: str | bytes) -> None:
            if (event := json.loads(message)).get("type") == "subscribed":
                confirmed.append(event)
            route.send(message)

        server.on_message(to_page)

    await page.route_web_socket(re.compile(r"/api/ws$"), keep_the_subscription)
    await log_in(page, ui)
    key = await new_chat(page)

    async def subscribed() -> bool:
        return any(event["session_key"] == key for event in confirmed)

    await until(subscribed, "the new chat's subscription is confirmed")
    before_the_turn = next(event for event in confirmed if event["session_key"] == key)
    assert before_the_turn["running_turn"] is None
    gate.hold_after(2)  # the reply after the denial stops after two words
    await say(page, "use deploy with env=production")
    waiting = card(page)
    await waiting.get_by_role("button", name="Deny").click()
    await expect(waiting.get_by_role("status")).to_have_text("Denied by web UI")
    await asyncio.wait_for(gate.held.wait(), 10)

    # The list is read again, its turn unknown to the page as a live one.
    async with page.expect_response(lambda r: r.request.method == "GET" and "/approvals" in r.url):
        socket[-1].send(json.dumps(before_the_turn))
    held = transcript(page).locator("article.approval-holder")
    await expect(held.get_by_role("status")).to_have_text("Denied by web UI")

    gate.release()
    reply = transcript(page).locator("article.role-assistant:not(.streaming):not(.approval-holder)")
    await expect(reply.locator(".msg-body")).to_contain_text("Denied by web UI")
    await expect(reply.locator("details.tool + .approval").get_by_role("status")).to_have_text(
        "Denied by web UI"
    )
    await expect(held).to_have_count(0)
    await expect(transcript(page).get_by_role("group", name="Approval for deploy")).to_have_count(1)
    assert deployer.done == []
