"""The web view (/ui) in headless Chromium, on both backends: sign in, org -> namespace ->
table, expand a snapshot (author and lineage link), sign out; a restricted principal does not
see a table it has no grant on; no page carries the token. Every page is saved as a PNG under
$FLOE_SCREENSHOTS (default: a temporary directory, printed).

Needs Debian's `chromium` and `chromium-driver` (scripts/test installs them); Selenium Manager
downloads nothing since the driver's path is given.
"""

import os
import shutil
import tempfile
import uuid

import pyarrow as pa
import pytest
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

from test_access import SCHEMA, _api

SHOTS = os.environ.get("FLOE_SCREENSHOTS") or tempfile.mkdtemp(prefix="floe-ui-screenshots-")


@pytest.fixture(scope="module")
def browser():
    driver_path = shutil.which("chromedriver")
    chromium = shutil.which("chromium")
    if not driver_path or not chromium:
        pytest.fail("chromium and chromium-driver must be installed (scripts/test installs them)")
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                "--window-size=1280,900", "--disable-extensions", "--no-first-run"):
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service(executable_path=driver_path), options=options)
    driver.set_page_load_timeout(30)
    print(f"\nweb view screenshots: {SHOTS}")
    try:
        yield driver
    finally:
        driver.quit()


def _shot(driver, floe, name: str):
    os.makedirs(SHOTS, exist_ok=True)
    path = os.path.join(SHOTS, f"{floe.backend}-{name}.png")
    driver.save_screenshot(path)
    return path


def _no_token(driver, *tokens):
    source = driver.page_source
    for token in tokens:
        assert token not in source, f"a page carries a token: {driver.current_url}"
    assert all(token not in driver.current_url for token in tokens)


def _wait_for_heading(driver, text: str):
    """Waits until the page (after a click) is the one headed `text`."""
    def headed(d):
        try:
            return d.find_element(By.TAG_NAME, "h1").text == text
        except Exception:
            return False
    WebDriverWait(driver, 10).until(headed)


def _sign_in(driver, base: str, token: str):
    driver.delete_all_cookies()
    driver.get(base + "/ui")
    driver.find_element(By.ID, "token").send_keys(token)
    driver.find_element(By.ID, "signin").click()
    _wait_for_heading(driver, "Organizations")
    cookie = driver.get_cookie("floe_session")
    assert cookie and cookie["httpOnly"] and cookie.get("sameSite") == "Strict"


def _sign_out(driver):
    driver.find_element(By.ID, "signout").click()
    WebDriverWait(driver, 10).until(lambda d: d.find_elements(By.ID, "token"))
    assert driver.get_cookie("floe_session") is None


def test_sign_in_browse_expand_a_snapshot_and_sign_out(floe, browser):
    base = floe.uri.removesuffix("/iceberg")
    ns = "ui_" + uuid.uuid4().hex[:8]
    catalog = floe.catalog()
    catalog.create_namespace(ns)
    table = catalog.create_table(f"{ns}.observations", schema=SCHEMA)
    rows = pa.table({"id": pa.array([1, 2, 3], pa.int64()), "name": pa.array(["a", "b", "<b>c</b>"])})
    table.append(rows, snapshot_properties={
        "arraylake.source.repo": "earthmover/era5-surface",
        "arraylake.source.ref": "main",
        "arraylake.source.snapshot-id": "1CECHNKREP0F1RSTCMT0",
        "arraylake.source.query": "<script>alert('x')</script>",
    })
    table.append(rows)

    driver = browser
    driver.get(base + "/ui")
    assert driver.find_element(By.ID, "token")
    _shot(driver, floe, "1-sign-in")
    _sign_in(driver, base, floe.token)
    _no_token(driver, floe.token)
    _shot(driver, floe, "2-orgs")

    driver.find_element(By.LINK_TEXT, floe.warehouse).click()
    _wait_for_heading(driver, floe.warehouse)
    row = driver.find_element(By.XPATH, f"//table[@id='namespaces']//tr[td/a[text()='{ns}']]")
    assert "private" in row.text and "default" in row.text
    _no_token(driver, floe.token)
    _shot(driver, floe, "3-org")

    driver.find_element(By.LINK_TEXT, ns).click()
    _wait_for_heading(driver, ns)
    driver.find_element(By.LINK_TEXT, "observations").click()
    _wait_for_heading(driver, "observations")
    assert driver.find_element(By.ID, "schema").text.count("\n") >= 2
    assert driver.find_element(By.ID, "chart")
    snapshots = driver.find_elements(By.CSS_SELECTOR, "details.snapshot")
    assert len(snapshots) == 2
    _no_token(driver, floe.token)
    _shot(driver, floe, "4-table")

    # The older snapshot (second, newest first) carries the lineage keys.
    lineage = snapshots[1]
    assert not lineage.find_element(By.TAG_NAME, "table").is_displayed()
    lineage.find_element(By.TAG_NAME, "summary").click()
    summary = lineage.find_element(By.TAG_NAME, "table")
    assert summary.is_displayed()
    assert "arraylake.author-email" in summary.text
    assert "<script>alert('x')</script>" in summary.text, "shown as text, not run"
    link = lineage.find_element(By.CSS_SELECTOR, "a.repo")
    assert link.get_attribute("href") == "https://repos.example.test/earthmover/era5-surface"
    assert link.text == "earthmover/era5-surface"
    assert "added-records" in summary.text and "1CECHNKREP0F1RSTCMT0" in summary.text
    driver.execute_script("arguments[0].scrollIntoView()", lineage)
    _no_token(driver, floe.token)
    _shot(driver, floe, "5-snapshot-expanded")

    _sign_out(driver)
    driver.get(f"{base}/ui/orgs/{floe.warehouse}")
    assert driver.find_element(By.ID, "token"), "signed out: back to the sign-in form"


def test_a_restricted_principal_sees_only_its_granted_table(floe, browser):
    base = floe.uri.removesuffix("/iceberg")
    ns = "uir_" + uuid.uuid4().hex[:8]
    catalog = floe.catalog()
    catalog.create_namespace(ns)
    catalog.create_table(f"{ns}.granted", schema=SCHEMA)
    catalog.create_table(f"{ns}.hidden", schema=SCHEMA)
    status, client = _api(floe, "POST", f"/orgs/{floe.warehouse}/api-clients", floe.token,
                          {"name": "ui-reader-" + ns, "role": "read"})
    assert status == 201, client
    principal = client["principal"]
    assert _api(floe, "PUT", f"/orgs/{floe.warehouse}/members/{principal}", floe.token, {"role": "none"})[0] == 204
    assert _api(floe, "PUT", f"/orgs/{floe.warehouse}/namespaces/{ns}/grants", floe.token,
                {"principal": principal, "action": "read", "table": "granted"})[0] == 204

    driver = browser
    _sign_in(driver, base, client["token"])
    driver.get(f"{base}/ui/orgs/{floe.warehouse}/namespaces/{ns}")
    tables = driver.find_element(By.ID, "tables").text
    assert "granted" in tables and "hidden" not in tables
    _no_token(driver, client["token"], floe.token)
    _shot(driver, floe, "6-restricted-namespace")
    driver.get(f"{base}/ui/orgs/{floe.warehouse}/namespaces/{ns}/tables/hidden")
    assert driver.find_element(By.TAG_NAME, "h1").text.startswith("403")
    _shot(driver, floe, "7-forbidden")
    driver.get(base + "/ui")
    _sign_out(driver)
