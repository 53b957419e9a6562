from django.core.management.base import BaseCommand, CommandError

from dashboard.kube.epoch import bump


class Command(BaseCommand):
    help = ("Run after restoring a backup, before the app starts: revisions jump past anything handed "
            "out before the restore and the older ones are marked compacted, so resuming watches and "
            "lists get 410 and relist (etcdutl's --bump-revision --mark-compacted).")

    def add_arguments(self, parser):
        parser.add_argument("--by", type=int, default=None,
                            help="how far to jump (default: a million per second since the newest restored "
                                 "revision was written, at least a billion)")

    def handle(self, *args, by=None, **options):
        if by is not None and by < 1:
            raise CommandError("--by must be a positive number of revisions")
        restored, new = bump(by)
        self.stdout.write(f"revision {restored} -> {new}: revisions up to {new} are compacted "
                          "(clients resuming from before the restore get 410 and relist)")
