// The API key field: kept in this tab's sessionStorage, sent as a bearer header, never in a URL.

import { apiKey, setApiKey } from "./api.js";
import { $, fill, h } from "./dom.js";

export function showKeyState() {
  const button = $("#key-button");
  button.textContent = apiKey() ? "API key: set" : "API key";
}

export function openKeyDialog(changed) {
  const dialog = $("#key-dialog");
  const input = h("input", {
    id: "key-input", type: "password", autocomplete: "off", spellcheck: "false", class: "input",
    placeholder: "egk_…", "aria-describedby": "key-help",
  });
  input.value = apiKey();
  const form = h("form", { class: "key-form" },
    h("div", { class: "dialog-head" }, h("h2", { id: "key-title" }, "API key")),
    h("label", { for: "key-input", class: "field-label" }, "Key"),
    input,
    h("p", { id: "key-help", class: "quiet" },
      "Needed when the service has keys. It stays in this tab only and goes with every call as a bearer header. " +
      "A key bound to part of the namespace tree shows only that part."),
    h("div", { class: "dialog-actions" },
      apiKey() ? h("button", { type: "button", class: "button ghost", onclick: () => { setApiKey(""); dialog.close(); done(); } }, "Remove key") : null,
      h("button", { type: "button", class: "button ghost", onclick: () => dialog.close() }, "Cancel"),
      h("button", { type: "submit", class: "button primary" }, "Use this key")));
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    setApiKey(input.value.trim());
    dialog.close();
    done();
  });
  function done() {
    showKeyState();
    changed();
  }
  fill(dialog, form);
  dialog.showModal();
  input.focus();
}
