from django.apps import AppConfig


class FollowConfig(AppConfig):
    name = "dashboard.follow"
    label = "follow"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self):
        from dashboard.kube import compaction  # noqa: PLC0415 (in ready(): it imports models)

        from .models import FollowSpan  # noqa: PLC0415 (as above)

        # The spans say where the pages' history of a followed cluster has gaps: none is kept
        # for history compaction has dropped.
        compaction.history_cut.connect(lambda sender, before, **kwargs: FollowSpan.prune(before), weak=False,
                                       dispatch_uid="follow-prune-spans")
