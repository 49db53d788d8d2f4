"""The explorer in a real browser (Debian's chromium) against a live ``engram serve``: drill down,
filter, search in every mode, open an item, ask and follow a citation, forget and undo, a scoped
key, a wrong key, a phone's width, accessibility (axe-core) and layout shift, and the API docs
offline. Every step leaves a screenshot in ``artifacts/ui/``."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import Browser, Page, expect

from tests.support.live import LiveServer, fingerprint, live_server
from tests.support.scratch import scratch
from tests.ui import corpus

pytestmark = pytest.mark.slow

ADMIN = "ui-admin-key"
DESKTOP = {"width": 1280, "height": 860}
PHONE = {"width": 360, "height": 740}
# Before any script of the page: every layout shift not caused by input, kept for the test to read.
SHIFTS = """
window.__shifts = [];
new PerformanceObserver((list) => {
  for (const entry of list.getEntries()) {
    if (!entry.hadRecentInput) window.__shifts.push({
      value: entry.value,
      sources: (entry.sources || []).map((s) => s.node ? `${s.node.nodeName}#${s.node.id}.${s.node.className}` : "?"),
    });
  }
}).observe({type: "layout-shift", buffered: true});
"""


@dataclass
class Service:
    server: LiveServer
    ids: dict[str, str] = field(default_factory=dict)  # an item's first words -> its id


@pytest.fixture(scope="module")
def service() -> Iterator[Service]:
    with (
        scratch("ui") as tmp,
        live_server(tmp, api_key=ADMIN, env={"ENGRAM_EMBEDDER": "wordllama"}) as server,
        httpx.Client(base_url=server.base_url, headers=server.headers(), timeout=60) as client,
    ):
        stored = client.post("/v1/store_many", json={"items": corpus.ITEMS})
        assert stored.status_code == 200, stored.text
        ids = [receipt["id"] for receipt in stored.json()["receipts"]]
        assert ids == [fingerprint(item) for item in corpus.ITEMS]
        # engram serve says where the explorer is.
        assert f"engram: explorer at {server.base_url}/ui" in server.logs()
        yield Service(server, {_words(item): id_ for item, id_ in zip(corpus.ITEMS, ids, strict=True)})


def _words(item: dict[str, Any]) -> str:
    text = item.get("text") or item.get("title") or item["turns"][0]["text"]
    return " ".join(str(text).split()[:3])


@dataclass
class Explorer:
    """One browser tab on /ui, with the checks every step shares."""

    page: Page
    base_url: str
    shots: Path
    width: int
    problems: list[str] = field(default_factory=list)

    def open(self, key: str | None = None) -> None:
        self.page.goto(f"{self.base_url}/ui")
        if key is not None:
            self.wait()  # the page asks for a key first
            self.use_key(key)
        self.wait()

    def wait(self) -> None:
        """Until every call of the last change has answered (or one failed)."""
        self.page.wait_for_function("() => ['ready', 'problem'].includes(document.body.dataset.state)")

    def use_key(self, key: str) -> None:
        self.page.get_by_role("button", name=re.compile("API key")).first.click()
        dialog = self.page.locator("#key-dialog")
        expect(dialog).to_be_visible()
        dialog.get_by_label("Key").fill(key)
        dialog.get_by_role("button", name="Use this key").click()
        self.wait()

    def shot(self, name: str) -> None:
        self.page.screenshot(path=self.shots / f"{name}-{self.width}.png", full_page=False)

    def count(self) -> str:
        return self.page.locator("#results-count").inner_text()

    def namespace(self, name: str) -> Any:
        """The tree's button that picks ``name`` (its accessible name is the label and the count)."""
        label = re.compile(rf"^{re.escape(name)} [\d,]+$")
        return self.page.locator("#facet-namespace").get_by_role("button", name=label)

    def axe(self, source: str, what: str) -> None:
        """axe-core over the page as it is now: no serious or critical violation."""
        self.page.evaluate(source)
        result = self.page.evaluate("async () => await axe.run(document, {resultTypes: ['violations']})")
        bad = [v for v in result["violations"] if v["impact"] in {"serious", "critical"}]
        assert not bad, f"{what}: " + "; ".join(
            f"{v['id']} ({v['impact']}): {[n['target'] for n in v['nodes']][:5]}" for v in bad
        )

    def layout_shift(self) -> float:
        shifts = self.page.evaluate("() => window.__shifts")
        return sum(s["value"] for s in shifts)


