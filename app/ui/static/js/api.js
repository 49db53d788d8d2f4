// Every call to the service: JSON in and out, the key from this tab's sessionStorage, errors typed.

const KEY = "engram.apiKey";

export function apiKey() {
  return sessionStorage.getItem(KEY) ?? "";
}

export function setApiKey(key) {
  if (key) sessionStorage.setItem(KEY, key);
  else sessionStorage.removeItem(KEY);
}

/** A failed call: the service's error envelope (contract §7), or status 0 when nothing answered. */
export class ApiError extends Error {
  constructor(status, code, message, requestId) {
    super(message);
    this.status = status;
    this.code = code;
    this.requestId = requestId;
  }
}

/** POST /v1/{route} (relative to the page, so the explorer works behind a path prefix). */
export async function call(route, body, { signal } = {}) {
  const headers = { "content-type": "application/json" };
  const key = apiKey();
  if (key) headers.authorization = `Bearer ${key}`;
  let response;
  try {
    response = await fetch(new URL(`v1/${route}`, document.baseURI), {
      method: "POST", headers, body: JSON.stringify(body), signal, cache: "no-store",
    });
  } catch (error) {
    if (error.name === "AbortError") throw error;
    throw new ApiError(0, "network", "the service did not answer: is it running?");
  }
  const text = await response.text();
  let data = null;
  try { data = JSON.parse(text); } catch { /* not JSON: described below */ }
  if (!response.ok) {
    throw new ApiError(response.status, data?.code ?? "http", data?.message ?? `HTTP ${response.status}`, data?.request_id);
  }
  return data;
}

export const explore = (facet, filter, limit, signal) => call("explore", { facet, filter, limit }, { signal });
