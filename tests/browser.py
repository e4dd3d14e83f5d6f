"""Headless Chromium for the browser tests: Debian's chromium and chromedriver (`make browser`).

Where they are missing a test is skipped with the reason; CI sets AURA_REQUIRE_BROWSER=1, so
there a missing browser fails instead."""

import os
import shutil

import pytest

CHROMIUM, CHROMEDRIVER = shutil.which("chromium"), shutil.which("chromedriver")
NO_BROWSER = "Debian's chromium and chromium-driver are not installed (run `make browser` as root)"


def chromium(tmp_path, prefs: dict | None = None, window: str | None = None):
    """A headless Chromium WebDriver with its own profile and no network side traffic (skips or
    fails without a browser, see above); the caller quits it. Only a serial test may start one."""
    from tests.workflow import require_tier

    require_tier("starts a browser", "serial")
    if not (CHROMIUM and CHROMEDRIVER):
        if os.environ.get("AURA_REQUIRE_BROWSER"):
            pytest.fail(NO_BROWSER)
        pytest.skip(NO_BROWSER)
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 f"--user-data-dir={tmp_path / 'profile'}", *([f"--window-size={window}"] if window else [])):
        options.add_argument(flag)
    if prefs:
        options.add_experimental_option("prefs", prefs)
    return webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)


# How long a page may take to show what a test waits for: a loaded 2-core machine is slow, never
# wrong, so a test waits for the condition until this deadline rather than for a count of tries.
PAGE_DEADLINE_S = 10.0


def wait_for(check, seconds: float = PAGE_DEADLINE_S) -> bool:
    """Poll `check` until it holds or the deadline passes; a check that raises (the page is still
    loading) counts as not yet. The last look's answer, after the deadline."""
    import time

    end = time.monotonic() + seconds
    while time.monotonic() < end:
        try:
            if check():
                return True
        except Exception:  # noqa: BLE001 (an element not there yet, a page between loads)
            pass
        time.sleep(0.05)
    return bool(check())
