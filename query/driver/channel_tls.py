"""TLS for a query's row channel, with a key made for that one query.

When the Spark session is secured (``spark.authenticate``, ``spark.network.crypto.enabled``,
``spark.ssl.enabled`` or ``spark.ssl.rpc.enabled``), the rows a query's tasks send to the
driver must not cross the network in the clear either. The driver then makes a new
private key and a self-signed certificate for the query (:class:`ChannelKeys`: an EC
P-256 key, kept in memory but for the moment ``ssl`` loads it), its channel speaks TLS
only, and the tasks trust exactly that certificate: it travels with the task, inside
Spark's own (secured) channel, so a task talks to this query's driver and to nobody else.
The channel's random token, sent inside TLS, still tells this query's tasks from any
other client. ``TREESTORE_QUERY_TLS=1`` asks for TLS on any session.
"""

from __future__ import annotations

import contextlib
import datetime
import os
import ssl
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass

__all__ = ["FORCE_ENV", "SECURITY_SETTINGS", "ChannelKeys", "client_context", "tls_reason"]

SECURITY_SETTINGS = (
    "spark.authenticate",
    "spark.network.crypto.enabled",
    "spark.ssl.enabled",
    "spark.ssl.rpc.enabled",
)
"""Spark settings that, when ``true``, make a query's row channel speak TLS."""

FORCE_ENV = "TREESTORE_QUERY_TLS"
"""``1``: the row channel speaks TLS whatever the session's settings."""


def tls_reason(settings: Mapping[str, str | None]) -> str | None:
    """Why the row channel must speak TLS under these Spark ``settings`` (the first setting
    that asks for it, or :data:`FORCE_ENV`), or ``None`` when it need not."""
    for name in SECURITY_SETTINGS:
        if (settings.get(name) or "").strip().lower() == "true":
            return f"{name}=true"
    if os.environ.get(FORCE_ENV, "").strip() == "1":
        return f"{FORCE_ENV}=1"
    return None


@dataclass(frozen=True)
class ChannelKeys:
    """One query's private key and self-signed certificate, both PEM."""

    key: bytes
    certificate: bytes

    @classmethod
    def new(cls) -> ChannelKeys:
        """A fresh EC P-256 key and a certificate for it, valid for two days."""
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.x509.oid import NameOID

        key = ec.generate_private_key(ec.SECP256R1())
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "treestore query")])
        now = datetime.datetime.now(datetime.UTC)
        certificate = (
            x509.CertificateBuilder()
            .subject_name(name)
            .issuer_name(name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=10))
            .not_valid_after(now + datetime.timedelta(days=2))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256())
        )
        pem_key = key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
        return cls(pem_key, certificate.public_bytes(serialization.Encoding.PEM))

    def server_context(self) -> ssl.SSLContext:
        """The driver's TLS context (TLS 1.2 at least) with this key and certificate."""
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        # no session tickets: a task never reads after its handshake, and unread tickets
        # would make its close a reset that drops its last frames on the driver's side
        context.num_tickets = 0
        # ssl loads a certificate chain only from files: one private file, gone at once
        handle, path = tempfile.mkstemp(prefix="treestore-query-", suffix=".pem")
        try:
            with os.fdopen(handle, "wb") as out:
                out.write(self.key + self.certificate)
            context.load_cert_chain(path)
        finally:
            with contextlib.suppress(OSError):
                os.unlink(path)
        return context


def client_context(certificate: bytes) -> ssl.SSLContext:
    """A task's TLS context: it trusts ``certificate`` (the query's own) and nothing else."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.check_hostname = False  # the driver's address is not in the certificate
    context.load_verify_locations(cadata=certificate.decode("ascii"))
    return context
