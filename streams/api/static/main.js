// The memory inspector: the key, the tenant's users, and one user's memories, searches,
// timelines, profile, projects, patterns, entity graph and reports. Fetches from /v1
// (api.js) and puts the answers in the page (memories.js, search.js, projects.js,
// patterns.js, graph.js, reports.js); errors show in one alert that
// says what to do.

import { ApiError, apiKey, call, explain, readiness, segment } from "./api.js";
import { el, fill, when } from "./dom.js";
import {
  STATUSES, TIERS, TYPES, countBy, filtered, filterOptions, memoryDetail, memoryGroups, summary,
  profileSubjects, profileSummary, timelineSummary, timelineValue,
} from "./memories.js";
import { patternList, patternsSummary } from "./patterns.js";
import { entityDetail, graphDrawing, graphSummary } from "./graph.js";
import { projectsList, projectsSummary } from "./projects.js";
import { chartFigure, reportOptions, rowsTable } from "./reports.js";
import { searchHit } from "./search.js";

const $ = (id) => document.getElementById(id);
// Below this width the memory opened shows under the list (inspector.css), so it is scrolled to.
const NARROW = window.matchMedia("(max-width: 1099px)");

const state = {
  userId: null,
  memories: [],
  openMemoryId: null,
  reports: null,
  chartUrl: null,
  graph: null,
  retry: null,
};

// --- errors ----------------------------------------------------------------------------

async function showError(error, retry) {
  if (error instanceof ApiError && error.status === 401) {
    apiKey.clear();
    showKeyForm();
  }
  const checks = error instanceof ApiError && error.status === 503 ? await readiness() : null;
  const said = explain(error, { userId: state.userId, checks });
  $("alert-title").textContent = said.title;
  $("alert-advice").textContent = said.advice;
  state.retry = said.retry ? retry : null;
  $("alert-retry").hidden = !state.retry;
  $("alert").hidden = false;
}

function clearError() {
  $("alert").hidden = true;
  state.retry = null;
}

/** Run `action` (async); an error it throws is shown, with `action` as the retry. */
async function attempt(action) {
  clearError();
  try {
    await action();
  } catch (error) {
    if (!(error instanceof ApiError)) console.error(error);
    await showError(error, () => attempt(action));
  }
}

// --- the key -----------------------------------------------------------------------------

function showKeyForm() {
  $("key-section").hidden = false;
  $("workspace").hidden = true;
  $("key-status").hidden = true;
  $("key-input").focus();
}

async function start() {
  const answer = await call("users");
  $("key-section").hidden = true;
  $("workspace").hidden = false;
  $("key-status").hidden = false;
  showUsers(answer.results);
  const wanted = new URLSearchParams(location.hash.slice(1)).get("user");
  if (wanted) await openUser(wanted);
}

// --- users -------------------------------------------------------------------------------

function showUsers(users) {
  $("users-note").textContent = users.length
    ? `${users.length} user${users.length === 1 ? "" : "s"} with memories:`
    : "No user of this tenant has memories yet; type a user id to look anyway.";
  fill(
    $("user-list"),
    users.map((user) =>
      el(
        "li",
        {},
        el(
          "button",
          { type: "button", class: "user", "data-user-id": user.user_id, onclick: () => attempt(() => openUser(user.user_id)) },
          el("span", { class: "user-id" }, user.user_id),
          el("span", { class: "user-counts" }, `${user.active} active of ${user.memories}`),
          user.last_memory_at ? el("span", { class: "user-last" }, "latest ", when(user.last_memory_at)) : null,
        ),
      ),
    ),
  );
  markUser();
}

function markUser() {
  for (const button of $("user-list").querySelectorAll("button.user")) {
    if (button.dataset.userId === state.userId) button.setAttribute("aria-current", "true");
    else button.removeAttribute("aria-current");
  }
}

