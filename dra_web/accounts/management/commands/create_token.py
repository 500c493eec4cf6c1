from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from dra_web.accounts import services


class Command(BaseCommand):
    help = "Print the API token of USER (created when missing): Authorization: Token <key>"

    def add_arguments(self, parser):
        parser.add_argument("username")
        parser.add_argument("--rotate", action="store_true", help="replace an existing token")
        parser.add_argument("--create-user", action="store_true", help="create USER if missing")

    def handle(self, *args, username, rotate, create_user, **options):
        User = get_user_model()
        user = User.objects.filter(username=username).first()
        if user is None:
            if not create_user:
                raise CommandError(f"user {username!r} does not exist (use --create-user)")
            user, _ = services.ensure_user(username)
        self.stdout.write(services.token_for(user, rotate=rotate).key)
