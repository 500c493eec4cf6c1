"""Login, tokens, the demo user and the demo snapshot."""

from __future__ import annotations

from io import StringIO
from pathlib import Path

import pytest
from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import CommandError
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from dra_web.runs.models import Run
from dra_web.snapshots.models import Snapshot

pytestmark = pytest.mark.django_db


def test_obtain_token_with_username_and_password(user):
    client = APIClient()
    response = client.post(
        "/api/auth/token/", {"username": "alice", "password": "alice-password-1"}, format="json"
    )
    assert response.status_code == 200
    token = response.json()["token"]
    assert Token.objects.get(user=user).key == token
    client.credentials(HTTP_AUTHORIZATION=f"Token {token}")
    assert client.get("/api/accounts/me/").json()["username"] == "alice"
    wrong = APIClient().post(
        "/api/auth/token/", {"username": "alice", "password": "nope"}, format="json"
    )
    assert wrong.status_code == 400


def test_logged_in_user_gets_and_rotates_a_token(client, user):
    client.login(username="alice", password="alice-password-1")
    first = client.get("/api/accounts/token/").json()["token"]
    assert client.get("/api/accounts/token/").json()["token"] == first
    # Session-authenticated writes need the CSRF token: use the API client for the rotation.
    api = APIClient()
    api.force_authenticate(user)
    rotated = api.post("/api/accounts/token/").json()["token"]
    assert rotated != first
    assert Token.objects.get(user=user).key == rotated


def test_login_form_takes_username_and_password(client, user):
    response = client.post(
        "/accounts/login/", {"username": "alice", "password": "alice-password-1"}
    )
    assert response.status_code == 302
    assert response["Location"] == settings.LOGIN_REDIRECT_URL
    assert client.get("/api/accounts/me/").json()["username"] == "alice"


def test_create_token_command(user):
    out = StringIO()
    call_command("create_token", "alice", stdout=out)
    assert out.getvalue().strip() == Token.objects.get(user=user).key
    with pytest.raises(CommandError, match="does not exist"):
        call_command("create_token", "mallory")
    out = StringIO()
    call_command("create_token", "carol", "--create-user", stdout=out)
    assert Token.objects.get(user__username="carol").key == out.getvalue().strip()


def test_ensure_demo_user_prints_how_to_log_in(_fast_passwords, settings):
    settings.DEBUG = True  # make run; without DEBUG the password is random (test_hardening)
    out = StringIO()
    call_command("ensure_demo_user", stdout=out)
    text = out.getvalue()
    assert "/accounts/login/" in text and "'demo'" in text and "Authorization: Token" in text
    demo = get_user_model().objects.get(username="demo")
    assert demo.check_password("demo")
    # Running it again keeps the password a user may have changed.
    demo.set_password("changed-by-user")
    demo.save()
    out = StringIO()
    call_command("ensure_demo_user", stdout=out)
    assert "password unchanged" in out.getvalue()
    demo.refresh_from_db()
    assert demo.check_password("changed-by-user")


DEMO = Path(settings.BASE_DIR) / "examples" / "demo-snapshot.yaml"


def test_load_demo_loads_snapshot_and_first_run(
    _fast_passwords, _web_settings, django_capture_on_commit_callbacks
):
    call_command("ensure_demo_user", stdout=StringIO())
    out = StringIO()
    with django_capture_on_commit_callbacks(execute=True):
        call_command("load_demo", stdout=out)
    snapshot = Snapshot.objects.get(source="demo")
    run = Run.objects.get(snapshot=snapshot)
    assert run.status == Run.SUCCEEDED, run.error
    assert run.trace_node_count > 0
    assert f"demo run #{run.pk}" in out.getvalue()
    # Idempotent: a second call neither duplicates the snapshot nor the run.
    call_command("load_demo", stdout=StringIO())
    assert Snapshot.objects.filter(source="demo").count() == 1
    assert Run.objects.count() == 1


def test_load_demo_needs_the_user(db):
    with pytest.raises(CommandError, match="ensure_demo_user"):
        call_command("load_demo")
