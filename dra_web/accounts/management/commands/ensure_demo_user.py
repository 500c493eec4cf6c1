import os
import secrets

from django.conf import settings
from django.core.management.base import BaseCommand

from dra_web.accounts import services


class Command(BaseCommand):
    help = (
        "Create the demo user (if missing) and print how to log in. `make run` calls it; a "
        "deployment only when asked (DRA_WEB_CREATE_DEMO_USER=true in docker-compose)."
    )

    def add_arguments(self, parser):
        parser.add_argument("--username", default=services.DEMO_USERNAME)
        parser.add_argument(
            "--password",
            default=os.environ.get("DRA_WEB_DEMO_PASSWORD") or None,
            help="default: DRA_WEB_DEMO_PASSWORD, else 'demo' for a new user with DEBUG on "
            "and a random password (printed) with DEBUG off",
        )

    def handle(self, *args, username, password, **options):
        user, pw = services.ensure_user(username, password or None)
        if pw is None and password is None:
            # Existing user: keep its password.
            message = f"log in at /accounts/login/ as {username!r} (password unchanged)"
        else:
            message = f"log in at /accounts/login/ as {username!r} with password {pw!r}"
        if pw is not None and password is None:
            # A new user without a given password: the well-known local one only for local
            # development; a deployment (DEBUG off) never gets a guessable login.
            fresh = "demo" if settings.DEBUG else secrets.token_urlsafe(12)
            user.set_password(fresh)
            user.save(update_fields=["password"])
            message = f"log in at /accounts/login/ as {username!r} with password {fresh!r}"
        token = services.token_for(user).key
        self.stdout.write(message)
        self.stdout.write(f"API token: {token}  (header: Authorization: Token {token})")
