"""Screenshots of the browser tests, under test-output/screenshots/."""

from __future__ import annotations

from pathlib import Path

SCREENSHOTS = Path(__file__).resolve().parents[2] / "test-output" / "screenshots"


def shot(page, name: str, full_page: bool = False) -> Path:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=full_page)
    return path


WIDTHS = (1280, 1920)


def shots(page, name: str, full_page: bool = False) -> list[Path]:
    """The same view at 1280 and 1920 px wide (``name-1280.png``, ``name-1920.png``); the
    viewport is left at 1280."""
    out = []
    height = page.viewport_size["height"] if page.viewport_size else 900
    for width in WIDTHS:
        page.set_viewport_size({"width": width, "height": height})
        out.append(shot(page, f"{name}-{width}", full_page=full_page))
    page.set_viewport_size({"width": WIDTHS[0], "height": height})
    return out
