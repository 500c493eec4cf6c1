import os

from django.core.management.base import BaseCommand

from dra_web.accounts import services


class Command(BaseCommand):
    help = "Create the local demo user (if missing) and print how to log in"

    def add_arguments(self, parser):
        parser.add_argument("--username", default=services.DEMO_USERNAME)
        parser.add_argument(
            "--password",
            default=os.environ.get("DRA_WEB_DEMO_PASSWORD") or None,
            help="default: DRA_WEB_DEMO_PASSWORD, else 'demo' for a new user",
        )

    def handle(self, *args, username, password, **options):
        user, pw = services.ensure_user(username, password or None)
        if pw is None and password is None:
            # Existing user: keep its password; a fresh one gets the well-known local password.
            message = f"log in at /accounts/login/ as {username!r} (password unchanged)"
        else:
            message = f"log in at /accounts/login/ as {username!r} with password {pw!r}"
        if pw is not None and password is None:
            user.set_password("demo")
            user.save(update_fields=["password"])
            message = f"log in at /accounts/login/ as {username!r} with password 'demo'"
        token = services.token_for(user).key
        self.stdout.write(message)
        self.stdout.write(f"API token: {token}  (header: Authorization: Token {token})")
