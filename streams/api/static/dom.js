// Building the inspector's DOM: every text from the API goes in as text, never as HTML.
//
// Memories are what users said: "<img src=x onerror=...>" is a memory like any other, and must
// show as those characters. So nothing here parses markup: el() makes elements from code-given
// tag and attribute names, and every child that is not a Node becomes a text node.

/**
 * An element: `tag` with `props` (attributes; "class"; "on<event>" handlers, functions only)
 * and `children` (Nodes, or anything else as text; null, undefined and false are left out).
 */
export function el(tag, props = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(props)) {
    if (value === undefined || value === null || value === false) continue;
    if (name.startsWith("on")) {
      if (typeof value !== "function") throw new TypeError(`${name} takes a function`);
      node.addEventListener(name.slice(2), value);
    } else if (name === "class") {
      node.className = String(value);
    } else {
      node.setAttribute(name, value === true ? "" : String(value));
    }
  }
  append(node, children);
  return node;
}

/** Add `children` to `node` as el() does: Nodes as they are, anything else as text. */
export function append(node, children) {
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

/** Replace what `node` holds with `children`. */
export function fill(node, ...children) {
  node.replaceChildren();
  return append(node, children);
}

/** A small label: `kind` picks its colours (badge-<kind>-<value> in the stylesheet). */
export function badge(kind, value, label = value) {
  const safe = String(value).toLowerCase().replace(/[^a-z0-9_-]/g, "");
  return el("span", { class: `badge badge-${kind} badge-${kind}-${safe}` }, String(label));
}

/** "short_term" as people read it: "short-term". */
export function words(code) {
  return String(code).replaceAll("_", "-");
}

/** A time of the API (ISO 8601) as a <time>, in UTC to the second; anything else as is. */
export function when(iso) {
  const date = new Date(iso);
  if (iso === null || iso === undefined || Number.isNaN(date.getTime())) {
    return el("span", {}, iso ?? "–");
  }
  const shown = `${date.toISOString().slice(0, 19).replace("T", " ")} UTC`;
  return el("time", { datetime: date.toISOString() }, shown);
}

/** The UTC day of a time of the API (ISO 8601) as a <time> ("2026-04-02"); anything else as is. */
export function day(iso) {
  const date = new Date(iso);
  if (iso === null || iso === undefined || Number.isNaN(date.getTime())) {
    return el("span", {}, iso ?? "–");
  }
  return el("time", { datetime: date.toISOString() }, date.toISOString().slice(0, 10));
}

/** A number in 0..1 with two decimals; anything else as text. */
export function fraction(value) {
  return typeof value === "number" ? value.toFixed(2) : String(value ?? "–");
}

/** A term list (<dl>) from [term, description] pairs; null descriptions are left out. */
export function terms(pairs, className = "terms") {
  const list = el("dl", { class: className });
  for (const [term, description] of pairs) {
    if (description === null || description === undefined) continue;
    list.append(el("div", {}, el("dt", {}, term), el("dd", {}, description)));
  }
  return list;
}
