from django.core.management.base import BaseCommand

from dashboard.kube.compaction import compact


class Command(BaseCommand):
    help = "Compact the revision log now (drop superseded history beyond the retention settings)."

    def add_arguments(self, parser):
        parser.add_argument("--keep", type=int, default=None, help="revisions to keep (default: KUBEDASH_RETAIN_REVISIONS)")
        parser.add_argument("--keep-seconds", type=int, default=None,
                            help="watch window age to keep (default: KUBEDASH_RETAIN_SECONDS)")
        parser.add_argument("--history-seconds", type=int, default=None,
                            help="the pages' history to keep (default: KUBEDASH_HISTORY_SECONDS)")

    def handle(self, *args, keep=None, keep_seconds=None, history_seconds=None, **options):
        removed = compact(keep=keep, keep_seconds=keep_seconds, history_seconds=history_seconds)
        self.stdout.write(f"removed {removed} revisions")
