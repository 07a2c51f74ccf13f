// The deliveries view (a dialog from the sidebar): each channel's state (`GET /api/channels`) and
// what the channels did with each message (`GET /api/deliveries`, newest first, a page at a time
// by `next_cursor`), with Retry on a failed one (`POST /api/deliveries/{id}/retry`).

import { path } from "./api.js";
import { BROWSER_ZONE, h, showError, timeEl } from "./dom.js";

const PAGE = 50;
const STATES = ["", "failed", "pending", "delivered"];

export class DeliveriesView {
  /** titleOf(sessionKey): the chat's title, or null when it is not in the list. */
  constructor({ api, titleOf }) {
    this.api = api;
    this.titleOf = titleOf;
    this.dialog = document.getElementById("deliveries-dialog");
    this.body = document.getElementById("deliveries-body");
    this.error = document.getElementById("deliveries-error");
    this.state = "";
    this.request = 0;
    document.getElementById("deliveries-close").addEventListener("click", () => this.dialog.close());
    this.dialog.addEventListener("close", () => {
      this.request += 1;
    });
  }

  async open() {
    this.body.replaceChildren(h("p", { class: "muted" }, "Loading…"));
    showError(this.error, "");
    if (!this.dialog.open) this.dialog.showModal();
    await this.load();
  }

  /** Re-read (after a delivery event, while it is open). */
  async refresh() {
    if (this.dialog.open) await this.load();
  }

  async load() {
    const request = ++this.request;
    try {
      const channels = await this.api("GET", path.channels());
      const page = await this.api("GET", path.allDeliveries(this.state, PAGE));
      if (request !== this.request) return;
      this.channels = channels.channels || [];
      this.records = page.deliveries || [];
      this.cursor = page.next_cursor ?? null;
      this.render();
    } catch (error) {
      if (request !== this.request) return;
      showError(this.error, `Could not load the deliveries: ${error.message}`);
    }
  }

  async loadMore(button) {
    button.disabled = true;
    const request = ++this.request;
    try {
      const page = await this.api("GET", path.allDeliveries(this.state, PAGE, this.cursor));
      if (request !== this.request) return;
      this.records = [...this.records, ...(page.deliveries || [])];
      this.cursor = page.next_cursor ?? null;
      this.render();
    } catch (error) {
      button.disabled = false;
      showError(this.error, `Could not load more: ${error.message}`);
    }
  }

  render() {
    const filter = h(
      "select",
      {
        id: "deliveries-state",
        "aria-label": "Show deliveries",
        onchange: (event) => {
          this.state = event.currentTarget.value;
          this.load();
        },
      },
      STATES.map((s) => h("option", { value: s, selected: s === this.state }, s || "all")),
    );
    this.body.replaceChildren(
      h(
        "section",
        { class: "channel-status", "aria-label": "Channel status" },
        h("h3", {}, "Channels"),
        this.channels.length
          ? h("ul", { class: "channel-cards" }, this.channels.map((c) => this.channel(c)))
          : h("p", { class: "muted" }, "No channel is configured: replies stay in the web chat."),
      ),
      h(
        "section",
        { class: "delivery-records", "aria-label": "Delivery records" },
        h("div", { class: "records-head" }, h("h3", {}, "Messages sent"), h("label", { class: "inline" }, "Show ", filter)),
        this.records.length
          ? h(
              "div",
              { class: "table-wrap" },
              h(
                "table",
                { class: "deliveries" },
                h(
                  "thead",
                  {},
                  h(
                    "tr",
                    {},
                    h("th", { scope: "col" }, `Sent (${BROWSER_ZONE})`),
                    ["Channel", "Chat", "State", "Attempts", "Last error", ""].map((t) => h("th", { scope: "col" }, t)),
                  ),
                ),
                h("tbody", {}, this.records.map((d) => this.row(d))),
              ),
            )
          : h("p", { class: "muted" }, "No deliveries."),
        this.cursor
          ? h("button", { type: "button", class: "small load-more", onclick: (event) => this.loadMore(event.currentTarget) }, "Load more")
          : null,
      ),
    );
  }

  channel(c) {
    const status = !c.running ? "stopped" : c.healthy ? "ok" : "failing";
    const label = { stopped: "not running", ok: "healthy", failing: "failing" }[status];
    return h(
      "li",
      { class: `channel-card channel ${status}`, "aria-label": `${c.name}: ${label}` },
      h("div", {}, h("span", { class: "dot", "aria-hidden": "true" }), h("strong", {}, c.name), ` (${c.kind}) `, h("span", { class: "muted" }, label)),
      h(
        "div",
        { class: "muted" },
        "last delivered: ",
        timeEl(c.last_success_at),
        c.failed ? ` · ${c.failed} given up since start` : "",
      ),
      c.last_error ? h("div", { class: "channel-error" }, "last error: ", c.last_error, " ", c.last_error_at ? timeEl(c.last_error_at) : null) : null,
    );
  }

  row(d) {
    const title = this.titleOf(d.session_key);
    return h(
      "tr",
      { class: `delivery state-${d.state}`, dataset: { id: d.id } },
      h("td", { "data-label": "Sent" }, timeEl(d.delivered_at || d.updated_at || d.created_at, BROWSER_ZONE, { label: false })),
      h("td", { "data-label": "Channel" }, d.channel),
      h("td", { title: d.session_key, "data-label": "Chat" }, title || d.session_key),
      h("td", { "data-label": "State" }, h("span", { class: `state-badge delivery-${d.state}` }, d.state)),
      h("td", { "data-label": "Attempts" }, String(d.attempts)),
      h("td", { class: d.last_error ? "error" : "muted", "data-label": "Last error" }, d.last_error || "—"),
      h(
        "td",
        {},
        d.state === "failed"
          ? h("button", { type: "button", class: "small", "aria-label": `Retry delivery ${d.id}`, onclick: (event) => this.retry(d, event.currentTarget) }, "Retry")
          : null,
      ),
    );
  }

  async retry(d, button) {
    button.disabled = true;
    try {
      await this.api("POST", path.retryDelivery(d.id));
    } catch (error) {
      button.disabled = false;
      showError(this.error, `Could not re-send: ${error.message}`);
      return;
    }
    await this.load();
  }
}
