// Problems said plainly in the page (never a blank page), and short news with an optional action.

import { apiKey } from "./api.js";
import { $, fill, h } from "./dom.js";

let askForKey = () => {};

export function onKeyWanted(open) {
  askForKey = open;
}

function explain(error) {
  if (error.status === 401) {
    return apiKey()
      ? ["The API key was refused", "The service did not accept the key this tab holds. Check it, or ask an admin for a new one."]
      : ["This service needs an API key", "Enter a key to see the memories it reaches. The key stays in this tab (sessionStorage), never in the address."];
  }
  if (error.status === 403) return ["This key may not do that", "The key works, but its role or its part of the namespace tree does not allow this."];
  if (error.status === 0) return ["The service does not answer", "Check that engram serve is running, then reload the page."];
  if (error.status === 503) return ["The service is unavailable for a moment", "Its database is down or busy. Try again in a few seconds."];
  return ["Something went wrong", "The service refused the request."];
}

/** Show `error` (an ApiError) in the notice area; an aborted call is not a problem. */
export function showProblem(error) {
  if (error?.name === "AbortError") return;
  if (!("status" in error)) console.error(error);
  const [title, text] = explain(error);
  const keyIssue = error.status === 401 || error.status === 403;
  fill($("#notice"), h("div", { class: `notice ${keyIssue ? "notice-key" : "notice-error"}` },
    h("h2", { class: "notice-title" }, title),
    h("p", {}, text),
    h("p", { class: "notice-detail" }, h("code", {}, error.message ?? String(error)),
      error.requestId ? ` (request ${error.requestId})` : ""),
    keyIssue ? h("button", { type: "button", class: "button primary", onclick: () => askForKey() },
      apiKey() ? "Change API key" : "Enter API key") : null));
}

export function clearProblem() {
  $("#notice").replaceChildren();
}

let timer = 0;

/** A line of news at the foot of the page; `action` ({label, run}) adds a button, such as Undo. */
export function toast(message, action = null) {
  clearTimeout(timer);
  const box = $("#toast");
  fill(box, h("div", { class: "toast-body" },
    h("span", {}, message),
    action ? h("button", { type: "button", class: "button small", onclick: () => { box.replaceChildren(); action.run(); } }, action.label) : null,
    h("button", { type: "button", class: "button small ghost", "aria-label": "Dismiss", onclick: () => box.replaceChildren() }, "✕")));
  timer = setTimeout(() => box.replaceChildren(), action ? 60_000 : 8_000);
}