async function openUser(userId) {
  state.userId = userId;
  state.openMemoryId = null;
  history.replaceState(null, "", `#${new URLSearchParams({ user: userId })}`);
  markUser();
  fill($("user-heading"), "User ", el("span", { class: "user-name" }, userId));
  $("user-intro").hidden = true;
  $("user-tabs").hidden = false;
  fill($("search-results"));
  $("search-status").textContent = "";
  fill($("timeline-values"));
  $("timeline-status").textContent = "";
  fill($("profile-subjects"));
  $("profile-status").textContent = "";
  fill($("patterns-list"));
  $("patterns-status").textContent = "";
  fill($("graph-canvas"));
  fill($("graph-entity"), el("p", { class: "hint" }, "Pick an entity in the drawing."));
  $("graph-status").textContent = "";
  state.graph = null;
  fill($("projects-list"));
  $("projects-status").textContent = "";
  fill($("report-output"));
  fill($("memory-detail"), el("p", { class: "hint" }, "Open a memory to see its history and the messages it came from."));
  fill($("memory-summary"));
  $("memory-filters").hidden = true;
  $("memory-detail").hidden = true;
  fill($("memory-list"), el("p", { class: "empty" }, "Loading the memories…"));
  selectTab("memories");
  try {
    await loadMemories();
  } catch (error) {
    fill($("memory-list"), el("p", { class: "empty" }, "The memories could not be read: see the message above."));
    throw error;
  }
}

// --- tabs --------------------------------------------------------------------------------

const TABS = ["memories", "search", "timeline", "profile", "projects", "patterns", "graph", "reports"];

function selectTab(name) {
  for (const tab of TABS) {
    const selected = tab === name;
    $(`tab-${tab}`).setAttribute("aria-selected", String(selected));
    $(`tab-${tab}`).tabIndex = selected ? 0 : -1;
    $(`panel-${tab}`).hidden = !selected;
  }
  if (name === "reports" && state.reports === null) attempt(loadReports);
  if (name === "profile" && $("profile-status").textContent === "") attempt(runProfile);
  if (name === "patterns" && $("patterns-status").textContent === "") attempt(runPatterns);
  if (name === "graph" && $("graph-status").textContent === "") attempt(runGraph);
  if (name === "projects" && $("projects-status").textContent === "") attempt(runProjects);
}

function tabKeys(event) {
  const index = TABS.findIndex((tab) => $(`tab-${tab}`) === document.activeElement);
  if (index < 0 || !["ArrowLeft", "ArrowRight", "Home", "End"].includes(event.key)) return;
  const next = { ArrowLeft: index - 1, ArrowRight: index + 1, Home: 0, End: TABS.length - 1 }[event.key];
  const tab = TABS[(next + TABS.length) % TABS.length];
  selectTab(tab);
  $(`tab-${tab}`).focus();
  event.preventDefault();
}

// --- memories ----------------------------------------------------------------------------

async function loadMemories() {
  const userId = state.userId;
  const answer = await call("memories", { params: { user_id: userId, include_inactive: true } });
  if (userId !== state.userId) return; // another user was opened meanwhile
  state.memories = answer.results;
  showMemories();
}

function currentFilters() {
  return { type: $("filter-type").value, tier: $("filter-tier").value, status: $("filter-status").value };
}

function showMemories() {
  const all = state.memories;
  $("memory-filters").hidden = all.length === 0;
  $("memory-detail").hidden = all.length === 0;
  fill($("memory-summary"), summary(all));
  filterOptions($("filter-type"), "all types", countBy(all, "type", TYPES));
  filterOptions($("filter-tier"), "both tiers", countBy(all, "tier", TIERS));
  filterOptions($("filter-status"), "any status", countBy(all, "status", STATUSES));
  const shown = filtered(all, currentFilters());
  $("filter-count").textContent = `${shown.length} of ${all.length} shown`;
  if (all.length === 0) {
    fill($("memory-list"), el("p", { class: "empty" }, "No memories for this user yet. (A user id the tenant never used has none either.)"));
  } else if (shown.length === 0) {
    fill($("memory-list"), el("p", { class: "empty" }, "No memory matches these filters."));
  } else {
    fill($("memory-list"), memoryGroups(shown, { onOpen: openMemory, selectedId: state.openMemoryId }));
  }
}

function openMemory(memoryId) {
  attempt(() => showMemory(memoryId));
}

