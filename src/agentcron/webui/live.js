// The WebSocket stream: authenticate with a first frame, (re)subscribe, reconnect with backoff.

const AUTH_FAILED = 4401;
const PING_EVERY_MS = 25_000;
const BACKOFF_MIN_MS = 400;
const BACKOFF_MAX_MS = 10_000;

export class Live {
  /**
   * onEvent(event): every event except ready/pong;
   * onStatus(state, detail): "connecting" | "live" | "reconnecting" | "offline";
   * onReady(): after each (re)connection, once subscriptions are re-sent;
   * onAuthFailed(reason): the server refused the token (no retry).
   */
  constructor({ token, onEvent, onStatus, onReady, onAuthFailed }) {
    this.token = token;
    this.onEvent = onEvent;
    this.onStatus = onStatus;
    this.onReady = onReady;
    this.onAuthFailed = onAuthFailed;
    this.keys = new Set();
    this.socket = null;
    this.ready = false;
    this.stopped = true;
    this.attempt = 0;
    this.retryTimer = null;
    this.pingTimer = null;
    this.onOnline = () => this.reconnectNow();
  }

  start() {
    this.stopped = false;
    window.addEventListener("online", this.onOnline);
    this.connect();
  }

  stop() {
    this.stopped = true;
    window.removeEventListener("online", this.onOnline);
    clearTimeout(this.retryTimer);
    clearInterval(this.pingTimer);
    const socket = this.socket;
    this.socket = null;
    this.ready = false;
    if (socket) socket.close(1000, "logged out");
  }

  subscribe(key) {
    this.keys.add(key);
    if (this.ready) this.send({ type: "subscribe", session_key: key });
  }

  unsubscribe(key) {
    if (!this.keys.delete(key)) return;
    if (this.ready) this.send({ type: "unsubscribe", session_key: key });
  }

  send(frame) {
    if (!this.socket || this.socket.readyState !== WebSocket.OPEN) return false;
    this.socket.send(JSON.stringify(frame));
    return true;
  }

  reconnectNow() {
    if (this.stopped || this.ready) return;
    clearTimeout(this.retryTimer);
    this.connect();
  }

  connect() {
    clearTimeout(this.retryTimer);
    const scheme = location.protocol === "https:" ? "wss" : "ws";
    const socket = new WebSocket(`${scheme}://${location.host}/api/ws`);
    this.socket = socket;
    this.ready = false;
    this.onStatus(this.attempt ? "reconnecting" : "connecting");
    socket.addEventListener("open", () => {
      socket.send(JSON.stringify({ type: "auth", token: this.token }));
    });
    socket.addEventListener("message", (message) => {
      if (this.socket !== socket) return;
      let event;
      try {
        event = JSON.parse(message.data);
      } catch {
        return;
      }
      if (event.type === "ready") {
        this.ready = true;
        this.attempt = 0;
        for (const key of this.keys) this.send({ type: "subscribe", session_key: key });
        clearInterval(this.pingTimer);
        this.pingTimer = setInterval(() => this.send({ type: "ping" }), PING_EVERY_MS);
        this.onStatus("live");
        this.onReady();
        return;
      }
      if (event.type === "pong") return;
      this.onEvent(event);
    });
    socket.addEventListener("close", (event) => {
      if (this.socket !== socket) return; // replaced or stopped on purpose
      this.socket = null;
      this.ready = false;
      clearInterval(this.pingTimer);
      if (event.code === AUTH_FAILED) {
        this.stopped = true;
        this.onStatus("offline");
        this.onAuthFailed(event.reason || "the server refused the token");
        return;
      }
      if (this.stopped) return;
      this.scheduleRetry();
    });
  }

  scheduleRetry() {
    const base = Math.min(BACKOFF_MAX_MS, BACKOFF_MIN_MS * 2 ** this.attempt);
    const delay = Math.round(base * (0.5 + Math.random() / 2));
    this.attempt += 1;
    this.onStatus("reconnecting", delay);
    this.retryTimer = setTimeout(() => this.connect(), delay);
  }
}
