// Forget with a count first (dry_run), a confirmation, and Undo through the forget's receipt.

import { call } from "./api.js";
import { $, fill, h } from "./dom.js";
import { plural } from "./format.js";
import { showProblem, toast } from "./notice.js";
import { chips, filterOf } from "./state.js";
import { forgetCounts } from "./timeline.js";

let changed = () => {};

export function wireForget(afterChange) {
  changed = afterChange;
}

/** Ask before forgetting; resolves true when the person confirmed. Cancel has the focus. */
function confirm(title, lines, action) {
  const dialog = $("#confirm-dialog");
  return new Promise((resolve) => {
    const cancel = h("button", { type: "button", class: "button ghost", onclick: () => dialog.close("cancel") }, "Cancel");
    fill(dialog,
      h("div", { class: "dialog-head" }, h("h2", { id: "confirm-title" }, title)),
      lines.map((line) => h("p", {}, line)),
      h("div", { class: "dialog-actions" }, cancel,
        h("button", { type: "button", class: "button danger", onclick: () => dialog.close("forget") }, action)));
    dialog.returnValue = "";
    dialog.addEventListener("close", () => resolve(dialog.returnValue === "forget"), { once: true });
    dialog.showModal();
    cancel.focus();
  });
}

async function run(target, describe) {
  try {
    const preview = await call("forget", { ...target, dry_run: true });
    const n = preview.would_forget ?? 0;
    if (!n) {
      toast("Nothing to forget: these items are already gone, or this key may not remove them.");
      return;
    }
    const ok = await confirm(`Forget ${plural(n, "item")}?`, [
      describe(n),
      "They leave every search, list, count and answer at once. You can undo right after.",
    ], `Forget ${plural(n, "item")}`);
    if (!ok) return;
    const report = await call("forget", target);
    forgetCounts();
    changed();
    const undo = report.receipt ? { label: "Undo", run: () => restore(report.receipt) } : null;
    toast(`Forgot ${plural(report.forgotten, "item")}.`, undo);
  } catch (error) {
    showProblem(error);
  }
}

async function restore(receipt) {
  try {
    const report = await call("restore", { receipt });
    forgetCounts();
    changed();
    toast(`Restored ${plural(report.restored, "item")}.`);
  } catch (error) {
    showProblem(error);
  }
}

export function forgetIds(ids) {
  return run({ ids }, (n) => n === ids.length
    ? `The ${n === 1 ? "item" : `${n} items`} you selected will be forgotten.`
    : `${plural(n, "item")} of the ${ids.length} selected can be forgotten by this key.`);
}

export function forgetFiltered() {
  const filter = filterOf();
  const named = chips().map((chip) => `${chip.facet}: ${chip.label}`).join(", ");
  return run({ filter }, () => `Every item matching ${named} will be forgotten (the search words play no part).`);
}
