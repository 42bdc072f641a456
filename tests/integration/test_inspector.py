"""The memory inspector (``/inspector/`` of ``memstream serve``) in a real browser: Debian's
chromium driven by Playwright, over ``memstream serve`` beside a real worker on the real broker
(one of each, and one browser, for the module).

A user enters the key, picks a user, sees the memories by type, opens one and reads its
history and the message it came from, searches and reads every part of a score, sees which
hits no longer hold (ann moved from Berlin to Munich) and opens what replaced them, follows
where ann lives over time, reads her profile (Munich now, Berlin before the move), reads bo's
projects (a task in atlas across two sessions, open), opens a report and sees its chart; HTML in a memory shows as
text; a wrong key, and a key for other users, say what went wrong. Each step is saved as a screenshot (1280x900) under the test's
temporary directory, and copied to ``MEMSTREAM_SCREENSHOTS_DIR`` when that is set.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from browser import CHROMIUM, CHROMIUM_ARGS, needs_chromium
from harness import wait_for
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st
from playwright.sync_api import Browser, Page, expect, sync_playwright
from serving import serve_settings, serving

from memstream.models.events.chat import SessionClosed, TaskProgress, TaskSet
from memstream.models.events.envelope import Event
from memstream.streams.api.auth import add_key
from memstream.streams.service.chat_events import publish_events

WIDE = {"width": 1280, "height": 900}

pytestmark = needs_chromium("the memory inspector's browser test")
# Assertions wait as long as the page's actions do: a report runs a DuckDB query over the
# table, which took over the 5 s default on a loaded 2-core machine.
expect.set_options(timeout=20_000)

HOSTILE = 'My favourite HTML tag is <img src=x onerror="window.__pwned=1"> and I like <b>bold</b> text.'
FIRST_SESSION = [
    {"role": "user", "content": "I live in Berlin and I work at Siemens as a data engineer."},
    {"role": "assistant", "content": "Nice. How can I help?"},
    {"role": "user", "content": "I prefer window seats on long flights."},
    {"role": "user", "content": HOSTILE},
]


@dataclass
class Inspector:
    root: str
    key: str
    ann_only_key: str
    shots: Path
    browser: Browser
    #: The days (UTC, ISO) ann said Berlin, and Munich.
    said_berlin: str
    said_munich: str
    #: Each page's script errors and refused resources (its Content-Security-Policy's too).
    problems: dict[int, list[str]] = field(default_factory=dict)

    def page(self, viewport: dict[str, int] = WIDE) -> Page:
        """A new page, with its own session storage; what goes wrong in it is kept."""
        page = self.browser.new_context(viewport=viewport).new_page()  # type: ignore[arg-type]
        page.set_default_timeout(20_000)
        problems = self.problems.setdefault(id(page), [])
        page.on("pageerror", lambda error: problems.append(f"script error: {error}"))
        page.on(
            "console",
            lambda message: problems.append(message.text) if message.type == "error" else None,
        )
        return page

    def assert_no_problems(self, page: Page, *allowed: str) -> None:
        """No script error and no refused resource in ``page`` but those naming one of
        ``allowed`` (the 401 a test caused on purpose)."""
        problems = [p for p in self.problems[id(page)] if not any(a in p for a in allowed)]
        assert problems == []

    def open_user(self, page: Page, key: str, user: str = "ann") -> None:
        page.goto(f"{self.root}/inspector/")
        page.get_by_label("API key", exact=True).fill(key)
        page.get_by_role("button", name="Open", exact=True).click()
        page.locator("button.user", has_text=user).click()
        expect(page.get_by_role("heading", name=f"User {user}", exact=True)).to_be_visible()
        expect(page.get_by_text("Loading the memories")).to_be_hidden()

    def screenshot(self, page: Page, name: str, *, full_page: bool = False) -> None:
        path = self.shots / f"{name}.png"
        page.screenshot(path=path, full_page=full_page)
        wanted = os.environ.get("MEMSTREAM_SCREENSHOTS_DIR")
        if wanted:
            Path(wanted).mkdir(parents=True, exist_ok=True)
            shutil.copy(path, Path(wanted) / path.name)


def task_session(user: str, session: str, start: datetime, progress: str) -> list[Event]:
    """A session that sets the task "Migrate billing" in project atlas and moves it on."""
    common = {"user_id": user, "session_id": session}
    return [
        TaskSet(event_id=f"{user}/{session}/task", task="Migrate billing", project="atlas",
                occurred_at=start, **common),
        TaskProgress(event_id=f"{user}/{session}/progress", progress=progress,
                     occurred_at=start + timedelta(minutes=1), **common),
        SessionClosed(event_id=f"{user}/{session}/close",
                      occurred_at=start + timedelta(minutes=2), **common),
    ]


@pytest.fixture(scope="module")
def inspector(
    tmp_path_factory: pytest.TempPathFactory, broker_address: str, broker_kind: str
) -> Iterator[Inspector]:
    """The stack, two sessions of ann three days apart (the second moves her: Berlin is
    superseded), one of bo, and the browser."""
    tmp = tmp_path_factory.mktemp("inspector")
    settings = serve_settings(tmp, broker_address, broker_kind, "insp")
    key = add_key(settings.api_keys_path, "acme")
    ann_only_key = add_key(settings.api_keys_path, "acme", ["ann"])
    shots = tmp / "screenshots"
    shots.mkdir()
    with serving(settings, tmp) as served:
        root = served.root
        now = datetime.now(UTC)
        for user, messages, days_ago in [
            ("ann", FIRST_SESSION, 3), ("ann", "I live in Munich now.", 0),
            ("bo", "I prefer green tea.", 0),
            # Three weeks of bo asking for tea: learned patterns (the Patterns tab).
            ("bo", "Can you recommend a green tea from Japan?", 21),
            ("bo", "Could you find a tea shop that sells green tea?", 14),
            ("bo", "Which green tea would you suggest for the morning?", 7),
        ]:
            made = httpx.post(
                f"{root}/v1/memories",
                headers={"Authorization": f"Bearer {key}"},
                json={
                    "user_id": user, "messages": messages, "wait": True, "timeout_s": 60,
                    "occurred_at": (now - timedelta(days=days_ago)).isoformat(),
                },
                timeout=90,
            )
            assert made.status_code == 200 and made.json()["status"] == "searchable", made.text
        # Bo's task in project atlas (tenant acme's user bo): set two days ago, picked up
        # today and still open.
        events = [
            *task_session("acme:bo", "atlas-1", now - timedelta(days=2), "schema copied"),
            *task_session("acme:bo", "atlas-2", now, "data copied, cutover open"),
        ]
        asyncio.run(publish_events(settings, events))

        def bo_tasks() -> int:
            found = httpx.post(
                f"{root}/v1/memories/projects", headers={"Authorization": f"Bearer {key}"},
                json={"user_id": "bo"}, timeout=30,
            ).json()["projects"]
            return sum(len(project["tasks"]) for project in found)

        wait_for(bo_tasks, "bo's task memories", until=lambda count: count == 3)
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(
                executable_path=str(CHROMIUM), args=CHROMIUM_ARGS
            )
            try:
                yield Inspector(
                    root, key, ann_only_key, shots, browser,
                    said_berlin=(now - timedelta(days=3)).date().isoformat(),
                    said_munich=now.date().isoformat(),
                )
            finally:
                browser.close()


def test_a_users_memories_by_type_and_one_memorys_history(inspector: Inspector) -> None:
    page = inspector.page()
    page.goto(f"{inspector.root}/inspector")  # redirected to /inspector/
    expect(page.get_by_role("heading", name="Enter your API key")).to_be_visible()
    inspector.screenshot(page, "01-key")
    page.get_by_label("API key", exact=True).fill(inspector.key)
    page.get_by_role("button", name="Open", exact=True).click()
    users = page.locator("button.user")
    expect(users).to_have_count(2)
    expect(users.filter(has_text="ann")).to_contain_text("10 active of 11")
    # The key is kept for the tab only, and never in the address.
    assert page.evaluate("sessionStorage.length") == 1 and page.evaluate("localStorage.length") == 0
    users.filter(has_text="ann").click()
    assert inspector.key not in page.url

    groups = page.locator(".type-group")
    expect(groups.locator("h3")).to_have_text(
        ["Preferences 3", "Facts 4", "Episodes 4"]
    )
    facts = groups.filter(has=page.get_by_role("heading", name="Facts"))
    berlin = facts.locator(".memory-card", has_text="User lives in Berlin")
    expect(berlin.locator(".badge-status")).to_have_text("superseded")
    expect(berlin.locator(".badge-tier")).to_have_text("long-term")
    expect(facts.locator(".memory-card", has_text="User lives in Munich").locator(".badge-status")).to_have_text("active")
    expect(page.locator(".stats")).to_contain_text("11 memories")
    inspector.screenshot(page, "02-memories")

    # Filters: the superseded ones only.
    page.get_by_label("Status").select_option("superseded")
    expect(page.locator(".memory-card")).to_have_count(1)
    expect(page.locator(".memory-card")).to_contain_text("User lives in Berlin")

    page.get_by_role("button", name="User lives in Berlin").click()
    detail = page.locator("#memory-detail")
    steps = detail.locator(".timeline > .step")
    expect(steps.locator(".step-label")).to_have_text(["Added", "Superseded"])
    source = steps.nth(0).locator(".source")
    expect(source.locator(".who")).to_have_text("user")
    expect(source.locator(".source-text")).to_have_text(
        "I live in Berlin and I work at Siemens as a data engineer."
    )
    expect(steps.nth(1)).to_contain_text("superseded by")
    inspector.screenshot(page, "03-history")

    # The memory that replaced it, opened from the timeline, tells the other side.
    steps.nth(1).get_by_role("button", name="User lives in Munich").click()
    expect(detail.locator(".detail-text")).to_have_text("User lives in Munich")
    expect(steps.locator(".step-label")).to_have_text(["Added", "Replaced an older memory"])
    inspector.assert_no_problems(page)


def test_a_search_shows_every_part_of_each_score(inspector: Inspector) -> None:
    page = inspector.page()
    inspector.open_user(page, inspector.key)
    page.get_by_role("tab", name="Search").click()
    page.get_by_label("Search this user's memories").fill("where does the user live")
    page.get_by_role("button", name="Search", exact=True).click()
    best = page.locator(".hit").first
    expect(best.locator(".memory-open")).to_have_text("User lives in Munich")
    parts = best.locator(".explain-table tbody tr")
    expect(parts.locator("th")).to_have_text(
        ["relevance", "meaning (similarity)", "words (full text)", "importance", "recency", "use"]
    )
    expect(best.locator("meter")).to_have_count(6)
    # What each weighted part adds makes the score shown.
    score = float(best.locator(".hit-score strong").inner_text())
    adds = [float(text) for text in best.locator("tr.part td:last-child").all_inner_texts()]
    assert abs(sum(adds) - score) <= 0.003, (adds, score)
    expect(best.locator(".explain-text")).to_contain_text(f"{score:.3f} = (")
    inspector.screenshot(page, "04-search")
    inspector.assert_no_problems(page)


def test_a_stale_hit_says_since_when_and_opens_what_replaced_it(inspector: Inspector) -> None:
    page = inspector.page()
    inspector.open_user(page, inspector.key)
    page.get_by_role("tab", name="Search").click()
    page.get_by_label("Search this user's memories").fill("where does the user live in Berlin")
    page.get_by_role("button", name="Search", exact=True).click()
    hits = page.locator(".hit")
    expect(hits.first).to_be_visible()
    # What holds ranks above what it replaced; only what no longer holds is marked.
    expect(hits.first.locator(".memory-open")).to_have_text("User lives in Munich")
    expect(hits.first.locator(".badge-stale")).to_have_count(0)
    stale = page.locator(".hit.is-stale", has_text="I live in Berlin")
    expect(stale.first.locator(".badge-stale")).to_have_text(
        f"stale since {inspector.said_munich}"
    )
    replaced = stale.first.locator(".replaced-by")
    expect(replaced).to_contain_text("replaced by User lives in Munich")
    expect(page.locator(".hit:not(.is-stale) .badge-stale")).to_have_count(0)
    stale.first.scroll_into_view_if_needed()
    inspector.screenshot(page, "04b-stale-hit")
    replaced.get_by_role("button", name="User lives in Munich").click()
    expect(page.locator("#memory-detail .detail-text")).to_have_text("User lives in Munich")
    expect(page.get_by_role("tab", name="Memories")).to_have_attribute("aria-selected", "true")
    inspector.assert_no_problems(page)


def test_the_timeline_follows_where_the_user_lives(inspector: Inspector) -> None:
    page = inspector.page()
    inspector.open_user(page, inspector.key)
    page.get_by_role("tab", name="Timeline").click()
    page.get_by_label("Follow over time").fill("where does the user live")
    page.get_by_role("button", name="Follow", exact=True).click()
    expect(page.locator("#timeline-status")).to_have_text("home of User: 2 values, oldest first.")
    values = page.locator("#timeline-values > .held")
    expect(values.locator(".held-value")).to_have_text(["Berlin", "Munich"])
    expect(values.locator(".interval")).to_have_text([
        f"{inspector.said_berlin} → {inspector.said_munich}", f"{inspector.said_munich} → now",
    ])
    expect(values.first.locator(".badge-status")).to_have_text("superseded")
    expect(values.first.locator(".replaced-by")).to_contain_text("User lives in Munich")
    expect(values.last.locator(".badge-status")).to_have_text("active")
    inspector.screenshot(page, "04c-timeline")
    # A value's statement opens its memory, with the interval it held.
    values.first.get_by_role("button", name="User lives in Berlin").click()
    detail = page.locator("#memory-detail")
    expect(detail.locator(".detail-text")).to_have_text("User lives in Berlin")
    expect(detail.locator(".terms").first).to_contain_text(f"held until{inspector.said_munich}")

    # Nothing matching says so, and an attribute of nobody else's.
    page.get_by_role("tab", name="Timeline").click()
    page.get_by_label("Follow over time").fill("favourite colour of the moon")
    page.get_by_label("Whose").fill("Nobody")
    page.get_by_role("button", name="Follow", exact=True).click()
    expect(page.locator("#timeline-status")).to_contain_text("Nothing this user said matches")
    expect(page.locator("#timeline-values > .held")).to_have_count(0)
    inspector.assert_no_problems(page)


def test_the_profile_says_where_the_user_lives_now_and_before_the_move(
    inspector: Inspector,
) -> None:
    page = inspector.page()
    inspector.open_user(page, inspector.key)
    page.get_by_role("tab", name="Profile").click()
    expect(page.locator("#profile-status")).to_contain_text("hold now.")
    subjects = page.locator("#profile-subjects > .profile-subject")
    expect(subjects.first.locator("h3")).to_have_text("User")
    home = subjects.first.locator(".claim", has=page.locator(".claim-attribute", has_text="home"))
    expect(home.locator(".claim-value")).to_have_text(["Munich"])
    expect(home.locator(".meta").first).to_have_text(f"since {inspector.said_munich}")
    expect(page.locator("#profile-subjects .claim-value", has_text="Berlin")).to_have_count(0)
    inspector.screenshot(page, "04d-profile")
    # A claim opens its memory.
    home.locator(".claim-value").click()
    expect(page.locator("#memory-detail .detail-text")).to_have_text("User lives in Munich")

    # A day and a half ago (in any zone of the browser's clock: between the two sessions),
    # ann still lived in Berlin.
    page.get_by_role("tab", name="Profile").click()
    before = datetime.now(UTC) - timedelta(hours=36)
    page.get_by_label("As of").fill(before.strftime("%Y-%m-%dT%H:%M:%S"))
    page.get_by_role("button", name="Refresh", exact=True).click()
    expect(page.locator("#profile-status")).to_contain_text("hold as of")
    expect(home.locator(".claim-value")).to_have_text(["Berlin"])
    inspector.assert_no_problems(page)


def test_the_patterns_tab_shows_what_the_user_does_again_and_again(
    inspector: Inspector,
) -> None:
    page = inspector.page()
    inspector.open_user(page, inspector.key, "bo")
    page.get_by_role("tab", name="Patterns").click()
    expect(page.locator("#patterns-status")).to_contain_text("patterns learned, now.")
    tea = page.locator("#patterns-list .pattern", has_text="usually asks about tea")
    expect(tea.locator(".claim-value")).to_have_text(["usually asks about tea (3 sessions)"])
    expect(tea.locator(".meta").first).to_have_text("3 of 4 sessions")
    expect(page.locator("#patterns-list [data-kind='weekday'] .claim-value")).to_contain_text(
        ["most sessions on"])
    inspector.screenshot(page, "04e-patterns")
    # A pattern opens its memory; ann (two sessions) has none yet.
    tea.locator(".claim-value").click()
    expect(page.locator("#memory-detail .detail-text")).to_have_text(
        "usually asks about tea (3 sessions)")
    inspector.assert_no_problems(page)
    other = inspector.page()
    inspector.open_user(other, inspector.key, "ann")
    other.get_by_role("tab", name="Patterns").click()
    expect(other.locator("#patterns-status")).to_contain_text("No patterns learned now")
    expect(other.locator("#patterns-list .pattern")).to_have_count(0)
    inspector.assert_no_problems(other)


def test_the_projects_show_a_tasks_sessions_and_what_is_open(inspector: Inspector) -> None:
    page = inspector.page()
    inspector.open_user(page, inspector.key, "bo")
    page.get_by_role("tab", name="Projects").click()
    expect(page.locator("#projects-status")).to_have_text("1 project, 1 open task now.")
    atlas = page.locator("#projects-list > .project")
    expect(atlas.locator("h3")).to_have_text(["atlas"])
    expect(atlas.locator(".tasks-open .task-progress")).to_have_text(["data copied, cutover open"])
    expect(atlas.locator(".tasks-all .badge-task")).to_have_text(["started", "open", "open"])
    expect(atlas.locator(".tasks-all .task .meta", has_text="session")).to_have_text(
        ["session atlas-1", "session atlas-1", "session atlas-2"]
    )
    inspector.screenshot(page, "04e-projects")
    # A task opens its memory.
    atlas.locator(".tasks-open .task-name").click()
    expect(page.locator("#memory-detail .detail-text")).to_have_text(
        "Project atlas: Migrate billing (open): data copied, cutover open"
    )
    # A day ago (in any zone of the browser's clock: between the two sessions), the schema
    # copy was the open item.
    page.get_by_role("tab", name="Projects").click()
    before = datetime.now(UTC) - timedelta(hours=24)
    page.get_by_label("At time").fill(before.strftime("%Y-%m-%dT%H:%M:%S"))
    page.get_by_role("button", name="Show", exact=True).click()
    expect(page.locator("#projects-status")).to_contain_text("open task as of")
    expect(atlas.locator(".tasks-open .task-progress")).to_have_text(["schema copied"])
    inspector.assert_no_problems(page)


def test_a_report_shows_its_rows_and_its_chart(inspector: Inspector) -> None:
    page = inspector.page()
    inspector.open_user(page, inspector.key)
    page.get_by_role("tab", name="Reports").click()
    expect(page.get_by_label("Report", exact=True)).to_have_value("growth")
    page.get_by_role("button", name="Show").click()
    table = page.locator("table.rows")
    expect(table.locator("thead th")).to_contain_text(["user_id", "day", "added", "total"])
    # Two days of ann's memories: 9 on the first (her job a fact of its own), 2 on the
    # second, 11 in all.
    expect(table.locator("tbody tr")).to_have_count(2)
    expect(table.locator("tbody tr").last.locator("td")).to_contain_text(["ann", "2", "11"])
    chart = page.get_by_role("img", name="Chart of the growth report for user ann")
    expect(chart).to_be_visible()
    page.wait_for_function("document.querySelector('.chart-image').naturalWidth > 0")
    inspector.screenshot(page, "05-report")
    inspector.assert_no_problems(page)


def test_html_in_a_memory_shows_as_text(inspector: Inspector) -> None:
    page = inspector.page()
    inspector.open_user(page, inspector.key)
    stated = "User's favourite HTML tag is <img src=x onerror=\"window.__pwned=1\">"
    card = page.locator(".memory-card", has_text=stated)
    expect(card.locator(".memory-open")).to_have_text(stated)
    card.locator(".memory-open").click()
    expect(page.locator("#memory-detail .detail-text")).to_have_text(stated)
    expect(page.locator("#memory-detail .source-text")).to_have_text(HOSTILE)
    inspector.screenshot(page, "06-html-as-text")
    assert page.locator("main img, main b, main script").count() == 0
    assert page.evaluate("window.__pwned") is None
    inspector.assert_no_problems(page)


# Markup, attributes that run code, and text, mixed: generated, not listed.
_TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=12)
_ELEMENT = st.builds(
    "<{0} {1}={2}>{3}</{0}>".format,
    st.sampled_from(["img", "script", "b", "svg", "iframe", "a", "style", "template", "math"]),
    st.sampled_from(["src", "onerror", "onload", "href", "style", "srcdoc"]),
    _TEXT.map(json.dumps),
    _TEXT,
)
HOSTILE_TEXT = st.lists(
    st.one_of(_ELEMENT, _TEXT, st.sampled_from(["<!--", "-->", "]]>", "&lt;", "&amp;", "<", ">", '"'])),
    min_size=1, max_size=6,
).map("".join).filter(bool)

#: Renders one text in every place the page shows API text (memory, history, source message,
#: search hit, stale hit, a timeline's value, a profile's claim, report cell), with the page's
#: own modules; says
#: which elements each made.
RENDER = """async (text) => {
  const load = (name) => import(new URL(name, document.baseURI).href);
  const [m, s, r, p, j] = await Promise.all(
    ["memories.js", "search.js", "reports.js", "patterns.js", "projects.js"].map(load));
  const at = "2026-11-02T09:00:00+00:00";
  const claim = {subject: text, attribute: text, value: text, polarity: true, valid_from: at};
  const memory = {memory_id: text, memory: text, type: "fact", tier: "short_term", status: "active",
    importance: 0.5, created_at: at, session_id: text, entities: [text], reinforcement_count: 1,
    access_count: 0, superseded_by: text, source_event_ids: ["e1"], claim, valid_until: at};
  const history = {results: [{event_id: "h1", type: "memory_added", occurred_at: at, memory_id: text,
      source_event_ids: ["e1"], details: {content: text, memory_type: "fact", reason: text}}],
    sources: [{event_id: "e1", type: "message_added", occurred_at: at, session_id: text,
      role: "user", name: text, content: text}]};
  const hit = {memory_id: text, memory: text, type: "fact", score: 0.5, created_at: at,
    explain: {relevance: 0.5, similarity: 0.5, words: 0.5, importance: 0.5, recency: 0.5, use: 0,
      weights: {relevance: 1, importance: 0.02, recency: 0.01, use: 0.01}, text}};
  const stale = {...hit, stale: true, superseded_by: text, valid_until: at, claim};
  const value = {memory_id: text, value: text, polarity: false, statement: text, valid_from: at,
    valid_until: at, status: "superseded", superseded_by: text, turns: [text]};
  const answer = {about: text, subject: text, attribute: text, entries: [value]};
  const held = {attribute: text, value: text, polarity: false, statement: text, valid_from: at,
    memory_id: text, turns: [text]};
  const profile = {subject: text, as_of: at,
    subjects: [{subject: text, kinds: [{kind: text, entries: [held]}]}]};
  const state = {task: text, status: text, progress: text, percent: 40, at, session_id: text,
    memory_id: text, current: true};
  const projects = {project: text, as_of: at, projects: [{project: text, first_at: at,
    last_at: at, sessions: [text], tasks: [state], open: [state],
    decided: [{statement: text, type: "episode", at, session_id: text, memory_id: text}]}]};
  const nodes = [m.memoryCard(memory), m.memoryDetail(memory, history), s.searchHit(hit),
    s.searchHit(stale), m.timelineValue(value), r.rowsTable(text, [text], [{[text]: text}]),
    Object.assign(document.createElement("p"), {textContent: m.timelineSummary(answer)}),
    ...m.profileSubjects(profile),
    ...p.patternList({as_of: at, patterns: [{memory_id: text, pattern: text, kind: text,
      content: text, session_count: 3, sessions_seen: 4, sessions: [text], event_ids: [text],
      importance: 0.5, decay: 0.5, learned_at: at}]}),
    Object.assign(document.createElement("p"),
      {textContent: m.profileSummary({...profile, subjects: []})}),
    ...j.projectsList(projects),
    Object.assign(document.createElement("p"),
      {textContent: j.projectsSummary({...projects, projects: []})})];
  return nodes.map((node) => ({
    tags: [...node.querySelectorAll("*")].map((e) => e.tagName),
    text: node.textContent,
  }));
}"""


def test_hostile_text_never_becomes_markup(inspector: Inspector) -> None:
    page = inspector.page()
    page.goto(f"{inspector.root}/inspector/")
    plain: list[dict[str, Any]] = page.evaluate(RENDER, "plain words")

    @hypothesis_settings(
        max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow]
    )
    @given(HOSTILE_TEXT)
    def renders_as_text(text: str) -> None:
        rendered = page.evaluate(RENDER, text)
        for made, expected in zip(rendered, plain, strict=True):
            assert made["tags"] == expected["tags"]
            assert text in made["text"]

    renders_as_text()
    assert page.evaluate("window.__pwned") is None
    inspector.assert_no_problems(page)


def test_a_wrong_key_and_a_user_the_key_may_not_read_say_what_to_do(inspector: Inspector) -> None:
    page = inspector.page()
    page.goto(f"{inspector.root}/inspector/")
    page.get_by_label("API key", exact=True).fill("msk_not-a-key-of-this-server")
    page.get_by_role("button", name="Open", exact=True).click()
    alert = page.get_by_role("alert")
    expect(alert).to_contain_text("The API key was not accepted (401)")
    expect(alert).to_contain_text("Enter the key again")
    # Asked again, and the wrong key is not kept.
    expect(page.get_by_label("API key", exact=True)).to_be_visible()
    assert page.evaluate("sessionStorage.length") == 0
    inspector.screenshot(page, "07-wrong-key")

    page.get_by_label("API key", exact=True).fill(inspector.ann_only_key)
    page.get_by_role("button", name="Open", exact=True).click()
    expect(alert).to_be_hidden()
    # A key for ann alone lists ann alone.
    expect(page.locator("button.user .user-id")).to_have_text(["ann"])
    page.get_by_label("User id").fill("bo")
    page.get_by_role("button", name="Open", exact=True).click()
    expect(alert).to_contain_text("This key may not read user “bo” (403)")
    inspector.screenshot(page, "08-other-user")
    inspector.assert_no_problems(page, "401", "403")


def test_a_service_not_ready_says_so_and_retry_loads(inspector: Inspector) -> None:
    page = inspector.page()
    # The server's 503 is stood in for here: a real one needs the memory table unreachable.
    page.route(
        "**/v1/memories?*",
        lambda route: route.fulfill(
            status=503, json={"detail": "the memory table does not open"}
        ),
    )
    inspector.open_user(page, inspector.key)
    alert = page.get_by_role("alert")
    expect(alert).to_contain_text("The service is not ready (503)")
    expect(alert).to_contain_text("retry in a moment")
    page.unroute("**/v1/memories?*")
    page.get_by_role("button", name="Retry").click()
    expect(alert).to_be_hidden()
    expect(page.locator(".memory-card")).to_have_count(11)
    inspector.assert_no_problems(page, "503")


def test_a_narrow_screen_shows_everything_in_one_column(inspector: Inspector) -> None:
    page = inspector.page({"width": 390, "height": 844})
    inspector.open_user(page, inspector.key)
    inspector.screenshot(page, "09-narrow-list")
    page.get_by_role("button", name="User lives in Berlin").click()
    expect(page.locator("#memory-detail .step-label")).to_have_text(["Added", "Superseded"])
    # The memory opened is scrolled to: below the list, on a narrow screen.
    expect(page.locator("#memory-detail")).to_be_in_viewport()
    # Nothing wider than the screen: no sideways scrolling.
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    inspector.screenshot(page, "10-narrow-history")
    inspector.assert_no_problems(page)
