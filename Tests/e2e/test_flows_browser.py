"""Flows people can finish, each in headless Chromium at a phone's size
(390x844) and a laptop's (1280x800), with axe-core 4.x finding nothing at either: the People page
reflows; refused forms keep what was typed, mark the field, say what is wrong next to it, focus an
error summary that links to the fields and stay at the page's own address; sessions are told apart
and signed out (one or all others) with a confirmation; invitations (sign out and continue,
replacing, expired, removing with a confirmation and a mail); the native sign-in page's "Forgot
your password?"; the start page for a new visitor and the People link; the offline page."""

import json
from urllib.parse import urlsplit

import pytest

from test_browser import VALID_LINK, Server, axe_violations, browser, tls_pki  # noqa: F401 (fixtures)
from test_lifecycle_browser import follow, sign_in
from test_people_browser import submit, submit_and_load
from test_web_sign_in import PASSWORD, add_account

pytest.importorskip("selenium.webdriver")
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support.ui import Select, WebDriverWait  # noqa: E402

SIZES = [(390, 844), (1280, 800)]


@pytest.fixture
def scheme():
    """Plain HTTP only: these flows do not depend on the transport (test_browser.py covers both)."""
    return "http"


def resize(driver, width, height):
    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", {
        "width": width, "height": height, "deviceScaleFactor": 1, "mobile": width < 600})


def ready(driver):
    WebDriverWait(driver, 10).until(lambda d: d.execute_script("return document.readyState") == "complete")


def fits(driver):
    """Nothing is wider than the viewport, and every control is inside it (WCAG 1.4.10)."""
    overflow = driver.execute_script(
        "return document.documentElement.scrollWidth - document.documentElement.clientWidth")
    assert overflow <= 0, f"{overflow} px of horizontal scrolling"
    outside = driver.execute_script("""
        const width = document.documentElement.clientWidth;
        return [...document.querySelectorAll('main button, main select, main input:not([type=hidden]), main a')]
          .filter((e) => e.getClientRects().length > 0)
          .map((e) => [e.outerHTML.slice(0, 80), e.getBoundingClientRect()])
          .filter(([, r]) => r.left < 0 || r.right > width + 0.5).map(([html]) => html);
    """)
    assert outside == [], outside


def checked(driver, reflow=True):
    """axe-core finds nothing at either size (and, with `reflow`, everything fits); ends at 1280x800."""
    ready(driver)
    for width, height in SIZES:
        resize(driver, width, height)
        violations = axe_violations(driver)
        assert violations == [], f"{width}x{height}: " + json.dumps(violations, indent=1)[:3000]
        if reflow:
            fits(driver)


def main_text(driver):
    return driver.find_element(By.TAG_NAME, "main").text


def refused(driver, field_id, message, path):
    """The refusal GOV.UK's way, with the checks axe cannot make: the title starts "Error:", the
    summary has focus and links to the field, the field is aria-invalid and described by the
    message next to it, and the address bar holds the form's page, not another URL."""
    WebDriverWait(driver, 10).until(lambda d: d.find_elements(By.ID, "error-summary"))
    assert driver.title.startswith("Error: "), driver.title
    # `autofocus` is applied at the page's next rendering, which may come after the summary is in
    # the document: wait for it (a summary that never takes focus fails here after 10 s).
    focused = "return document.activeElement && document.activeElement.id"
    WebDriverWait(driver, 10).until(
        lambda d: d.execute_script(focused) == "error-summary", "the error summary did not take focus")
    assert driver.current_url.split("?")[0].endswith(path), driver.current_url
    field = driver.find_element(By.ID, field_id)
    assert field.get_attribute("aria-invalid") == "true"
    described = field.get_attribute("aria-describedby").split()
    assert f"{field_id}-error" in described
    assert message in driver.find_element(By.ID, f"{field_id}-error").text
    link = driver.find_element(By.CSS_SELECTOR, f"#error-summary a[href='#{field_id}']")
    assert message in link.text
    checked(driver)
    link.click()
    assert driver.execute_script("return document.activeElement.id") == field_id


def sessions_in_store(server, email):
    return server.store.query(
        "SELECT s.id, s.revoked_at, s.network FROM sessions s JOIN accounts a ON a.id = s.account_id "
        "WHERE a.email = ? ORDER BY s.created_at", (email,))


# 9. The People page on a phone.

