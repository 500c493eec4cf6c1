from django.core.management.base import BaseCommand, CommandError

from dra_web.runs import retention

SHOWN_IDS = 20


def _size(n: int) -> str:
    for unit in ("bytes", "kB", "MB", "GB"):
        if n < 1000 or unit == "GB":
            return f"{n} {unit}" if unit == "bytes" else f"{n:.1f} {unit}"
        n /= 1000
    return str(n)


class Command(BaseCommand):
    help = (
        "Delete finished runs older than DRA_WEB_RUN_RETENTION_DAYS (or --older-than) with "
        "their traces; pinned runs and runs with reviews are kept"
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "--older-than",
            type=float,
            default=None,
            metavar="DAYS",
            help="age in days, by when the run finished (default: DRA_WEB_RUN_RETENTION_DAYS)",
        )
        parser.add_argument("--dry-run", action="store_true", help="only list what would go")

    def handle(self, *args, older_than, dry_run, **options):
        if older_than is not None and not older_than > 0:
            raise CommandError("--older-than: must be a number of days > 0")
        report = retention.prune_runs(older_than, dry_run=dry_run)
        if report.cutoff is None:
            self.stdout.write("retention is off (DRA_WEB_RUN_RETENTION_DAYS=0): nothing pruned")
            return
        verb = "would delete" if dry_run else "deleted"
        self.stdout.write(
            f"{verb} {report.runs} run{'s' if report.runs != 1 else ''} finished before "
            f"{report.cutoff:%Y-%m-%d %H:%M} UTC ({_size(report.bytes)} of results and traces)"
        )
        if report.ids:
            shown = ", ".join(f"#{pk}" for pk in report.ids[:SHOWN_IDS])
            more = f" and {len(report.ids) - SHOWN_IDS} more" if len(report.ids) > SHOWN_IDS else ""
            self.stdout.write(f"  {shown}{more}")
