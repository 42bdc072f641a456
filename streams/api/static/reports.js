// The reports view: the named reports of the analytics, one user's rows as a table and the
// report's chart, fetched with the key as an image blob (an <img src> could not send it).

import { el } from "./dom.js";

/** Fill the report `select` from GET /v1/reports, choosing `first` when it is one of them. */
export function reportOptions(select, reports, first) {
  select.replaceChildren(...reports.map((r) => el("option", { value: r.name }, r.name)));
  if (reports.some((r) => r.name === first)) select.value = first;
}

/** A cell of a report's rows as text: numbers to three decimals at most, lists joined. */
export function cellText(value) {
  if (value === null || value === undefined) return "–";
  if (typeof value === "number") return Number.isInteger(value) ? String(value) : String(Number(value.toFixed(3)));
  if (typeof value === "object") return JSON.stringify(value);
  return String(value);
}

/** A report's rows as a table (a column per name in `columns`). */
export function rowsTable(report, columns, rows) {
  if (rows.length === 0) return el("p", { class: "hint" }, `The ${report} report has no rows for this user yet.`);
  return el(
    "div",
    { class: "table-wrap", tabindex: "0", role: "region", "aria-label": `${report} rows` },
    el(
      "table",
      { class: "rows" },
      el("caption", {}, `${report}: ${rows.length} row${rows.length === 1 ? "" : "s"}`),
      el("thead", {}, el("tr", {}, columns.map((c) => el("th", { scope: "col", class: typeof rows[0][c] === "number" ? "num" : null }, c)))),
      el(
        "tbody",
        {},
        rows.map((row) =>
          el(
            "tr",
            {},
            columns.map((c) => el("td", { class: typeof row[c] === "number" ? "num" : null }, cellText(row[c]))),
          ),
        ),
      ),
    ),
  );
}

/** The report's chart: an <img> showing `blobUrl`, with a caption. */
export function chartFigure(report, userId, blobUrl) {
  return el(
    "figure",
    { class: "chart" },
    el("img", { src: blobUrl, alt: `Chart of the ${report} report for user ${userId}`, class: "chart-image" }),
    el("figcaption", {}, `The ${report} report's chart (PNG).`),
  );
}
