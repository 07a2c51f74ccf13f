"""The web UI over lists the API answers in pages: the chat list reads its next page as it is
scrolled; a chat shows more transcript entries than one page holds (api.js follows
next_cursor until the last page).
"""

from __future__ import annotations

import pytest
from playwright.async_api import Page, expect

from tests.e2e.conftest import StartServer, log_in

pytestmark = pytest.mark.e2e

CHATS = 57  # more than a page (50)
NOTES = 61


@pytest.mark.timeout(60)
async def test_more_chats_and_entries_than_a_page_are_all_shown(
    start_server: StartServer, page: Page
) -> None:
    ui = await start_server()
    for i in range(CHATS):
        await ui.cron.sessions.create(f"websocket:many-{i:02d}", title=f"Chat {i:02d}")
    key = "websocket:many-00"
    for i in range(NOTES):
        await ui.cron.sessions.note(key, f"note {i:02d}")
    await log_in(page, ui)
    chats = page.get_by_role("navigation", name="Chat list").locator("li[data-key]")
    await expect(chats).to_have_count(50)  # a page; the rest as the list is scrolled
    await page.locator("nav.session-nav").evaluate("n => { n.scrollTop = n.scrollHeight; }")
    await expect(chats).to_have_count(CHATS)
    await chats.and_(page.locator(f'li[data-key="{key}"]')).click()
    await expect(page.locator("#chat-key")).to_have_text(key)
    log = page.get_by_role("log", name="Messages").locator("article.role-user")
    await expect(log).to_have_count(NOTES)
    await expect(log.last).to_contain_text(f"note {NOTES - 1}")
