"""The shell in a real browser: headless Chromium (Debian) driven by selenium, against the real
binary. Service worker, installability, offline navigation, Cache Storage, accessibility. The suite
runs twice: over plain HTTP, and over HTTPS with a test CA's certificate trusted by its key
(Chromium's SPKI allowlist), where the server offers ALPN h2 (--http2) and Chromium takes it."""

import json
import os
import shutil

import pytest
import edge
from edge import ROOT, built_shell

os.environ.setdefault("SE_OFFLINE", "true")  # never let selenium fetch a driver: use Debian's

webdriver = pytest.importorskip("selenium.webdriver")
from selenium.webdriver.chrome.service import Service  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"


# The certificate and key the HTTPS pass serves, while it runs (None in the plain pass).
TLS_PKI = None


@pytest.fixture(scope="module")
def tls_pki(tmp_path_factory):
    """A test CA and a certificate for 127.0.0.1, and the base64 SHA-256 of its key (SPKI)."""
    import base64
    import hashlib
    import subprocess
    import sys

    sys.path.insert(0, str(ROOT / "build" / "lib"))
    import test_pki

    pki = test_pki.make(tmp_path_factory.mktemp("pki"), {"server": "IP:127.0.0.1,DNS:localhost"})
    public = subprocess.run(["openssl", "x509", "-pubkey", "-noout", "-in", str(pki / "server.pem")],
                            capture_output=True, check=True).stdout
    spki = subprocess.run(["openssl", "pkey", "-pubin", "-outform", "der"], input=public, capture_output=True,
                          check=True).stdout
    return pki, base64.b64encode(hashlib.sha256(spki).digest()).decode()


@pytest.fixture(params=["http", "https"])
def scheme(request):
    return request.param


@pytest.fixture
def browser(tmp_path, scheme, request):
    global TLS_PKI
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                 "--no-first-run", "--disable-extensions", f"--user-data-dir={tmp_path / 'profile'}",
                 "--window-size=1280,900"):
        options.add_argument(flag)
    if scheme == "https":
        TLS_PKI, pin = request.getfixturevalue("tls_pki")
        options.add_argument(f"--ignore-certificate-errors-spki-list={pin}")
    driver = webdriver.Chrome(options=options, service=Service(executable_path=CHROMEDRIVER))
    driver.set_script_timeout(20)
    yield driver
    driver.quit()
    TLS_PKI = None


def Server(*args, **kwargs):
    """The binary under test; in the HTTPS pass with a TLS listener too (offering h2), and `url` naming it."""
    if TLS_PKI is None:
        return edge.Server(*args, **kwargs)
    server = edge.Server(*args, "--tls-listen", "127.0.0.1:0", "--cert", str(TLS_PKI / "server.pem"), "--key",
                         str(TLS_PKI / "server.key"), "--http2", **kwargs)
    port = server.listening_ports()[1]
    server.url = lambda path: f"https://127.0.0.1:{port}{path}"
    return server


def wait_for_worker(driver):
    """Resolves once the page is controlled by an activated service worker."""
    state = driver.execute_async_script("""
        const done = arguments[arguments.length - 1];
        navigator.serviceWorker.ready.then(async (registration) => {
          if (!navigator.serviceWorker.controller) {
            await new Promise((r) => navigator.serviceWorker.addEventListener('controllerchange', r, {once: true}));
          }
          const worker = registration.active;
          if (worker && worker.state !== 'activated') {
            await new Promise((r) => worker.addEventListener('statechange', () => worker.state === 'activated' && r()));
          }
          done(worker ? worker.state : 'none');
        }).catch((e) => done('error: ' + e));
    """)
    return state


def cached_paths(driver):
    return driver.execute_async_script("""
        const done = arguments[arguments.length - 1];
        (async () => {
          const out = {};
          for (const name of await caches.keys()) {
            const cache = await caches.open(name);
            out[name] = (await cache.keys()).map((r) => new URL(r.url).pathname);
          }
          return out;
        })().then(done, (e) => done({error: String(e)}));
    """)