async function showMemory(memoryId) {
  const userId = state.userId;
  selectTab("memories");
  const path = `memories/${segment(memoryId)}`;
  const [memory, life] = await Promise.all([
    call(path, { params: { user_id: userId } }),
    call(`${path}/history`, { params: { user_id: userId, sources: true } }),
  ]);
  if (userId !== state.userId) return;
  state.openMemoryId = memoryId;
  for (const card of $("memory-list").querySelectorAll(".memory-card")) {
    const selected = card.dataset.memoryId === memoryId;
    card.classList.toggle("is-selected", selected);
    card.querySelector(".memory-open").setAttribute("aria-pressed", String(selected));
  }
  const detail = $("memory-detail");
  fill(detail, memoryDetail(memory, life, { onOpen: openMemory, textOf }));
  detail.focus({ preventScroll: !NARROW.matches });
  if (NARROW.matches) detail.scrollIntoView({ block: "start" });
}

/** The words of one of the user's memories, as listed; null when not listed. */
function textOf(memoryId) {
  return state.memories.find((m) => m.memory_id === memoryId)?.memory ?? null;
}

// --- search ------------------------------------------------------------------------------

async function runSearch() {
  const userId = state.userId;
  const query = $("search-query").value.trim();
  if (!query) return;
  const limit = Math.min(Math.max(Number($("search-limit").value) || 10, 1), 50);
  $("search-status").textContent = "Searching…";
  const answer = await call("memories/search", {
    method: "POST",
    body: { query, user_id: userId, limit, explain: true },
  });
  if (userId !== state.userId) return;
  const hits = answer.results;
  $("search-status").textContent = hits.length
    ? `${hits.length} result${hits.length === 1 ? "" : "s"}, best first.`
    : "No active memory of this user matches.";
  fill($("search-results"), hits.map((hit, i) => searchHit(hit, { onOpen: openMemory, position: i + 1, textOf })));
}

// --- timeline ----------------------------------------------------------------------------

async function runTimeline() {
  const userId = state.userId;
  const about = $("timeline-about").value.trim();
  if (!about) return;
  const subject = $("timeline-subject").value.trim();
  $("timeline-status").textContent = "Reading the timeline…";
  const body = { about, user_id: userId };
  if (subject) body.subject = subject;
  const answer = await call("memories/timeline", { method: "POST", body });
  if (userId !== state.userId) return;
  $("timeline-status").textContent = timelineSummary(answer);
  fill($("timeline-values"), answer.entries.map((entry) => timelineValue(entry, { onOpen: openMemory, textOf })));
}

// --- profile -----------------------------------------------------------------------------

async function runProfile() {
  const userId = state.userId;
  const subject = $("profile-subject").value.trim();
  const asOf = $("profile-as-of").value;
  $("profile-status").textContent = "Reading the profile…";
  const body = { user_id: userId };
  if (subject) body.subject = subject;
  // The field is the browser's local time; the API wants an instant with its zone.
  if (asOf) body.as_of = new Date(asOf).toISOString();
  const answer = await call("memories/profile", { method: "POST", body });
  if (userId !== state.userId) return;
  $("profile-status").textContent = profileSummary(answer);
  fill($("profile-subjects"), profileSubjects(answer, { onOpen: openMemory }));
}

// --- patterns ----------------------------------------------------------------------------

async function runPatterns() {
  const userId = state.userId;
  const asOf = $("patterns-as-of").value;
  $("patterns-status").textContent = "Reading the patterns…";
  const body = { user_id: userId };
  // The field is the browser's local time; the API wants an instant with its zone.
  if (asOf) body.as_of = new Date(asOf).toISOString();
  const answer = await call("memories/patterns", { method: "POST", body });
  if (userId !== state.userId) return;
  $("patterns-status").textContent = patternsSummary(answer);
  fill($("patterns-list"), patternList(answer, { onOpen: openMemory }));
}

// --- entity graph ------------------------------------------------------------------------

/** The time of the graph's "as of" field as an instant, or null for now. */
function graphAsOf() {
  const asOf = $("graph-as-of").value;
  // The field is the browser's local time; the API wants an instant with its zone.
  return asOf ? new Date(asOf).toISOString() : null;
}

async function runGraph() {
  const userId = state.userId;
  const asOf = graphAsOf();
  $("graph-status").textContent = "Reading the graph…";
  const body = { user_id: userId };
  if (asOf) body.as_of = asOf;
  const answer = await call("memories/graph", { method: "POST", body });
  if (userId !== state.userId) return;
  state.graph = { answer, selected: null };
  $("graph-status").textContent = graphSummary(answer);
  drawGraph();
  fill($("graph-entity"), el("p", { class: "hint" }, answer.nodes.length ? "Pick an entity in the drawing." : ""));
}

