// agentcron web UI: log in, chats with live turns (user and scheduled), automations, recall.
// Plain ES modules, no build step. All text is rendered as text (never innerHTML).

import { ApiError, makeApi, path } from "./api.js";
import { AutomationsPanel } from "./automations.js";
import { ChatView } from "./chat.js";
import { DeliveriesView } from "./deliveries.js";
import { BROWSER_ZONE, debounce, h, keepTimeTitlesFresh, knownZone, showError, timeEl } from "./dom.js";
import { JobDetail } from "./jobdetail.js";
import { Live } from "./live.js";
import { Sidebar, sessionTitle } from "./sidebar.js";

const TOKEN_KEY = "agentcron.token";
const SESSION_KEY = "agentcron.session";
const $ = (id) => document.getElementById(id);

const state = {
  token: null,
  live: null,
  current: null, // the open session's key
  detail: null, // GET /api/sessions/{key} of the open session
  detailRequest: 0,
  deletedHere: new Set(), // chats deleted from this page: no "it was deleted" notice
};

const api = makeApi(
  () => state.token,
  () => logout("The server no longer accepts this token. Log in again."),
);

const sidebar = new Sidebar({
  api,
  onOpen: (key) => {
    openSession(key);
    showPane("chat");
  },
});
const chat = new ChatView({
  api,
  onRunning: (running) => {
    $("stop").hidden = !running;
    $("stop").disabled = false;
  },
  onError: (message) => showChatError(message),
});
const panel = new AutomationsPanel({
  api,
  refresh: () => refreshDetail(),
  onError: (message) => showChatError(message),
  onDetails: (job) => jobDetail.open(job.id),
});
const jobDetail = new JobDetail({ api, onShowTurn: (run) => showTurn(run) });
const deliveries = new DeliveriesView({
  api,
  titleOf: (key) => {
    const session = sidebar.get(key);
    return session ? sessionTitle(session) : null;
  },
});
keepTimeTitlesFresh();

// -- panes: on a phone one of list -> chat -> automations at a time (CSS), with back buttons ---

function showPane(name) {
  $("app").dataset.pane = name;
}

$("back-to-list").addEventListener("click", () => showPane("list"));
$("show-automations").addEventListener("click", () => showPane("automations"));
$("back-to-chat").addEventListener("click", () => showPane("chat"));
$("open-deliveries").addEventListener("click", () => deliveries.open());

/** A run's "Show in chat": its session open (it may be another chat), the turn in view. */
function showTurn(run) {
  const key = run.session_key || run.delivery?.session_key || null;
  if (key && key !== state.current && sidebar.get(key)) openSession(key);
  showPane("chat");
  chat.reveal(run.message_id);
}

// -- login ------------------------------------------------------------------------------------