def axe_source():
    """axe-core 4.x, as shipped inside the pinned axe-playwright-python wheel (build/setup), found
    without importing that package (it would import playwright)."""
    import importlib.util
    from pathlib import Path

    spec = importlib.util.find_spec("axe_playwright_python")
    assert spec and spec.submodule_search_locations, "build/setup --test installs axe-playwright-python"
    source = (Path(spec.submodule_search_locations[0]) / "axe.min.js").read_text()
    assert source.startswith("/*! axe v4."), source[:40]
    return source


def axe_violations(driver):
    """Every violation axe-core 4 finds on the current page (any impact)."""
    driver.execute_script(axe_source())
    return driver.execute_async_script("""
        const done = arguments[arguments.length - 1];
        axe.run(document, {resultTypes: ['violations']})
          .then((r) => done(r.violations.map((v) => ({id: v.id, impact: v.impact, help: v.help,
                                                     nodes: v.nodes.map((n) => n.target)}))),
                (e) => done([{id: 'axe-error', help: String(e)}]));
    """)


def precache_list():
    return json.loads((built_shell() / "shell-manifest.json").read_text())["precache"]


def test_service_worker_activates_and_precaches_exactly_the_list(browser, scheme):
    server = Server()
    try:
        browser.get(server.url("/"))
        assert wait_for_worker(browser) == "activated"
        assert browser.execute_script("return location.protocol") == scheme + ":"
        caches = cached_paths(browser)
        assert len(caches) == 1, caches
        (paths,) = caches.values()
        assert sorted(paths) == sorted(precache_list())
        assert not any(p.startswith(("/api/", "/.well-known/", "/sign-in", "/native/", "/account")) for p in paths)
        # The shell asked for the session; its 404 today (401 once accounts exist) shows the signed-out view,
        # and the answer was not stored.
        WebDriverWait(browser, 10).until(lambda d: d.find_element(By.ID, "signed-out").is_displayed())
        assert not any("/api/" in p for p in sum(cached_paths(browser).values(), []))
    finally:
        server.stop()


def test_the_page_and_its_script_came_over_h2_with_tls_and_http11_without(browser, scheme):
    """Chromium speaks HTTP/2 only over TLS with ALPN: over HTTPS the navigation and the fingerprinted
    script must say `h2` (Navigation and Resource Timing's nextHopProtocol), over plain HTTP `http/1.1`."""
    import re

    server = Server()
    try:
        browser.get(server.url("/"))
        WebDriverWait(browser, 10).until(lambda d: d.execute_script("return document.readyState") == "complete")
        expected = "h2" if scheme == "https" else "http/1.1"
        navigation = browser.execute_script("return performance.getEntriesByType('navigation')[0].nextHopProtocol")
        assert navigation == expected
        resources = browser.execute_script(
            "return performance.getEntriesByType('resource').map((e) => [new URL(e.name).pathname, e.nextHopProtocol])")
        scripts = [protocol for path, protocol in resources if re.fullmatch(r"/app\.[0-9a-f]{8}\.js", path)]
        assert scripts == [expected], resources
    finally:
        server.stop()


def test_chrome_finds_the_app_installable(browser):
    server = Server()
    try:
        browser.get(server.url("/"))
        assert wait_for_worker(browser) == "activated"
        errors = browser.execute_cdp_cmd("Page.getInstallabilityErrors", {})
        assert errors.get("installabilityErrors") == [], errors
        manifest = browser.execute_cdp_cmd("Page.getAppManifest", {})
        assert not manifest.get("errors"), manifest
    finally:
        server.stop()


