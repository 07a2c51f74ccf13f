// The REST client: bearer token on every call, API errors as ApiError with the server's detail.

export class ApiError extends Error {
  constructor(status, detail, kind = null) {
    super(detail);
    this.name = "ApiError";
    this.status = status;
    this.kind = kind;
  }
}

/** The API's `detail` as one readable line (validation errors come as a list of lines). */
export function detailText(detail) {
  if (detail === null || detail === undefined) return "";
  if (Array.isArray(detail)) return detail.map(detailText).join("; ");
  if (typeof detail === "string") return detail;
  return JSON.stringify(detail);
}

export const path = {
  sessions: () => "/api/sessions",
  session: (key) => `/api/sessions/${encodeURIComponent(key)}`,
  messages: (key, after) =>
    `/api/sessions/${encodeURIComponent(key)}/messages` + (after ? `?after=${after}` : ""),
  stop: (key) => `/api/sessions/${encodeURIComponent(key)}/stop`,
  recall: (key) => `/api/sessions/${encodeURIComponent(key)}/recall`,
  recallSkip: (key) => `/api/sessions/${encodeURIComponent(key)}/recall/skip`,
  deliveries: (key, state) =>
    `/api/deliveries?session_key=${encodeURIComponent(key)}&state=${state}&limit=200`,
  retryDelivery: (id) => `/api/deliveries/${encodeURIComponent(id)}/retry`,
  channels: () => "/api/channels",
  approvals: (key, all = false) =>
    `/api/approvals?session_key=${encodeURIComponent(key)}` + (all ? "&all=true" : ""),
  approval: (id) => `/api/approvals/${encodeURIComponent(id)}`,
  jobs: () => "/api/jobs",
  job: (id) => `/api/jobs/${encodeURIComponent(id)}`,
  grants: (id) => `/api/jobs/${encodeURIComponent(id)}/grants`,
  grant: (id, grantId) => `/api/jobs/${encodeURIComponent(id)}/grants/${encodeURIComponent(grantId)}`,
  /** A job's trigger: POST turns it on, DELETE off; `rotate` makes a new secret. */
  jobTrigger: (id, rotate = false) => `/api/jobs/${encodeURIComponent(id)}/trigger` + (rotate ? "/rotate" : ""),
  /** A job's spend against its budget per UTC day (`days`: 1 to 366). */
  jobSpend: (id, days = 30) => `/api/jobs/${encodeURIComponent(id)}/spend?days=${days}`,
  jobRuns: (id, limit, cursor = null) =>
    `/api/jobs/${encodeURIComponent(id)}/runs?limit=${limit}` +
    (cursor ? `&cursor=${encodeURIComponent(cursor)}` : ""),
  /** The usage report per day: of a job (`jobId`) or a chat (`sessionKey`), days in `tz`. */
  usage: ({ jobId = null, sessionKey = null, tz, since = null }) => {
    const params = new URLSearchParams({ tz });
    if (jobId) params.set("job_id", jobId);
    if (sessionKey) params.set("session_key", sessionKey);
    if (since) params.set("since", since);
    return `/api/usage?${params}`;
  },
  allDeliveries: (state, limit, cursor = null) =>
    `/api/deliveries?limit=${limit}` +
    (state ? `&state=${encodeURIComponent(state)}` : "") +
    (cursor ? `&cursor=${encodeURIComponent(cursor)}` : ""),
};

/** Two pages of one list as one answer: the lists joined, the rest from the later page. */
function joinPages(first, next) {
  const joined = { ...first, ...next };
  for (const [name, value] of Object.entries(first)) {
    if (Array.isArray(value) && Array.isArray(next[name])) joined[name] = value.concat(next[name]);
  }
  return joined;
}

/** The URL of the page after `url`'s: its filters, with the cursor in place of a position. */
function nextPage(url, cursor) {
  const next = new URL(url, "http://page.invalid");
  next.searchParams.delete("after");
  next.searchParams.delete("before");
  next.searchParams.set("cursor", cursor);
  return `${next.pathname}${next.search}`;
}

/**
 * A function api(method, url, body?) -> parsed JSON. `getToken` is read on every call;
 * `onUnauthorized(error)` is told about a 401 (the token was revoked or is wrong).
 * A list the API answers in pages (`next_cursor`) and asked for without `limit` or `cursor`
 * is read to its end and answered whole.
 */
export function makeApi(getToken, onUnauthorized) {
  const request = makeRequest(getToken, onUnauthorized);
  return async function api(method, url, body = undefined) {
    let data = await request(method, url, body);
    if (method !== "GET" || /[?&](limit|cursor)=/.test(url)) return data;
    while (data && typeof data.next_cursor === "string") {
      data = joinPages(data, await request("GET", nextPage(url, data.next_cursor)));
    }
    return data;
  };
}

/** One request: the parsed JSON, or an ApiError with the server's detail. */
function makeRequest(getToken, onUnauthorized) {
  return async function request(method, url, body = undefined) {
    const headers = { Authorization: `Bearer ${getToken()}`, Accept: "application/json" };
    if (body !== undefined) headers["Content-Type"] = "application/json";
    let response;
    try {
      response = await fetch(url, {
        method,
        headers,
        body: body === undefined ? undefined : JSON.stringify(body),
        cache: "no-store",
      });
    } catch (error) {
      throw new ApiError(0, `cannot reach the server (${error.message})`);
    }
    const text = await response.text();
    let data = null;
    if (text) {
      try {
        data = JSON.parse(text);
      } catch {
        data = { detail: text };
      }
    }
    if (!response.ok) {
      const detail = detailText(data && data.detail) || `${response.status} ${response.statusText}`;
      const error = new ApiError(response.status, detail, data && data.error);
      if (response.status === 401 && onUnauthorized) onUnauthorized(error);
      throw error;
    }
    return data;
  };
}
