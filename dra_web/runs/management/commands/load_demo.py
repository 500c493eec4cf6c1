from pathlib import Path

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from dra_web.accounts import services as account_services
from dra_web.runs import services as run_services
from dra_web.runs.models import Run
from dra_web.snapshots import services
from dra_web.snapshots.models import Snapshot

DEFAULT_PATH = Path(settings.BASE_DIR) / "examples" / "demo-snapshot.yaml"


class Command(BaseCommand):
    help = "Load examples/demo-snapshot.yaml for a user and start a first run"

    def add_arguments(self, parser):
        parser.add_argument("--user", default=account_services.DEMO_USERNAME)
        parser.add_argument("--path", default=str(DEFAULT_PATH))
        parser.add_argument("--no-run", action="store_true", help="only load the snapshot")

    def handle(self, *args, user, path, no_run, **options):
        owner = get_user_model().objects.filter(username=user).first()
        if owner is None:
            raise CommandError(f"user {user!r} does not exist: run ensure_demo_user first")
        file = Path(path)
        if not file.is_file():
            raise CommandError(f"{file}: no such file")
        try:
            snapshot = services.create_snapshot(
                owner, [(file.name, file.read_bytes())], "demo", source=Snapshot.SOURCE_DEMO
            )
        except services.SnapshotUploadError as exc:
            raise CommandError("\n".join(exc.problems)) from None
        state = "already loaded" if snapshot.existing else "loaded"
        self.stdout.write(f"demo snapshot #{snapshot.pk} {state}: {snapshot.object_counts}")
        if no_run:
            return
        if snapshot.existing and snapshot.runs.exists():
            self.stdout.write(f"demo run #{snapshot.runs.order_by('id').first().pk} exists")
            return
        run = run_services.start_run(owner, snapshot, {"trace": True})
        run = Run.objects.get(pk=run.pk)
        self.stdout.write(f"demo run #{run.pk} {run.status}")
