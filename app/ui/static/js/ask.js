// Ask: recall's answer over the current filter, its [n] marks and citations opening their items.

import { call } from "./api.js";
import { $, fill, h } from "./dom.js";
import { namespaceOf, snippet, terms } from "./format.js";
import { filterOf } from "./state.js";
import { badge } from "./results.js";

const CITED = 5;

export async function ask(question, open, signal) {
  const box = $("#answer");
  box.hidden = false;
  box.setAttribute("aria-busy", "true");
  fill(box, h("div", { class: "answer-head" }, h("h2", { id: "answer-heading" }, "Answer")),
    h("p", { class: "quiet" }, `Asking: ${question}`));
  try {
    const answer = await call("recall", { question, limit: CITED, filter: filterOf() }, { signal });
    draw(box, question, answer, open);
  } catch (error) {
    box.hidden = true;
    throw error;
  } finally {
    box.removeAttribute("aria-busy");
  }
}

function draw(box, question, answer, open) {
  const cite = (n) => answer.citations[n - 1];
  // "[2]" in the answer becomes a link to the second citation's item.
  const text = answer.answer.split(/(\[\d+\])/).map((part) => {
    const n = /^\[(\d+)\]$/.exec(part)?.[1];
    return n && cite(Number(n))
      ? h("button", { type: "button", class: "cite", "aria-label": `Open source ${n}`, onclick: () => open(cite(Number(n)).id) }, `[${n}]`)
      : part;
  });
  const stems = terms(question);
  fill(box,
    h("div", { class: "answer-head" },
      h("h2", { id: "answer-heading" }, "Answer"),
      answer.model ? h("span", { class: "quiet" }, answer.model) : null,
      h("button", { type: "button", class: "button small ghost", "aria-label": "Close the answer", onclick: () => { box.hidden = true; } }, "✕")),
    h("p", { class: "answer-text" }, text),
    answer.citations.length ? h("ol", { class: "citations", "aria-label": "Sources" }, answer.citations.map((c, i) =>
      h("li", {}, h("button", { type: "button", class: "citation", "data-id": c.id, onclick: () => open(c.id) },
        h("span", { class: "hit-head" }, h("span", { class: "cite-number" }, `[${i + 1}]`), badge(c.kind), h("span", { class: "hit-ns" }, namespaceOf(c.meta))),
        h("span", { class: "hit-text" }, snippet(c.snippet, stems, 200)))))) : null);
}