/** A token passed once in the address (#token=...) is taken and removed from the address bar. */
function tokenFromFragment() {
  const params = new URLSearchParams(location.hash.replace(/^#/, ""));
  const token = params.get("token");
  if (!token) return null;
  params.delete("token");
  const rest = params.toString();
  history.replaceState(null, "", location.pathname + location.search + (rest ? `#${rest}` : ""));
  return token.trim() || null;
}

function sessionFromFragment() {
  const params = new URLSearchParams(location.hash.replace(/^#/, ""));
  return params.get("session");
}

function rememberSession(key) {
  const hash = key ? `#${new URLSearchParams({ session: key })}` : "";
  history.replaceState(null, "", location.pathname + location.search + hash);
  if (key) localStorage.setItem(SESSION_KEY, key);
  else localStorage.removeItem(SESSION_KEY);
}

async function checkToken(token) {
  const probe = makeApi(() => token, null);
  return probe("GET", `${path.sessions()}?limit=1`);
}

function showLogin(message = "") {
  $("app").hidden = true;
  $("login").hidden = false;
  showError($("login-error"), message);
  $("login-token").value = "";
  $("login-token").focus();
}

async function login(token, { fromStorage = false } = {}) {
  const button = $("login-submit");
  button.disabled = true;
  try {
    await checkToken(token);
    state.token = token;
    localStorage.setItem(TOKEN_KEY, token);
    await startApp();
  } catch (error) {
    if (error instanceof ApiError && error.status === 401) {
      localStorage.removeItem(TOKEN_KEY);
      showLogin(
        fromStorage
          ? "The saved token was not accepted (the server's token changed?). Paste the current one."
          : "Wrong token: the server did not accept it. Use the token `agentcron serve` printed " +
            "at start-up (`agentcron token` prints it again).",
      );
    } else {
      showLogin(`Could not log in: ${error.message}`);
    }
  } finally {
    button.disabled = false;
  }
}

function logout(message = "") {
  if (state.live) state.live.stop();
  state.live = null;
  state.token = null;
  localStorage.removeItem(TOKEN_KEY);
  state.current = null;
  chat.open(null);
  panel.open(null);
  showLogin(message);
}

$("login-form").addEventListener("submit", (event) => {
  event.preventDefault();
  const token = $("login-token").value.trim();
  if (!token) {
    showError($("login-error"), "Paste the token first.");
    return;
  }
  login(token);
});

$("logout").addEventListener("click", () => logout());

// -- the app ----------------------------------------------------------------------------------

async function startApp() {
  $("login").hidden = true;
  $("app").hidden = false;
  showPane("list");
  await sidebar.reload();
  if (state.live) state.live.stop();
  state.live = new Live({
    token: state.token,
    onEvent: onEvent,
    onStatus: showConnection,
    onReady: () => {
      // Anything may have changed while we were away: re-read what the events would have said.
      refreshSessions();
      refreshDetail();
      refreshChannels();
    },
    onAuthFailed: () => logout("The server refused the token for the live stream. Log in again."),
  });
  state.live.start();
  const wanted = sessionFromFragment() || localStorage.getItem(SESSION_KEY);
  if (wanted && !sidebar.get(wanted)) {
    // Not on the first page: opened all the same when it exists.
    try {
      sidebar.add(await api("GET", path.session(wanted)));
    } catch {
      // gone: the newest chat opens instead
    }
  }
  const first = sidebar.get(wanted) ? wanted : sidebar.sessions[0]?.key || null;
  openSession(first);
}

// -- channels: each configured one, running and healthy or not ---------------------------------

async function refreshChannelsNow() {
  let data;
  try {
    data = await api("GET", path.channels());
  } catch {
    return; // shown again at the next delivery event or reconnect
  }
  const list = $("channel-list");
  list.replaceChildren();
  for (const c of data.channels) {
    const status = !c.running ? "stopped" : c.healthy ? "ok" : "failing";
    const label = { stopped: "not running", ok: "healthy", failing: "failing" }[status];
    const lines = [`${c.name} (${c.kind}): ${label}`];
    if (c.last_success_at) lines.push(`last delivered: ${timeEl(c.last_success_at).textContent}`);
    if (c.last_error) lines.push(`last error: ${c.last_error}`);
    list.append(
      h(
        "li",
        { class: `channel ${status}`, title: lines.join("\n"), "aria-label": `${c.name}: ${label}` },
        h("span", { class: "dot", "aria-hidden": "true" }),
        c.name,
        " ",
        h("span", { class: "muted" }, label),
      ),
    );
  }
  $("channels").hidden = data.channels.length === 0;
}
const refreshChannels = debounce(refreshChannelsNow, 200);

function showConnection(status, delay) {
  const el = $("conn-status");
  el.dataset.state = status;
  el.textContent = {
    connecting: "Connecting…",
    live: "Live",
    reconnecting: delay ? `Reconnecting in ${Math.ceil(delay / 1000)} s…` : "Reconnecting…",
    offline: "Offline",
  }[status];
}

function showChatError(message) {
  showError($("chat-error"), message);
}

const refreshSessions = debounce(async () => {
  try {
    await sidebar.reload();
  } catch (error) {
    if (!(error instanceof ApiError && error.status === 401)) {
      showChatError(`Could not load the chats: ${error.message}`);
    }
  }
}, 60);

async function refreshDetailNow() {
  const key = state.current;
  const request = ++state.detailRequest;
  if (key === null) return;
  try {
    const detail = await api("GET", path.session(key));
    if (request !== state.detailRequest || key !== state.current) return; // a newer answer wins
    state.detail = detail;
    showTitle(sessionTitle(detail));
    showZone(detail.tz);
    showQuiet(detail.quiet_hours);
    panel.show(detail);
  } catch (error) {
    if (request !== state.detailRequest || key !== state.current) return;
    if (error instanceof ApiError && error.status === 404) {
      sessionGone(key);
    } else if (!(error instanceof ApiError && error.status === 401)) {
      showChatError(`Could not load the chat: ${error.message}`);
    }
  }
}

const refreshDetail = debounce(refreshDetailNow, 40);

/** The chat's title, whole on hover (the header cuts a long one with an ellipsis). */
function showTitle(title) {
  $("chat-title").textContent = title;
  $("chat-title").title = title;
}

/** The chat's zone: its message times are in it, and the header says so. */
function showZone(tz) {
  const zone = knownZone(tz);
  chat.setZone(zone);
  $("chat-zone").textContent = state.current === null ? "" : `Times in ${zone}`;
}

// -- the chat's quiet hours: seen in its header, set and turned off in its info --------------

/** The chat's quiet hours ("22:00-07:00" in its zone, or none) in its header and form. */
function showQuiet(hours) {
  const shown = state.current === null ? null : hours || null;
  $("chat-quiet").textContent = shown ? `Quiet ${shown}` : "";
  $("chat-quiet").hidden = shown === null;
  $("quiet-off").hidden = shown === null;
  const input = $("quiet-hours");
  if (document.activeElement !== input) input.value = shown || ""; // not what a person types
  for (const el of $("quiet-form").elements) el.disabled = state.current === null;
}

/** PATCH the open chat's quiet hours (null: none); a refusal is shown by the form. */
async function setQuiet(hours) {
  const key = state.current;
  if (key === null) return;
  const buttons = [$("quiet-set"), $("quiet-off")];
  for (const b of buttons) b.disabled = true;
  try {
    const session = await api("PATCH", path.session(key), { quiet_hours: hours });
    showError($("quiet-error"), "");
    if (key !== state.current) return;
    if (state.detail) state.detail.quiet_hours = session.quiet_hours;
    $("quiet-hours").value = session.quiet_hours || "";
    showQuiet(session.quiet_hours);
    refreshSessions();
  } catch (error) {
    showError($("quiet-error"), `Could not set the quiet hours: ${error.message}`);
  } finally {
    for (const b of buttons) b.disabled = state.current === null;
  }
}

$("quiet-form").addEventListener("submit", (event) => {
  event.preventDefault();
  const hours = $("quiet-hours").value.trim();
  if (!hours) {
    showError($("quiet-error"), "Type them as HH:MM-HH:MM, e.g. 22:00-07:00 (or turn them off).");
    return;
  }
  setQuiet(hours);
});
$("quiet-off").addEventListener("click", () => setQuiet(null));

function openSession(key) {
  if (state.live && state.current && state.current !== key) state.live.unsubscribe(state.current);
  state.current = key;
  state.detail = null;
  rememberSession(key);
  sidebar.select(key);
  showChatError("");
  const session = key ? sidebar.get(key) : null;
  chat.open(key, session?.tz);
  panel.open(key);
  showTitle(session ? sessionTitle(session) : key ? key : "No chat open");
  showZone(session?.tz);
  showError($("quiet-error"), "");
  $("quiet-hours").value = "";
  showQuiet(session?.quiet_hours);
  $("chat-key").textContent = key || "";
  $("delete-chat").hidden = key === null;
  $("composer-input").disabled = key === null;
  $("send").disabled = key === null;
  if (key !== null) {
    state.live.subscribe(key);
    refreshDetailNow();
  }
}

function sessionGone(key) {
  if (key !== state.current) return;
  const next = sidebar.sessions.find((s) => s.key !== key)?.key || null;
  openSession(next);
  if (!state.deletedHere.has(key)) showChatError("That chat was deleted (elsewhere).");
}

// A system job's event (heartbeat, dream, ...) goes to every client, whatever chat is open.
function showSystemEvent(event) {
  const line = $("system-event");
  line.textContent = `System event “${event.name}”${event.text ? `: ${event.text}` : ""}`;
  line.title = `from ${event.source}`;
  line.hidden = false;
}

function concernsCurrent(event) {
  const key = state.current;
  if (key === null) return false;
  if (event.session_key === key) return true;
  if (typeof event.session_key === "string" && event.session_key.startsWith("unified:")) return true;
  const jobs = state.detail?.automations || [];
  return jobs.some((j) => j.id === event.job_id);
}

const refreshJobDetail = debounce(() => jobDetail.refresh(), 100);
const refreshDeliveries = debounce(() => deliveries.refresh(), 200);

function onEvent(event) {
  chat.handle(event);
  switch (event.type) {
    case "automation_update":
    case "recall_update":
    // a job's alert (overdue, failing, recovered, ending): its card's and detail's badges
    case "job_overdue":
    case "job_failing":
    case "job_recovered":
    case "job_ending":
    // a job paused at a cap of its budget
    case "job_budget_reached":
      refreshSessions();
      if (concernsCurrent(event)) refreshDetail();
      if (event.job_id && event.job_id === jobDetail.jobId) refreshJobDetail();
      break;
    case "session_sync":
    case "message":
      refreshSessions();
      if (event.session_key === state.current) refreshDetail();
      break;
    case "approval_requested":
    case "approval_decided":
      // an open automation's detail shows a fire waiting for a person (`waiting_approval`)
      refreshJobDetail();
      break;
    case "delivery_succeeded":
    case "delivery_failed":
      refreshChannels();
      refreshDeliveries();
      break;
    case "system_event":
      showSystemEvent(event);
      break;
    case "session_deleted":
      refreshSessions();
      if (event.session_key === state.current) sessionGone(event.session_key);
      break;
    case "error":
      showChatError(`The server said: ${event.detail}`);
      break;
    default:
      break;
  }
}

// -- new chat, composer, stop -------------------------------------------------------------------

function randomId() {
  const bytes = new Uint8Array(8);
  crypto.getRandomValues(bytes);
  return [...bytes].map((b) => b.toString(16).padStart(2, "0")).join("");
}

$("new-chat").addEventListener("click", async () => {
  const key = `websocket:${randomId()}`;
  const tz = BROWSER_ZONE; // a web chat's zone is the browser's
  try {
    try {
      await api("POST", path.sessions(), { key, tz });
    } catch (error) {
      if (!(error instanceof ApiError && error.status === 422)) throw error;
      await api("POST", path.sessions(), { key, tz: "UTC" }); // a zone the server does not know
    }
  } catch (error) {
    showChatError(`Could not create a chat: ${error.message}`);
    return;
  }
  await sidebar.reload();
  openSession(key);
  showPane("chat");
  $("composer-input").focus();
});

$("composer").addEventListener("submit", (event) => {
  event.preventDefault();
  const input = $("composer-input");
  const content = input.value;
  if (!content.trim() || state.current === null) return;
  input.value = "";
  showChatError("");
  chat.send(content).catch((error) => showChatError(`Message not sent: ${error.message}`));
});

$("composer-input").addEventListener("keydown", (event) => {
  if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
    event.preventDefault();
    $("composer").requestSubmit();
  }
});

$("stop").addEventListener("click", async () => {
  if (state.current === null) return;
  $("stop").disabled = true;
  try {
    await api("POST", path.stop(state.current));
  } catch (error) {
    showChatError(`Could not stop the turn: ${error.message}`);
    $("stop").disabled = false;
  }
});

// -- delete a chat (two steps when it has automations) ----------------------------------------

const dialog = $("delete-dialog");
let deleting = null; // {key, listed: Set of automation ids shown to the user}

function fillDeleteDialog(title, automations, { recall = false, shared = 0, changed = false } = {}) {
  const n = automations.length;
  $("delete-title").textContent = `Delete “${title}”?`;
  $("delete-text").textContent = n
    ? `This chat has ${n} automation${n === 1 ? "" : "s"}. Deleting the chat deletes ${n === 1 ? "it" : "them"} too:`
    : "The chat and its transcript will be deleted. This cannot be undone.";
  $("delete-automations").replaceChildren(
    ...automations.map((job) =>
      h("li", { dataset: { id: job.id } }, h("strong", {}, job.name), job.enabled === false ? " (paused)" : ""),
    ),
  );
  $("delete-automations").hidden = n === 0;
  const notes = [];
  if (changed) notes.push("The list changed since you opened this: check it and confirm again.");
  if (recall) notes.push("Its pending recall is cancelled.");
  if (shared) notes.push("Shared automations (unified mode) are kept.");
  $("delete-note").textContent = notes.join(" ");
  $("delete-note").hidden = notes.length === 0;
  $("delete-confirm").textContent = n ? `Delete chat and ${n} automation${n === 1 ? "" : "s"}` : "Delete chat";
  deleting.listed = new Set(automations.map((j) => j.id));
}

$("delete-chat").addEventListener("click", async () => {
  const key = state.current;
  if (key === null) return;
  let detail;
  try {
    detail = await api("GET", path.session(key));
  } catch (error) {
    showChatError(`Could not read the chat: ${error.message}`);
    return;
  }
  const jobs = (detail.automations || []).filter((j) => j.state !== "done"); // go without asking
  // The same rule as the server: the chat's own user automations block; shared ones do not.
  const own = jobs.filter((j) => j.session_key === key && j.kind === "agent_turn" && !j.legacy);
  deleting = { key, listed: new Set(), title: sessionTitle(detail), recall: Boolean(detail.recall), shared: jobs.length - own.length };
  fillDeleteDialog(deleting.title, own, { recall: deleting.recall, shared: deleting.shared });
  showError($("delete-error"), "");
  $("delete-confirm").disabled = false;
  dialog.showModal();
  $("delete-cancel").focus();
});

$("delete-cancel").addEventListener("click", () => dialog.close());
dialog.addEventListener("close", () => {
  deleting = null;
});

$("delete-confirm").addEventListener("click", async () => {
  if (!deleting) return;
  const { key } = deleting;
  state.deletedHere.add(key);
  const button = $("delete-confirm");
  button.disabled = true;
  try {
    let answer = await api("DELETE", path.session(key));
    if (!answer.deleted && answer.blocked_by_automations) {
      const blocking = answer.automations || [];
      if (blocking.every((j) => deleting.listed.has(j.id))) {
        answer = await api("DELETE", `${path.session(key)}?confirm=true`); // what the user saw
      } else {
        fillDeleteDialog(deleting.title, blocking, { recall: deleting.recall, shared: deleting.shared, changed: true });
        return;
      }
    }
    if (!answer.deleted) throw new Error("the server did not delete the chat");
    dialog.close();
    await sidebar.reload();
    if (state.current === key) openSession(sidebar.sessions[0]?.key || null);
  } catch (error) {
    showError($("delete-error"), `Could not delete the chat: ${error.message}`);
  } finally {
    button.disabled = false;
  }
});

// -- start ------------------------------------------------------------------------------------

function boot() {
  const passed = tokenFromFragment();
  if (passed) {
    login(passed);
    return;
  }
  const saved = localStorage.getItem(TOKEN_KEY);
  if (saved) login(saved, { fromStorage: true });
  else showLogin();
}

boot();
