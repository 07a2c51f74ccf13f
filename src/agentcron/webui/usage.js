// A chat's usage per day (turns, tokens, cost) in its zone, from GET /api/usage?session_key=;
// hidden when there is none, or the server cannot say.

import { money } from "./chart.js";
import { h } from "./dom.js";

const DAYS = 7; // the days shown, the newest first

/** The report's rows (one per day, session and job) summed per day, newest day first. */
export function perDay(report) {
  const days = new Map();
  for (const row of report.days) {
    const day = days.get(row.day) || { day: row.day, turns: 0, input: 0, output: 0, cost: null };
    day.turns += row.turns;
    day.input += row.input_tokens;
    day.output += row.output_tokens;
    if (row.cost_usd !== null && row.cost_usd !== undefined) day.cost = (day.cost ?? 0) + row.cost_usd;
    days.set(row.day, day);
  }
  return [...days.values()].sort((a, b) => b.day.localeCompare(a.day));
}

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
    const url =
      `/api/usage?session_key=${encodeURIComponent(key)}&tz=${encodeURIComponent(tz || "UTC")}` +
      `&since=${since}`;
    let report;
    try {
      report = await this.api("GET", url);
    } catch {
      if (request === this.request) this.clear(); // a server without the route, or gone
      return;
    }
    if (request !== this.request) return; // another chat was opened meanwhile
    const days = perDay(report);
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
            h("td", {}, `${d.input.toLocaleString()} / ${d.output.toLocaleString()}`),
            h("td", {}, d.cost === null ? "—" : money(d.cost)),
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