@pytest.fixture
def explorer(browser: Browser, service: Service, artifacts: Path, request: pytest.FixtureRequest) -> Iterator[Explorer]:
    viewport = dict(getattr(request, "param", DESKTOP))
    context = browser.new_context(viewport=viewport, color_scheme=viewport.pop("color_scheme", "light"))
    context.add_init_script(SHIFTS)
    page = context.new_page()
    tab = Explorer(page, service.server.base_url, artifacts, viewport["width"])
    # A script error, or a refusal by the page's Content-Security-Policy, is a console error.
    page.on("console", lambda m: tab.problems.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: tab.problems.append(str(e)))
    yield tab
    context.close()
    # Refused calls (401, 403) are logged by the browser itself: the page shows them, they are expected.
    assert not [p for p in tab.problems if "the server responded with a status of 40" not in p], tab.problems


def test_without_a_key_the_page_asks_for_one_and_a_wrong_key_is_said_so(explorer: Explorer, axe_source: str) -> None:
    explorer.open()
    notice = explorer.page.get_by_role("alert")
    expect(notice).to_contain_text("This service needs an API key")
    expect(explorer.page.locator("#facets-wait")).to_have_text("Enter an API key to see what it reaches.")
    explorer.shot("01-key-needed")
    explorer.axe(axe_source, "the page asking for a key")
    explorer.use_key("not-a-key")
    expect(notice).to_contain_text("The API key was refused")
    expect(notice).to_contain_text("unauthorized")
    explorer.shot("02-wrong-key")
    # The key lives in this tab's sessionStorage, never in the address.
    assert explorer.page.evaluate("() => sessionStorage.getItem('engram.apiKey')") == "not-a-key"
    assert "not-a-key" not in explorer.page.url


def test_drill_down_filter_and_the_histogram(explorer: Explorer, axe_source: str) -> None:
    calls: list[dict[str, Any]] = []

    def record(request: Any) -> None:
        if "/v1/" in request.url:
            calls.append({"route": request.url.rsplit("/", 1)[1], **request.post_data_json})

    explorer.page.on("request", record)
    explorer.open(ADMIN)
    # The page's first read with the key: one list page and one explore per facet (explore counts
    # one facet a call), then the histogram: the years, and the months of their span (2023-2025).
    read = [c.get("facet", c["route"]) for c in calls[-7:]]
    assert sorted(read[:5]) == ["kind", "list", "namespace", "source", "tag"], read
    assert read[5:] == ["observed_year", "observed_month"], read
    expect(explorer.namespace("All namespaces")).to_contain_text(str(corpus.TOTAL))
    expect(explorer.page.locator("#results-count")).to_have_text(f"{corpus.TOTAL} items")
    explorer.shot("03-start")
    explorer.axe(axe_source, "the first page")
    assert explorer.layout_shift() < 0.01, explorer.page.evaluate("() => window.__shifts")

    explorer.page.get_by_role("button", name="Expand team:acme").click()
    expect(explorer.namespace("team:acme")).to_contain_text(str(corpus.ACME))
    explorer.namespace("agent:writer").click()
    explorer.wait()
    expect(explorer.page.locator("#chips")).to_contain_text("team:acme/agent:writer")
    expect(explorer.page.locator("#results-count")).to_have_text(f"{corpus.WRITER_COUNT} items")
    expect(explorer.page.locator("#results .hit")).to_have_count(corpus.WRITER_COUNT)
    explorer.shot("04-namespace")

    explorer.page.get_by_role("button", name="Remove filter namespace").click()
    explorer.wait()
    explorer.page.locator("#facet-tag").get_by_role("button", name="deploy").click()
    explorer.wait()
    expect(explorer.page.locator("#chips")).to_contain_text("deploy")
    expect(explorer.page.locator("#results-count")).to_have_text(f"{corpus.DEPLOY_TAG} items")
    explorer.shot("05-tag")

    # The deploy items were observed in May (two) and June 2024 (one): a bar each, May narrows to two.
    page = explorer.page
    bars = page.locator("#facet-observed button.bar")
    expect(bars).to_have_count(2)
    expect(page.locator("#facet-observed")).to_contain_text(f"{corpus.DEPLOY_TAG} items with observed_at")
    may = page.get_by_role("button", name=re.compile(r"^May 2024: 2 items"))
    may.click()
    explorer.wait()
    chips = page.locator("#chips")
    expect(chips.locator(".chip-observed")).to_contain_text("May 2024")
    expect(page.locator("#results-count")).to_have_text("2 items")
    expect(page.locator("#facet-observed")).to_contain_text("2 items with observed_at")
    explorer.shot("06-observed")
    # The histogram now draws May in days: the 10th and the 11th. A bar is picked with the keyboard,
    # the focus going on to the finer bars drawn in its place; the chip says which day.
    expect(bars).to_have_count(2)
    tenth = page.get_by_role("button", name=re.compile(r"^10 May 2024: 1 item"))
    tenth.focus()
    page.keyboard.press("Enter")
    explorer.wait()
    expect(chips.locator(".chip-observed")).to_contain_text("10 May 2024")
    expect(chips.locator(".chip-observed")).to_have_count(1)  # the day replaces the month
    expect(page.locator("#results-count")).to_have_text("1 item")
    expect(page.locator("#results .hit")).to_have_count(1)
    expect(page.locator("#results .hit").first).to_contain_text("the deploy window is friday afternoon")
    expect(page.locator("#facet-observed button.bar")).to_have_count(1)  # the one hour holding it
    expect(page.locator("#facet-observed")).to_contain_text("10 May 2024 15:00 UTC")
    assert page.evaluate("() => document.activeElement.getAttribute('aria-label')").startswith("10 May 2024 15:00")
    explorer.shot("06b-observed-day")
    explorer.axe(axe_source, "the histogram narrowed to a day")
    assert explorer.layout_shift() < 0.01, page.evaluate("() => window.__shifts")
    # Its chip removes the time range alone: the tag stays, and so do its three items and two bars.
    page.get_by_role("button", name="Remove filter observed 10 May 2024").click()
    explorer.wait()
    expect(chips.locator(".chip-observed")).to_have_count(0)
    expect(chips).to_contain_text("deploy")
    expect(page.locator("#results-count")).to_have_text(f"{corpus.DEPLOY_TAG} items")
    expect(bars).to_have_count(2)
    page.get_by_role("button", name="Clear all").click()
    explorer.wait()
    expect(page.locator("#results-count")).to_have_text(f"{corpus.TOTAL} items")