def test_9_the_people_page_fits_and_works_at_320_and_390_px(browser, mail_sink):
    server = Server("--smtp", mail_sink.url)
    try:
        add_account(server, "ada@example.test", "Ada Example", [("northfield", "administrator")])
        add_account(server, "maximilian.longname-example@example.test", "Maximilian Longname-Example",
                    [("northfield", "teacher")])
        northfield = server.store.query("SELECT id FROM schools WHERE slug = 'northfield'")[0][0]
        people = f"/schools/{northfield}/people"
        sign_in(browser, server, "ada@example.test", people)
        browser.find_element(By.ID, "invite-email").send_keys("lee.someone-with-a-long-address@example.test")
        submit(browser, "form.form")
        WebDriverWait(browser, 10).until(lambda d: "Invitation sent." in d.page_source)
        checked(browser)
        resize(browser, 320, 800)
        fits(browser)
        # Operable at 320 px: the role changes and the removal starts from the row.
        Select(browser.find_element(By.ID, "role-1")).select_by_value("read_only")
        browser.find_element(
            By.CSS_SELECTOR, "button[aria-label='Change the role of Maximilian Longname-Example']").click()
        WebDriverWait(browser, 10).until(lambda d: "Role changed." in d.page_source)
        browser.find_element(
            By.CSS_SELECTOR, "button[aria-label='Remove Maximilian Longname-Example from the school']").click()
        WebDriverWait(browser, 10).until(lambda d: "/people/remove" in d.current_url)
        fits(browser)
    finally:
        server.stop()


# 10. Forms keep what was typed and say what is wrong where it is wrong.

def test_10_refused_account_forms_keep_the_typing_and_point_at_the_field(browser, mail_sink):
    server = Server("--smtp", mail_sink.url)
    try:
        add_account(server, "ada@example.test", "Ada Example")
        sign_in(browser, server, "ada@example.test")
        checked(browser)
        # A malformed address: the address stays, the error is by it, the page is /account.
        browser.find_element(By.ID, "new-email").send_keys("ada at example")
        browser.find_element(By.ID, "email-password").send_keys(PASSWORD)
        submit_and_load(browser, "form:has(#new-email)")
        refused(browser, "new-email", "Enter the new email address.", "/account")
        assert browser.find_element(By.ID, "new-email").get_attribute("value") == "ada at example"
        # A wrong current password when changing the password.
        browser.find_element(By.ID, "current-password").send_keys("not my password at all")
        browser.find_element(By.ID, "new-password").send_keys("a brand new long secret 9")
        submit_and_load(browser, "form:has(#new-password)")
        refused(browser, "current-password", "Your current password is not right.", "/account")
        # A refused name (over 100 characters) keeps what was typed.
        long_name = "Ada " + "x" * 100
        browser.execute_script(
            "const name = document.getElementById('name'); name.value = arguments[0]; name.form.noValidate = true",
            long_name)
        submit_and_load(browser, "form:has(#name)")
        refused(browser, "name", "Enter a name of 1 to 100 characters", "/account")
        assert browser.find_element(By.ID, "name").get_attribute("value") == long_name
    finally:
        server.stop()


def test_10_sign_in_and_the_invitation_form_refuse_by_the_field(browser, mail_sink):
    server = Server("--smtp", mail_sink.url)
    try:
        add_account(server, "ada@example.test", "Ada Example", [("northfield", "administrator")])
        browser.get(server.url("/sign-in"))
        browser.find_element(By.ID, "email").send_keys("ada@example.test")
        browser.find_element(By.ID, "password").send_keys("not the password")
        submit_and_load(browser, "form")
        refused(browser, "email", "do not match an account", "/sign-in")
        assert browser.find_element(By.ID, "email").get_attribute("value") == "ada@example.test"

        northfield = server.store.query("SELECT id FROM schools WHERE slug = 'northfield'")[0][0]
        people = f"/schools/{northfield}/people"
        sign_in(browser, server, "ada@example.test", people)
        browser.find_element(By.ID, "invite-email").send_keys("lee at example")
        submit_and_load(browser, "form.form")
        refused(browser, "invite-email", "Enter the email address of the person to invite.", people)
        assert browser.find_element(By.ID, "invite-email").get_attribute("value") == "lee at example"
        browser.find_element(By.ID, "invite-email").clear()
        browser.find_element(By.ID, "invite-email").send_keys("lee@example.test")
        submit(browser, "form.form")
        WebDriverWait(browser, 10).until(lambda d: "Invitation sent." in d.page_source)
        message = mail_sink.wait_for(lambda m: m.to == "lee@example.test")
        (link,) = [url for url in message.links if "/invitations/accept?token=" in url]

        # A refused password on the invitation's form: the name stays.
        browser.delete_all_cookies()
        follow(browser, server, link)
        WebDriverWait(browser, 10).until(lambda d: d.current_url.endswith("/invitations/accept"))
        browser.find_element(By.ID, "name").send_keys("Lee Example")
        browser.find_element(By.ID, "password").send_keys("password1234")
        submit_and_load(browser, "form")
        refused(browser, "password", "", "/invitations/accept")
        assert browser.find_element(By.ID, "name").get_attribute("value") == "Lee Example"
        assert browser.find_element(By.ID, "password").get_attribute("value") == ""
    finally:
        server.stop()


