"""Debian's Chromium under Playwright: one launch recipe for the browser tests and the benches."""

from __future__ import annotations

import os

CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
# Headless and quiet: no sandbox (containers), no GPU, no background traffic skewing timings.
CHROMIUM_ARGS = [
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


def launch_chromium(playwright):
    """Launch Debian's Chromium (never a downloaded browser) headless."""
    return playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
