// One item in full: its text (a conversation as its turns), every meta field, its id, when it was stored.

import { call } from "./api.js";
import { $, fill, h } from "./dom.js";
import { instant, namespaceOf } from "./format.js";
import { badge, split } from "./results.js";

let forgetOne = () => {};

export function wireItem(forget) {
  forgetOne = forget;
}

// A conversation's rendered text is one `role: text` line per turn (contract §1); a line without
// a role continues the turn before it (a turn whose text held a line break).
const ROLE = /^(user|assistant|system|tool): /;

function turns(text) {
  const found = [];
  for (const line of text.split("\n")) {
    const role = ROLE.exec(line);
    if (role) found.push({ role: role[1], text: line.slice(role[0].length) });
    else if (found.length) found.at(-1).text += `\n${line}`;
    else found.push({ role: "", text: line });
  }
  return found;
}

function titleOf(hit) {
  const [title] = split(hit);
  if (title) return title;
  if (hit.kind === "conversation") return `Conversation of ${turns(hit.text).length} turns`;
  return hit.kind === "learning" ? "Learning" : "Document";
}

function body(hit) {
  if (hit.kind === "conversation") {
    return h("ol", { class: "turns" }, turns(hit.text).map((turn) => h("li", { class: `turn turn-${turn.role || "other"}` },
      h("span", { class: "turn-role" }, turn.role || "—"), h("p", {}, turn.text))));
  }
  return h("p", { class: "item-text" }, split(hit)[1]);
}

function details(hit) {
  const meta = hit.meta ?? {};
  const rows = [
    ["Id", h("span", {}, h("code", { class: "item-id" }, hit.id), h("span", { class: "quiet block" },
      "Its fingerprint: a SHA-256 of the item's canonical JSON, so the same item stored again keeps this id."))],
    ["Kind", hit.kind],
    ["Namespace", namespaceOf(meta)],
  ];
  if (hit.confidence !== undefined) rows.push(["Confidence", String(hit.confidence)]);
  if (meta.tags?.length) rows.push(["Tags", h("span", {}, meta.tags.map((tag) => h("span", { class: "tag" }, tag)))]);
  rows.push(["Source", meta.source ? `${meta.source.kind}${meta.source.id ? ` · ${meta.source.id}` : ""}` : "agent"]);
  rows.push(["Observed", meta.observed_at ? instant(meta.observed_at) : h("span", { class: "quiet" }, "not given")]);
  // When this service stored it (get answers it; an undo keeps it, an import stores the item anew).
  rows.push(["Stored", hit.stored_at
    ? h("time", { class: "item-stored", datetime: hit.stored_at }, instant(hit.stored_at, { seconds: true }))
    : h("span", { class: "quiet" }, "not reported by this service")]);
  const plain = [["workspace", "Workspace"], ["folder", "Folder"], ["file_path", "File"], ["language", "Language"],
    ["repo", "Repository"], ["commit", "Commit"], ["url", "URL"], ["thread_id", "Thread"], ["agent_id", "Agent"]];
  for (const [field, name] of plain) if (meta[field]) rows.push([name, meta[field]]);
  if (meta.turns) rows.push(["Turns", `${meta.turns.first}–${meta.turns.last}`]);
  if (meta.tool_call) rows.push(["Tool call", `${meta.tool_call.name}${meta.tool_call.id ? ` (${meta.tool_call.id})` : ""}`]);
  return h("dl", { class: "meta" }, rows.map(([name, value]) => [h("dt", {}, name), h("dd", {}, value)]));
}

function frame(dialog, title, ...content) {
  fill(dialog, h("div", { class: "dialog-head" },
    h("h2", { id: "item-title" }, title),
    h("button", { type: "button", class: "button small ghost close", "aria-label": "Close", onclick: () => dialog.close() }, "✕")),
  ...content);
}

/** Open the item dialog on `id`, read fresh with `get`. */
export async function openItem(id) {
  const dialog = $("#item-dialog");
  frame(dialog, "Loading…", h("p", { class: "quiet" }, "Reading the item…"));
  if (!dialog.open) dialog.showModal();
  try {
    const { hits } = await call("get", { ids: [id] });
    if (!hits.length) {
      frame(dialog, "Not found", h("p", {}, "This item is not here: it was forgotten, or it lies outside this key's reach."));
      return;
    }
    const hit = hits[0];
    frame(dialog, titleOf(hit),
      h("div", { class: "item-kind" }, badge(hit.kind), h("span", { class: "hit-ns" }, namespaceOf(hit.meta))),
      h("div", { class: "item-body" }, body(hit)),
      h("h3", { class: "section-title" }, "Details"),
      details(hit),
      h("div", { class: "dialog-actions" },
        h("button", { type: "button", class: "button ghost", onclick: (event) => copy(event.currentTarget, hit.id) }, "Copy id"),
        h("button", { type: "button", class: "button danger", onclick: () => { dialog.close(); forgetOne(hit.id); } }, "Forget this item…")));
    dialog.querySelector(".close").focus();
  } catch (error) {
    dialog.close();
    throw error;
  }
}

async function copy(button, text) {
  try {
    await navigator.clipboard.writeText(text);
    button.textContent = "Copied";
  } catch {
    button.textContent = "Select the id to copy it";
  }
}
