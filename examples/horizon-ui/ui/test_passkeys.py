"""Success criterion of `passkeys` (a browser criterion: the rig's input, frozen by hash).
A passkey is created and used through the page, with the rig's virtual authenticator
(CTAP2, internal, resident keys, user verification). The server must really verify the
assertion: a passkey that claims a registered credential's id but signs with another key
(what a cloned or forged authenticator would send) must be refused."""

import pytest
from playwright.sync_api import Page, expect

# A page that shows a result here does so within a second (the slowest passing check of
# this example's run, a registration the server verifies, took 0.57 s): a page that never
# shows it fails in 3 s, not in Playwright's default 5 (every failing sample waited 5 s on
# each such check).
expect.set_options(timeout=3_000)


def register(page: Page, user: str) -> None:
    page.get_by_label("User name").fill(user)
    page.get_by_role("button", name="Create a passkey").click()
    expect(page.get_by_role("status")).to_have_text(f"Passkey saved for {user}")


def sign_in(page: Page, user: str) -> None:
    page.get_by_label("User name").fill(user)
    page.get_by_role("button", name="Sign in with a passkey").click()


def test_register_then_sign_in(page: Page, virtual_authenticator):
    page.goto("/passkeys.html")
    register(page, "alice")
    assert len(virtual_authenticator.credentials()) == 1
    page.reload()
    sign_in(page, "alice")
    expect(page.get_by_role("status")).to_have_text("Signed in as alice")


# This flow's sign-in must be refused by the server (the criterion's expect_requests
# ask every other test for a 2xx sign-in).
@pytest.mark.expect_requests("POST /api/passkeys/register/finish",
                             "POST /api/passkeys/login/finish 4xx")
def test_a_passkey_signed_with_another_key_is_refused(page: Page, virtual_authenticator):
    page.goto("/passkeys.html")
    register(page, "alice")
    (alice,) = virtual_authenticator.credentials()
    register(page, "mallory")
    (mallory,) = [c for c in virtual_authenticator.credentials()
                  if c["credentialId"] != alice["credentialId"]]
    for credential in (alice, mallory):
        virtual_authenticator.remove_credential(credential["credentialId"])
    virtual_authenticator.add_credential({
        "credentialId": alice["credentialId"], "isResidentCredential": True,
        "rpId": alice["rpId"], "userHandle": alice["userHandle"],
        "privateKey": mallory["privateKey"], "signCount": alice["signCount"] + 10})
    page.reload()
    sign_in(page, "alice")
    expect(page.get_by_role("status")).to_have_text("Sign-in refused")