def test_search_in_every_mode_open_an_item_and_ask(explorer: Explorer, service: Service, axe_source: str) -> None:
    explorer.open(ADMIN)
    searches = [
        ("Keyword", "queue worker", "Runbook"),
        ("Vector", "restarting the worker process", "Runbook"),
        ("Hybrid", "deploy window", "the deploy window is friday afternoon"),
    ]
    for mode, query, first in searches:
        explorer.page.get_by_role("radio", name=mode).check()
        explorer.page.get_by_role("searchbox", name="Search or ask").fill(query)
        explorer.page.get_by_role("button", name="Search", exact=True).click()
        explorer.wait()
        hits = explorer.page.locator("#results .hit")
        expect(hits.first).to_contain_text(first)
        expect(hits.first.locator("mark").first).to_be_visible()  # the query's words, marked
        expect(hits.first.locator(".score")).to_have_text(re.compile(r"^\d\.\d{3}$"))
        expect(explorer.page.locator("#results-count")).to_have_text(f"{mode.lower()} · best first")
        explorer.shot(f"07-search-{mode.lower()}")
        assert explorer.layout_shift() < 0.01, explorer.page.evaluate("() => window.__shifts")

    explorer.page.locator("#results .hit-open").first.click()
    dialog = explorer.page.locator("#item-dialog")
    expect(dialog).to_be_visible()
    deploy_window = service.ids["the deploy window"]
    expect(dialog.locator(".item-id")).to_have_text(deploy_window)
    expect(dialog).to_contain_text("fingerprint")
    expect(dialog).to_contain_text("team:acme/agent:deployer")
    expect(dialog).to_contain_text("2024-05-10 15:00 UTC")
    # When the service stored it, as get answers it, to the second.
    with httpx.Client(base_url=service.server.base_url, headers=service.server.headers(), timeout=30) as client:
        (got,) = client.post("/v1/get", json={"ids": [deploy_window]}).json()["hits"]
    stored = dialog.locator("time.item-stored")
    expect(stored).to_have_attribute("datetime", got["stored_at"])
    expect(stored).to_have_text(f"{got['stored_at'][:10]} {got['stored_at'][11:19]} UTC")
    expect(dialog.locator("dt", has_text="Stored")).to_be_visible()
    explorer.shot("08-item")
    explorer.axe(axe_source, "the item view")
    explorer.page.keyboard.press("Escape")
    expect(dialog).to_be_hidden()

    explorer.page.get_by_role("searchbox", name="Search or ask").fill("when is the deploy window?")
    explorer.page.get_by_role("button", name="Ask").click()
    answer = explorer.page.locator("#answer")
    expect(answer.locator(".answer-text")).to_contain_text("friday afternoon")
    explorer.shot("09-ask")
    explorer.axe(axe_source, "an answer")
    answer.get_by_role("button", name="Open source 1").click()
    expect(dialog.locator(".item-id")).to_have_text(deploy_window)
    explorer.shot("10-citation")
    explorer.page.keyboard.press("Escape")

    # An item's text that holds markup is shown as text, and runs nothing.
    explorer.page.get_by_role("radio", name="Keyword").check()
    explorer.page.get_by_role("searchbox", name="Search or ask").fill("markup sample")
    explorer.page.get_by_role("button", name="Search", exact=True).click()
    explorer.wait()
    expect(explorer.page.locator("#results .hit").first).to_contain_text('<img src=x onerror="document.title')
    assert explorer.page.locator("#results img").count() == 0
    assert explorer.page.title() == "Engram explorer"