# 11. Sessions.

def test_11_sessions_are_told_apart_and_signed_out_with_a_confirmation(browser, mail_sink):
    server = Server("--smtp", mail_sink.url)
    try:
        add_account(server, "ada@example.test", "Ada Example")
        for _ in range(3):  # three sessions: the cookies go, the sessions stay
            sign_in(browser, server, "ada@example.test")
            browser.delete_all_cookies()
        sign_in(browser, server, "ada@example.test")
        assert len([s for s in sessions_in_store(server, "ada@example.test") if s[1] is None]) == 4
        text = main_text(browser)
        assert "Last used from this network" in text and "Last used" in text and "(this browser)" in text
        assert "127.0.0.1" not in browser.page_source, "no address is shown"
        assert all(s[2] and "127" not in s[2] for s in sessions_in_store(server, "ada@example.test"))
        checked(browser)

        # One device.
        browser.find_elements(By.CSS_SELECTOR, "button[aria-label^='Sign out: Chrome']")[-1].click()
        WebDriverWait(browser, 10).until(lambda d: "That device has been signed out." in d.page_source)
        assert browser.current_url.endswith("/account?changed=session")
        checked(browser)
        # Every other one, in one action.
        browser.find_element(By.XPATH, "//button[text()='Sign out of all other devices']").click()
        WebDriverWait(browser, 10).until(lambda d: "Every other device has been signed out." in d.page_source)
        live = [s for s in sessions_in_store(server, "ada@example.test") if s[1] is None]
        assert len(live) == 1
        assert not browser.find_elements(By.XPATH, "//button[text()='Sign out of all other devices']")
        checked(browser)
        # Signing out says so.
        browser.find_element(By.XPATH, "//form[@action='/sign-out']//button").click()
        WebDriverWait(browser, 10).until(lambda d: "/sign-in" in d.current_url)
        assert "You have signed out" in main_text(browser)
        checked(browser)
    finally:
        server.stop()


# 12. Invitations.

