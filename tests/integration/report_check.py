"""REPORT.html as a reader's browser shows it: this program runs INSIDE the browser's
container (`bakeoff/browser`: Debian's chromium, Playwright; no network at all), never on
the host, and only reports what it saw; the tests on the host decide.

    python report_check.py QUERY.json

QUERY.json: `page` (the file to open, by path in the container), `charts` (the accessible
names to look for), `full_page` (the screenshot's extent). Chromium is launched as the
rig's browser plugin launches it (`bakeoff_browser`: its binary, flags and context
settings). What it writes in $BAKEOFF_BROWSER_OUT, handed back as one `bakeoff-out:` line
(a base64 tar) on stdout, as the rig's browser container does:

- `seen.json`: every request of the context (`page.on("request")`), every console message
  and uncaught page error; for each chart name, how many elements have role img and
  exactly that accessible name, and how many have role img at all; the winner lines; the
  winners table's rows; the CSP meta and the number of script elements; per sample grid
  (role table, named by its caption) its rows and cells; a grid link followed (the sample
  it names becomes visible, the `<details>` around it open); per pair matrix (issue 33)
  its rows as shown and the colour each kind of heat cell is painted, the rank
  intervals' table; the page's height; timings
  (seconds, this container's clock);
- `screenshot.png`: the page as opened (the whole page, or its first screen), and
  `sample.png`: the screen once the grid's link was followed.
"""

import base64
import io
import json
import os
import re
import sys
import tarfile
import time
from pathlib import Path

import bakeoff_browser as plugin
from playwright.sync_api import sync_playwright

GRID = re.compile(r"^Samples of change ")
PAIRS = re.compile(r"^Pairs of change ")  # issue 33: a round's pair matrix (a heat map)
RANKS = "Rank interval per arm across changes (the chart's numbers)"
PAINT = "cells => cells.map(c => [c.className, getComputedStyle(c).backgroundColor])"
NAVIGATION_TIMEOUT_MS = 120_000
ACTION_TIMEOUT_MS = 60_000
# The page's own clock (milliseconds since navigation start), read with `evaluate`: a
# measurement, never a verdict (and the page has no script that could redefine it: its
# CSP forbids them).
TIMING = """() => {
  const nav = performance.getEntriesByType("navigation")[0];
  const paint = performance.getEntriesByName("first-contentful-paint")[0];
  return {dom_content_loaded_ms: nav.domContentLoadedEventEnd, load_ms: nav.loadEventEnd,
          first_contentful_paint_ms: paint ? paint.startTime : null};
}"""


def since(started):
    return round(time.perf_counter() - started, 3)


def charts(page, names):
    return {"found": {name: page.get_by_role("img", name=name, exact=True).count()
                      for name in names},
            "img_roles": page.get_by_role("img").count()}


def winners(page):
    table = page.get_by_role("table", name="Winner of each change", exact=True)
    rows = [row.get_by_role("cell").all_inner_texts() for row in table.get_by_role("row").all()]
    return {"lines": page.locator("p.winner-line").all_inner_texts(),
            "table": [row for row in rows if row]}


def grids(page):
    found = {}
    for table in page.get_by_role("table", name=GRID).all():
        found[table.locator("caption").inner_text()] = {
            "rows": table.get_by_role("row").count(),
            "cells": table.get_by_role("cell").count()}
    return found


def rows_of(table):
    return [row.get_by_role("cell").all_inner_texts() + row.get_by_role(
        "rowheader").all_inner_texts() for row in table.get_by_role("row").all()]


def pairs(page):
    """Per pair matrix (named by its caption) its rows as shown (row header last), the
    background each kind of heat cell is painted with, and the rank table's rows."""
    found, paint = {}, {}
    for table in page.get_by_role("table", name=PAIRS).all():
        found[table.locator("caption").inner_text()] = rows_of(table)
        for kind, colour in table.locator("td").evaluate_all(PAINT):
            paint.setdefault(" ".join(sorted(kind.split())), colour)
    ranks = page.get_by_role("table", name=RANKS, exact=True)
    return {"matrices": found, "paint": paint,
            "ranks": rows_of(ranks) if ranks.count() else None}


def follow(page):
    """Click the last grid's first sample: the fragment it names must show, opened."""
    link = page.get_by_role("table", name=GRID).last.get_by_role("link").first
    href = link.get_attribute("href")
    target = page.locator(f"[id='{href.removeprefix('#')}']")
    started = time.perf_counter()
    link.click()
    target.wait_for(state="visible")
    return {"href": href, "text": link.inner_text(), "visible": target.is_visible(),
            "open": page.locator("details.sample", has=target).get_attribute("open") == "",
            "seconds": since(started)}


def look(page, query, out):
    timings = {}
    started = time.perf_counter()
    page.goto(Path(query["page"]).as_uri(), wait_until="load")
    timings["goto_load_s"] = since(started)
    started = time.perf_counter()
    seen = {"charts": charts(page, query["charts"]), "winners": winners(page),
            "csp": page.locator('meta[http-equiv="Content-Security-Policy"]').get_attribute(
                "content"),
            "scripts": page.locator("script").count(), "grids": grids(page),
            "pairs": pairs(page)}
    timings["queries_s"] = since(started)
    timings.update(page.evaluate(TIMING))  # by now the first paint has its entry
    seen["height"] = page.evaluate("() => document.documentElement.scrollHeight")
    started = time.perf_counter()
    page.screenshot(path=str(out / "screenshot.png"), full_page=query["full_page"],
                    timeout=ACTION_TIMEOUT_MS)
    timings["screenshot_s"] = since(started)
    seen["followed"] = follow(page)
    page.screenshot(path=str(out / "sample.png"))
    seen["timings"] = timings
    return seen


def main():
    query = json.loads(Path(sys.argv[1]).read_text())
    out = Path(os.environ[plugin.OUT_ENV])
    requests, console, errors = [], [], []
    started = time.perf_counter()
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=plugin.CHROMIUM, headless=True,
                                             args=list(plugin.LAUNCH_ARGS))
        launched = since(started)
        context = browser.new_context(**plugin.CONTEXT, **plugin.FORCED)
        context.set_default_timeout(ACTION_TIMEOUT_MS)
        context.set_default_navigation_timeout(NAVIGATION_TIMEOUT_MS)
        context.on("request", lambda r: requests.append(
            {"method": r.method, "url": r.url, "resource_type": r.resource_type}))
        page = context.new_page()
        page.on("console", lambda m: console.append({"type": m.type, "text": m.text}))
        page.on("pageerror", lambda e: errors.append(str(e)))
        seen = look(page, query, out)
        browser.close()
    seen["timings"]["launch_s"] = launched
    seen.update(requests=requests, console=console, page_errors=errors)
    (out / "seen.json").write_text(json.dumps(seen, indent=1))
    tar = io.BytesIO()
    with tarfile.open(fileobj=tar, mode="w") as archive:
        for name in ("seen.json", "screenshot.png", "sample.png"):
            archive.add(out / name, arcname=name)
    sys.stdout.write("bakeoff-out:" + base64.b64encode(tar.getvalue()).decode() + "\n")


if __name__ == "__main__":
    main()