def test_forget_two_then_undo_and_forget_a_filter(explorer: Explorer, service: Service) -> None:
    explorer.open(ADMIN)
    rows = explorer.page.locator("#results .hit")
    first_two = [rows.nth(i).locator(".hit-open").get_attribute("data-id") for i in range(2)]
    for i in range(2):
        rows.nth(i).get_by_role("checkbox").check()
    expect(explorer.page.locator("#selection-count")).to_have_text("2 selected")
    explorer.page.get_by_role("button", name="Forget selected…").click()
    confirm = explorer.page.locator("#confirm-dialog")
    expect(confirm).to_contain_text("Forget 2 items?")
    expect(confirm.get_by_role("button", name="Cancel")).to_be_focused()  # the safe choice has the focus
    explorer.shot("11-forget-confirm")
    confirm.get_by_role("button", name="Forget 2 items").click()
    toast = explorer.page.get_by_role("status")
    expect(toast).to_contain_text("Forgot 2 items.")
    explorer.wait()
    left = corpus.TOTAL - 2
    expect(explorer.page.locator("#results-count")).to_have_text(f"{left} items")
    expect(explorer.namespace("All namespaces")).to_contain_text(str(left))
    shown = explorer.page.locator("#results .hit-open").evaluate_all("(all) => all.map((b) => b.dataset.id)")
    assert not set(first_two) & set(shown)
    explorer.shot("12-forgotten")

    toast.get_by_role("button", name="Undo").click()
    expect(toast).to_contain_text("Restored 2 items.")
    explorer.wait()
    expect(explorer.page.locator("#results-count")).to_have_text(f"{corpus.TOTAL} items")

    explorer.page.locator("#facet-tag").get_by_role("button", name="food").click()
    explorer.wait()
    explorer.page.get_by_role("button", name="Forget all matching…").click()
    expect(confirm).to_contain_text("Forget 2 items?")
    expect(confirm).to_contain_text("tag: food")
    confirm.get_by_role("button", name="Forget 2 items").click()
    expect(toast).to_contain_text("Forgot 2 items.")
    explorer.wait()
    expect(explorer.page.locator("#results-count")).to_have_text("0 items")
    explorer.shot("13-forgot-filter")
    toast.get_by_role("button", name="Undo").click()
    expect(toast).to_contain_text("Restored 2 items.")
    explorer.wait()
    expect(explorer.page.locator("#results-count")).to_have_text("2 items")


def test_a_scoped_key_sees_only_its_subtree(explorer: Explorer, service: Service) -> None:
    with httpx.Client(base_url=service.server.base_url, headers=service.server.headers(), timeout=30) as client:
        made = client.post(
            "/v1/keys",
            json={
                "name": "acme reader",
                "role": "read",
                "reach": {"at": "team:acme", "inherit": False, "descendants": True},
            },
        )
        assert made.status_code == 201, made.text
    secret = made.json()["secret"]
    service.server.secrets.append(secret)
    explorer.open(secret)
    expect(explorer.namespace("All namespaces")).to_contain_text(str(corpus.ACME))
    expect(explorer.page.locator("#results-count")).to_have_text(f"{corpus.ACME} items")
    assert explorer.namespace("team:globex").count() == 0
    assert explorer.namespace("root itself").count() == 0
    expect(explorer.page.locator("#results")).not_to_contain_text("globex")
    expect(explorer.page.locator("#facet-observed")).to_contain_text(f"{corpus.ACME} items with observed_at")
    explorer.shot("14-scoped-key")

    # A read key may not forget: the page says so rather than failing silently.
    explorer.page.locator("#results .hit").first.get_by_role("checkbox").check()
    explorer.page.get_by_role("button", name="Forget selected…").click()
    expect(explorer.page.get_by_role("alert")).to_contain_text("This key may not do that")
    explorer.shot("15-scoped-key-forbidden")

    # Another key in the same tab: nothing the first one counted is shown for it.
    explorer.use_key(ADMIN)
    expect(explorer.namespace("All namespaces")).to_contain_text(str(corpus.TOTAL))
    expect(explorer.page.locator("#facet-observed")).to_contain_text(f"{corpus.OBSERVED} items with observed_at")


