"""TLS material made at test time with trustme: a CA the client trusts, a server certificate
it issued, and certificates that must fail verification: from another CA, expired, or issued
by the trusted CA for another name."""

from __future__ import annotations

import datetime as dt
import ssl
from dataclasses import dataclass
from pathlib import Path

import trustme

NAMES = ("localhost", "127.0.0.1", "::1", "api.prober.test")


@dataclass(frozen=True)
class Certs:
    ca_file: str
    server: ssl.SSLContext  # signed by the trusted CA
    untrusted: ssl.SSLContext  # signed by a CA nobody trusts
    expired: ssl.SSLContext  # signed by the trusted CA, valid until yesterday
    wrong_name: ssl.SSLContext  # signed by the trusted CA for a name nobody connects to


def server_context(
    ca: trustme.CA,
    alpn: tuple[str, ...] = ("h2", "http/1.1"),
    names: tuple[str, ...] = NAMES,
    not_after: dt.datetime | None = None,
) -> ssl.SSLContext:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    not_before = None if not_after is None else not_after - dt.timedelta(days=30)
    cert = ca.issue_cert(*names, not_before=not_before, not_after=not_after)
    cert.configure_cert(context)
    context.set_alpn_protocols(list(alpn))
    return context


def make_certs(directory: Path) -> Certs:
    directory.mkdir(parents=True, exist_ok=True)
    ca = trustme.CA()
    ca_file = directory / "ca.pem"
    ca.cert_pem.write_to_path(str(ca_file))
    yesterday = dt.datetime.now(dt.UTC) - dt.timedelta(days=1)
    return Certs(
        str(ca_file),
        server=server_context(ca),
        untrusted=server_context(trustme.CA()),
        expired=server_context(ca, not_after=yesterday),
        wrong_name=server_context(ca, names=("elsewhere.prober.test",)),
    )


_CA_PEM: list[str] = []


def ca_pem() -> str:
    """A real CA certificate as PEM text, for a file a configuration names (the loader
    refuses one that holds none); made once per test session."""
    if not _CA_PEM:
        _CA_PEM.append(trustme.CA().cert_pem.bytes().decode())
    return _CA_PEM[0]
