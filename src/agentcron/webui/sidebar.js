// The chat list: newest first, read a page at a time as it is scrolled, searched on the server;
// a clock on chats with automations or a pending recall, and the "pending recalls only" filter
// (over the chats read so far).

import { clockIcon, h } from "./dom.js";

function scheduledLabel(session) {
  const parts = [];
  if (session.automations) {
    parts.push(`${session.automations} automation${session.automations === 1 ? "" : "s"}`);
  }
  if (session.has_recall) parts.push("recall pending");
  return parts.length ? `Scheduled: ${parts.join(", ")}` : null;
}

function newestFirst(a, b) {
  // Stable: chats updated at the same instant keep the server's order.
  return (b.updated_at || "").localeCompare(a.updated_at || "");
}

export function sessionTitle(session) {
  return session.title || `Untitled chat ${session.chat_id ? session.chat_id.slice(0, 6) : ""}`.trim();
}

const PAGE = 50; // chats read per page; the next page is read as the list is scrolled near its end
const REFRESH_MAX = 200; // a refresh re-reads at most this many of the chats already shown

export class Sidebar {
  /**
   * The chat list, read from the server a page at a time (`next_cursor`): the first page at
   * once, the next ones as the list is scrolled near its end; the search box asks the server
   * (`q`, title or key). `api(method, url)` is the REST client.
   */
  constructor({ api, onOpen }) {
    this.api = api;
    this.onOpen = onOpen;
    this.list = document.getElementById("session-list");
    this.empty = document.getElementById("session-empty");
    this.more = document.getElementById("session-more");
    this.search = document.getElementById("session-search");
    this.filterButton = document.getElementById("filter-recalls");
    this.sessions = [];
    this.cursor = null; // the next page's cursor (null: everything is shown)
    this.query = "";
    this.loading = null; // the page being read
    this.generation = 0; // bumped by a new search or refresh: an older answer is dropped
    this.current = null;
    this.onlyRecalls = false;
    this.filterButton.addEventListener("click", () => {
      this.onlyRecalls = !this.onlyRecalls;
      this.filterButton.setAttribute("aria-pressed", String(this.onlyRecalls));
      this.render();
    });
    let typing = null;
    this.search.addEventListener("input", () => {
      clearTimeout(typing);
      typing = setTimeout(() => {
        this.query = this.search.value.trim();
        this.reload().catch(() => {});
      }, 200);
    });
    // The next page as the end of the list comes into view (the list scrolls in its nav).
    this.observer = new IntersectionObserver(
      (entries) => {
        if (entries.some((e) => e.isIntersecting)) this.loadMore().catch(() => {});
      },
      { root: this.list.closest("nav"), rootMargin: "200px" },
    );
    this.observer.observe(this.more);
    // The observer tells only of a change of state: a list that grew and was scrolled to its
    // new end within one frame stays "in view" to it, and it says nothing. A scroll near the
    // end reads on too.
    this.list.closest("nav").addEventListener(
      "scroll",
      () => {
        if (this.cursor && !this.loading && this.moreInView()) this.loadMore().catch(() => {});
      },
      { passive: true },
    );
  }

  url(limit, cursor = null) {
    const params = new URLSearchParams({ limit: String(limit) });
    if (this.query) params.set("q", this.query);
    if (cursor) params.set("cursor", cursor);
    return `/api/sessions?${params}`;
  }

  /** Read the list again from its first page (a search, a change): as many chats as shown. */
  async reload() {
    const generation = ++this.generation;
    const limit = Math.min(REFRESH_MAX, Math.max(PAGE, this.sessions.length));
    // No next page is read on top of a reload: it would add to the list this one replaces
    // (a page read before it is dropped by its generation).
    const reading = this.api("GET", this.url(limit));
    this.loading = reading;
    let page;
    try {
      page = await reading;
    } finally {
      if (generation === this.generation) this.loading = null;
    }
    if (generation !== this.generation) return;
    // The open chat stays listed, on the first page or not (a search shows only what it finds).
    const open = this.query ? null : this.get(this.current);
    this.sessions = [...page.sessions].sort(newestFirst);
    if (open && !this.get(open.key)) this.sessions.push(open);
    this.cursor = page.next_cursor ?? null;
    this.render();
    // The end of the list may be in view already (a tall screen, or scrolled there while this
    // was read): the observer tells only of a change, so read on here.
    if (this.cursor && this.moreInView()) await this.loadMore();
  }

  /** The next page, if there is one and none is being read. */
  async loadMore() {
    if (!this.cursor || this.loading) return;
    const generation = this.generation;
    this.loading = this.api("GET", this.url(PAGE, this.cursor));
    try {
      const page = await this.loading;
      if (generation !== this.generation) return;
      const known = new Set(this.sessions.map((s) => s.key));
      this.sessions = this.sessions.concat(page.sessions.filter((s) => !known.has(s.key)));
      this.cursor = page.next_cursor ?? null;
      this.render();
    } finally {
      if (generation === this.generation) this.loading = null;
    }
    // Still short of the end of the view (a tall screen): read on.
    if (this.cursor && this.moreInView()) await this.loadMore();
  }

  moreInView() {
    const nav = this.list.closest("nav");
    const box = this.more.getBoundingClientRect();
    const view = nav.getBoundingClientRect();
    return box.top < view.bottom + 200;
  }

  /** A chat that is not among the pages read (opened by its link): shown too. */
  add(session) {
    if (!this.get(session.key)) {
      this.sessions = [...this.sessions, session];
      this.render();
    }
  }

  select(key) {
    this.current = key;
    this.render();
  }

  get(key) {
    return this.sessions.find((s) => s.key === key) || null;
  }

  render() {
    const shown = this.onlyRecalls
      ? this.sessions.filter((s) => s.has_recall)
      : this.sessions;
    this.list.replaceChildren(...shown.map((s) => this.item(s)));
    this.more.hidden = !this.cursor;
    if (!shown.length && !this.cursor) {
      this.empty.textContent = this.query
        ? `No chat's title or key holds “${this.query}”.`
        : this.onlyRecalls
          ? "No chats with a pending recall."
          : "No chats yet: start one with “New chat”.";
      this.empty.hidden = false;
    } else {
      this.empty.hidden = true;
    }
  }

  item(session) {
    const label = scheduledLabel(session);
    const current = session.key === this.current;
    return h(
      "li",
      { class: `session${current ? " current" : ""}`, dataset: { key: session.key } },
      h(
        "button",
        {
          type: "button",
          class: "session-button",
          "aria-current": current ? "page" : null,
          title: `${sessionTitle(session)}\n${session.key}`, // the whole title; the key on hover only
          onclick: () => this.onOpen(session.key),
        },
        h("span", { class: "session-title" }, sessionTitle(session)),
      ),
      h(
        "span",
        { class: "session-marks" },
        label ? clockIcon(label, session.has_recall ? "recall" : "") : null,
      ),
    );
  }
}
