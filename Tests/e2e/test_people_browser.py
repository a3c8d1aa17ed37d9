"""The People page and the invitation's accept flow in headless Chromium, against the real binary
with a real SMTP server on loopback, over plain HTTP and HTTPS (the fixtures of test_browser.py):
axe finds nothing on any of the pages, the invite form sends a mail, and its link (its token gone
from the address bar at once) lets a new person choose a name and a password and arrive signed in."""

import json
from urllib.parse import urlsplit

import pytest

from test_browser import Server, axe_violations, browser, scheme, tls_pki  # noqa: F401 (fixtures)
from test_web_sign_in import PASSWORD, add_account

pytest.importorskip("selenium.webdriver")
from selenium.common.exceptions import WebDriverException  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support.ui import Select, WebDriverWait  # noqa: E402


def accessible(driver):
    WebDriverWait(driver, 10).until(lambda d: d.execute_script("return document.readyState") == "complete")
    violations = axe_violations(driver)
    assert violations == [], json.dumps(violations, indent=1)[:3000]


def submit(driver, form_selector):
    driver.find_element(By.CSS_SELECTOR, form_selector + " button[type=submit]").click()


def submit_and_load(driver, form_selector):
    """Submits the form and waits until the answer's page has replaced the form's and loaded, so
    that what is checked next is never read from the page before (which may hold an earlier
    refusal or notice). The old document is marked; a new one lacks the mark. WebDriver errors
    while the navigation is under way (a node "not in the document", a context destroyed) are
    retried rather than taken as the answer."""
    driver.execute_script("document.bandEdgeFormPage = true")
    submit(driver, form_selector)
    WebDriverWait(driver, 10, ignored_exceptions=(WebDriverException,)).until(
        lambda d: d.execute_script(
            "return document.bandEdgeFormPage !== true && document.readyState === 'complete'"),
        "the form's answer did not replace its page")


def test_the_people_page_and_the_accept_flow(browser, mail_sink):
    server = Server("--smtp", mail_sink.url)
    try:
        add_account(server, "ada@example.test", "Ada Example", [("northfield", "administrator")])
        add_account(server, "tom@example.test", "Tom Example", [("northfield", "teacher")])
        northfield = server.store.query("SELECT id FROM schools WHERE slug = 'northfield'")[0][0]
        people = f"/schools/{northfield}/people"
        browser.get(server.url("/sign-in?return=" + people.replace("/", "%2F")))
        browser.find_element(By.ID, "email").send_keys("ada@example.test")
        browser.find_element(By.ID, "password").send_keys(PASSWORD)
        submit(browser, "form")
        WebDriverWait(browser, 10).until(lambda d: d.current_url.endswith(people))
        assert browser.find_element(By.TAG_NAME, "h1").text == "People at Northfield School"
        accessible(browser)

        # Tom becomes read-only through his row's select.
        Select(browser.find_element(By.ID, "role-1")).select_by_value("read_only")
        browser.find_element(By.CSS_SELECTOR, "button[aria-label='Change the role of Tom Example']").click()
        WebDriverWait(browser, 10).until(lambda d: "Role changed." in d.page_source)
        assert Select(browser.find_element(By.ID, "role-1")).first_selected_option.text == "Read-only"

        # Invite a new person.
        browser.find_element(By.ID, "invite-email").send_keys("lee@example.test")
        Select(browser.find_element(By.ID, "invite-role")).select_by_value("teacher")
        submit(browser, "form:has(#invite-email)")
        WebDriverWait(browser, 10).until(lambda d: "Invitation sent." in d.page_source)
        assert "lee@example.test" in browser.find_element(By.TAG_NAME, "main").text
        accessible(browser)

        message = mail_sink.wait_for(lambda m: m.to == "lee@example.test")
        (link,) = [url for url in message.links if "/invitations/accept?token=" in url]
        parts = urlsplit(link)
        browser.delete_all_cookies()
        browser.get(server.url(parts.path + "?" + parts.query))
        WebDriverWait(browser, 10).until(lambda d: d.current_url.endswith("/invitations/accept"))
        assert "token" not in browser.current_url
        assert browser.find_element(By.TAG_NAME, "h1").text == "Join Northfield School"
        accessible(browser)
        browser.find_element(By.ID, "name").send_keys("Lee Example")
        browser.find_element(By.ID, "password").send_keys("a new and long secret 7")
        submit(browser, "form")
        WebDriverWait(browser, 10).until(lambda d: d.current_url.endswith("/account"))
        main = browser.find_element(By.TAG_NAME, "main").text
        assert "Lee Example" in main and "Northfield School" in main and "Teacher" in main
    finally:
        server.stop()


def test_a_used_link_shows_an_accessible_explanation(browser, mail_sink):
    server = Server("--smtp", mail_sink.url)
    try:
        browser.get(server.url("/invitations/accept?token=" + "A" * 43))
        WebDriverWait(browser, 10).until(lambda d: d.current_url.endswith("/invitations/accept"))
        assert browser.find_element(By.TAG_NAME, "h1").text == "This invitation link does not work"
        accessible(browser)
    finally:
        server.stop()
