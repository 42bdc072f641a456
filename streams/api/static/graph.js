// The graph tab: a user's entity graph (POST /v1/memories/graph) drawn as SVG, and one
// entity (POST /v1/memories/entity): its facts and relations with their sources. The API
// sends at most its default limit of a large graph (the user, then the most mentioned),
// and says so (`truncated`, `total_nodes`): the summary line tells the reader.
//
// Pure rendering, as memories.js: each function takes what the API answered and returns
// elements. The drawing is made with createElementNS and every name goes in as a text node,
// so a name like "<img src=x onerror=...>" shows as those characters. The layout is fixed by
// the graph's own order (the API gives nodes User first, then by name): the user in the
// middle, every other entity on a circle around it, clockwise from the top.

import { day, el } from "./dom.js";

const SVG = "http://www.w3.org/2000/svg";
const WIDTH = 900;
// Names longer than this are cut in the drawing (the whole name is in its tooltip).
const LABEL_CHARS = 40;
const NODE_RADIUS = 10;
// Parallel edges of one pair of entities bend apart by this much (px), so each label shows.
const BEND = 34;

/** An SVG element: `tag` with attributes `attrs` and `children` (Nodes, or text). */
function svg(tag, attrs = {}, ...children) {
  const node = document.createElementNS(SVG, tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (value !== null && value !== undefined && value !== false) node.setAttribute(name, String(value));
  }
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

// A drawing stays readable (and light) for a user with many memories: at most this many
// entities (the user, then the most named), and this many co-mention lines (the most said).
export const MAX_NODES = 60;
export const MAX_CO_MENTIONS = 150;

/**
 * What is drawn of `answer`: its nodes and edges within MAX_NODES and MAX_CO_MENTIONS (every
 * claim between drawn nodes is), in the graph's own order, and how many of each were left out.
 */
export function drawable(answer) {
  const ranked = answer.nodes
    .map((node, i) => ({ node, i }))
    .sort((a, b) => (b.node.name === "User") - (a.node.name === "User")
      || b.node.memory_ids.length - a.node.memory_ids.length || a.i - b.i);
  const kept = new Set(ranked.slice(0, MAX_NODES).map(({ node }) => node.name));
  const nodes = answer.nodes.filter((node) => kept.has(node.name));
  const between = answer.edges.filter((e) => kept.has(e.source) && kept.has(e.target));
  const said = between
    .map((edge, i) => ({ edge, i }))
    .filter(({ edge }) => edge.kind !== "claim")
    .sort((a, b) => b.edge.memory_ids.length - a.edge.memory_ids.length || a.i - b.i);
  const shown = new Set(said.slice(0, MAX_CO_MENTIONS).map(({ edge }) => edge));
  const edges = between.filter((e) => e.kind === "claim" || shown.has(e));
  return {
    nodes, edges,
    leftOut: { nodes: answer.nodes.length - nodes.length, edges: answer.edges.length - edges.length },
  };
}

/** A count as the page shows it: 1,234. */
const count = (n) => n.toLocaleString("en");

/**
 * One line that says what the graph holds, and when: when the API cut the graph (its
 * `limit`: the user, then the most mentioned), how many of its entities it sent; and what
 * the drawing leaves out of those.
 */
export function graphSummary(answer) {
  const when = answer.as_of ? `as of ${answer.as_of}` : "now";
  if (answer.nodes.length === 0) return `No entity is named in this user's memories ${when}.`;
  const claims = answer.edges.filter((e) => e.kind === "claim");
  const ended = claims.filter((e) => e.valid_until !== null).length;
  const nodes = answer.nodes.length;
  const { leftOut } = drawable(answer);
  const cut = leftOut.nodes || leftOut.edges
    ? ` Drawn: the ${nodes - leftOut.nodes} most named entities and ${answer.edges.length - leftOut.edges} of the lines between them; pick an entity for all of its relations.`
    : "";
  const entities = answer.truncated
    ? `Showing ${count(nodes)} of ${count(answer.total_nodes)} entities (the most mentioned)`
    : `${count(nodes)} entit${nodes === 1 ? "y" : "ies"}`;
  const among = answer.truncated ? " among them" : "";
  return `${entities} and ${count(claims.length)} relation${claims.length === 1 ? "" : "s"}${among}`
    + ` (${ended} ended), ${answer.edges.length - claims.length} co-mention${answer.edges.length - claims.length === 1 ? "" : "s"}, ${when}.${cut}`;
}

/** Where each node goes: the user (the first node, if it is "User") in the middle, the others
 * on a circle, in the order given. Returns a Map name -> {x, y}, and the drawing's height. */
export function layout(nodes) {
  const places = new Map();
  const centred = nodes.length > 0 && nodes[0].name === "User";
  const around = centred ? nodes.slice(1) : nodes;
  const radius = around.length === 1 && centred ? 150 : around.length <= 1 ? 0 : Math.min(Math.max(150, around.length * 24), 320);
  const height = 2 * radius + 120;
  const cx = WIDTH / 2;
  const cy = height / 2;
  if (centred) places.set(nodes[0].name, { x: cx, y: cy, cos: 0, sin: 1 });
  around.forEach((node, i) => {
    const angle = -Math.PI / 2 + (2 * Math.PI * i) / around.length;
    const [cos, sin] = [Math.cos(angle), Math.sin(angle)];
    // Wider than high no more than the names beside the nodes leave room for.
    places.set(node.name, { x: cx + Math.min(radius, 230) * cos, y: cy + radius * sin, cos, sin });
  });
  return { places, height };
}

/** The point a quadratic curve from `a` to `b` bent by `offset` passes at its middle, and
 * its control point. */
function bent(a, b, offset) {
  const mx = (a.x + b.x) / 2;
  const my = (a.y + b.y) / 2;
  const length = Math.hypot(b.x - a.x, b.y - a.y) || 1;
  const nx = -(b.y - a.y) / length;
  const ny = (b.x - a.x) / length;
  // The control point is twice as far out as the curve's middle.
  return { mid: { x: mx + nx * offset, y: my + ny * offset }, control: { x: mx + 2 * nx * offset, y: my + 2 * ny * offset } };
}

/**
 * The drawing: an SVG with one group per edge (a path, its relation as a label; an ended
 * relation dashed, a co-mention thin and grey) and one per node (a circle and its name), of
 * what `drawable` keeps of the graph.
 * Clicking a node, or Enter on it, calls `onSelect(name)`.
 */
export function graphDrawing(whole, { onSelect, selected = null } = {}) {
  const answer = drawable(whole);
  const { places, height } = layout(answer.nodes);
  const drawing = svg("svg", {
    class: "graph-drawing", viewBox: `0 0 ${WIDTH} ${height}`, width: WIDTH, height,
    role: "group", "aria-label": "The user's entity graph",
  });
  drawing.append(svg("defs", {}, svg(
    "marker",
    { id: "graph-arrow", viewBox: "0 0 10 10", refX: 10, refY: 5, markerWidth: 7, markerHeight: 7, orient: "auto-start-reverse" },
    svg("path", { d: "M 0 0 L 10 5 L 0 10 z", class: "graph-arrow" }),
  )));

  // Edges of one pair (either way round) are spread around the straight line.
  const pairs = new Map();
  for (const edge of answer.edges) {
    const key = [edge.source, edge.target].sort().join("\u0000");
    pairs.set(key, [...(pairs.get(key) ?? []), edge]);
  }
  const edges = svg("g", { class: "graph-edges" });
  for (const group of pairs.values()) {
    group.forEach((edge, i) => {
      const a = places.get(edge.source);
      const b = places.get(edge.target);
      if (!a || !b) return;
      const sign = edge.source < edge.target ? 1 : -1; // the same side whichever way round
      const { mid, control } = bent(a, b, sign * (i - (group.length - 1) / 2) * BEND);
      const end = shortened(control, b, NODE_RADIUS + 2);
      const ended = edge.valid_until !== null;
      const claim = edge.kind === "claim";
      const validity = ended ? `until ${edge.valid_until.slice(0, 10)}` : edge.holds ? "holds" : "does not hold";
      edges.append(svg(
        "g",
        {
          class: `graph-edge ${claim ? "edge-claim" : "edge-co-mention"}${ended ? " edge-ended" : ""}`,
          "data-source": edge.source, "data-target": edge.target, "data-relation": edge.relation,
          "data-ended": String(ended),
        },
        svg("title", {}, `${edge.source} ${edge.relation} ${edge.target}, from ${edge.valid_from.slice(0, 10)}, ${validity}`),
        svg("path", {
          class: "edge-line",
          d: `M ${a.x} ${a.y} Q ${control.x} ${control.y} ${end.x} ${end.y}`,
          "stroke-dasharray": ended ? "6 4" : null,
          "marker-end": claim ? "url(#graph-arrow)" : null,
        }),
        claim ? svg("text", { class: "edge-label", x: mid.x, y: mid.y - 3, "text-anchor": "middle" }, edge.relation) : null,
      ));
    });
  }
  drawing.append(edges);

  const nodes = svg("g", { class: "graph-nodes" });
  for (const node of answer.nodes) {
    const at = places.get(node.name);
    // The name goes outwards, away from the middle: beside a node at the sides, under or
    // over one at the bottom or the top.
    const side = at.cos > 0.35 ? "start" : at.cos < -0.35 ? "end" : "middle";
    const label = side === "middle"
      ? { x: 0, y: at.sin >= 0 ? 26 : -16, "text-anchor": "middle" }
      : { x: side === "start" ? 15 : -15, y: 5, "text-anchor": side };
    const item = svg(
      "g",
      {
        class: `graph-node kind-${String(node.kind ?? "unknown").replace(/[^a-z]/g, "")}${node.name === selected ? " is-selected" : ""}`,
        "data-name": node.name, tabindex: 0, role: "button",
        "aria-label": `${node.name}${node.kind ? ` (${node.kind})` : ""}`,
        transform: `translate(${at.x} ${at.y})`,
      },
      svg("title", {}, [node.name, ...node.aliases].join(" · ")),
      svg("circle", { r: NODE_RADIUS }),
      svg("text", { class: "node-label", ...label }, cut(node.name)),
    );
    item.addEventListener("click", () => onSelect?.(node.name));
    item.addEventListener("keydown", (event) => {
      if (event.key === "Enter" || event.key === " ") {
        event.preventDefault();
        onSelect?.(node.name);
      }
    });
    nodes.append(item);
  }
  drawing.append(nodes);
  return drawing;
}

/** `name` as the drawing shows it: cut after LABEL_CHARS characters. */
function cut(name) {
  const chars = [...name];
  return chars.length > LABEL_CHARS ? `${chars.slice(0, LABEL_CHARS - 1).join("")}…` : name;
}

/** The point `by` px before `to` on the line from `from`. */
function shortened(from, to, by) {
  const length = Math.hypot(to.x - from.x, to.y - from.y) || 1;
  return { x: to.x - ((to.x - from.x) / length) * by, y: to.y - ((to.y - from.y) / length) * by };
}

/** "from 2026-03-01 until 2026-03-20" / "since 2026-03-01". */
function validity(item) {
  return item.valid_until
    ? ["from ", day(item.valid_from), " until ", day(item.valid_until)]
    : ["since ", day(item.valid_from)];
}

/** A list of buttons opening each of `memoryIds`, each named by its words when known. */
function sources(memoryIds, onOpen, textOf) {
  return el(
    "ul",
    { class: "entity-sources", "aria-label": "The memories that say it" },
    memoryIds.map((id) => el(
      "li",
      {},
      el("button", { type: "button", class: "memory-open", title: id, onclick: () => onOpen?.(id) }, textOf(id) ?? id),
    )),
  );
}

/** " (showing 100 of 250)" when the API's limit kept fewer than there are; else nothing. */
function shownOf(shown, total) {
  return total > shown ? ` (showing ${count(shown)} of ${count(total)})` : null;
}

/**
 * One entity (the answer of POST /v1/memories/entity): its names and kind, its facts, its
 * relations, each with its validity and the memories (and turns) that say it; `textOf(id)`
 * gives a memory's words (null: its id is shown).
 */
export function entityDetail(answer, { onOpen, textOf = () => null } = {}) {
  const node = answer.entity;
  if (node === null) return [el("p", { class: "hint" }, `No entity is named “${answer.name}”.`)];
  const seen = node.sessions.length;
  return [
    el("h3", { class: "entity-name" }, node.name),
    el(
      "p",
      { class: "meta" },
      node.kind ?? "kind unknown",
      node.aliases.length ? ["; also ", node.aliases.join(", ")] : null,
      `; named in ${node.memory_ids.length} memor${node.memory_ids.length === 1 ? "y" : "ies"}, ${seen} session${seen === 1 ? "" : "s"}`,
    ),
    el("h4", {}, "Facts", shownOf(answer.facts.length, answer.total_facts)),
    answer.facts.length
      ? el("ul", { class: "entity-facts" }, answer.facts.map((fact) => el(
        "li",
        { class: `entity-fact${fact.holds ? "" : " is-ended"}`, "data-memory-id": fact.memory_id },
        el("span", { class: "claim-attribute" }, fact.attribute),
        el("span", { class: "claim-value" }, fact.polarity === false ? ["not: ", fact.value] : fact.value),
        el("span", { class: "meta" }, validity(fact)),
        el("span", { class: "meta", title: fact.turns.join(", ") }, `stated in ${fact.turns.length} turn${fact.turns.length === 1 ? "" : "s"}`),
        sources([fact.memory_id], onOpen, textOf),
      )))
      : el("p", { class: "hint" }, "No claim is about it."),
    el("h4", {}, "Relations", shownOf(answer.edges.length, answer.total_edges)),
    answer.edges.length
      ? el("ul", { class: "entity-edges" }, answer.edges.map((edge) => el(
        "li",
        {
          class: `entity-edge${edge.valid_until ? " is-ended" : ""}`,
          "data-source": edge.source, "data-target": edge.target, "data-relation": edge.relation,
        },
        el("span", { class: "edge-words" }, edge.source, " ", el("strong", {}, edge.relation), " ", edge.target),
        el("span", { class: "meta" }, validity(edge)),
        sources(edge.memory_ids, onOpen, textOf),
      )))
      : el("p", { class: "hint" }, "No relation."),
  ];
}
