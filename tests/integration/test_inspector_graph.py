"""The inspector's Graph tab in a real browser (Debian's chromium driven by Playwright) over
``memstream serve`` beside a real worker on the real broker: the graph of the example of
docs/long-term-memory.md (rui's sister Ana, who works at a hostile name, and the move from
Berlin to Porto) drawn as SVG, an entity opened with its facts and relations, the drawing as of
a time before the move, and a name that is HTML shown as text."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import httpx
import pytest
from browser import CHROMIUM, CHROMIUM_ARGS, needs_chromium
from playwright.sync_api import Browser, Page, expect, sync_playwright
from serving import serve_settings, serving

from memstream.streams.api.auth import add_key

pytestmark = needs_chromium("the memory inspector's browser test")

#: A name that is markup: the offline extractor takes it whole as rui's sister's employer.
HOSTILE = "Evil<img/src=x/onerror=__pwned=1>"
SAID = [
    ("rui", "My sister's name is Ana.", 1), ("rui", "I live in Berlin.", 2),
    ("rui", f"My sister Ana works at {HOSTILE}.", 8), ("rui", "I moved to Porto.", 20),
    ("kim", "I live in Oslo.", 3),
]


@dataclass
class Stack:
    root: str
    key: str
    browser: Browser
    shots: Path


@pytest.fixture(scope="module")
def stack(
    tmp_path_factory: pytest.TempPathFactory, broker_address: str, broker_kind: str
) -> Iterator[Stack]:
    """The stack with rui's four sessions and kim's one, and the browser."""
    tmp = tmp_path_factory.mktemp("inspector-graph")
    settings = serve_settings(tmp, broker_address, broker_kind, "inspg")
    key = add_key(settings.api_keys_path, "acme")
    with serving(settings, tmp) as served:
        for user, text, day in SAID:
            made = httpx.post(
                f"{served.root}/v1/memories",
                headers={"Authorization": f"Bearer {key}"},
                json={"user_id": user, "messages": text, "wait": True, "timeout_s": 60,
                      "occurred_at": datetime(2026, 3, day, 9, tzinfo=UTC).isoformat()},
                timeout=90,
            )
            assert made.status_code == 200 and made.json()["status"] == "searchable", made.text
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
            try:
                yield Stack(served.root, key, browser, tmp)
            finally:
                browser.close()


def graph_of(stack: Stack, user: str) -> tuple[Page, list[str]]:
    """A page with ``user``'s Graph tab open; its script errors, kept as they come."""
    page = stack.browser.new_context(viewport={"width": 1280, "height": 900}).new_page()
    page.set_default_timeout(20_000)
    problems: list[str] = []
    page.on("pageerror", lambda error: problems.append(f"script error: {error}"))
    page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
    page.goto(f"{stack.root}/inspector/")
    page.get_by_label("API key", exact=True).fill(stack.key)
    page.get_by_role("button", name="Open", exact=True).click()
    page.locator("button.user", has_text=user).click()
    expect(page.get_by_role("heading", name=f"User {user}", exact=True)).to_be_visible()
    page.get_by_role("tab", name="Graph").click()
    expect(page.locator("#graph-status")).to_contain_text("entities")
    return page, problems


def edge(page: Page, target: str, relation: str) -> dict[str, str | None]:
    """The drawn edge User --relation--> target: whether it is marked ended, and its line's
    dashes as the browser draws them ("none": solid)."""
    found = page.evaluate(
        """([target, relation]) => {
            const edges = [...document.querySelectorAll("#graph-canvas .graph-edge")].filter(
                (e) => e.dataset.source === "User" && e.dataset.target === target
                    && e.dataset.relation === relation);
            return edges.map((e) => ({
                ended: e.dataset.ended,
                dashes: getComputedStyle(e.querySelector(".edge-line")).strokeDasharray,
            }));
        }""",
        [target, relation],
    )
    assert len(found) == 1, found
    return found[0]  # type: ignore[no-any-return]


def test_the_graph_tab_draws_ana_and_the_move_ended_edges_dashed(stack: Stack) -> None:
    page, problems = graph_of(stack, "rui")
    labels = page.locator("#graph-canvas .node-label")
    expect(labels).to_contain_text(["User", "Ana", "Berlin", "Porto"])
    names = labels.all_text_contents()
    assert "Oslo" not in names  # kim's
    assert names.count("Ana") == 1  # "my sister" and "Ana" are one node
    assert edge(page, "Berlin", "home") == {"ended": "true", "dashes": "6px, 4px"}
    assert edge(page, "Porto", "home") == {"ended": "false", "dashes": "none"}
    assert edge(page, "Ana", "sister")["ended"] == "false"
    page.screenshot(path=stack.shots / "graph.png")

    # Picking Ana lists what is known of her, with the memories that say it.
    page.locator("#graph-canvas .graph-node", has_text="Ana").click()
    detail = page.locator("#graph-entity")
    expect(detail.locator("h3")).to_have_text("Ana")
    expect(detail).to_contain_text("User's sister")
    fact = detail.locator(".entity-fact")
    expect(fact.locator(".claim-attribute")).to_have_text(["employer"])
    expect(fact.locator(".claim-value")).to_have_text([HOSTILE])
    relations = detail.locator(".entity-edge .edge-words").all_text_contents()
    assert "User sister Ana" in relations and f"Ana employer {HOSTILE}" in relations
    page.screenshot(path=stack.shots / "graph-entity.png", full_page=True)
    expect(page.locator("#graph-canvas .graph-node.is-selected")).to_have_attribute(
        "data-name", "Ana")
    # Each source is named by its memory's words, and opens it in the Memories tab.
    expect(fact.locator(".entity-sources button")).to_have_text(
        [f"User's sister Ana works at {HOSTILE}"])
    fact.locator(".entity-sources button").first.click()
    expect(page.get_by_role("tab", name="Memories")).to_have_attribute("aria-selected", "true")
    expect(page.locator("#memory-detail .detail-text")).to_contain_text("works at")
    assert problems == []


