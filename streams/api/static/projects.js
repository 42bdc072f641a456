// The inspector's Projects tab: one user's project history (POST /v1/memories/projects), per
// project the tasks in the order they happened, what was decided, and what is open.
//
// Pure rendering, as memories.js: each function takes what the API answered and returns
// elements; main.js fetches and wires. Every text from the API goes in through dom.js, as text.

import { badge, day, el } from "./dom.js";

/** One line that says what the history holds: how many projects and open tasks, when. */
export function projectsSummary(answer) {
  const when = answer.as_of ? `as of ${answer.as_of}` : "now";
  if (answer.projects.length === 0) {
    return answer.project
      ? `No task was set in a project named “${answer.project}” ${when}.`
      : `No task was set in a project ${when}.`;
  }
  const projects = answer.projects.length;
  const open = answer.projects.reduce((n, project) => n + project.open.length, 0);
  return `${projects} project${projects === 1 ? "" : "s"}, ${open} open task${open === 1 ? "" : "s"} ${when}.`;
}

/** A task's state as the list shows it: "schema copied (40%)", or its status alone. */
function progressOf(state) {
  const percent = state.percent === null || state.percent === undefined ? "" : `${state.percent}%`;
  if (state.progress && percent) return `${state.progress} (${percent})`;
  return state.progress || percent || "";
}

/** One state of a task: its day, the task (a button that opens its memory), status, progress, session. */
function taskRow(state, onOpen) {
  return el(
    "li",
    { class: `task${state.current ? " is-current" : ""}`, "data-memory-id": state.memory_id },
    el("span", { class: "meta" }, day(state.at)),
    el("button", { type: "button", class: "memory-open task-name", onclick: () => onOpen?.(state.memory_id) }, state.task),
    badge("task", state.status),
    el("span", { class: "task-progress" }, progressOf(state)),
    el("span", { class: "meta" }, "session ", state.session_id),
  );
}

/** The history: a section per project (most recently worked on first) with its open tasks,
 * its tasks in time order and what was decided. */
export function projectsList(answer, { onOpen } = {}) {
  return answer.projects.map((project) =>
    el(
      "section",
      { class: "project", "data-project": project.project },
      el("h3", {}, project.project),
      el(
        "p",
        { class: "meta" },
        day(project.first_at), " to ", day(project.last_at), " · ",
        `${project.sessions.length} session${project.sessions.length === 1 ? "" : "s"}`,
      ),
      el("h4", {}, "Open"),
      project.open.length
        ? el("ul", { class: "tasks tasks-open" }, project.open.map((state) => taskRow(state, onOpen)))
        : el("p", { class: "hint" }, "Nothing open."),
      el("h4", {}, "Tasks over time"),
      el("ol", { class: "tasks tasks-all" }, project.tasks.map((state) => taskRow(state, onOpen))),
      project.decided.length ? el("h4", {}, "Decided") : null,
      project.decided.length
        ? el(
          "ul",
          { class: "decisions" },
          project.decided.map((decision) =>
            el(
              "li",
              { class: "decision", "data-memory-id": decision.memory_id },
              el("span", { class: "meta" }, day(decision.at)),
              el("button", { type: "button", class: "memory-open", onclick: () => onOpen?.(decision.memory_id) }, decision.statement),
            )),
        )
        : null,
    ),
  );
}
