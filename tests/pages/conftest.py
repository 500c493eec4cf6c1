"""Fixtures of the page tests: a logged-in team, the GPU training snapshot, a finished run."""

from __future__ import annotations

import pytest

from tests.pages.builders import FIXTURE, make_run


@pytest.fixture
def team(db, django_user_model):
    """Two engineers who review failed placements together."""
    return (
        django_user_model.objects.create_user("maria", password="maria-password-1"),
        django_user_model.objects.create_user("kenji", password="kenji-password-1"),
    )


@pytest.fixture
def maria(team):
    return team[0]


@pytest.fixture
def browser_client(client, maria):
    client.force_login(maria)
    return client


@pytest.fixture
def snapshot(maria):
    from dra_web.snapshots.services import create_snapshot

    return create_snapshot(maria, [(FIXTURE.name, FIXTURE.read_bytes())], "gpu-training")


@pytest.fixture
def run(snapshot, maria):
    return make_run(snapshot, maria)
