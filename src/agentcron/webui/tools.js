// Tool calls in a turn: one folded row each (name, outcome, duration), arguments and result on
// demand. The same row for a call streamed live (`tool_started` / `tool_call` events) and for a
// `tool` entry of the transcript, so a turn looks the same before and after a reload.

import { h } from "./dom.js";

export const MAX_ARGS_CHARS = 2_000;
export const MAX_RESULT_CHARS = 4_000;

/** `text` cut to `limit` characters, saying how much was left out. */
export function clip(text, limit) {
  const s = String(text ?? "");
  if (s.length <= limit) return s;
  return `${s.slice(0, limit)}… (${s.length - limit} more characters)`;
}

/** Arguments as indented JSON, cut to MAX_ARGS_CHARS (shown as text, never as HTML). */
export function prettyArgs(args) {
  let text;
  try {
    text = JSON.stringify(args ?? {}, null, 2);
  } catch {
    text = String(args);
  }
  return clip(text ?? "", MAX_ARGS_CHARS);
}

/** Arguments as one line of JSON: a call's and its approval's compare equal. */
export function argsKey(args) {
  try {
    return JSON.stringify(args ?? {});
  } catch {
    return "";
  }
}

/** "84 ms", "1.2 s", "3 min 5 s"; null when not measured. */
export function formatDuration(ms) {
  if (typeof ms !== "number" || !Number.isFinite(ms) || ms < 0) return null;
  if (ms < 1000) return `${Math.round(ms)} ms`;
  if (ms < 60_000) return `${(ms / 1000).toFixed(ms < 10_000 ? 1 : 0)} s`;
  const minutes = Math.floor(ms / 60_000);
  const seconds = Math.round((ms % 60_000) / 1000);
  return seconds ? `${minutes} min ${seconds} s` : `${minutes} min`;
}

/**
 * running | ok | denied | unknown | error. `ok` comes with a saved call (false: failed, denied,
 * or its turn ended before it answered); a live `tool_call` event has no `ok`, so its result
 * text decides (a denial always starts "Denied"; a call cut off, "(no result"). A tool that
 * refuses answers "Error: ..." as its result (the MCP server marks those as errors too): never
 * a green "ok", whatever its `ok` says.
 */
export function toolStatus(call, running = false) {
  if (running) return "running";
  const result = String(call.result ?? "").trimStart().toLowerCase();
  if (call.ok === true) return result.startsWith("error:") ? "error" : "ok";
  if (result.startsWith("denied")) return "denied";
  if (result.startsWith("(no result")) return "unknown"; // it may have done its work: say so
  if (call.ok === false || /^(error|failed)\b/.test(result)) return "error";
  return "ok";
}

const STATUS = {
  running: { icon: "⋯", label: "running…" },
  ok: { icon: "✓", label: "ok" },
  denied: { icon: "⊘", label: "denied" },
  unknown: { icon: "?", label: "no result" },
  error: { icon: "✗", label: "error" },
};

/** "cron · add · stretch": the tool's name and its telling arguments. */
export function toolSummary(call) {
  const args = call.args || {};
  const bits = [args.action, args.name, args.when, args.call_type].filter(
    (v) => typeof v === "string" && v,
  );
  return bits.length ? `${call.name} · ${bits.join(" · ")}` : call.name;
}

/**
 * One folded row: call = {name, args, result?, ok?, duration_ms?, truncated?}; `running` while
 * the call has not answered yet.
 */
export function toolElement(call, running = false) {
  const status = toolStatus(call, running);
  const { icon, label } = STATUS[status];
  const duration = running ? null : formatDuration(call.duration_ms);
  const failed = status === "denied" || status === "error";
  return h(
    "details",
    {
      class: `tool status-${status}${running ? " running" : ""}${failed ? " failed" : ""}`,
      dataset: { name: call.name || "", status, args: argsKey(call.args) },
    },
    h(
      "summary",
      {},
      h("span", { class: "tool-icon", "aria-hidden": "true" }, icon),
      h("span", { class: "tool-name" }, toolSummary(call)),
      h("span", { class: "tool-status" }, label),
      duration ? h("span", { class: "tool-duration" }, duration) : null,
    ),
    h("div", { class: "tool-label" }, "Arguments"),
    h("pre", { class: "tool-args" }, prettyArgs(call.args)),
    running ? null : h("div", { class: "tool-label" }, "Result"),
    running ? null : h("pre", { class: "tool-result" }, clip(call.result ?? "", MAX_RESULT_CHARS)),
    !running && call.truncated ? h("p", { class: "tool-note muted" }, "Kept shortened in the transcript.") : null,
  );
}
