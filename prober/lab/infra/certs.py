"""Certificates for the lab, made at run time with `trustme`: one CA, then server certificates
for the DNS names and IP addresses each fake apiserver or load balancer answers on.

Everything is written as PEM files so that processes we do not control (HAProxy, curl, nghttp,
the prober itself) can load them by path.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import trustme


@dataclass(frozen=True, slots=True)
class ServerCertificate:
    """A server certificate chain and its key; `combined` holds both, as HAProxy wants."""

    cert: Path
    key: Path
    combined: Path


class LabCA:
    """A certificate authority whose certificate is written to `directory/ca.crt`."""

    def __init__(self, directory: Path, organization: str = "prober lab") -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self._ca = trustme.CA(organization_name=organization)
        self.ca_cert = self.directory / "ca.crt"
        self._ca.cert_pem.write_to_path(str(self.ca_cert))

    def issue(self, name: str, identities: Sequence[str]) -> ServerCertificate:
        """Write `<name>.crt`, `<name>.key` and `<name>.pem` for these DNS names / IPs."""
        if not identities:
            raise ValueError(f"certificate {name!r} needs at least one DNS name or IP address")
        issued = self._ca.issue_cert(*identities)
        cert = self.directory / f"{name}.crt"
        key = self.directory / f"{name}.key"
        combined = self.directory / f"{name}.pem"
        chain = b"".join(blob.bytes() for blob in issued.cert_chain_pems)
        cert.write_bytes(chain)
        key.write_bytes(issued.private_key_pem.bytes())
        key.chmod(0o600)
        combined.write_bytes(chain + issued.private_key_pem.bytes())
        combined.chmod(0o600)
        return ServerCertificate(cert=cert, key=key, combined=combined)


def make_certificates(
    directory: Path, identities: Sequence[str], name: str = "server"
) -> tuple[Path, ServerCertificate]:
    """One CA and one server certificate in `directory`: (CA certificate path, server files)."""
    ca = LabCA(directory)
    return ca.ca_cert, ca.issue(name, identities)