def test_a_tree_too_large_for_one_call_loads_as_it_opens(explorer: Explorer, service: Service) -> None:
    """Explore answers at most 500 namespaces a call: the rest of a subtree is asked for when it opens."""
    many = [
        {"type": "learning", "text": f"note {i}", "kind": "fact", "confidence": 0.5,
         "meta": {"namespace": f"ws:many/project:p{i % 6}/agent:a{i}"}}
        for i in range(600)
    ]  # fmt: skip
    with httpx.Client(base_url=service.server.base_url, headers=service.server.headers(), timeout=60) as client:
        for start in range(0, len(many), 100):
            assert client.post("/v1/store_many", json={"items": many[start : start + 100]}).status_code == 200
        try:
            explorer.open(ADMIN)
            page = explorer.page
            expect(explorer.namespace("All namespaces")).to_contain_text(str(corpus.TOTAL + 600))
            expect(page.locator("#facet-namespace")).to_contain_text("The largest namespaces are shown")
            page.get_by_role("button", name="Expand ws:many", exact=True).click()
            page.get_by_role("button", name="Expand ws:many/project:p3", exact=True).click()
            expect(explorer.namespace("project:p3")).to_contain_text("100")
            expect(explorer.namespace("agent:a597")).to_be_visible()
            # That subtree came whole: its leaves have nothing more to open.
            assert page.get_by_role("button", name="Expand ws:many/project:p3/agent:a597").count() == 0
            explorer.shot("16-many-namespaces")
            # A filter change reads the tree again, and the open subtree with it.
            page.locator("#facet-kind").get_by_role("button", name="learning").click()
            explorer.wait()
            expect(explorer.namespace("agent:a597")).to_be_visible()

            # Paging through list cursors: Next, and Previous back to the very same page.
            first_page = page.locator("#results .hit-open").evaluate_all("(all) => all.map((b) => b.dataset.id)")
            page.get_by_role("button", name="Next ›").click()
            explorer.wait()
            expect(page.locator("#pager")).to_contain_text("Page 2")
            second_page = page.locator("#results .hit-open").evaluate_all("(all) => all.map((b) => b.dataset.id)")
            assert len(second_page) == 20 and not set(first_page) & set(second_page)
            expect(page.get_by_role("button", name="Next ›")).to_be_focused()  # the focus stays on the pager
            page.get_by_role("button", name="‹ Previous").click()
            explorer.wait()
            again = page.locator("#results .hit-open").evaluate_all("(all) => all.map((b) => b.dataset.id)")
            assert again == first_page
        finally:
            gone = client.post(
                "/v1/forget",
                json={"filter": {"reach": {"at": "ws:many", "inherit": False, "descendants": True}}, "purge": True},
            )
            assert gone.json()["forgotten"] == 600, gone.text


