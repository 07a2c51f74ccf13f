// The chat list: newest first, a clock on chats with automations or a pending recall, and the
// seed's "pending recalls only" filter.

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

export class Sidebar {
  constructor({ onOpen }) {
    this.onOpen = onOpen;
    this.list = document.getElementById("session-list");
    this.empty = document.getElementById("session-empty");
    this.filterButton = document.getElementById("filter-recalls");
    this.sessions = [];
    this.current = null;
    this.onlyRecalls = false;
    this.filterButton.addEventListener("click", () => {
      this.onlyRecalls = !this.onlyRecalls;
      this.filterButton.setAttribute("aria-pressed", String(this.onlyRecalls));
      this.render();
    });
  }

  set(sessions) {
    this.sessions = [...sessions].sort(newestFirst);
    this.render();
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
    if (!shown.length) {
      this.empty.textContent = this.onlyRecalls
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
