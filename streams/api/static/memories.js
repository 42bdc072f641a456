// The memories view: a user's memories by type with tier and status, one memory's life,
// one attribute over time (the timeline tab: each value a claim held, with its interval),
// and what holds about the user (the profile tab: their current claims by subject and kind).
//
// Pure rendering: each function takes what the API answered and returns elements; main.js
// fetches and wires. Every text from the API goes in through dom.js, as text.

import { badge, day, el, fraction, terms, when, words } from "./dom.js";

export const TYPES = ["preference", "fact", "correction", "episode", "summary", "task", "entity", "pattern"];
export const TIERS = ["short_term", "long_term"];
export const STATUSES = ["active", "superseded", "expired", "forgotten", "deleted"];
const TYPE_TITLES = {
  preference: "Preferences",
  fact: "Facts",
  correction: "Corrections",
  episode: "Episodes",
  summary: "Summaries",
  task: "Tasks",
  entity: "Entities",
  pattern: "Patterns",
};

/** How many of `memories` hold each value of `field`: known `order` first, then the rest. */
export function countBy(memories, field, order = []) {
  const counts = new Map(order.map((value) => [value, 0]));
  for (const memory of memories) counts.set(memory[field], (counts.get(memory[field]) ?? 0) + 1);
  return counts;
}

/** The memories `filters` ({type, tier, status}, "" for any) let through. */
export function filtered(memories, filters) {
  return memories.filter(
    (m) =>
      (!filters.type || m.type === filters.type) &&
      (!filters.tier || m.tier === filters.tier) &&
      (!filters.status || m.status === filters.status),
  );
}

/** The counts above the list: memories, and how many in each status and tier. */
export function summary(memories) {
  const chips = [el("li", { class: "stat stat-total" }, el("strong", {}, memories.length), " memories")];
  for (const [field, order] of [["status", STATUSES], ["tier", TIERS]]) {
    for (const [value, count] of countBy(memories, field, order)) {
      if (count === 0) continue;
      chips.push(el("li", { class: "stat" }, el("strong", {}, count), " ", badge(field, value, words(value))));
    }
  }
  return el("ul", { class: "stats", "aria-label": "Counts" }, chips);
}

/** Fill the filter `select` with "any" and each of `values` with its count, keeping the choice. */
export function filterOptions(select, anyLabel, counts) {
  const chosen = select.value;
  const total = [...counts.values()].reduce((a, b) => a + b, 0);
  const options = [el("option", { value: "" }, `${anyLabel} (${total})`)];
  for (const [value, count] of counts) {
    options.push(el("option", { value }, `${words(value)} (${count})`));
  }
  select.replaceChildren(...options);
  select.value = [...counts.keys()].includes(chosen) ? chosen : "";
}

/** One memory in the list: its words (a button that opens it), badges and counts. */
export function memoryCard(memory, { onOpen, selected = false } = {}) {
  const open = el(
    "button",
    { type: "button", class: "memory-open", "aria-pressed": selected ? "true" : "false", onclick: () => onOpen?.(memory.memory_id) },
    memory.memory,
  );
  return el(
    "li",
    {
      class: `memory-card${memory.status === "active" ? "" : " is-inactive"}${selected ? " is-selected" : ""}`,
      "data-memory-id": memory.memory_id,
    },
    open,
    el(
      "div",
      { class: "memory-meta" },
      badge("tier", memory.tier, words(memory.tier)),
      badge("status", memory.status),
      el("span", { class: "meta", title: "importance (0..1)" }, `importance ${fraction(memory.importance)}`),
      memory.reinforcement_count > 0 ? el("span", { class: "meta" }, `reinforced ${memory.reinforcement_count}×`) : null,
      el("span", { class: "meta" }, `used ${memory.access_count ?? 0}×`),
      el("span", { class: "meta" }, when(memory.created_at)),
    ),
  );
}

/** The memories by type (one section each, with its count), newest first within a type. */
export function memoryGroups(memories, { onOpen, selectedId } = {}) {
  const groups = countBy(memories, "type", TYPES);
  const sections = [];
  for (const [type, count] of groups) {
    if (count === 0) continue;
    const headingId = `type-${String(type).replace(/[^a-z0-9_-]/gi, "")}-heading`;
    sections.push(
      el(
        "section",
        { class: "type-group", "aria-labelledby": headingId, "data-type": type },
        el("h3", { id: headingId }, badge("type", type, TYPE_TITLES[type] ?? words(type)), " ", el("span", { class: "count" }, count)),
        el(
          "ul",
          { class: "memory-cards" },
          memories
            .filter((m) => m.type === type)
            .map((m) => memoryCard(m, { onOpen, selected: m.memory_id === selectedId })),
        ),
      ),
    );
  }
  return sections;
}

