"""The database-facing web tests again, against a real PostgreSQL (a second pytest run)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.integration


def test_web_suite_passes_on_postgresql(postgres_url):
    env = {k: v for k, v in os.environ.items() if not k.startswith("DRA_WEB_")}
    env["DATABASE_URL"] = postgres_url
    env.pop("REDIS_URL", None)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "tests/web", "-q", "-p", "no:cacheprovider"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    tail = "\n".join(done.stdout.splitlines()[-25:])
    assert done.returncode == 0, tail + done.stderr[-2000:]
    assert " passed" in done.stdout and " failed" not in done.stdout