def test_12_invitations_and_removals(browser, mail_sink):
    server = Server("--smtp", mail_sink.url)
    try:
        add_account(server, "ada@example.test", "Ada Example", [("northfield", "administrator")])
        add_account(server, "tom@example.test", "Tom Example", [("northfield", "teacher")])
        add_account(server, "sam@example.test", "Sam Example")
        northfield = server.store.query("SELECT id FROM schools WHERE slug = 'northfield'")[0][0]
        people = f"/schools/{northfield}/people"
        sign_in(browser, server, "ada@example.test", people)

        def invite(email, role):
            browser.find_element(By.ID, "invite-email").send_keys(email)
            Select(browser.find_element(By.ID, "invite-role")).select_by_value(role)
            # The page before may say "Invitation sent." already (a second invitation): wait for
            # the answer's page to replace it first, or its text is read from the old one.
            submit_and_load(browser, "form.form")
            WebDriverWait(browser, 10).until(lambda d: "Invitation sent." in d.page_source)

        # Re-inviting says that the earlier invitation (and its role) is replaced.
        invite("lee@example.test", "teacher")
        invite("lee@example.test", "read_only")
        assert "It replaces the earlier invitation to that address (as teacher)" in main_text(browser)
        checked(browser)

        # An expired invitation stays listed, as expired, until withdrawn.
        server.store.query("UPDATE invitations SET expires_at = 1000 WHERE email = 'lee@example.test' "
                           "AND revoked_at IS NULL")
        browser.get(server.url(people))
        row = browser.find_element(By.XPATH, "//tr[td[text()='lee@example.test']]")
        assert "Expired" in row.text
        checked(browser)
        row.find_element(By.TAG_NAME, "button").click()
        WebDriverWait(browser, 10).until(lambda d: "Invitation withdrawn." in d.page_source)
        assert "lee@example.test" not in main_text(browser)

        # Removing asks first, names the person, and mails them.
        browser.find_element(By.CSS_SELECTOR, "button[aria-label='Remove Tom Example from the school']").click()
        WebDriverWait(browser, 10).until(lambda d: "/people/remove" in d.current_url)
        assert browser.find_element(By.TAG_NAME, "h1").text == "Remove Tom Example from Northfield School?"
        assert "tom@example.test" in main_text(browser)
        checked(browser)
        assert server.store.query("SELECT count(*) FROM memberships WHERE revoked_at IS NULL")[0][0] == 2
        browser.find_element(By.XPATH, "//button[text()='Remove Tom Example']").click()
        WebDriverWait(browser, 10).until(lambda d: "Removed from the school." in d.page_source)
        mail = mail_sink.wait_for(lambda m: m.to == "tom@example.test")
        assert "removed you from the school" in mail.text and "Ada Example" in mail.text
        assert [urlsplit(url).path for url in mail.links] == ["/account"], mail.links

        # Opened while signed in as someone else: "Sign out and continue" comes back to it.
        invite("sam@example.test", "teacher")
        message = mail_sink.wait_for(lambda m: m.to == "sam@example.test")
        (link,) = [url for url in message.links if "/invitations/accept?token=" in url]
        follow(browser, server, link)
        WebDriverWait(browser, 10).until(lambda d: d.current_url.endswith("/invitations/accept"))
        assert "You are signed in as ada@example.test" in main_text(browser)
        checked(browser)
        browser.find_element(By.XPATH, "//button[text()='Sign out and continue']").click()
        WebDriverWait(browser, 10).until(lambda d: "sign in to accept" in d.page_source)
        assert browser.current_url.endswith("/invitations/accept")
        assert browser.find_element(By.TAG_NAME, "h1").text == "Join Northfield School"
        checked(browser)
    finally:
        server.stop()


# 13. The native sign-in page.

def test_13_the_native_sign_in_page_offers_forgot_your_password(browser):
    server = Server()
    try:
        browser.get(server.url(VALID_LINK))
        link = browser.find_element(By.LINK_TEXT, "Forgot your password?")
        assert link.get_attribute("href") == server.url("/account/recover")
        checked(browser)
    finally:
        server.stop()


# 14. A new visitor, the People link and named zones.

def test_14_the_start_page_explains_access_and_leads_to_people(browser, mail_sink):
    server = Server("--smtp", mail_sink.url)
    try:
        add_account(server, "ada@example.test", "Ada Example", [("northfield", "administrator")])
        browser.get(server.url("/"))
        WebDriverWait(browser, 10).until(lambda d: d.find_element(By.ID, "signed-out").is_displayed())
        text = main_text(browser)
        assert "How to get an account" in text and "by invitation" in text and "administrator" in text
        assert "What you can do today" in text
        checked(browser)

        sign_in(browser, server, "ada@example.test", "/")
        WebDriverWait(browser, 10).until(lambda d: d.find_element(By.ID, "signed-in").is_displayed())
        people = WebDriverWait(browser, 10).until(lambda d: d.find_element(By.ID, "people"))
        WebDriverWait(browser, 10).until(lambda d: d.find_element(By.ID, "devices-zone").text)
        zone = browser.execute_script("return Intl.DateTimeFormat().resolvedOptions().timeZone")
        assert browser.find_element(By.ID, "devices-zone").text == f"Times are in this device's time zone ({zone})."
        checked(browser)
        people.click()
        WebDriverWait(browser, 10).until(lambda d: d.current_url.endswith("/people"))
        browser.find_element(By.ID, "invite-email").send_keys("lee@example.test")
        submit(browser, "form.form")
        WebDriverWait(browser, 10).until(lambda d: "Invitation sent." in d.page_source)
        assert "Times are in Europe/London time." in main_text(browser)
    finally:
        server.stop()


# 15. The offline page.

