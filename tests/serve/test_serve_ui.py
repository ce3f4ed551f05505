"""The search page in a real browser: headless Chromium (Debian's ``chromium``) driven by
Playwright's Python package through ``executable_path`` (no browser is downloaded). The test types
a question, picks two strategies, and checks the ranked papers, section badges and score bars
against the search API's own answer; it takes the screenshot the README shows, and writes it to
docs/img/search-page.png when that file is missing or ``SCHOLAR_ES_UPDATE_SCREENSHOT=1`` (so that a
test run does not leave a changed tracked file behind).

Skipped, with the reason printed, where Playwright or a Chromium binary is missing.
"""

from __future__ import annotations

import json
import os
import shutil
import urllib.request
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.browser]

REPO = Path(__file__).resolve().parents[2]
SCREENSHOT = REPO / "docs" / "img" / "search-page.png"
QUESTION = "How is information carried between windows of a long document?"


def _chromium() -> str | None:
    for candidate in (os.environ.get("SCHOLAR_ES_CHROMIUM"), "chromium", "chromium-browser"):
        if candidate and shutil.which(candidate):
            return shutil.which(candidate)
    return None


@pytest.fixture(scope="module")
def browser():
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        reason = "playwright is not installed (pip install -e '.[test]'); browser test skipped"
        print(f"\n[serve-ui] {reason}")
        pytest.skip(reason)
    path = _chromium()
    if path is None:
        reason = (
            "no chromium binary (apt-get install chromium; .ci/run does it as root); browser test skipped"
        )
        print(f"\n[serve-ui] {reason}")
        pytest.skip(reason)
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=path, headless=True)
        yield b
        b.close()


def _api(url: str, body: dict) -> dict:
    req = urllib.request.Request(
        url + "/_scholar/search",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(req, timeout=120) as r:
        return json.load(r)


def test_search_page_shows_what_the_api_answers(served_demo, browser, tmp_path):
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(served_demo.url + "/_scholar/ui")
    page.wait_for_selector("body[data-ready='1']")
    assert page.locator("#strategy-a option").count() >= 5
    page.fill("#question", QUESTION)
    page.select_option("#strategy-a", "sections")
    page.select_option("#strategy-b", "bm25")
    page.fill("#size", "3")
    page.click("#go")
    page.wait_for_selector("body[data-state='done']")
    assert not errors
    columns = page.locator(".column")
    assert columns.count() == 2
    for i, strategy in enumerate(["sections", "bm25"]):
        col = columns.nth(i)
        assert col.get_attribute("data-strategy") == strategy
        answer = _api(
            served_demo.url,
            {"question": QUESTION, "strategy": strategy, "size": 3, "papers": True, "explain": True},
        )
        shown = col.locator(".paper").evaluate_all("els => els.map(e => e.dataset.paperId)")
        assert shown == [p["paper_id"] for p in answer["papers"]]
        chunks = [h for p in answer["papers"] for h in p["chunks"]]
        shown_chunks = col.locator(".chunk").evaluate_all("els => els.map(e => e.dataset.chunkId)")
        assert shown_chunks == [h["chunk_id"] for h in chunks]
        # (the others than each paper's best are behind its "more from this paper" toggle)
        badges = col.locator(".chunk .badge").evaluate_all("els => els.map(e => e.textContent)")
        assert badges == [h["section_type"] for h in chunks]
        # the score bar: one segment per part, carrying the API's numbers, widths in proportion
        segs = col.locator(".chunk").first.locator(".seg")
        values = {s.get_attribute("data-part"): float(s.get_attribute("data-value")) for s in segs.all()}
        bar = chunks[0]["score_bar"]
        assert values == pytest.approx(bar)
        widths = segs.evaluate_all("els => els.map(e => e.getBoundingClientRect().width)")
        total = max(h["score"] for h in chunks)
        bar_width = col.locator(".chunk .bar").first.evaluate("e => e.getBoundingClientRect().width")
        for w, part in zip(widths, ("bm25", "knn", "section"), strict=True):
            assert w == pytest.approx(bar_width * max(bar[part], 0) / total, abs=1.5)
        # matched question words are highlighted in the chunk text
        assert col.locator(".chunk-text mark").count() > 0
    assert page.locator(".column").first.locator(".paper").first.get_attribute("data-paper-id") == "demo-001"
    # the Kibana console text is what /_scholar/query gives
    first = columns.nth(0)
    first.locator(".copy-console").click()
    page.wait_for_function("document.querySelector('.column .console').textContent.length > 0")
    console = first.locator(".console").inner_text()
    assert console.startswith("GET chunks/_search")
    first.locator(".console").evaluate("e => e.hidden = true")  # the screenshot shows the results
    update = os.environ.get("SCHOLAR_ES_UPDATE_SCREENSHOT") == "1" or not SCREENSHOT.exists()
    shot = SCREENSHOT if update else tmp_path / SCREENSHOT.name
    shot.parent.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(shot), full_page=False)
    assert shot.stat().st_size > 10_000
    page.close()


