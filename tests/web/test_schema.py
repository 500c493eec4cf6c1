"""The OpenAPI document and its UI (assets from drf-spectacular-sidecar, never a CDN)."""

from __future__ import annotations

import pytest
import yaml

pytestmark = pytest.mark.django_db


def test_schema_lists_the_contract_paths(api):
    response = api.get("/api/schema/")
    assert response.status_code == 200
    schema = yaml.safe_load(response.content)
    paths = schema["paths"]
    for path in (
        "/api/snapshots/",
        "/api/snapshots/{snapshot_id}/",
        "/api/snapshots/import/",
        "/api/runs/",
        "/api/runs/{run_id}/",
        "/api/runs/{run_id}/trace/",
        "/api/runs/{run_id}/diff/{other_id}/",
    ):
        assert path in paths, path
    assert "post" in paths["/api/runs/"] and "202" in paths["/api/runs/"]["post"]["responses"]
    params = {p["name"] for p in paths["/api/runs/{run_id}/trace/"]["get"]["parameters"]}
    assert {"parent", "node", "q", "reason"} <= params
    assert {"tokenAuth", "cookieAuth"} <= set(schema["components"]["securitySchemes"])


def test_docs_pages_load_assets_locally(api):
    for url in ("/api/docs/", "/api/redoc/"):
        page = api.get(url)
        assert page.status_code == 200
        html = page.content.decode()
        assert "/static/drf_spectacular_sidecar/" in html
        assert "cdn.jsdelivr" not in html and "unpkg.com" not in html


def test_health_check_needs_no_login(client):
    response = client.get("/healthz/")
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}
