"""Shared fixtures: users, API clients, and a realistic GPU cluster snapshot.

Browser fixtures live in tests/browser/conftest.py; servers (Redis, Celery, PostgreSQL) in
tests/integration/conftest.py.
"""

from __future__ import annotations

import os

import pytest

from allocator import forking
from bench.workloads import synthetic_cluster, to_json, to_yaml


@pytest.fixture
def cluster_docs() -> list[dict]:
    """Two H100 nodes, one running pod holding a GPU, two pending training pods."""
    return synthetic_cluster(nodes=2, running_pods=1, pending_pods=2)


@pytest.fixture
def cluster_yaml(cluster_docs) -> str:
    return to_yaml(cluster_docs)


@pytest.fixture
def cluster_json(cluster_docs) -> str:
    return to_json(cluster_docs)


class Forks:
    """The children ``allocator.forking`` forked during a test, by pid."""

    def __init__(self) -> None:
        self.pids: list[int] = []

    def reaped(self) -> bool:
        """Whether every one is gone, reaped (no zombie, nothing left running)."""
        for pid in self.pids:
            try:
                os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                continue
            return False
        return True


@pytest.fixture
def forks(monkeypatch) -> Forks:
    recorded = Forks()
    fork = os.fork

    def recording_fork() -> int:
        pid = fork()
        if pid:
            recorded.pids.append(pid)
        return pid

    monkeypatch.setattr(forking.os, "fork", recording_fork)
    return recorded


@pytest.fixture
def _web_settings(settings):
    # Tasks run eagerly inside the test: no heartbeat thread against the test database.
    settings.DRA_WEB_RUN_HEARTBEAT_SECONDS = 0
    return settings


@pytest.fixture
def _fast_passwords(settings):
    # PBKDF2 at production strength costs ~0.4 s per user: not what these tests measure.
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture
def user(db, django_user_model, _fast_passwords):
    return django_user_model.objects.create_user("alice", password="alice-password-1")


@pytest.fixture
def other_user(db, django_user_model, _fast_passwords):
    return django_user_model.objects.create_user("bob", password="bob-password-1")


def _token_client(user):
    from rest_framework.authtoken.models import Token
    from rest_framework.test import APIClient

    client = APIClient()
    token, _ = Token.objects.get_or_create(user=user)
    client.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")
    return client


@pytest.fixture
def api(user, _web_settings):
    """An API client authenticated as alice with her token."""
    return _token_client(user)


@pytest.fixture
def bob_api(other_user, _web_settings):
    return _token_client(other_user)