def test_search_page_shows_api_errors(served_demo, browser):
    page = browser.new_page()
    page.goto(served_demo.url + "/_scholar/ui")
    page.wait_for_selector("body[data-ready='1']")
    page.fill("#question", "anything")
    page.fill("#year-from", "2030")
    page.fill("#year-to", "2000")
    page.click("#go")
    page.wait_for_selector("body[data-state='error']")
    assert "year range 2030-2000 is empty" in page.locator("#status").inner_text()
    page.close()


def test_with_an_api_key_the_browser_signs_in_with_basic_auth(served_demo, browser):
    """The 401 challenge makes a browser ask for credentials; with the key as password the page
    and its API calls pass, without it nothing does."""
    from serving import serving

    key = "page-key-123"
    with serving(
        served_demo.path,
        env={"SCHOLAR_ES_SERVE_API_KEY": key},
        wait_model=True,
        headers={"Authorization": f"ApiKey {key}"},
    ) as server:
        anonymous = browser.new_context()
        resp = anonymous.request.get(server.url + "/_scholar/ui")
        assert resp.status == 401 and resp.headers["www-authenticate"].startswith("Basic")
        # a browser with no credentials to give cannot open the page
        with pytest.raises(Exception, match="ERR_INVALID_AUTH_CREDENTIALS"):
            anonymous.new_page().goto(server.url + "/_scholar/ui")
        anonymous.close()
        context = browser.new_context(http_credentials={"username": "reader", "password": key})
        page = context.new_page()
        page.goto(server.url + "/_scholar/ui")
        page.wait_for_selector("body[data-ready='1']")
        page.fill("#question", QUESTION)
        page.click("#go")
        page.wait_for_selector("body[data-state='done']")
        assert page.locator(".paper").first.get_attribute("data-paper-id") == "demo-001"
        context.close()


def _requests_outside(page, base: str) -> list[str]:
    """Every request the page makes, from now on, to anywhere but ``base``."""
    outside: list[str] = []
    page.on("request", lambda r: None if r.url.startswith(base + "/") else outside.append(r.url))
    return outside


def test_the_api_docs_load_from_the_server_alone(served_demo, browser, tmp_path):
    """/_scholar/docs is Swagger UI with its files served by scholar-es (no CDN): it renders the
    API offline, and the browser asks nothing of any other host."""
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    outside = _requests_outside(page, served_demo.url)
    loaded: list[str] = []
    page.on("requestfinished", lambda r: loaded.append(r.url))
    page.goto(served_demo.url + "/_scholar/docs")
    page.wait_for_selector(".swagger-ui .info .title")
    assert "scholar-es" in page.locator(".swagger-ui .info .title").inner_text()
    page.wait_for_selector(".opblock-summary-path[data-path='/_scholar/search']")
    page.wait_for_load_state("networkidle")
    assert outside == []
    assert any(u.endswith("/_scholar/docs/static/swagger-ui-bundle.js") for u in loaded)
    assert any(u.endswith("/_scholar/openapi.json") for u in loaded)
    page.screenshot(path=str(tmp_path / "docs.png"))
    page.close()


@pytest.mark.parametrize("width", [1280, 390])
def test_one_best_paragraph_per_paper_with_metadata_at_desktop_and_phone_width(
    served_demo, browser, tmp_path, width
):
    """Each paper shows its best paragraph, the others behind "more from this paper", and its
    authors, year, venue and abstract (the search API's paper view); nothing runs off the page."""
    page = browser.new_page(viewport={"width": width, "height": 900})
    outside = _requests_outside(page, served_demo.url)
    page.goto(served_demo.url + "/_scholar/ui")
    page.wait_for_selector("body[data-ready='1']")
    page.fill("#question", QUESTION)
    page.select_option("#strategy-a", "sections")
    page.fill("#size", "3")
    page.click("#go")
    page.wait_for_selector("body[data-state='done']")
    answer = _api(
        served_demo.url,
        {"question": QUESTION, "strategy": "sections", "size": 3, "papers": True, "explain": True},
    )
    first = answer["papers"][0]
    assert first["paper_id"] == "demo-001"
    assert (first["authors"], first["year"]) == (["A. Okafor", "L. Brandt"], 2023)
    assert first["venue"] == "Demo Workshop on Long Context"
    assert first["abstract"].startswith("Language models read a bounded number of tokens")
    papers = page.locator(".paper")
    assert papers.count() == len(answer["papers"])
    with_more = 0
    for i, expected in enumerate(answer["papers"]):
        paper = papers.nth(i)
        assert paper.get_attribute("data-paper-id") == expected["paper_id"]
        meta = paper.locator(".paper-meta")
        assert meta.locator(".authors").inner_text() == ", ".join(expected["authors"])
        assert meta.locator(".year").inner_text() == str(expected["year"])
        assert meta.locator(".venue").inner_text() == expected["venue"]
        assert paper.locator("details.abstract p").text_content() == expected["abstract"]  # folded
        # one paragraph shown: the paper's best
        visible = [c for c in paper.locator(".chunk").all() if c.is_visible()]
        assert [c.get_attribute("data-chunk-id") for c in visible] == [expected["chunks"][0]["chunk_id"]]
        others = [h["chunk_id"] for h in expected["chunks"][1:]]
        toggle = paper.locator("details.more > summary")
        if not others:
            assert toggle.count() == 0
            continue
        with_more += 1
        assert toggle.inner_text() == f"more from this paper ({len(others)})"
        toggle.click()
        shown = paper.locator("details.more .chunk")
        assert shown.evaluate_all("els => els.map(e => e.dataset.chunkId)") == others
        assert all(c.is_visible() for c in shown.all())
    assert with_more > 0  # the toggle was exercised
    page.locator("details.abstract > summary").first.click()
    # usable at this width: no horizontal scrolling, every result inside the viewport
    assert page.evaluate("document.documentElement.scrollWidth") <= width
    boxes = page.locator(".paper, .paper .chunk, .paper-meta, details.abstract p").evaluate_all(
        "els => els.filter(e => e.offsetParent).map(e => { const r = e.getBoundingClientRect();"
        " return [r.left, r.right]; })"
    )
    assert boxes and all(left >= 0 and right <= width for left, right in boxes)
    assert outside == []
    shot = tmp_path / f"search-page-{width}.png"
    page.screenshot(path=str(shot), full_page=True)
    assert shot.stat().st_size > 10_000
    print(f"\n[serve-ui] screenshot at {width} px: {shot}")
    page.close()


