// Calling memstream's HTTP API: the key in the Authorization header, and what each error means.

const KEY_ITEM = "memstream.inspector.apiKey";
// The page is served at <server>/inspector/: the API is <server>/v1/, behind any path prefix.
const API_ROOT = new URL("../v1/", document.baseURI);

/** The API key of this tab: in session storage (gone with the tab), never in an address. */
export const apiKey = {
  get: () => sessionStorage.getItem(KEY_ITEM),
  set: (key) => sessionStorage.setItem(KEY_ITEM, key),
  clear: () => sessionStorage.removeItem(KEY_ITEM),
};

/** A failed call: `status` is the HTTP status (0: no answer), `detail` the server's reason. */
export class ApiError extends Error {
  constructor(status, detail) {
    super(`${status}: ${detail}`);
    this.status = status;
    this.detail = detail;
  }
}

/**
 * Call `path` (relative to /v1/) with the tab's key. `params` go in the query string,
 * `body` as JSON; `as` is "json" or "blob". Throws ApiError when the answer is not 2xx.
 */
export async function call(path, { method = "GET", params = {}, body, as = "json" } = {}) {
  const url = new URL(path, API_ROOT);
  for (const [name, value] of Object.entries(params)) {
    if (value !== undefined && value !== null) url.searchParams.set(name, String(value));
  }
  const headers = { Authorization: `Bearer ${apiKey.get() ?? ""}` };
  if (body !== undefined) headers["Content-Type"] = "application/json";
  let response;
  try {
    response = await fetch(url, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      cache: "no-store",
      credentials: "omit",
    });
  } catch {
    throw new ApiError(0, "the server did not answer");
  }
  if (!response.ok) throw new ApiError(response.status, await reasonOf(response));
  return as === "blob" ? response.blob() : response.json();
}

/** A path segment holding `id` (a memory id may hold "/" or "?"). */
export function segment(id) {
  return encodeURIComponent(id);
}

/** The service's readiness checks ({"broker": "ok", ...}), asked without a key; null if none. */
export async function readiness() {
  try {
    const response = await fetch(new URL("ready", API_ROOT), { cache: "no-store" });
    return (await response.json()).checks ?? null;
  } catch {
    return null;
  }
}

async function reasonOf(response) {
  try {
    const detail = (await response.json()).detail;
    if (typeof detail === "string") return detail;
    if (Array.isArray(detail)) {
      return detail.map((e) => `${(e.loc ?? []).join(".")}: ${e.msg ?? ""}`).join("; ");
    }
  } catch {
    // Not JSON (a proxy's page): the status says enough.
  }
  return response.statusText || "no reason given";
}

/**
 * What an error means to the person at the page, and what to do: {title, advice, retry}
 * (`retry`: whether trying again may help). `userId` names the user the call was for.
 */
export function explain(error, { userId, checks } = {}) {
  const status = error instanceof ApiError ? error.status : -1;
  const detail = error instanceof ApiError ? error.detail : String(error);
  switch (status) {
    case 0:
      return {
        title: "The server did not answer.",
        advice: "Check that memstream serve is running and reachable, then retry.",
        retry: true,
      };
    case 401:
      return {
        title: "The API key was not accepted (401): wrong key, or a key since removed.",
        advice: "Enter the key again; memstream api-key add --tenant NAME prints a new one.",
        retry: false,
      };
    case 403:
      return {
        title: `This key may not read user “${userId ?? "?"}” (403).`,
        advice:
          "The key is limited to other users. Pick one of the users listed, " +
          "or enter a key that may read this user (Change key).",
        retry: false,
      };
    case 404:
      return {
        title: "Not found (404): no such memory of this user.",
        advice: "It may have been erased; reload the user's memories.",
        retry: false,
      };
    case 422:
      return {
        title: `The server refused the input (422): ${detail}.`,
        advice: "Change the input and try again.",
        retry: false,
      };
    case 503: {
      const failing = Object.entries(checks ?? {})
        .filter(([, state]) => state !== "ok")
        .map(([check, state]) => `${check}: ${state}`);
      return {
        title: "The service is not ready (503).",
        advice:
          (failing.length ? `Not ready: ${failing.join("; ")}. ` : "") +
          "The broker or the memory table cannot be reached now; retry in a moment " +
          "(GET /v1/ready shows the checks).",
        retry: true,
      };
    }
    default:
      return {
        title: `The call failed (${status > 0 ? status : "in the page"}): ${detail}.`,
        advice: "Retry; if it keeps failing, look at memstream serve's log.",
        retry: true,
      };
  }
}
