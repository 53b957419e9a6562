"""Local TLS material for the HTTPS listener: a private CA and a serving certificate it signs.

kubectl (Go's crypto/tls) sends bearer tokens only over TLS and verifies the server strictly:
the name it dialled must be in the certificate's subjectAltName (the CN is ignored), the leaf
must allow serverAuth, and the CA must be a real CA (BasicConstraints CA:TRUE, keyCertSign).
The CA is made once and kept, so kubeconfigs written earlier stay valid; the serving
certificate is remade when it is missing, unreadable, near expiry, not signed by the CA, or
does not cover a requested host name.

Needs only the `cryptography` package; importable without Django.
"""
from __future__ import annotations

import datetime as dt
import ipaddress
import os
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

try:
    import fcntl
except ImportError:     # Windows: no advisory locks; single-process use only
    fcntl = None

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

# Names every serving certificate covers: what a local client dials.
DEFAULT_HOSTS = ("localhost", "127.0.0.1", "::1")
CA_VALIDITY = dt.timedelta(days=3650)
SERVER_VALIDITY = dt.timedelta(days=365)
# Renew the serving certificate this long before it expires, so a running server
# started just before expiry does not go stale mid-week.
RENEW_BEFORE = dt.timedelta(days=30)
# Backdate notBefore a little: a client whose clock runs slightly behind must not reject it.
CLOCK_SKEW = dt.timedelta(hours=1)


@dataclass(frozen=True)
class TlsPaths:
    ca_cert: Path
    server_cert: Path
    server_key: Path


def ensure_tls(data_dir: str | os.PathLike, hosts: tuple[str, ...] | list[str] = (),
               *, now: dt.datetime | None = None) -> TlsPaths:
    """Create (first run) or reuse the CA and serving certificate under data_dir/tls/.

    `hosts` are extra DNS names or IP addresses the serving certificate must cover, beyond
    localhost, 127.0.0.1 and ::1. `now` is for tests.
    """
    now = now or dt.datetime.now(dt.timezone.utc)
    tls_dir = Path(data_dir) / "tls"
    tls_dir.mkdir(parents=True, exist_ok=True)
    paths = TlsPaths(tls_dir / "ca.crt", tls_dir / "server.crt", tls_dir / "server.key")
    wanted = _unique(list(DEFAULT_HOSTS) + [h for h in hosts if h])
    # Several processes may start at once on one data dir (compose with replicas): one at a
    # time, or two would each make a CA and sign with a key the other overwrote.
    with _locked(tls_dir / ".lock"):
        _ensure(paths, tls_dir / "ca.key", wanted, now)
    return paths


def expiry_times(data_dir: str | os.PathLike) -> dict[str, float]:
    """When the certificates under data_dir/tls/ stop being valid (`serving`, `ca`: Unix
    seconds), those that exist; for /metrics. `serve` renews the serving one when it starts."""
    out = {}
    for name, path in (("serving", "server.crt"), ("ca", "ca.crt")):
        try:
            cert = x509.load_pem_x509_certificate((Path(data_dir) / "tls" / path).read_bytes())
        except (OSError, ValueError):
            continue
        out[name] = cert.not_valid_after_utc.timestamp()
    return out


def _ensure(paths: TlsPaths, ca_key_path: Path, wanted: list[str], now: dt.datetime) -> None:
    ca_cert, ca_key = _load_ca(paths.ca_cert, ca_key_path, now)
    if ca_cert is None:
        ca_key = ec.generate_private_key(ec.SECP256R1())
        ca_cert = _make_ca(ca_key, now)
        _write_key(ca_key_path, ca_key)
        _write_atomic(paths.ca_cert, ca_cert.public_bytes(serialization.Encoding.PEM), 0o644)
        server_ok = False   # a new CA invalidates whatever serving certificate was there
    else:
        server_ok = _server_cert_ok(paths, ca_cert, wanted, now)
        # Keep the names the old certificate covered, so two callers asking for different
        # extra names do not keep replacing each other's certificate.
        wanted = _unique(wanted + sorted(_old_hosts(paths.server_cert)))

    if not server_ok:
        key = ec.generate_private_key(ec.SECP256R1())
        cert = _make_server_cert(key, ca_cert, ca_key, wanted, now)
        _write_key(paths.server_key, key)
        _write_atomic(paths.server_cert, cert.public_bytes(serialization.Encoding.PEM), 0o644)


def covered_hosts(cert: x509.Certificate) -> set[str]:
    """The subjectAltName entries of a certificate, as strings (IPs in compressed form)."""
    try:
        san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return set()
    return set(san.get_values_for_type(x509.DNSName)) | {
        str(ip) for ip in san.get_values_for_type(x509.IPAddress)}


# --- internals -------------------------------------------------------------------------