def _shown(page) -> list[str]:
    return (
        page.locator(".column").first.locator(".paper").evaluate_all("els => els.map(e => e.dataset.paperId)")
    )


def _wait_done(page, action) -> None:
    page.evaluate("document.body.dataset.state = ''")
    action()
    page.wait_for_selector("body[data-state='done']")


@pytest.mark.parametrize("width", [1280, 390])
def test_paging_and_sort_by_year(served_demo, browser, tmp_path, width):
    """Next/Previous move through the API's pages (``from``); "year, newest first" shows the API's
    Elasticsearch year sort; both stay inside the viewport."""
    page = browser.new_page(viewport={"width": width, "height": 900})
    page.goto(served_demo.url + "/_scholar/ui")
    page.wait_for_selector("body[data-ready='1']")
    page.fill("#question", QUESTION)
    page.select_option("#strategy-a", "sections")
    page.fill("#size", "4")
    _wait_done(page, lambda: page.click("#go"))
    body = {"question": QUESTION, "strategy": "sections", "papers": True, "explain": True}
    whole = [p["paper_id"] for p in _api(served_demo.url, {**body, "size": 8})["papers"]]
    assert len(whole) == 6  # the demo's papers
    assert _shown(page) == whole[:4]
    assert page.locator("#prev").is_disabled() and page.locator("#next").is_enabled()
    assert page.locator("#page-info").inner_text() == "papers 1–4"
    _wait_done(page, lambda: page.click("#next"))
    assert (
        _shown(page)
        == whole[4:]
        == [p["paper_id"] for p in _api(served_demo.url, {**body, "size": 4, "from": 4})["papers"]]
    )
    assert page.locator(".column .papers").first.get_attribute("start") == "5"  # numbering goes on
    assert page.locator("#page-info").inner_text() == "papers 5–6"
    assert page.locator("#next").is_disabled() and page.locator("#prev").is_enabled()
    _wait_done(page, lambda: page.click("#prev"))
    assert _shown(page) == whole[:4]
    # sort by year: what the API's year sort answers, newest first
    page.select_option("#sort", "year")
    _wait_done(page, lambda: page.click("#go"))
    # (no score bars sorted by year: the page leaves explain out, the score does not rank)
    by_year = {**body, "explain": False, "sort": "year"}
    every = [p["paper_id"] for p in _api(served_demo.url, {**by_year, "size": 8})["papers"]]
    assert _shown(page) == every[:4] != whole[:4]
    years = [int(y) for y in page.locator(".column .paper .paper-meta .year").all_inner_texts()]
    assert years == sorted(years, reverse=True) and years[0] == 2024
    _wait_done(page, lambda: page.click("#next"))
    assert _shown(page) == every[4:]
    later = [int(y) for y in page.locator(".column .paper .paper-meta .year").all_inner_texts()]
    assert max(later) <= min(years) and later == sorted(later, reverse=True)
    assert page.evaluate("document.documentElement.scrollWidth") <= width
    right = page.locator("#pager button").evaluate_all("els => els.map(e => e.getBoundingClientRect().right)")
    assert all(r <= width for r in right)
    page.screenshot(path=str(tmp_path / f"year-sort-{width}.png"), full_page=True)
    # a strategy that cannot sort by year is refused by name, on the page too
    page.select_option("#strategy-a", "rrf")
    page.evaluate("document.body.dataset.state = ''")
    page.click("#go")
    page.wait_for_selector("body[data-state='error']")
    assert "sort 'year' applies only to the strategies" in page.locator("#status").inner_text()
    page.close()