def test_navigation_with_the_server_stopped_shows_the_offline_page(browser):
    server = Server()
    browser.get(server.url("/"))
    assert wait_for_worker(browser) == "activated"
    url = server.url("/some/page")
    server.stop()
    browser.get(url)
    heading = WebDriverWait(browser, 10).until(lambda d: d.find_element(By.TAG_NAME, "h1"))
    assert heading.text == "Band Licence cannot be reached"
    assert browser.find_element(By.ID, "retry").is_displayed()


VALID_LINK = ("/native/sign-in?state=state-0123456789abcdef&code_challenge=E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"
              "&code_challenge_method=S256&platform=ios&app_version=1.4.0")


@pytest.mark.parametrize("path", ["/", "/offline.html", "/sign-in", "/no/such/page", "/qr/ABC123", "/native/callback",
                                  VALID_LINK, "/native/sign-in?state=state-0123456789abcdef&platform=x"])
def test_no_accessibility_violations(browser, path):
    server = Server()
    try:
        browser.get(server.url(path))
        WebDriverWait(browser, 10).until(lambda d: d.execute_script("return document.readyState") == "complete")
        violations = axe_violations(browser)
        assert violations == [], json.dumps(violations, indent=1)[:3000]
    finally:
        server.stop()


def test_text_at_200_percent_still_fits(browser):
    server = Server()
    try:
        browser.get(server.url("/"))
        browser.execute_script("document.documentElement.style.fontSize = '200%'")
        overflow = browser.execute_script(
            "return document.documentElement.scrollWidth - document.documentElement.clientWidth")
        assert overflow <= 0, "no horizontal scrolling at 200% text"
        button = browser.find_element(By.LINK_TEXT, "Sign in")
        assert button.is_displayed()
    finally:
        server.stop()


# Plain HTTP only: staging and production with TLS serve the configured origin's host, which a
# loopback browser cannot reach by name; the label does not depend on the transport.
@pytest.mark.parametrize("scheme", ["http"])
@pytest.mark.parametrize("environment,label,visible", [("staging", "Staging", True), ("production", "Production", False)])
def test_staging_is_visibly_different_from_production(browser, tmp_path, environment, label, visible):
    from test_links import config

    server = Server("--config", str(config(environment, tmp_path)), test_routes=False,
                    env={"BAND_LICENCE_ENV": environment})
    try:
        browser.get(server.url("/"))
        WebDriverWait(browser, 10).until(
            lambda d: d.execute_script("return document.documentElement.dataset.environment") == environment)
        badge = browser.find_element(By.ID, "deployment")
        assert badge.is_displayed() == visible
        bar = browser.find_element(By.CSS_SELECTOR, ".bar").value_of_css_property("background-color")
        if visible:
            assert badge.text == label
            assert browser.title.startswith(f"[{label}] ")
            assert bar == "rgba(180, 83, 9, 1)"
        else:
            assert bar == "rgba(29, 78, 216, 1)"
            assert not browser.title.startswith("[")
    finally:
        server.stop()