def _unique(hosts: list[str]) -> list[str]:
    out: list[str] = []
    for h in hosts:
        h = _normalize_host(h)
        if h not in out:
            out.append(h)
    return out


def _normalize_host(host: str) -> str:
    host = host.strip().strip("[]")
    try:
        return str(ipaddress.ip_address(host))
    except ValueError:
        return host.lower()


def _san(hosts: list[str]) -> x509.SubjectAlternativeName:
    names: list[x509.GeneralName] = []
    for h in hosts:
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(h)))
        except ValueError:
            names.append(x509.DNSName(h))
    return x509.SubjectAlternativeName(names)


def _load_ca(cert_path: Path, key_path: Path, now: dt.datetime):
    """The stored CA if it is complete, consistent and valid for a while yet; else (None, None)."""
    try:
        cert = x509.load_pem_x509_certificate(cert_path.read_bytes())
        key = serialization.load_pem_private_key(key_path.read_bytes(), password=None)
    except (OSError, ValueError, TypeError):
        return None, None
    if not _same_key(cert, key):
        return None, None
    if cert.not_valid_after_utc - RENEW_BEFORE <= now:
        return None, None
    return cert, key


def _old_hosts(path: Path) -> set[str]:
    try:
        return covered_hosts(x509.load_pem_x509_certificate(path.read_bytes()))
    except (OSError, ValueError):
        return set()


def _same_key(cert: x509.Certificate, key) -> bool:
    spki = (serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    return cert.public_key().public_bytes(*spki) == key.public_key().public_bytes(*spki)


def _server_cert_ok(paths: TlsPaths, ca_cert: x509.Certificate, hosts: list[str],
                    now: dt.datetime) -> bool:
    try:
        cert = x509.load_pem_x509_certificate(paths.server_cert.read_bytes())
        key = serialization.load_pem_private_key(paths.server_key.read_bytes(), password=None)
    except (OSError, ValueError, TypeError):
        return False
    if not _same_key(cert, key):
        return False
    if not (cert.not_valid_before_utc <= now < cert.not_valid_after_utc - RENEW_BEFORE):
        return False
    try:
        cert.verify_directly_issued_by(ca_cert)
    except (ValueError, TypeError, InvalidSignature):
        return False
    return set(hosts) <= covered_hosts(cert)


def _name(common_name: str) -> x509.Name:
    return x509.Name([
        x509.NameAttribute(NameOID.ORGANIZATION_NAME, "kubedash"),
        x509.NameAttribute(NameOID.COMMON_NAME, common_name),
    ])


def _make_ca(key: ec.EllipticCurvePrivateKey, now: dt.datetime) -> x509.Certificate:
    subject = _name(f"kubedash local CA {now:%Y-%m-%d}")
    public = key.public_key()
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(public)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - CLOCK_SKEW)
        .not_valid_after(now + CA_VALIDITY)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(x509.KeyUsage(
            digital_signature=True, key_cert_sign=True, crl_sign=True,
            content_commitment=False, key_encipherment=False, data_encipherment=False,
            key_agreement=False, encipher_only=False, decipher_only=False), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(public), critical=False)
        .sign(key, hashes.SHA256())
    )


def _make_server_cert(key: ec.EllipticCurvePrivateKey, ca_cert: x509.Certificate,
                      ca_key, hosts: list[str], now: dt.datetime) -> x509.Certificate:
    public = key.public_key()
    ski = ca_cert.extensions.get_extension_for_class(x509.SubjectKeyIdentifier).value
    return (
        x509.CertificateBuilder()
        .subject_name(_name("kubedash"))
        .issuer_name(ca_cert.subject)
        .public_key(public)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - CLOCK_SKEW)
        # Never outlive the CA: clients reject a chain whose issuer has expired.
        .not_valid_after(min(now + SERVER_VALIDITY, ca_cert.not_valid_after_utc))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        # ECDSA keys sign the handshake; no key encipherment as with RSA.
        .add_extension(x509.KeyUsage(
            digital_signature=True, key_cert_sign=False, crl_sign=False,
            content_commitment=False, key_encipherment=False, data_encipherment=False,
            key_agreement=False, encipher_only=False, decipher_only=False), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(_san(hosts), critical=False)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(public), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(ski),
                       critical=False)
        .sign(ca_key, hashes.SHA256())
    )


@contextmanager
def _locked(path: Path):
    with open(path, "a") as f:
        if fcntl is not None:
            fcntl.flock(f, fcntl.LOCK_EX)
        yield   # the lock goes with the file's close


def _write_key(path: Path, key) -> None:
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                            serialization.NoEncryption())
    _write_atomic(path, pem, 0o600)


def _write_atomic(path: Path, data: bytes, mode: int) -> None:
    # Created with its final mode (a key is never world-readable, even for an instant), then
    # renamed over the old file, so a concurrent reader sees the old or the new file whole.
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, mode)   # the umask may have narrowed it; make it exact
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
