"""The notifications' settings, from the environment (docs/OPERATIONS.md, "Notifications")."""
import os


def _float(name: str, default: str) -> float:
    return float(os.environ.get(name, default))


# At most this many messages a minute per channel; the rest are folded into one digest.
PER_MINUTE = int(_float("KUBEDASH_NOTIFY_PER_MINUTE", "20"))
RATE_WINDOW_SECONDS = _float("KUBEDASH_NOTIFY_RATE_WINDOW_SECONDS", "60")   # "a minute" (tests shorten it)
# Delivery: each try may take this long; failed tries are retried with backoff for RETRY_FOR, then failed.
TIMEOUT_SECONDS = _float("KUBEDASH_NOTIFY_TIMEOUT_SECONDS", "5")
RETRY_FOR_SECONDS = _float("KUBEDASH_NOTIFY_RETRY_FOR_SECONDS", str(24 * 3600))
BACKOFF_FIRST_SECONDS = _float("KUBEDASH_NOTIFY_BACKOFF_SECONDS", "5")
BACKOFF_MAX_SECONDS = _float("KUBEDASH_NOTIFY_BACKOFF_MAX_SECONDS", "600")
# The sender looks at the outbox at least this often (the evaluator in the same process rings it
# at once; this is for messages another process wrote: "Send a test" from a page).
SENDER_POLL_SECONDS = _float("KUBEDASH_NOTIFY_POLL_SECONDS", "1")
# Rules changed by a page or a command in another process are picked up within this.
RULES_RELOAD_SECONDS = _float("KUBEDASH_NOTIFY_RULES_RELOAD_SECONDS", "2")
# Link-local addresses (169.254.0.0/16, fe80::/10: cloud metadata services among them) and the
# known metadata addresses are refused as destinations unless this is set.
ALLOW_LINK_LOCAL = os.environ.get("KUBEDASH_NOTIFY_ALLOW_LINK_LOCAL", "").lower() in ("1", "true", "yes")
# The address pages are reached at (https://dash.example.com), for the messages' `url`; unset: paths only.
PUBLIC_URL = os.environ.get("KUBEDASH_PUBLIC_URL", "").rstrip("/")
