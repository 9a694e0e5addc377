"""Success criterion of `cap-ui` (a browser criterion: the rig's input, frozen by hash,
never read from an arm's tree). It drives the forecast page as a user does, with the
values the page's input can send: 1, 45 and its maximum, 90. The page must still cap the
input at 90. With `expect_requests = ["POST /api/horizon"]` the rig also requires that
each test's own flow got a 2xx from the app's server for it (not an answer made in the
page). The test binds what is shown to the server's answer: the first forecast request
the click makes must be answered, and for the days typed (a page that sends days the
server can answer and shows a result of its own fails here); a click that makes none is
left to expect_requests (`not_real_path`)."""

from urllib.parse import urlsplit

import pytest
from playwright.sync_api import Page, Response, TimeoutError, expect

# A page that shows a result here does so in well under a second (the slowest passing
# check of this example's run took 0.3 s): a page that never shows it fails in 2 s, not in
# Playwright's default 5 (every failing sample waited 5 s on each such check).
expect.set_options(timeout=2_000)

EXPECTED = {
    1: "Forecast for 1 day: total 123.8, peak 123.77 on day 1",
    45: "Forecast for 45 days: total 5411.9, peak 125.82 on day 44",
    90: "Forecast for 90 days: total 10797.5, peak 126.92 on day 86",
}


@pytest.mark.parametrize("days", sorted(EXPECTED))
def test_the_summary_for_days_the_page_can_send(page: Page, days):
    page.goto("/")
    field = page.get_by_label("Days ahead")
    expect(field).to_have_attribute("max", "90")
    expect(field).to_have_attribute("min", "1")
    field.fill(str(days))
    try:
        with page.expect_response(forecast, timeout=2000) as answered:
            page.get_by_role("button", name="Forecast").click()
        answer: Response | None = answered.value
    except TimeoutError:
        answer = None  # never requested: the rig's expect_requests decides
    expect(page.get_by_role("status")).to_have_text(EXPECTED[days])
    if answer is not None:
        assert answer.ok and answer.json()["days"] == days


def forecast(response: Response) -> bool:
    return response.request.method == "POST" and urlsplit(response.url).path == "/api/horizon"
