"""The `X-OpenShift-Disruption` response header (OpenShift carry patch on kube-apiserver).

The server writes, only when the request carried `X-Openshift-If-Disruption`:

    shutdown=<bool> shutdown-delay-duration=<go-duration> elapsed=<go-duration> host=<apiserver-id>

with Go's `%t` for the bool and `Duration.Round(time.Second).String()` for both durations.
We parse that shape strictly (field order, single spaces, `true|false`) because anything else
means we are not talking to the server we think we are, and we accept the whole Go duration
grammar because rounding is the server's choice, not part of the format.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import re
from collections.abc import Iterable
from dataclasses import dataclass

from prober.core.durations import DurationError, format_go_seconds, parse_go_duration

REQUEST_HEADER = "X-Openshift-If-Disruption"
RESPONSE_HEADER = "X-OpenShift-Disruption"

# The longest well-formed value is ~120 bytes; anything far beyond is not this header.
MAX_VALUE_LENGTH = 512

_SHAPE = re.compile(
    r"shutdown=(?P<shutdown>[^ ]*) shutdown-delay-duration=(?P<delay>[^ ]*)"
    r" elapsed=(?P<elapsed>[^ ]*) host=(?P<host>[^ ]*)"
)
_HOST = re.compile(r"[\x21-\x7e]+")  # visible ASCII: a hostname or an apiserver-<base32> id


class HeaderInvalid(ValueError):
    """The header was present but is not a value the apiserver can send."""


@dataclass(frozen=True, slots=True)
class ShutdownHeader:
    """One parsed header value; durations in seconds."""

    shutdown: bool
    delay: float
    elapsed: float
    host: str

    def format(self) -> str:
        return format_shutdown_header(self.shutdown, self.delay, self.elapsed, self.host)


def parse_shutdown_header(value: str | bytes) -> ShutdownHeader:
    """Parse one header value, raising `HeaderInvalid` with the reason on any deviation."""
    if isinstance(value, bytes):
        try:
            value = value.decode("ascii")
        except UnicodeDecodeError:
            raise HeaderInvalid("header value is not ASCII") from None
    return _parse(value)


# A server repeats the same few hundred values (elapsed counts whole seconds): the parse of a
# value seen before costs a lookup. Only valid values are kept (an error is raised each time).
@functools.lru_cache(maxsize=1024)
def _parse(value: str) -> ShutdownHeader:
    if len(value) > MAX_VALUE_LENGTH:
        raise HeaderInvalid(f"header value is {len(value)} bytes, longer than {MAX_VALUE_LENGTH}")
    match = _SHAPE.fullmatch(value)
    if match is None:
        raise HeaderInvalid(f"header value {_clip(value)!r} does not have the expected fields")
    flag = match["shutdown"]
    if flag not in ("true", "false"):
        raise HeaderInvalid(f"shutdown={_clip(flag)!r} is not true or false")
    delay = _duration("shutdown-delay-duration", match["delay"])
    elapsed = _duration("elapsed", match["elapsed"])
    host = match["host"]
    if not _HOST.fullmatch(host):
        raise HeaderInvalid(f"host={_clip(host)!r} is not a host identifier")
    return ShutdownHeader(shutdown=flag == "true", delay=delay, elapsed=elapsed, host=host)


def _duration(field: str, text: str) -> float:
    try:
        seconds = parse_go_duration(text)
    except DurationError:
        raise HeaderInvalid(f"{field}={_clip(text)!r} is not a Go duration") from None
    if seconds < 0:
        raise HeaderInvalid(f"{field}={_clip(text)!r} is negative")
    return seconds


def _clip(text: str, limit: int = 100) -> str:
    return text if len(text) <= limit else text[:limit] + "..."


def format_shutdown_header(shutdown: bool, delay: float, elapsed: float, host: str) -> str:
    """The value exactly as the apiserver writes it (durations rounded to whole seconds)."""
    flag = "true" if shutdown else "false"
    return (
        f"shutdown={flag} shutdown-delay-duration={format_go_seconds(delay)}"
        f" elapsed={format_go_seconds(elapsed)} host={host}"
    )


def find_header(headers: Iterable[tuple[str | bytes, str | bytes]], name: str) -> str | None:
    """The first value of `name` in (name, value) pairs, matching names case-insensitively.

    Go canonicalises names on HTTP/1.1 (`X-Openshift-Disruption`) and HTTP/2 lowercases them.
    """
    wanted = name.lower()
    for key, value in headers:
        key_text = key.decode("latin-1") if isinstance(key, bytes) else key
        if key_text.lower() == wanted:
            return value.decode("latin-1") if isinstance(value, bytes) else value
    return None


def apiserver_id(hostname: str) -> str:
    """The APIServerID kube-apiserver derives from its hostname (the `host` in the header and
    the name of its identity Lease): `apiserver-` + base32 of the first 16 bytes of
    sha256(u16-length-prefixed hostname, u16-length-prefixed "kube-apiserver"), lowercased."""
    data = b"".join(
        len(part).to_bytes(2, "big") + part for part in (hostname.encode(), b"kube-apiserver")
    )
    digest = hashlib.sha256(data).digest()[:16]
    return "apiserver-" + base64.b32encode(digest).decode("ascii").rstrip("=").lower()
