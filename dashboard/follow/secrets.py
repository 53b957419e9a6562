"""Followed clusters' credentials at rest: Fernet (AES-128-CBC + HMAC-SHA256) under one key.

KUBEDASH_CREDENTIALS_KEY  a Fernet key (`python -c "from cryptography.fernet import Fernet;
                          print(Fernet.generate_key().decode())"`); several, comma-separated,
                          to rotate: the first encrypts, any of them decrypts. Unset (local use):
                          a key generated once into DATA_DIR/credentials_key, mode 0600.

Deployments with several processes or an ephemeral /data must set it, the same in every
process (docs/OPERATIONS.md, "Following clusters: credentials"). A token that does not decrypt
under the key raises CredentialsError, whose message says so in plain words: never a
traceback, never the token.
"""
from __future__ import annotations

import os
from pathlib import Path

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from django.conf import settings

ENV = "KUBEDASH_CREDENTIALS_KEY"
KEY_FILE = "credentials_key"


class CredentialsError(Exception):
    """Stored credentials cannot be used with the configured key (or the key is not a key)."""


def _key_file() -> Path:
    return Path(settings.DATA_DIR) / KEY_FILE


def _local_key() -> bytes:
    """The key in DATA_DIR/credentials_key, created (0600, exclusively) on first use."""
    path = _key_file()
    if not path.exists():
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            pass   # another process made it first: read theirs
        else:
            with os.fdopen(fd, "wb") as f:
                f.write(Fernet.generate_key())
            path.chmod(0o600)
    return path.read_bytes().strip()


def _fernet() -> MultiFernet:
    configured = os.environ.get(ENV, "").strip()
    keys = [k.strip() for k in configured.split(",") if k.strip()] if configured else [_local_key()]
    try:
        return MultiFernet([Fernet(k) for k in keys])
    except (ValueError, TypeError):
        where = ENV if configured else f"the key file {_key_file()}"
        raise CredentialsError(
            f"{where} is not a Fernet key (32 url-safe base64-encoded bytes; make one with "
            '`python -c "from cryptography.fernet import Fernet; print(Fernet.generate_key().decode())"`)'
        ) from None


def check_configured_key() -> None:
    """CredentialsError now (`serve` refuses to start) when KUBEDASH_CREDENTIALS_KEY is set but
    is not a key (a placeholder left in), rather than at the first `follow add`."""
    if os.environ.get(ENV, "").strip():
        _fernet()


def encrypt(data: bytes) -> bytes:
    return _fernet().encrypt(bytes(data))


def decrypt(token: bytes) -> bytes:
    try:
        return _fernet().decrypt(bytes(token))
    except InvalidToken:
        how = (f"this {ENV}" if os.environ.get(ENV, "").strip()
               else f"this {ENV} (unset: the key in {_key_file()})")
        raise CredentialsError(
            f"The cluster's stored credentials cannot be decrypted with {how}: they were saved under "
            f"another key. Set {ENV} to the key they were saved with, or remove the cluster and add it again."
        ) from None
