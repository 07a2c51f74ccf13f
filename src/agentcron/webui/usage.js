// A chat's usage per day (turns, tokens, cost) in its zone, from GET /api/usage?session_key=;
// hidden when there is none, or the server cannot say.

import { path } from "./api.js";
import { money, usageByDay } from "./chart.js";
import { h } from "./dom.js";

const DAYS = 7; // the days shown, the newest first

export class ChatUsage {
  constructor({ api }) {
    this.api = api;
    this.section = document.getElementById("chat-usage");
    this.body = document.getElementById("chat-usage-body");
    this.request = 0;
  }

  clear() {
    this.request++;
    this.section.hidden = true;
    this.body.replaceChildren();
  }

  /** The last DAYS days of `key`'s usage, days counted in `tz` (the chat's zone). */
  async load(key, tz) {
    const request = ++this.request;
    if (!key) return;
    const since = new Date(Date.now() - (DAYS - 1) * 86_400_000).toISOString().slice(0, 10);
    const url = path.usage({ sessionKey: key, tz: tz || "UTC", since });
    let report;
    try {
      report = await this.api("GET", url);
    } catch {
      if (request === this.request) this.clear(); // a server without the route, or gone
      return;
    }
    if (request !== this.request) return; // another chat was opened meanwhile
    const days = usageByDay(report).reverse(); // the newest day first
    const total = report.total;
    this.body.replaceChildren(
      h("caption", {}, `Days in ${tz || "UTC"}`),
      h("thead", {}, h("tr", {}, ...["Day", "Turns", "Tokens in / out", "Cost"].map((t) => h("th", { scope: "col" }, t)))),
      h(
        "tbody",
        {},
        ...days.map((d) =>
          h(
            "tr",
            {},
            h("td", {}, d.day),
            h("td", {}, String(d.turns)),
            h("td", {}, `${d.input_tokens.toLocaleString()} / ${d.output_tokens.toLocaleString()}`),
            h("td", {}, d.cost_usd === null ? "—" : money(d.cost_usd)),
          ),
        ),
      ),
      h(
        "tfoot",
        {},
        h(
          "tr",
          {},
          h("th", { scope: "row" }, "Total"),
          h("td", {}, String(total.turns)),
          h("td", {}, `${total.input_tokens.toLocaleString()} / ${total.output_tokens.toLocaleString()}`),
          h("td", {}, total.cost_usd === null ? "—" : money(total.cost_usd)),
        ),
      ),
    );
    this.section.hidden = days.length === 0;
  }
}
