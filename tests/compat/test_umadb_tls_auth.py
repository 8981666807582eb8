"""API key over TLS with the real ``umadb`` client (the client refuses to send a key over
plaintext): the exact ``Bearer <key>`` is required on every DCB RPC, health is not behind it."""

from __future__ import annotations

import datetime as dt
import ipaddress
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import umadb
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

KEY = "s3cret-key"


def _cert(subject: str, issuer: x509.Name, pub: object, signer: object, *, ca: bool) -> x509.Certificate:
    now = dt.datetime.now(dt.timezone.utc)
    b = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)]))
        .issuer_name(issuer).public_key(pub).serial_number(x509.random_serial_number())  # type: ignore[arg-type]
        .not_valid_before(now - dt.timedelta(days=1)).not_valid_after(now + dt.timedelta(days=2))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
    )
    if not ca:
        b = b.add_extension(x509.SubjectAlternativeName([
            x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False)
    return b.sign(signer, hashes.SHA256())  # type: ignore[arg-type]


def self_signed(tmp: Path) -> tuple[Path, Path, Path]:
    """A private CA and a server certificate for localhost signed by it (rustls refuses a CA
    certificate used as the server's own)."""
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "tuffdb test CA")])
    ca = _cert("tuffdb test CA", ca_name, ca_key.public_key(), ca_key, ca=True)
    key = ec.generate_private_key(ec.SECP256R1())
    leaf = _cert("localhost", ca_name, key.public_key(), ca_key, ca=False)
    ca_path, cert_path, key_path = tmp / "ca.pem", tmp / "cert.pem", tmp / "key.pem"
    ca_path.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    cert_path.write_bytes(leaf.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption()))
    return ca_path, cert_path, key_path


@pytest.fixture
def tls_server(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    ca, cert, key = self_signed(tmp_path)
    proc = subprocess.Popen(
        [sys.executable, "-m", "tuffdb.server.umadb", "--port", "0",
         "--data-dir", str(tmp_path / "events"), "--api-key", KEY,
         "--tls-cert", str(cert), "--tls-key", str(key)],
        stderr=subprocess.PIPE, text=True,
    )
    assert proc.stderr is not None
    port = 0
    for line in proc.stderr:
        if "listening on" in line:
            port = int(line.rsplit(":", 1)[1])
        if "UmaDB started" in line:
            break
    yield f"https://localhost:{port}", ca
    proc.terminate()
    assert proc.wait(30) == 0
    proc.stderr.close()


def test_right_key_over_tls_works(tls_server: tuple[str, Path]) -> None:
    url, ca = tls_server
    c = umadb.Client(url=url, ca_path=str(ca), api_key=KEY)
    assert c.append([umadb.Event(event_type="t", data=b"x")]) == 1
    assert [e.position for e in c.read()] == [1]
    assert c.head() == 1


@pytest.mark.parametrize("key", [None, "wrong", f"bearer {KEY}"])
def test_missing_or_wrong_key_is_unauthenticated(tls_server: tuple[str, Path], key: str | None) -> None:
    url, ca = tls_server
    c = umadb.Client(url=url, ca_path=str(ca), api_key=key)
    with pytest.raises(umadb.AuthenticationError):
        c.head()
    with pytest.raises(umadb.AuthenticationError):
        c.append([umadb.Event(event_type="t", data=b"x")])
    assert umadb.Client(url=url, ca_path=str(ca), api_key=KEY).head() is None


def test_health_is_not_behind_the_key(tls_server: tuple[str, Path]) -> None:
    url, ca = tls_server
    assert umadb.Client(url=url, ca_path=str(ca)).check_health() == umadb.ServingStatus.SERVING
