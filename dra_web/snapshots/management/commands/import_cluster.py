import sys
from pathlib import Path

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from dra_web.accounts import services as account_services
from dra_web.snapshots import services


class Command(BaseCommand):
    help = "List every DRA/Karpenter kind from a live cluster and store it as a snapshot"

    def add_arguments(self, parser):
        parser.add_argument("--kubeconfig", required=True, help="path to a kubeconfig file")
        parser.add_argument("--context", default=None)
        parser.add_argument("--name", default=None, help="snapshot name")
        parser.add_argument("--user", default=account_services.DEMO_USERNAME, help="owner")
        parser.add_argument(
            "--instance-types",
            action="append",
            default=[],
            metavar="PATH",
            help="InstanceType YAML/JSON (or Karpenter instance_types.json); repeatable",
        )
        parser.add_argument(
            "--region",
            default=None,
            help="AWS region of the catalog (default: read from the nodes' labels)",
        )
        parser.add_argument(
            "--no-catalog",
            dest="catalog",
            action="store_false",
            help="do not add the AWS catalog's instance types",
        )

    def handle(
        self, *args, kubeconfig, context, name, user, instance_types, region, catalog, **options
    ):
        owner = get_user_model().objects.filter(username=user).first()
        if owner is None:
            raise CommandError(f"user {user!r} does not exist")
        path = Path(kubeconfig)
        if not path.is_file():
            raise CommandError(f"{path}: no such file")
        files = []
        for it in instance_types:
            p = Path(it)
            if not p.is_file():
                raise CommandError(f"{p}: no such file")
            files.append((p.name, p.read_bytes()))
        try:
            snapshot = services.import_cluster(
                owner,
                path.read_text(),
                context=context,
                name=name,
                instance_type_files=files,
                allow_local_files=True,  # the operator's own kubeconfig may use exec/files
                catalog=catalog,
                region=region,
            )
        except services.SnapshotUploadError as exc:
            for problem in exc.problems:
                sys.stderr.write(f"{problem}\n")
            raise CommandError("import failed", returncode=2) from None
        state = "already stored as" if snapshot.existing else "stored as"
        self.stdout.write(f"{state} snapshot #{snapshot.pk} {snapshot.name!r}")
        for kind, count in sorted(snapshot.object_counts.items()):
            self.stdout.write(f"  {kind}: {count}")
        for warning in snapshot.warnings:
            self.stdout.write(f"warning: {warning}")