def test_sign_in_through_the_form_sign_out_and_nothing_private_is_cached(browser):
    from test_web_sign_in import PASSWORD, add_account

    server = Server()
    try:
        add_account(server, "ada@example.test", "Ada Example", [("northfield", "teacher"), ("riverside", "administrator")])
        browser.get(server.url("/"))
        assert wait_for_worker(browser) == "activated"
        WebDriverWait(browser, 10).until(lambda d: d.find_element(By.ID, "signed-out").is_displayed())
        browser.find_element(By.LINK_TEXT, "Sign in").click()
        WebDriverWait(browser, 10).until(lambda d: d.find_elements(By.ID, "email"))
        browser.find_element(By.ID, "email").send_keys("ada@example.test")
        browser.find_element(By.ID, "password").send_keys(PASSWORD)
        browser.find_element(By.CSS_SELECTOR, "form button[type=submit]").click()
        WebDriverWait(browser, 10).until(lambda d: d.find_element(By.ID, "signed-in").is_displayed())
        assert browser.find_element(By.ID, "account-name").text == "Ada Example"
        assert browser.find_element(By.ID, "account-email").text == "ada@example.test"
        options = [o.text for o in browser.find_elements(By.CSS_SELECTOR, "#school option")]
        assert options == ["Northfield School", "Riverside School"]
        assert browser.find_element(By.ID, "school-role").text == "Your role here: Teacher"
        browser.execute_script("const s = document.getElementById('school'); s.selectedIndex = 1; s.dispatchEvent(new Event('change'))")
        assert browser.find_element(By.ID, "school-role").text == "Your role here: Administrator"
        WebDriverWait(browser, 10).until(lambda d: d.find_elements(By.CSS_SELECTOR, "#devices li"))
        assert "(this browser)" in browser.find_element(By.CSS_SELECTOR, "#devices li").text
        cookie = browser.get_cookie("__Host-bl_session")
        assert cookie and cookie["httpOnly"] and cookie["secure"] and cookie["sameSite"] == "Lax"
        assert browser.execute_script("return document.cookie").find("bl_session") == -1
        violations = axe_violations(browser)
        assert violations == [], json.dumps(violations, indent=1)[:3000]
        browser.find_element(By.ID, "sign-out").click()
        WebDriverWait(browser, 10).until(lambda d: d.find_element(By.ID, "signed-out").is_displayed())
        assert browser.find_element(By.ID, "status").text == "You have signed out."
        browser.refresh()
        WebDriverWait(browser, 10).until(lambda d: d.find_element(By.ID, "signed-out").is_displayed())
        caches = cached_paths(browser)
        (paths,) = caches.values()
        assert sorted(paths) == sorted(precache_list()), "Cache Storage holds the shell and nothing else"
    finally:
        server.stop()


@pytest.mark.parametrize("path", ["/sign-in", "/account", "/account/delete"])
def test_server_rendered_pages_are_accessible(browser, path):
    from test_web_sign_in import PASSWORD, add_account

    server = Server()
    try:
        add_account(server, "ada@example.test", "Ada Example", [("northfield", "teacher")])
        browser.get(server.url("/sign-in"))
        if path != "/sign-in":
            browser.find_element(By.ID, "email").send_keys("ada@example.test")
            browser.find_element(By.ID, "password").send_keys(PASSWORD)
            browser.find_element(By.CSS_SELECTOR, "form button[type=submit]").click()
            WebDriverWait(browser, 10).until(lambda d: d.current_url.endswith("/"))
            browser.get(server.url(path))
            assert browser.find_element(By.TAG_NAME, "h1").text in ("Your account", "Delete your account")
        WebDriverWait(browser, 10).until(lambda d: d.execute_script("return document.readyState") == "complete")
        assert browser.find_element(By.CSS_SELECTOR, ".deployment").text == "Development"
        violations = axe_violations(browser)
        assert violations == [], json.dumps(violations, indent=1)[:3000]
    finally:
        server.stop()


# No signed-out flash, a visible focus ring everywhere, buttons under forced
# colours.

def sign_in(browser, server):
    from test_web_sign_in import PASSWORD, add_account

    add_account(server, "ada@example.test", "Ada Example", [("northfield", "teacher")])
    browser.get(server.url("/sign-in"))
    browser.find_element(By.ID, "email").send_keys("ada@example.test")
    browser.find_element(By.ID, "password").send_keys(PASSWORD)
    browser.find_element(By.CSS_SELECTOR, "form button[type=submit]").click()
    WebDriverWait(browser, 10).until(lambda d: d.current_url.endswith("/"))


