"""Playwright against pytest-django's live_server, driving Debian's Chromium (no downloads).

Celery runs eagerly (no REDIS_URL), so a run started from a page is finished when the page
that started it loads. Every test saves screenshots under test-output/screenshots/.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from tests.browser.chromium import CHROMIUM, launch_chromium

# Playwright's sync API keeps an event loop in this thread; Django's ORM calls from the test
# itself are still synchronous and safe.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

PASSWORD = "maria-password-1"


def pytest_collection_modifyitems(items):
    for item in items:
        if "tests/browser/" in str(item.fspath).replace(os.sep, "/"):
            item.add_marker(pytest.mark.browser)


@pytest.fixture(scope="session")
def chromium():
    from playwright.sync_api import sync_playwright

    if not Path(CHROMIUM).exists() and not shutil.which("chromium"):
        pytest.fail(f"Chromium not found at {CHROMIUM}: install Debian's chromium package")
    with sync_playwright() as p:
        browser = launch_chromium(p)
        yield browser
        browser.close()


@pytest.fixture
def web_settings(settings):
    settings.DRA_WEB_RUN_HEARTBEAT_SECONDS = 0  # eager runs: no heartbeat thread
    return settings


@pytest.fixture
def maria(transactional_db, django_user_model):
    return django_user_model.objects.create_user("maria", password=PASSWORD)


@pytest.fixture
def page(chromium, live_server, web_settings):
    context = chromium.new_context(viewport={"width": 1280, "height": 900}, accept_downloads=False)
    context.set_default_timeout(15_000)
    pg = context.new_page()
    errors: list[str] = []
    pg.on("pageerror", lambda exc: errors.append(str(exc)))
    pg.base = live_server.url
    pg.js_errors = errors
    yield pg
    context.close()
    assert not errors, f"JavaScript errors on the page: {errors}"


@pytest.fixture
def logged_in(page, maria):
    page.goto(f"{page.base}/")
    page.fill("#id_username", "maria")
    page.fill("#id_password", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_url(f"{page.base}/")
    return page