@pytest.mark.parametrize("explorer", [PHONE], indirect=True)
def test_at_a_phone_width(explorer: Explorer, axe_source: str) -> None:
    explorer.open(ADMIN)
    page = explorer.page
    assert page.evaluate("() => document.documentElement.scrollWidth") <= PHONE["width"]
    assert explorer.layout_shift() < 0.01, page.evaluate("() => window.__shifts")
    explorer.shot("17-phone")
    explorer.axe(axe_source, "the page at 360 px")
    page.get_by_role("button", name="Filters").click()
    page.locator("#facet-kind").get_by_role("button", name="conversation").click()
    explorer.wait()
    expect(page.locator("#results-count")).to_have_text("2 items")
    explorer.shot("18-phone-filters")
    # A bar of the histogram narrows here too, and its chip fits the width.
    page.get_by_role("button", name=re.compile(r"^Jan 2025: 1 item")).click()
    explorer.wait()
    expect(page.locator("#chips .chip-observed")).to_contain_text("Jan 2025")
    expect(page.locator("#results-count")).to_have_text("1 item")
    assert page.evaluate("() => document.documentElement.scrollWidth") <= PHONE["width"]
    explorer.shot("18b-phone-observed")
    page.get_by_role("button", name="Remove filter observed Jan 2025").click()
    explorer.wait()
    expect(page.locator("#results-count")).to_have_text("2 items")
    page.locator("#results .hit-open").first.click()
    dialog = page.locator("#item-dialog")
    expect(dialog.locator(".turn-role").first).to_have_text("user")
    assert page.evaluate("() => document.documentElement.scrollWidth") <= PHONE["width"]
    explorer.shot("19-phone-item")
    explorer.axe(axe_source, "the item view at 360 px")


@pytest.mark.parametrize("explorer", [{**DESKTOP, "color_scheme": "dark"}], indirect=True)
def test_in_a_dark_colour_scheme(explorer: Explorer, axe_source: str) -> None:
    explorer.open(ADMIN)
    explorer.page.get_by_role("searchbox", name="Search or ask").fill("deploy window")
    explorer.page.get_by_role("button", name="Search", exact=True).click()
    explorer.wait()
    explorer.shot("20-dark")
    explorer.axe(axe_source, "the dark palette")
    explorer.page.locator("#results .hit-open").first.click()
    explorer.shot("21-dark-item")
    explorer.axe(axe_source, "the item view, dark")


def test_keyboard_alone_reaches_search_and_an_item(explorer: Explorer) -> None:
    explorer.open(ADMIN)
    page = explorer.page
    page.keyboard.press("/")
    expect(page.get_by_role("searchbox", name="Search or ask")).to_be_focused()
    page.keyboard.type("tea")
    page.keyboard.press("Enter")
    explorer.wait()
    expect(page.locator("#results .hit").first).to_contain_text("alice prefers tea")
    for _ in range(40):  # Tab on until the first hit has the focus
        page.keyboard.press("Tab")
        if page.evaluate("() => document.activeElement.classList.contains('hit-open')"):
            break
    page.keyboard.press("Enter")
    expect(page.locator("#item-dialog")).to_be_visible()
    expect(page.get_by_role("button", name="Close")).to_be_focused()
    page.keyboard.press("Escape")
    expect(page.locator("#item-dialog")).to_be_hidden()

    # Picking a facet value with the keyboard keeps the focus on it once the page is read again.
    page.locator("#facet-tag").get_by_role("button", name="food").focus()
    page.keyboard.press("Enter")
    explorer.wait()
    expect(page.locator("#chips")).to_contain_text("food")
    assert page.evaluate("() => document.activeElement.dataset.key") == "tag:food"
    page.keyboard.press("Enter")
    explorer.wait()
    expect(page.locator("#chips")).not_to_contain_text("food")
    assert page.evaluate("() => document.activeElement.dataset.key") == "tag:food"


@pytest.mark.parametrize("path", ["/docs", "/redoc"])
def test_the_api_docs_work_offline(browser: Browser, service: Service, artifacts: Path, path: str) -> None:
    context = browser.new_context(viewport=DESKTOP, extra_http_headers={"Authorization": f"Bearer {ADMIN}"})
    elsewhere: list[str] = []
    local = re.compile(r"^(https?://127\.0\.0\.1:\d+/|data:|blob:|about:)")

    def only_local(route: Any) -> None:
        if local.match(route.request.url):
            route.continue_()
        else:
            elsewhere.append(route.request.url)
            route.abort()

    context.route("**/*", only_local)
    page = context.new_page()
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(f"{service.server.base_url}{path}")
    if path == "/docs":
        expect(page.locator(".swagger-ui .info .title")).to_contain_text("Engram", timeout=30_000)
        expect(page.locator(".opblock-summary-path").first).to_be_visible()
    else:
        expect(page.locator("h1").first).to_contain_text("Engram", timeout=30_000)
    page.screenshot(path=artifacts / f"22-api{path.replace('/', '-')}.png")
    context.close()
    assert not elsewhere, elsewhere
    # ReDoc's logo from its CDN is refused by the page's policy before any request; nothing else fails.
    refused = re.compile(r"Loading the image '\S+' violates the following Content Security Policy")
    assert not [e for e in errors if not refused.match(e)], errors