/** A memory opened: what it is now, then its life as a timeline with the messages it came from. */
export function memoryDetail(memory, history, { onOpen, textOf = () => null } = {}) {
  const sources = new Map((history.sources ?? []).map((s) => [s.event_id, s]));
  // Another memory (superseded by, replaced): a button that opens it, named by its words when known.
  const link = (id) =>
    id
      ? el("button", { type: "button", class: "link", title: id, onclick: () => onOpen?.(id) }, textOf(id) ?? id)
      : null;
  return el(
    "article",
    { class: "detail", "aria-labelledby": "detail-heading", "data-memory-id": memory.memory_id },
    el("h3", { id: "detail-heading" }, "Memory"),
    el("p", { class: "detail-text" }, memory.memory),
    el(
      "div",
      { class: "memory-meta" },
      badge("type", memory.type),
      badge("tier", memory.tier, words(memory.tier)),
      badge("status", memory.status),
    ),
    terms([
      ["id", el("code", {}, memory.memory_id)],
      ["importance", fraction(memory.importance)],
      ["created", when(memory.created_at)],
      ["session", el("code", {}, memory.session_id)],
      ["entities", memory.entities?.length ? memory.entities.join(", ") : null],
      ["reinforced", `${memory.reinforcement_count ?? 0}×`],
      ["used", `${memory.access_count ?? 0}× (retrieved)`],
      ["claim", memory.claim ? claimText(memory.claim) : null],
      ["held from", memory.claim ? day(memory.claim.valid_from) : null],
      ["held until", memory.valid_until ? day(memory.valid_until) : null],
      [memory.status === "superseded" ? "superseded by" : "replaced by", link(memory.superseded_by)],
    ]),
    el("h4", {}, "History"),
    timeline(history.results ?? [], sources, { link }),
    unreadNote(history.results ?? [], sources),
  );
}

/** What a claim asserts, as one line: "User · home = Munich" ("≠" when taken back). */
export function claimText(claim) {
  return `${claim.subject} · ${claim.attribute} ${claim.polarity === false ? "≠" : "="} ${claim.value}`;
}

const STEPS = {
  memory_added: "Added",
  memory_reinforced: "Reinforced",
  memory_superseded: "Superseded",
  memory_outdated: "Outdated: what it states changed",
  memory_deleted: "Deleted",
  memory_promoted: "Promoted to long-term",
  memory_expired: "Expired",
  memory_forgotten: "Forgotten",
};

/** A memory's history, in log order: one step per event, each with the messages it cites. */
export function timeline(entries, sources = new Map(), { link = (id) => id } = {}) {
  return el(
    "ol",
    { class: "timeline" },
    entries.map((entry) => {
      const details = entry.details ?? {};
      const supersedes = entry.type === "memory_superseded" && details.supersedes;
      const label = supersedes ? "Replaced an older memory" : (STEPS[entry.type] ?? words(entry.type));
      const kind = String(entry.type).replace(/^memory_/, "").replace(/[^a-z_]/g, "");
      const cited = (entry.source_event_ids ?? []).map((id) => sources.get(id)).filter(Boolean);
      return el(
        "li",
        { class: `step step-${kind}`, "data-event-type": entry.type },
        el("div", { class: "step-head" }, el("strong", { class: "step-label" }, label), " ", when(entry.occurred_at)),
        terms(
          [
            ["content", details.content],
            ["type", details.memory_type],
            ["tier", details.tier ? words(details.tier) : null],
            ["importance", details.importance !== undefined ? fraction(details.importance) : null],
            ["similarity", details.similarity !== undefined && details.similarity !== null ? fraction(details.similarity) : null],
            ["superseded by", details.superseded_by ? link(details.superseded_by) : null],
            ["replaced", supersedes ? link(details.supersedes) : null],
            ["change", details.change],
            ["decided by", details.decided_by],
            ["held until", details.valid_until ? day(details.valid_until) : null],
            ["claim", details.claim ? claimText(details.claim) : details.claim_memory_id ? link(details.claim_memory_id) : null],
            ["policy", details.policy],
            ["score", details.score !== undefined ? `${fraction(details.score)} (threshold ${fraction(details.threshold)})` : null],
            ["reason", details.reason],
          ],
          "terms step-terms",
        ),
        cited.length ? el("p", { class: "sources-label" }, cited.length === 1 ? "from this message:" : `from these ${cited.length} messages:`) : null,
        cited.length ? sourceList(cited) : null,
      );
    }),
  );
}

/** The chat messages (and other events) a step cites: who said what, when. */
export function sourceList(sources) {
  return el(
    "ol",
    { class: "sources", "aria-label": "Source messages" },
    sources.map((source) => {
      const who = source.role ? (source.name ? `${source.name} (${source.role})` : source.role) : words(source.type);
      const role = String(source.role ?? "event").replace(/[^a-z]/g, "");
      return el(
        "li",
        { class: `source source-${role}`, "data-event-id": source.event_id },
        el("div", { class: "source-head" }, el("span", { class: "who" }, who), " ", when(source.occurred_at)),
        el("p", { class: "source-text" }, source.content),
      );
    }),
  );
}

