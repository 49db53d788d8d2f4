// Building elements from data: every string becomes a text node, never markup.

export function h(tag, props = {}, ...children) {
  const el = document.createElement(tag);
  for (const [name, value] of Object.entries(props)) {
    if (value == null || value === false) continue;
    if (name === "class") el.className = value;
    else if (name.startsWith("on")) el.addEventListener(name.slice(2), value);
    else el.setAttribute(name, value === true ? "" : String(value));
  }
  append(el, children);
  return el;
}

export function append(el, children) {
  for (const child of children.flat(Infinity)) {
    if (child == null || child === false) continue;
    el.append(child instanceof Node ? child : String(child));
  }
}

/** Replace what `el` holds with `children`. */
export function fill(el, ...children) {
  el.replaceChildren();
  append(el, children);
  return el;
}

export const $ = (selector, root = document) => root.querySelector(selector);

/** Run `redraw` (which replaces what `root` holds) and give the focus back to the control with
 * the same `data-key`, so a keyboard user stays where they were. */
export function keepFocus(root, redraw) {
  const key = root.contains(document.activeElement) ? document.activeElement.dataset?.key : null;
  redraw();
  if (key) root.querySelector(`[data-key="${CSS.escape(key)}"]`)?.focus();
}
