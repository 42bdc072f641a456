// The search view: each hit with every part of its score (relevance, its meaning and words,
// importance, recency, use), as bars and numbers, and the weights that combine them. A hit
// whose statement no longer held when searched (stale) says since when, and what replaced it;
// one a newer statement of the same speaker may have outdated says which.

import { badge, day, el, fraction, when } from "./dom.js";

/** The parts of a score, in the order of the formula; `of` is the part a sub-part feeds. */
const PARTS = [
  { key: "relevance", label: "relevance", weighted: true },
  { key: "similarity", label: "meaning (similarity)", of: "relevance" },
  { key: "words", label: "words (full text)", of: "relevance" },
  { key: "importance", label: "importance", weighted: true },
  { key: "recency", label: "recency", weighted: true },
  { key: "use", label: "use", weighted: true },
];

/** One search hit: its score, the memory (a button that opens it), whether it is stale, and
 *  how the score is made. `textOf(id)` names another memory by its words when known. */
export function searchHit(hit, { onOpen, position = 1, textOf = () => null } = {}) {
  return el(
    "li",
    { class: `hit${hit.stale ? " is-stale" : ""}`, "data-memory-id": hit.memory_id },
    el(
      "div",
      { class: "hit-memory" },
      el(
        "div",
        { class: "hit-head" },
        el("span", { class: "hit-rank", "aria-label": `rank ${position}` }, `#${position}`),
        el("span", { class: "hit-score", title: "rank score (0..1)" }, "score ", el("strong", {}, hit.score.toFixed(3))),
        badge("type", hit.type),
        hit.stale ? staleBadge(hit) : null,
        !hit.stale && hit.possibly_outdated_by
          ? el("span", { class: "badge badge-stale", title: "A newer statement of the same speaker about the same thing ranks above it; nothing superseded it." }, "possibly outdated")
          : null,
      ),
      el("button", { type: "button", class: "memory-open", onclick: () => onOpen?.(hit.memory_id) }, hit.memory),
      hit.stale ? replacedBy(hit, { onOpen, textOf }) : null,
      !hit.stale && hit.possibly_outdated_by ? newerLink(hit.possibly_outdated_by, { onOpen, textOf }) : null,
      el("p", { class: "meta" }, "created ", when(hit.created_at)),
    ),
    explanation(hit),
  );
}

/** A stale hit's badge: "stale since <day>" (just "stale" when the end is not known). */
export function staleBadge(hit) {
  return el(
    "span",
    { class: "badge badge-stale", title: "What this memory states no longer held when searched; it ranks below what replaced it." },
    "stale",
    hit.valid_until ? [" since ", day(hit.valid_until)] : null,
  );
}

/** What replaced a stale hit: a button that opens that memory, named by its words when known. */
function replacedBy(hit, { onOpen, textOf }) {
  if (!hit.superseded_by) return el("p", { class: "replaced-by meta" }, "It ran out on its own: nothing replaced it.");
  return el(
    "p",
    { class: "replaced-by meta" },
    "replaced by ",
    el(
      "button",
      { type: "button", class: "link", title: hit.superseded_by, onclick: () => onOpen?.(hit.superseded_by) },
      textOf(hit.superseded_by) ?? hit.superseded_by,
    ),
  );
}

/** The newer statement that may have outdated a hit: a button that opens it. */
function newerLink(id, { onOpen, textOf }) {
  return el(
    "p",
    { class: "replaced-by meta" },
    "said differently later: ",
    el("button", { type: "button", class: "link", title: id, onclick: () => onOpen?.(id) }, textOf(id) ?? id),
  );
}

/** How a hit's score is made: a row per part with its value (a bar and the number), its
 *  weight and what it adds to the score; then the whole as one line. */
export function explanation(hit) {
  const parts = hit.explain ?? { relevance: hit.relevance, similarity: hit.similarity, words: hit.words, importance: hit.importance };
  const weights = parts.weights ?? {};
  const total = Object.values(weights).reduce((a, b) => a + b, 0);
  const rows = PARTS.filter((part) => typeof parts[part.key] === "number").map((part) => {
    const value = parts[part.key];
    const weight = part.weighted ? weights[part.key] : undefined;
    const adds = weight !== undefined && total > 0 ? (weight * value) / total : undefined;
    return el(
      "tr",
      { class: part.of ? "sub-part" : "part", "data-part": part.key },
      el("th", { scope: "row" }, part.label),
      el(
        "td",
        { class: "bar-cell" },
        el("meter", { min: "0", max: "1", value: String(value), "aria-label": `${part.label} ${fraction(value)}` }),
        el("span", { class: "value" }, fraction(value)),
      ),
      el("td", { class: "num" }, weight !== undefined ? `× ${fraction(weight)}` : part.of ? `½ in ${part.of}` : "–"),
      el("td", { class: "num" }, adds !== undefined ? `+${adds.toFixed(3)}` : ""),
    );
  });
  return el(
    "div",
    { class: "explain" },
    el(
      "table",
      { class: "explain-table" },
      el("caption", {}, "How the score is made"),
      el("thead", {}, el("tr", {}, el("th", { scope: "col" }, "part"), el("th", { scope: "col" }, "value (0..1)"), el("th", { scope: "col" }, "weight"), el("th", { scope: "col" }, "adds"))),
      el("tbody", {}, rows),
    ),
    parts.text ? el("p", { class: "explain-text" }, el("code", {}, parts.text)) : null,
  );
}