function unreadNote(entries, sources) {
  const missing = new Set(entries.flatMap((e) => e.source_event_ids ?? []).filter((id) => !sources.has(id)));
  if (missing.size === 0) return null;
  return el(
    "p",
    { class: "hint" },
    `${missing.size} cited event${missing.size === 1 ? "" : "s"} could not be read from the chat ` +
      "topic (past its retention, or the user's key destroyed).",
  );
}

// --- an attribute over time (POST /v1/memories/timeline) ------------------------------------

/** One line that says what the timeline is: the attribute matched, whose, how many values. */
export function timelineSummary(answer) {
  if (answer.attribute === null) {
    return `Nothing this user said matches “${answer.about}”: try other words (an attribute such as “budget” or “home”).`;
  }
  const count = answer.entries.length;
  return `${answer.attribute} of ${answer.subject}: ${count} value${count === 1 ? "" : "s"}, oldest first.`;
}

/**
 * One value the attribute held: its interval (from → until, or "now"), the value, the
 * statement (a button that opens its memory), its status, what replaced it and the turns
 * that stated it. `textOf(id)` names another memory by its words when known.
 */
export function timelineValue(entry, { onOpen, textOf = () => null } = {}) {
  const holds = entry.valid_until === null || entry.valid_until === undefined;
  return el(
    "li",
    { class: `held${holds ? " holds-now" : ""}`, "data-memory-id": entry.memory_id },
    el(
      "p",
      { class: "interval" },
      day(entry.valid_from),
      " → ",
      holds ? el("strong", { class: "now" }, "now") : day(entry.valid_until),
    ),
    el("p", { class: "held-value" }, entry.polarity === false ? ["no longer: ", entry.value] : entry.value),
    el("button", { type: "button", class: "memory-open", onclick: () => onOpen?.(entry.memory_id) }, entry.statement),
    el(
      "div",
      { class: "memory-meta" },
      badge("status", entry.status),
      entry.superseded_by
        ? el(
            "span",
            { class: "meta replaced-by" },
            "replaced by ",
            el(
              "button",
              { type: "button", class: "link", title: entry.superseded_by, onclick: () => onOpen?.(entry.superseded_by) },
              textOf(entry.superseded_by) ?? entry.superseded_by,
            ),
          )
        : null,
      el(
        "span",
        { class: "meta", title: (entry.turns ?? []).join(", ") },
        `stated in ${(entry.turns ?? []).length} turn${(entry.turns ?? []).length === 1 ? "" : "s"}`,
      ),
    ),
  );
}

// --- what holds about the user (POST /v1/memories/profile) ----------------------------------

/** One line that says what the profile holds: how many claims about how many subjects, when. */
export function profileSummary(answer) {
  const when = answer.as_of ? `as of ${answer.as_of}` : "now";
  const count = answer.subjects.reduce(
    (sum, who) => sum + who.kinds.reduce((n, kind) => n + kind.entries.length, 0), 0);
  if (count === 0) {
    return answer.subject
      ? `Nothing holds about “${answer.subject}” ${when}.`
      : `Nothing holds about this user ${when}: no facts or preferences yet.`;
  }
  const subjects = answer.subjects.length;
  return `${count} claim${count === 1 ? "" : "s"} about ${subjects} subject${subjects === 1 ? "" : "s"} hold ${when}.`;
}

/**
 * The profile: a section per subject (the user first), a list per kind, one row per claim:
 * the attribute, the value (a button that opens its memory), since when, and its turns.
 */
export function profileSubjects(answer, { onOpen } = {}) {
  return answer.subjects.map((who) =>
    el(
      "section",
      { class: "profile-subject", "data-subject": who.subject },
      el("h3", {}, who.subject),
      who.kinds.map((kind) =>
        el(
          "div",
          { class: "profile-kind" },
          el("h4", {}, Object.hasOwn(TYPE_TITLES, kind.kind) ? TYPE_TITLES[kind.kind] : words(kind.kind)),
          el(
            "ul",
            { class: "claims" },
            kind.entries.map((entry) =>
              el(
                "li",
                { class: "claim", "data-memory-id": entry.memory_id },
                el("span", { class: "claim-attribute" }, entry.attribute || "—"),
                el(
                  "button",
                  { type: "button", class: "memory-open claim-value", title: entry.statement, onclick: () => onOpen?.(entry.memory_id) },
                  entry.polarity === false ? ["no longer: ", entry.value] : entry.value,
                ),
                el("span", { class: "meta" }, "since ", day(entry.valid_from)),
                el(
                  "span",
                  { class: "meta", title: (entry.turns ?? []).join(", ") },
                  `stated in ${(entry.turns ?? []).length} turn${(entry.turns ?? []).length === 1 ? "" : "s"}`,
                ),
              ),
            ),
          ),
        ),
      ),
    ),
  );
}