function drawGraph() {
  const { answer, selected } = state.graph;
  const onSelect = (name) => attempt(() => showEntity(name));
  fill($("graph-canvas"), answer.nodes.length ? graphDrawing(answer, { onSelect, selected }) : null);
}

async function showEntity(name) {
  const userId = state.userId;
  const body = { name, user_id: userId };
  if (state.graph?.answer.as_of) body.as_of = state.graph.answer.as_of;
  const answer = await call("memories/entity", { method: "POST", body });
  if (userId !== state.userId || state.graph === null) return;
  state.graph.selected = name;
  drawGraph();
  const detail = $("graph-entity");
  fill(detail, entityDetail(answer, { onOpen: openMemory, textOf }));
  detail.scrollIntoView({ block: "nearest" });
}

// --- projects ----------------------------------------------------------------------------

async function runProjects() {
  const userId = state.userId;
  const project = $("projects-project").value.trim();
  const asOf = $("projects-as-of").value;
  $("projects-status").textContent = "Reading the projects…";
  const body = { user_id: userId };
  if (project) body.project = project;
  // The field is the browser's local time; the API wants an instant with its zone.
  if (asOf) body.as_of = new Date(asOf).toISOString();
  const answer = await call("memories/projects", { method: "POST", body });
  if (userId !== state.userId) return;
  $("projects-status").textContent = projectsSummary(answer);
  fill($("projects-list"), projectsList(answer, { onOpen: openMemory }));
}

// --- reports -----------------------------------------------------------------------------

async function loadReports() {
  state.reports = await call("reports");
  reportOptions($("report-name"), state.reports, "growth");
  describeReport();
}

function describeReport() {
  const report = (state.reports ?? []).find((r) => r.name === $("report-name").value);
  $("report-description").textContent = report?.description ?? "";
  $("report-days-field").hidden = !report?.options.includes("days");
  $("report-limit-field").hidden = !report?.options.includes("limit");
}

async function runReport() {
  const userId = state.userId;
  const name = $("report-name").value;
  if (!name) return;
  const params = { user_id: userId };
  if (!$("report-days-field").hidden) params.days = $("report-days").value;
  if (!$("report-limit-field").hidden) params.limit = $("report-limit").value;
  fill($("report-output"), el("p", { class: "hint" }, `Running the ${name} report…`));
  const [rows, chart] = await Promise.all([
    call(`reports/${segment(name)}`, { params }),
    call(`reports/${segment(name)}`, { params: { ...params, format: "png" }, as: "blob" }),
  ]);
  if (userId !== state.userId) return;
  if (state.chartUrl) URL.revokeObjectURL(state.chartUrl);
  state.chartUrl = URL.createObjectURL(chart);
  fill($("report-output"), chartFigure(name, userId, state.chartUrl), rowsTable(name, rows.columns, rows.rows));
}

// --- wiring ------------------------------------------------------------------------------

function submit(form, action) {
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    attempt(action);
  });
}

submit($("key-form"), async () => {
  const key = $("key-input").value.trim();
  $("key-input").value = "";
  if (!key) return;
  apiKey.set(key);
  await start();
});
submit($("user-form"), async () => {
  const userId = $("user-input").value.trim();
  if (userId) await openUser(userId);
});
submit($("search-form"), runSearch);
submit($("timeline-form"), runTimeline);
submit($("profile-form"), runProfile);
submit($("patterns-form"), runPatterns);
submit($("graph-form"), runGraph);
submit($("projects-form"), runProjects);
submit($("report-form"), runReport);
for (const select of ["filter-type", "filter-tier", "filter-status"]) {
  $(select).addEventListener("change", showMemories);
}
$("report-name").addEventListener("change", describeReport);
for (const tab of TABS) $(`tab-${tab}`).addEventListener("click", () => selectTab(tab));
$("user-tabs").addEventListener("keydown", tabKeys);
$("change-key").addEventListener("click", () => {
  apiKey.clear();
  clearError();
  showKeyForm();
});
$("alert-dismiss").addEventListener("click", clearError);
$("alert-retry").addEventListener("click", () => state.retry?.());

if (apiKey.get()) attempt(start);
else showKeyForm();
