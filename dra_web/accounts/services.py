"""Accounts: API tokens and the local demo user."""

from __future__ import annotations

import secrets

from django.contrib.auth import get_user_model
from rest_framework.authtoken.models import Token

DEMO_USERNAME = "demo"


def token_for(user, *, rotate: bool = False) -> Token:
    if rotate:
        Token.objects.filter(user=user).delete()
    token, _ = Token.objects.get_or_create(user=user)
    return token


def ensure_user(username: str, password: str | None = None, *, superuser: bool = False):
    """Create the user when missing; set the password when one is given. Returns (user, pw)."""
    User = get_user_model()
    user, created = User.objects.get_or_create(username=username)
    if created or password:
        password = password or secrets.token_urlsafe(12)
        user.set_password(password)
    if superuser:
        user.is_staff = user.is_superuser = True
    user.save()
    return user, (password if (created or password) else None)
