from django.apps import AppConfig


class AccessConfig(AppConfig):
    name = "dashboard.access"
    label = "access"

    def ready(self):
        from . import signals  # noqa: PLC0415 (in ready(): it imports models, loadable only once the app registry is set up)

        signals.connect()
        # A KUBEDASH_AUTHENTICATION_CONFIG kubedash cannot honour (a CEL expression, a missing
        # audience) stops the start with the field named, rather than refusing tokens later.
        from . import jwt_authn  # noqa: PLC0415 (as above)

        jwt_authn.issuers()
