"""TLS material made at test time with trustme: a CA the client trusts, a server certificate
it issued, and a certificate from another CA for servers that should fail verification."""

from __future__ import annotations

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


def server_context(ca: trustme.CA, alpn: tuple[str, ...] = ("h2", "http/1.1")) -> ssl.SSLContext:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert(*NAMES).configure_cert(context)
    context.set_alpn_protocols(list(alpn))
    return context


def make_certs(directory: Path) -> Certs:
    directory.mkdir(parents=True, exist_ok=True)
    ca = trustme.CA()
    ca_file = directory / "ca.pem"
    ca.cert_pem.write_to_path(str(ca_file))
    return Certs(str(ca_file), server_context(ca), server_context(trustme.CA()))