def test_15_the_offline_page_says_the_service_cannot_be_reached(browser):
    from test_browser import wait_for_worker

    server = Server()
    browser.get(server.url("/"))
    assert wait_for_worker(browser) == "activated"
    WebDriverWait(browser, 10).until(lambda d: d.find_element(By.ID, "deployment").is_displayed())
    label = browser.find_element(By.ID, "deployment").text
    url = server.url("/some/page")
    server.stop()
    browser.get(url)
    heading = WebDriverWait(browser, 10).until(lambda d: d.find_element(By.TAG_NAME, "h1"))
    assert heading.text == "Band Licence cannot be reached"
    assert "service may not be answering" in main_text(browser)
    badge = WebDriverWait(browser, 10).until(lambda d: d.find_element(By.ID, "deployment"))
    WebDriverWait(browser, 10).until(lambda d: badge.is_displayed())
    assert badge.text == label and browser.title.startswith(f"[{label}] ")
    ring = browser.find_element(By.CSS_SELECTOR, ".logo").value_of_css_property("box-shadow")
    assert "rgb(255, 255, 255)" in ring, ring
    checked(browser)


def test_credential_pages_an_email_change_its_way_back_and_the_last_administrator(browser, mail_sink):
    """The credential pages, each axe-clean and reflowing at both sizes: the pending email change
    on /account with its cancel button, the "sign in to confirm" page a signed-out holder of the
    link sees, the confirmation, the old address's way back and the reset form it leads to, and the
    page that tells a school's only administrator to hand the role over before deleting."""
    server = Server("--smtp", mail_sink.url)
    try:
        add_account(server, "ada@example.test", "Ada Example", [("northfield", "administrator")])
        sign_in(browser, server, "ada@example.test")
        browser.find_element(By.ID, "new-email").send_keys("ada.new@example.test")
        browser.find_element(By.ID, "email-password").send_keys(PASSWORD)
        submit(browser, "form:has(#new-email)")
        WebDriverWait(browser, 10).until(lambda d: d.find_elements(By.ID, "pending-email"))
        assert "ada.new@example.test" in browser.find_element(By.ID, "pending-email").text
        checked(browser)
        link = mail_sink.wait_for(lambda m: m.to == "ada.new@example.test").links[0]

        # Signed out, the link asks to sign in first, and comes back after.
        browser.delete_all_cookies()
        follow(browser, server, link)
        WebDriverWait(browser, 10).until(lambda d: "Sign in to confirm" in d.title)
        checked(browser)
        browser.find_element(By.LINK_TEXT, "Sign in").click()
        browser.find_element(By.ID, "email").send_keys("ada@example.test")
        browser.find_element(By.ID, "password").send_keys(PASSWORD)
        submit(browser, "form")
        # Waits read the title and the address, never an element the navigation may replace.
        WebDriverWait(browser, 10).until(lambda d: "Confirm your new email address" in d.title)
        assert "ada.new@example.test" in main_text(browser)
        checked(browser)
        submit(browser, "form")
        WebDriverWait(browser, 10).until(lambda d: d.current_url.endswith("/account/email/confirmed"))
        assert "has been changed" in main_text(browser)

        back = mail_sink.wait_for(lambda m: m.to == "ada@example.test" and "was changed" in m.subject).links[0]
        browser.delete_all_cookies()
        follow(browser, server, back)
        WebDriverWait(browser, 10).until(lambda d: "Take your account back" in d.title)
        checked(browser)
        submit(browser, "form")
        WebDriverWait(browser, 10).until(lambda d: d.find_elements(By.ID, "password"))
        checked(browser)
        browser.find_element(By.ID, "password").send_keys("a brand new phrase for ada")
        submit(browser, "form")
        WebDriverWait(browser, 10).until(lambda d: "/account/reset/done" in d.current_url)

        browser.get(server.url("/sign-in"))
        browser.find_element(By.ID, "email").send_keys("ada@example.test")
        browser.find_element(By.ID, "password").send_keys("a brand new phrase for ada")
        submit(browser, "form")
        # The sign-in's answer sets the cookie; leaving before it lands would ask /account/delete unsigned.
        WebDriverWait(browser, 10).until(lambda d: "/sign-in" not in d.current_url)
        browser.get(server.url("/account/delete"))
        WebDriverWait(browser, 10).until(lambda d: d.current_url.endswith("/account/delete"))
        browser.find_element(By.ID, "password").send_keys("a brand new phrase for ada")
        submit(browser, "form")
        WebDriverWait(browser, 10).until(lambda d: "Hand over your schools first" in d.title)
        assert "Northfield School" in main_text(browser)
        checked(browser)
    finally:
        server.stop()