def test_a_signed_in_person_never_sees_the_signed_out_view(browser):
    server = Server()
    try:
        sign_in(browser, server)
        # Watch every moment from the first byte: the signed-out view must never be displayed.
        browser.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": """
            window.__sawSignedOut = false;
            const check = () => {
              const el = document.getElementById('signed-out');
              if (el && !el.hidden) window.__sawSignedOut = true;
            };
            new MutationObserver(check).observe(document, {subtree: true, childList: true, attributes: true});
        """})
        browser.get(server.url("/"))
        WebDriverWait(browser, 10).until(lambda d: d.find_element(By.ID, "signed-in").is_displayed())
        assert browser.execute_script("return window.__sawSignedOut") is False
        assert browser.find_element(By.ID, "main").get_attribute("aria-busy") is None
    finally:
        server.stop()


CONTRAST = """
    const rgb = (c) => (c.match(/[\\d.]+/g) || []).map(Number);
    const lum = ([r, g, b]) => [r, g, b].map((v) => { v /= 255; return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4; })
      .reduce((a, v, i) => a + v * [0.2126, 0.7152, 0.0722][i], 0);
    const ratio = (a, b) => { const [x, y] = [lum(a), lum(b)].sort((p, q) => q - p); return (x + 0.05) / (y + 0.05); };
    const background = (el) => {
      for (let n = el.parentElement; n; n = n.parentElement) {
        const c = rgb(getComputedStyle(n).backgroundColor);
        if (c.length === 3 || c[3] > 0) return c.slice(0, 3);
      }
      return [255, 255, 255];
    };
    const out = [];
    for (const el of document.querySelectorAll('a[href], button, input:not([type=hidden]), select, summary')) {
      if (!el.offsetParent && el.tagName !== 'SUMMARY') continue;
      el.focus({focusVisible: true});
      if (document.activeElement !== el) continue;
      const style = getComputedStyle(el);
      const ring = rgb(style.outlineColor).slice(0, 3);
      out.push({el: el.outerHTML.slice(0, 80), width: parseFloat(style.outlineWidth),
                ratio: ratio(ring, background(el))});
    }
    return out;
"""


@pytest.mark.parametrize("path", ["/", "/sign-in", "/no/such/page", "/qr/ABC123", "/native/sign-in?platform=x"])
def test_the_focus_ring_has_3_to_1_contrast_on_every_background(browser, path):
    server = Server()
    try:
        browser.get(server.url(path))
        WebDriverWait(browser, 10).until(lambda d: d.execute_script("return document.readyState") == "complete")
        # Keyboard focus, so that :focus-visible applies.
        browser.find_element(By.TAG_NAME, "body").send_keys("\ue004")
        rings = browser.execute_script(CONTRAST)
        assert rings, "something on the page can take focus"
        weak = [r for r in rings if r["width"] < 2 or r["ratio"] < 3]
        assert weak == [], weak
    finally:
        server.stop()


def test_buttons_stay_visible_under_forced_colours(browser):
    server = Server()
    try:
        browser.execute_cdp_cmd("Emulation.setEmulatedMedia", {"features": [{"name": "forced-colors", "value": "active"}]})
        browser.get(server.url("/sign-in"))
        assert browser.execute_script("return matchMedia('(forced-colors: active)').matches")
        edges = browser.execute_script("""
            return [...document.querySelectorAll('.button')].map((b) => {
              const s = getComputedStyle(b);
              return {width: parseFloat(s.borderTopWidth), border: s.borderTopColor, background: s.backgroundColor,
                      text: s.color};
            });
        """)
        assert edges
        for edge_ in edges:
            assert edge_["width"] >= 1 and edge_["border"] != edge_["background"], edge_
            assert edge_["text"] != edge_["background"], edge_
    finally:
        server.stop()


@pytest.mark.parametrize("scheme", ["http"])
def test_axe_finds_a_known_violation(browser):
    """The checker itself can fail: an unlabelled field and an image without text are found."""
    server = Server()
    try:
        browser.get(server.url("/sign-in"))
        browser.execute_script("document.querySelector('label[for=email]').remove();"
                               "document.querySelector('main').append(Object.assign(document.createElement('img'), {src: '/favicon.ico'}))")
        found = {v["id"] for v in axe_violations(browser)}
        assert {"label", "image-alt"} <= found, found
    finally:
        server.stop()
