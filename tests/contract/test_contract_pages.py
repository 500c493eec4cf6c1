"""CONTRACT section 7: the pages (login, the four paths, the accessible search tree)."""

from __future__ import annotations

import re

import pytest
import yaml
from django.contrib.staticfiles import finders

from tests.contract.conftest import DEMO

pytestmark = pytest.mark.django_db


@pytest.fixture
def finished(api, django_capture_on_commit_callbacks):
    """A demo snapshot with two finished runs (gates on, DRAAdminAccess off)."""
    snap = api.post("/api/snapshots/", DEMO.read_text(), content_type="application/yaml").json()
    runs = []
    for options in ({}, {"featureGates": {"DRAAdminAccess": False}}):
        with django_capture_on_commit_callbacks(execute=True):
            response = api.post(
                "/api/runs/", {"snapshot": snap["id"], "options": options}, format="json"
            )
        runs.append(api.get(f"/api/runs/{response.json()['id']}/").json())
    assert all(r["status"] == "succeeded" for r in runs), runs
    return snap, runs


def _paths(snap, runs):
    a, b = runs
    return [
        "/",
        f"/snapshots/{snap['id']}/",
        f"/runs/{a['id']}/",
        f"/runs/{a['id']}/diff/{b['id']}/",
    ]


def test_pages_require_login(client, finished):
    snap, runs = finished
    for path in _paths(snap, runs):
        response = client.get(path)
        assert response.status_code == 302, path
        assert response["Location"].startswith("/accounts/login/"), response["Location"]


def test_standard_login_form_with_username_and_password(client, finished):
    snap, runs = finished
    page = client.get("/accounts/login/")
    assert page.status_code == 200
    html = page.content.decode()
    assert re.search(r'<input[^>]*name="username"', html)
    assert re.search(r'<input[^>]*name="password"', html)
    target = f"/runs/{runs[0]['id']}/"
    done = client.post(
        f"/accounts/login/?next={target}",
        {"username": "alice", "password": "alice-password-1", "next": target},
    )
    assert done.status_code == 302 and done["Location"] == target
    for path in _paths(snap, runs):
        assert client.get(path).status_code == 200, path
    wrong = client.__class__().post("/accounts/login/", {"username": "alice", "password": "nope"})
    assert wrong.status_code == 200  # the form again, with an error


def test_each_page_shows_what_the_contract_lists(client, user, finished):
    snap, (a, b) = finished
    client.force_login(user)
    dashboard = client.get("/").content.decode()
    assert snap["name"] in dashboard
    assert f"/runs/{a['id']}/" in dashboard
    assert 'type="file"' in dashboard  # upload
    assert re.search(r"<form[^>]*>", dashboard)

    snapshot_page = client.get(f"/snapshots/{snap['id']}/").content.decode()
    for kind in snap["objectCounts"]:
        assert kind in snapshot_page
    snapshot_page = client.get(f"/snapshots/{snap['id']}/?kind=NodePool").content.decode()
    for doc in yaml.safe_load_all(DEMO.read_text()):
        if doc and doc["kind"] == "NodePool":
            assert doc["metadata"]["name"] in snapshot_page

    run_page = client.get(f"/runs/{a['id']}/").content.decode()
    for entry in a["result"]["pods"][:10]:  # the placements table is paginated
        assert entry["pod"].split("/")[1] in run_page
    for nc in a["result"]["nodeClaims"]:
        assert nc["name"] in run_page
    assert a["result"]["pools"][0]["pool"] in run_page
    # summary, placements, NodeClaims, search tree, pools, review
    for section in ("Summary", "Placements", "NodeClaims", "Search tree", "Pools", "Review"):
        assert re.search(r"<(h2|button|a)[^>]*>\s*" + section, run_page), section

    diff_page = client.get(f"/runs/{a['id']}/diff/{b['id']}/").content.decode()
    assert "dcgm" in diff_page or "gpu-debug" in diff_page or "admin" in diff_page.lower()


def test_search_tree_is_an_aria_tree(client, user, finished):
    _, (a, _) = finished
    client.force_login(user)
    html = client.get(f"/runs/{a['id']}/").content.decode()
    container = re.search(r'<(ul|div|ol)[^>]*role="tree"[^>]*>', html)
    assert container, "the search tree container has role=tree"
    scripts = re.findall(r'<script[^>]*src="([^"]+)"', html)
    tree_js = [s for s in scripts if "tree" in s]
    assert tree_js, scripts
    path = finders.find(tree_js[0].split("/static/", 1)[1].split("?")[0])
    with open(path) as f:
        source = f.read()
    # The nodes it renders are treeitems with aria-expanded where they have children.
    assert re.search(r'role["\']?\s*[:=]\s*["\']treeitem', source)
    assert "aria-expanded" in source
    assert "keydown" in source  # keyboard navigation
    for key in ("ArrowDown", "ArrowUp", "ArrowRight", "ArrowLeft"):
        assert key in source, key