def test_as_of_a_time_before_the_move_berlin_holds_and_porto_is_not_there(stack: Stack) -> None:
    page, problems = graph_of(stack, "rui")
    page.get_by_label("Graph at").fill("2026-03-10T12:00:00")
    page.locator("#graph-form").get_by_role("button", name="Refresh").click()
    expect(page.locator("#graph-status")).to_contain_text("as of 2026-03-1")
    expect(page.locator("#graph-canvas .node-label")).not_to_contain_text(["Porto"])
    assert edge(page, "Berlin", "home") == {"ended": "false", "dashes": "none"}
    # An entity picked is read at the same time: Berlin was home then, with no end yet.
    page.locator("#graph-canvas .graph-node", has_text="Berlin").click()
    home = page.locator("#graph-entity .entity-edge", has_text="home")
    expect(home.locator(".edge-words")).to_have_text(["User home Berlin"])
    expect(home.locator(".meta")).to_have_text(["since 2026-03-02"])
    assert problems == []


def test_a_name_that_is_html_shows_as_text(stack: Stack) -> None:
    page, problems = graph_of(stack, "rui")
    hostile = page.locator("#graph-canvas .node-label", has_text="Evil<img")
    expect(hostile).to_have_text(HOSTILE)
    # Picked from the keyboard, as a button is.
    page.locator("#graph-canvas .graph-node", has_text="Evil<img").focus()
    page.keyboard.press("Enter")
    expect(page.locator("#graph-entity h3")).to_have_text(HOSTILE)
    assert page.locator("#graph-canvas img, #graph-entity img").count() == 0
    assert page.evaluate("window.__pwned") is None
    assert problems == []


LARGE_GRAPH = """async () => {
    const graph = await import("./graph.js");
    const node = (name, mentions) => ({name, kind: null, aliases: [],
        memory_ids: Array.from({length: mentions}, (_, i) => `m${i}`), turns: [], sessions: []});
    const edge = (source, target, kind) => ({source, target, kind,
        relation: kind === "claim" ? "friend" : "mentioned with",
        valid_from: "2026-03-01T09:00:00+00:00", valid_until: null, holds: true,
        memory_ids: ["m0"], turns: [], sessions: []});
    // The user and 300 entities named 1 to 7 times; a claim to each, co-mentions in a chain
    // and from every entity to the next but one.
    const nodes = [node("User", 1)];
    for (let i = 0; i < 300; i++) nodes.push(node(`E${String(i).padStart(3, "0")}`, (i % 7) + 1));
    const edges = nodes.slice(1).map((n) => edge("User", n.name, "claim"));
    for (let i = 1; i < 299; i++) {
        edges.push(edge(nodes[i].name, nodes[i + 1].name, "co-mention"));
        edges.push(edge(nodes[i].name, nodes[i + 2].name, "co-mention"));
    }
    const answer = {as_of: null, nodes, edges};
    const drawing = graph.graphDrawing(answer);
    const drawn = [...drawing.querySelectorAll(".graph-node")].map((g) => g.dataset.name);
    const fewest = Math.min(...nodes.filter((n) => drawn.includes(n.name) && n.name !== "User")
        .map((n) => n.memory_ids.length));
    const most = Math.max(...nodes.filter((n) => !drawn.includes(n.name))
        .map((n) => n.memory_ids.length));
    return {
        nodes: drawn.length, user: drawn.includes("User"), fewest, most,
        claims: drawing.querySelectorAll(".edge-claim").length,
        coMentions: drawing.querySelectorAll(".edge-co-mention").length,
        summary: graph.graphSummary(answer),
        // As the API answers when its limit cut the graph.
        cut: graph.graphSummary({...answer, total_nodes: 1234, total_edges: 9999, truncated: true}),
    };
}"""


def test_a_large_graph_is_drawn_within_bounds_the_most_named_first(stack: Stack) -> None:
    page, problems = graph_of(stack, "rui")
    drawn = page.evaluate(LARGE_GRAPH)
    assert (drawn["nodes"], drawn["user"], drawn["claims"]) == (60, True, 59)
    assert drawn["fewest"] >= drawn["most"]  # no entity left out is named more than one drawn
    assert 0 < drawn["coMentions"] <= 150
    assert "Drawn: the 60 most named entities" in drawn["summary"]
    assert "Showing" not in drawn["summary"]
    assert drawn["cut"].startswith("Showing 301 of 1,234 entities (the most mentioned) and ")
    assert problems == []
