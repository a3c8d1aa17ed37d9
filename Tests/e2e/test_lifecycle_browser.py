"""The rest of the account lifecycle in headless Chromium: removing a member
and inviting a person who already has an account from the People page, and changing one's email
address from /account through the link mailed to the new address — each page axe-clean, over
plain HTTP and HTTPS (the fixtures of test_browser.py). With BAND_EDGE_SCREENSHOTS=DIR the pages
are also saved as PNG files there (for the notes; nothing is compared)."""

import os
from urllib.parse import urlsplit

import pytest

from test_browser import Server, browser, scheme, tls_pki  # noqa: F401 (fixtures)
from test_people_browser import accessible, submit
from test_web_sign_in import PASSWORD, add_account

pytest.importorskip("selenium.webdriver")
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402


def shot(driver, name):
    directory = os.environ.get("BAND_EDGE_SCREENSHOTS")
    if directory:
        driver.set_window_size(1024, 1400)
        driver.save_screenshot(os.path.join(directory, name + ".png"))


def sign_in(driver, server, email, back="/account"):
    driver.get(server.url("/sign-in?return=" + back.replace("/", "%2F")))
    driver.find_element(By.ID, "email").send_keys(email)
    driver.find_element(By.ID, "password").send_keys(PASSWORD)
    submit(driver, "form")
    WebDriverWait(driver, 10).until(lambda d: d.current_url.endswith(back))


def follow(driver, server, link):
    parts = urlsplit(link)
    driver.get(server.url(parts.path + "?" + parts.query))


def test_removing_a_member_and_inviting_someone_who_has_an_account(browser, mail_sink):
    server = Server("--smtp", mail_sink.url)
    try:
        add_account(server, "ada@example.test", "Ada Example", [("northfield", "administrator")])
        add_account(server, "tom@example.test", "Tom Example", [("northfield", "teacher")])
        add_account(server, "sam@example.test", "Sam Example")
        northfield = server.store.query("SELECT id FROM schools WHERE slug = 'northfield'")[0][0]
        people = f"/schools/{northfield}/people"
        sign_in(browser, server, "ada@example.test", people)
        shot(browser, "people")
        browser.find_element(By.CSS_SELECTOR, "button[aria-label='Remove Tom Example from the school']").click()
        accessible(browser)
        browser.find_element(By.XPATH, "//button[text()='Remove Tom Example']").click()
        WebDriverWait(browser, 10).until(lambda d: "Removed from the school." in d.page_source)
        assert "Tom Example" not in browser.find_element(By.TAG_NAME, "main").text
        accessible(browser)

        browser.find_element(By.ID, "invite-email").send_keys("sam@example.test")
        submit(browser, "form:has(#invite-email)")
        WebDriverWait(browser, 10).until(lambda d: "Invitation sent." in d.page_source)
        message = mail_sink.wait_for(lambda m: m.to == "sam@example.test")
        (link,) = [url for url in message.links if "/invitations/accept?token=" in url]

        browser.delete_all_cookies()
        follow(browser, server, link)
        WebDriverWait(browser, 10).until(lambda d: d.current_url.endswith("/invitations/accept"))
        assert "token" not in browser.current_url
        accessible(browser)
        shot(browser, "invitation-existing-account")
        browser.find_element(By.LINK_TEXT, "Sign in").click()
        browser.find_element(By.ID, "email").send_keys("sam@example.test")
        browser.find_element(By.ID, "password").send_keys(PASSWORD)
        submit(browser, "form")
        WebDriverWait(browser, 10).until(lambda d: d.current_url.endswith("/invitations/accept"))
        accessible(browser)
        submit(browser, "form[action='/invitations/accept']")
        WebDriverWait(browser, 10).until(lambda d: d.current_url.endswith("/account"))
        main = browser.find_element(By.TAG_NAME, "main").text
        assert "Northfield School" in main and "Teacher" in main
        assert "Tom" not in [row[0] for row in server.store.query(
            "SELECT a.display_name FROM memberships m JOIN accounts a ON a.id = m.account_id "
            "WHERE m.revoked_at IS NULL")], "the removed member is gone"
    finally:
        server.stop()


def test_changing_one_s_email_through_the_link_sent_to_the_new_address(browser, mail_sink):
    server = Server("--smtp", mail_sink.url)
    try:
        add_account(server, "ada@example.test", "Ada Example", [("northfield", "teacher")])
        sign_in(browser, server, "ada@example.test")
        accessible(browser)
        shot(browser, "account")
        browser.find_element(By.ID, "new-email").send_keys("ada.new@example.test")
        browser.find_element(By.ID, "email-password").send_keys(PASSWORD)
        submit(browser, "form:has(#new-email)")
        WebDriverWait(browser, 10).until(lambda d: "We have sent a link to your new address" in d.page_source)
        accessible(browser)
        confirm = mail_sink.wait_for(lambda m: m.to == "ada.new@example.test")
        notice = mail_sink.wait_for(lambda m: m.to == "ada@example.test")
        assert "ada.new@example.test" in notice.text and not [u for u in notice.links if "token=" in u]
        assert server.store.query("SELECT email FROM accounts")[0][0] == "ada@example.test", "nothing yet"
        (link,) = [url for url in confirm.links if "token=" in url]
        follow(browser, server, link)
        WebDriverWait(browser, 10).until(lambda d: "token" not in d.current_url)
        assert browser.find_element(By.TAG_NAME, "h1").text == "Confirm your new email address"
        accessible(browser)
        shot(browser, "email-confirm")
        submit(browser, "form")
        WebDriverWait(browser, 10).until(lambda d: "<h1>Your email address has been changed</h1>" in d.page_source)
        accessible(browser)
        assert server.store.query("SELECT email FROM accounts")[0][0] == "ada.new@example.test"
    finally:
        server.stop()
