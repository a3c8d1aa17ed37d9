"""Password recovery in headless Chromium (Debian, driven by selenium) against the real binary, with
a real SMTP server on loopback: from "Forgot your password?" on the sign-in page to signing in with
the new password, axe-core on every new page, the token never in the address bar — also when the
link is opened from another site, as from a webmail page."""

import json
import os
import shutil
from urllib.parse import urlsplit

import pytest

from test_browser import axe_violations
from test_web_sign_in import PASSWORD, add_account

os.environ.setdefault("SE_OFFLINE", "true")  # never let selenium fetch a driver: use Debian's

webdriver = pytest.importorskip("selenium.webdriver")
from selenium.webdriver.chrome.service import Service  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"
NEW_PASSWORD = "a new phrase from the browser"


@pytest.fixture
def browser(tmp_path):
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                 "--no-first-run", "--disable-extensions", f"--user-data-dir={tmp_path / 'profile'}",
                 "--window-size=1280,900"):
        options.add_argument(flag)
    driver = webdriver.Chrome(options=options, service=Service(executable_path=CHROMEDRIVER))
    driver.set_script_timeout(20)
    yield driver
    driver.quit()


def accessible(driver):
    WebDriverWait(driver, 10).until(lambda d: d.execute_script("return document.readyState") == "complete")
    violations = axe_violations(driver)
    assert violations == [], json.dumps(violations, indent=1)[:3000]


def local(server, link):
    """The mailed link (on the configured origin) on this test server's port."""
    parts = urlsplit(link)
    return server.url(parts.path + "?" + parts.query)


def ask(browser, server, email):
    browser.get(server.url("/sign-in"))
    browser.find_element(By.LINK_TEXT, "Forgot your password?").click()
    WebDriverWait(browser, 10).until(lambda d: d.current_url.endswith("/account/recover"))
    browser.find_element(By.ID, "email").send_keys(email)
    browser.find_element(By.CSS_SELECTOR, "form button[type=submit]").click()
    WebDriverWait(browser, 10).until(lambda d: d.current_url.endswith("/account/recover/sent"))


def test_recovery_in_the_browser(browser, make_server, mail_sink):
    server = make_server("--smtp", mail_sink.url)
    add_account(server, "ada@example.test", "Ada Example", [("northfield", "teacher")])
    browser.get(server.url("/account/recover"))
    accessible(browser)
    ask(browser, server, "ada@example.test")
    assert browser.find_element(By.TAG_NAME, "h1").text == "Check your email"
    accessible(browser)

    (link,) = mail_sink.wait_for(lambda m: m.to == "ada@example.test").links
    browser.get(local(server, link))
    WebDriverWait(browser, 10).until(lambda d: d.current_url == server.url("/account/reset"))
    assert "token" not in browser.current_url
    cookie = browser.get_cookie("__Host-bl_reset")
    assert cookie and cookie["httpOnly"] and cookie["secure"] and cookie["sameSite"] == "Lax"
    assert browser.execute_script("return document.cookie").find("bl_reset") == -1
    assert browser.find_element(By.TAG_NAME, "h1").text == "Choose a new password"
    accessible(browser)

    browser.find_element(By.ID, "password").send_keys("password1234")
    browser.find_element(By.CSS_SELECTOR, "form button[type=submit]").click()
    WebDriverWait(browser, 10).until(lambda d: d.find_elements(By.CSS_SELECTOR, "[role=alert]"))
    assert "most common" in browser.find_element(By.CSS_SELECTOR, "[role=alert]").text
    accessible(browser)
    browser.find_element(By.ID, "password").send_keys(NEW_PASSWORD)
    browser.find_element(By.CSS_SELECTOR, "form button[type=submit]").click()
    WebDriverWait(browser, 10).until(lambda d: d.current_url.endswith("/account/reset/done"))
    assert browser.get_cookie("__Host-bl_reset") is None
    accessible(browser)

    browser.find_element(By.LINK_TEXT, "Sign in").click()
    WebDriverWait(browser, 10).until(lambda d: d.find_elements(By.ID, "email"))
    browser.find_element(By.ID, "email").send_keys("ada@example.test")
    browser.find_element(By.ID, "password").send_keys(NEW_PASSWORD)
    browser.find_element(By.CSS_SELECTOR, "form button[type=submit]").click()
    WebDriverWait(browser, 10).until(lambda d: d.get_cookie("__Host-bl_session"))
    browser.get(server.url("/account"))
    assert browser.find_element(By.TAG_NAME, "h1").text == "Your account"
    accessible(browser)  # with the correction forms

    browser.get(local(server, link))  # used: the expired page, which sends no referrer
    assert browser.find_element(By.TAG_NAME, "h1").text == "Link expired"
    accessible(browser)
    assert mail_sink.wait_for(lambda m: m.to == "ada@example.test" and "was changed" in m.subject)
    assert PASSWORD not in server.stderr_path.read_text()


def test_a_link_opened_from_another_site_works(browser, make_server, mail_sink):
    """A webmail page is another site: the redirect that moves the token into the cookie must
    still bring it back (why the cookie is SameSite=Lax, not Strict)."""
    server = make_server("--smtp", mail_sink.url)
    add_account(server, "ada@example.test", "Ada Example")
    ask(browser, server, "ada@example.test")
    (link,) = mail_sink.wait_for(lambda m: m.to == "ada@example.test").links
    browser.delete_all_cookies()
    # localhost is another site than 127.0.0.1; the same server answers both.
    webmail = server.url("/account/recover").replace("127.0.0.1", "localhost")
    browser.get(webmail)
    browser.execute_script(
        "const a = document.createElement('a'); a.id = 'mail-link'; a.href = arguments[0];"
        "a.textContent = 'Choose a new password'; document.querySelector('main').append(a);",
        local(server, link))
    browser.find_element(By.ID, "mail-link").click()
    WebDriverWait(browser, 10).until(lambda d: d.current_url == server.url("/account/reset"))
    assert browser.find_element(By.TAG_NAME, "h1").text == "Choose a new password"
    browser.find_element(By.ID, "password").send_keys(NEW_PASSWORD)
    browser.find_element(By.CSS_SELECTOR, "form button[type=submit]").click()
    WebDriverWait(browser, 10).until(lambda d: d.current_url.endswith("/account/reset/done"))
