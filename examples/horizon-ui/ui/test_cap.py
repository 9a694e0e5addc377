"""Success criterion of `cap-ui` (a browser criterion: the rig's input, frozen by hash,
never read from an arm's tree). It drives the forecast page as a user does, with the
values the page's input can send: 1, 45 and its maximum, 90. The page must still cap the
input at 90. With `expect_requests = ["POST /api/horizon"]` the rig also requires that
the summary came from the server (a 2xx from the app, not an answer made in the page)."""

import pytest
from playwright.sync_api import Page, expect

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
    page.get_by_role("button", name="Forecast").click()
    expect(page.get_by_role("status")).to_have_text(EXPECTED[days])
