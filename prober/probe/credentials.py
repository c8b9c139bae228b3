"""TLS contexts and bearer tokens for the probes.

Projected service-account tokens rotate: the kubelet swaps the file (a symlink flip), so the
token is re-read whenever the file's identity or mtime changes; a stat per request costs a
couple of microseconds. A file that vanished, is empty or holds something no header can
carry keeps the last good token, and says so once. The token itself is only ever put in the
Authorization header: it is never returned in a sample, never logged, and its repr hides it.
"""

from __future__ import annotations

import os
import re
import ssl
from collections.abc import Callable

from prober.core.models import Protocol

ALPN = {Protocol.HTTP1: ["http/1.1"], Protocol.HTTP2: ["h2", "http/1.1"]}
_BEARER = re.compile(r"[\x21-\x7e]+")  # what a header value can carry, without spaces

Notify = Callable[[str, str], None]  # (event, detail) with no secret in either


def client_context(ca_file: str | None, protocol: Protocol, *, verify: bool) -> ssl.SSLContext:
    """One context per target x protocol: ALPN is set on the context, so the protocol offered
    is the stream's (HTTP/1.1 alone, or h2 first)."""
    context = ssl.create_default_context(cafile=ca_file)
    if not verify:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    context.set_alpn_protocols(ALPN[protocol])
    return context


class TokenFile:
    """The bearer token in a file, re-read when the file changes."""

    def __init__(self, path: str, notify: Notify | None = None) -> None:
        self.path = path
        self._notify = notify or (lambda _event, _detail: None)
        self._stamp: tuple[int, int, int, int] | None = None
        self._header: str | None = None
        self._problem_seen: str | None = None
        self.reloads = 0
        self.header()

    def __repr__(self) -> str:
        return f"TokenFile({self.path!r})"

    def header(self) -> str | None:
        """`Bearer <token>`, or None when the file never held one."""
        try:
            st = os.stat(self.path)
        except OSError as exc:
            self._problem(f"cannot stat: {exc.strerror}")
            return self._header
        stamp = (st.st_ino, st.st_dev, st.st_mtime_ns, st.st_size)
        if stamp != self._stamp:
            self._reload(stamp)
        return self._header

    def _reload(self, stamp: tuple[int, int, int, int]) -> None:
        try:
            with open(self.path, encoding="utf-8") as stream:
                token = stream.read().strip()
        except (OSError, UnicodeDecodeError) as exc:
            self._problem(f"cannot read: {exc}")
            return
        if not token:
            self._problem("empty")
            return
        if not _BEARER.fullmatch(token):  # it would make every request raise, not fail
            self._problem("not a bearer token: characters beyond visible ASCII")
            return
        first = self._stamp is None
        self._stamp = stamp
        self._problem_seen = None
        self._header = f"Bearer {token}"
        if not first:
            self.reloads += 1
            self._notify("token_reloaded", self.path)

    def _problem(self, detail: str) -> None:
        if detail != self._problem_seen:  # once per problem, not once per request
            self._problem_seen = detail
            self._notify("token_unreadable", f"{self.path}: {detail}")
