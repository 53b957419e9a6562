"""`manage.py group bind GROUP --role ROLE [--namespace NS ...] [--cluster NAME ...]`,
`manage.py group unbind GROUP`, `manage.py group list`: the roles an identity provider's groups
give (access/models.py GroupBinding). Binding a group again replaces its binding. Members' open
pages and watches re-check at once (signals._binding_changed)."""
from django.core.management.base import BaseCommand, CommandError

from dashboard.access.bindings import bind, unbind
from dashboard.access.models import GroupBinding, Role


class Command(BaseCommand):
    help = "Give an identity provider's group a kubedash role (bind), take it away (unbind), or list them."

    def add_arguments(self, parser):
        sub = parser.add_subparsers(dest="action", required=True)
        b = sub.add_parser("bind", help="give GROUP a role (replacing its binding, if any)")
        b.add_argument("group")
        b.add_argument("--role", required=True, choices=Role.values)
        b.add_argument("--namespace", action="append", default=[], help="only this namespace (repeatable)")
        b.add_argument("--cluster", action="append", default=[], help="only this cluster (repeatable)")
        u = sub.add_parser("unbind", help="take GROUP's role away")
        u.add_argument("group")
        sub.add_parser("list", help="every group binding")

    def handle(self, *args, action, **options):
        if action == "bind":
            binding = bind(options["group"], options["role"], options["namespace"], options["cluster"])
            self.stdout.write(f"group {binding.group}: {describe(binding)}")
        elif action == "unbind":
            if not unbind(options["group"]):
                raise CommandError(f'group "{options["group"]}" has no binding')
            self.stdout.write(f"group {options['group']}: unbound")
        else:
            for binding in GroupBinding.objects.all():
                self.stdout.write(f"{binding.group}\t{describe(binding)}")


def describe(binding: GroupBinding) -> str:
    where = [f"namespaces {', '.join(binding.namespaces)}"] if binding.namespaces else ["every namespace"]
    where += [f"clusters {', '.join(binding.clusters)}"] if binding.clusters else []
    return f"{binding.role} in {'; '.join(where)}"
