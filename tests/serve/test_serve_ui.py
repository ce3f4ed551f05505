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
        badges = col.locator(".chunk .badge").all_inner_texts()
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
