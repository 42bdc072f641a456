// The patterns view: a user's learned patterns (what they usually ask about, the tools they
// use, the corrections they repeat, when they are active), each with the sessions that show
// it, its decay score, and a button that opens its memory.
//
// Pure rendering: each function takes what the API answered (POST /v1/memories/patterns)
// and returns elements; main.js fetches and wires. Every text goes in through dom.js, as text.

import { day, el, fraction } from "./dom.js";

const KIND_TITLES = {
  tool: "Tools",
  correction: "Corrections",
  request: "Requests",
  hours: "Hours",
  weekday: "Weekday",
};

/** One line that says how many patterns were learned, and when. */
export function patternsSummary(answer) {
  const when = answer.as_of ? `as of ${answer.as_of}` : "now";
  const count = answer.patterns.length;
  if (count === 0) return `No patterns learned ${when}: a habit shows after three sessions.`;
  return `${count} pattern${count === 1 ? "" : "s"} learned, ${when}.`;
}

/** The patterns: one row each, grouped by kind in the order the API gave them. */
export function patternList(answer, { onOpen } = {}) {
  const groups = new Map();
  for (const pattern of answer.patterns) {
    if (!groups.has(pattern.kind)) groups.set(pattern.kind, []);
    groups.get(pattern.kind).push(pattern);
  }
  return [...groups].map(([kind, patterns]) =>
    el(
      "section",
      { class: "profile-kind", "data-kind": kind },
      el("h4", {}, Object.hasOwn(KIND_TITLES, kind) ? KIND_TITLES[kind] : kind),
      el(
        "ul",
        { class: "claims" },
        patterns.map((pattern) =>
          el(
            "li",
            { class: "claim pattern", "data-memory-id": pattern.memory_id },
            el(
              "button",
              { type: "button", class: "memory-open claim-value", title: pattern.pattern, onclick: () => onOpen?.(pattern.memory_id) },
              pattern.content,
            ),
            el(
              "span",
              { class: "meta", title: pattern.sessions.join(", ") },
              `${pattern.session_count} of ${pattern.sessions_seen} sessions`,
            ),
            el("span", { class: "meta", title: "decay score (0..1): importance, recency and use" }, "decay ", fraction(pattern.decay)),
            el("span", { class: "meta" }, "learned ", day(pattern.learned_at)),
          ),
        ),
      ),
    ),
  );
}
