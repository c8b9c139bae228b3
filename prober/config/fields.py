"""The parsers of configuration values that only the configuration has (sizes, labels, URLs,
enums); the kinds every command shares (durations, numbers, HOST:PORT) are in
`prober.common.values`, re-exported here so the loader names one module.

Each parser takes what YAML gave (a typed value) or what an environment variable or a flag
gave (a string) and returns the typed value, or raises `Invalid` with the problem; the loader
prefixes where the value came from. `Invalid.sub` locates a fault inside a nested value.
"""

from __future__ import annotations

import ipaddress
import os
import re
import ssl
from collections.abc import Callable, Mapping
from enum import StrEnum
from typing import Any, TypeVar
from urllib.parse import urlsplit

from prober.common.values import Invalid, at_least, duration, host_port, positive_int, shown, whole

__all__ = ["Invalid", "at_least", "duration", "host_port", "positive_int", "shown", "whole"]

E = TypeVar("E", bound=StrEnum)

_LABEL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
# Labels the metrics already use; a constant label of the same name would clash.
RESERVED_LABELS = frozenset(
    {"platform", "lb", "protocol", "connection", "result", "error", "apiserver", "closed_by"}
    | {"version", "le", "quantile"}
)
_SIZE = re.compile(r"(?P<n>[0-9]+)\s*(?P<unit>|B|KB|MB|GB|KiB|MiB|GiB)")
_SIZE_UNITS = {
    "": 1,
    "B": 1,
    "KB": 10**3,
    "MB": 10**6,
    "GB": 10**9,
    "KiB": 2**10,
    "MiB": 2**20,
    "GiB": 2**30,
}
_TRUE = {"true", "yes", "on", "1"}
_FALSE = {"false", "no", "off", "0"}


def optional_duration(value: object) -> float | None:
    if value is None or value == "":
        return None
    return duration()(value)


def boolean(value: object) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in _TRUE | _FALSE:
        return value.lower() in _TRUE
    raise Invalid(f"expected true or false, got {shown(value)}")


STDOUT_RECORDS = ("off", "all", "compact")
_ON_THE_WIRE = re.compile(r"[\x21-\x7e]+")
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


def stdout_records(value: object) -> str:
    """`event_log_stdout`: off, all, compact; a boolean as before (true: all)."""
    if value in STDOUT_RECORDS:
        return str(value)
    try:
        return "all" if boolean(value) else "off"
    except Invalid:
        raise Invalid(f"{shown(value)} is not one of {', '.join(STDOUT_RECORDS)}") from None


WATCH_SYNCS = ("watch-list", "list", "off")


def watch_sync(value: object) -> str:
    """`watches`: how a watch stream syncs (client-go 1.35's watch-list, or LIST then WATCH)
    or off; a boolean as before (true: watch-list)."""
    if value in WATCH_SYNCS:
        return str(value)
    try:
        return "watch-list" if boolean(value) else "off"
    except Invalid:
        raise Invalid(f"{shown(value)} is not one of {', '.join(WATCH_SYNCS)}") from None


def text(value: object) -> str:
    if not isinstance(value, str) or not value.strip():
        raise Invalid(f"expected a non-empty string, got {shown(value)}")
    return value


def optional_text(value: object) -> str | None:
    return None if value is None or value == "" else text(value)


def choice(options: tuple[str, ...]) -> Callable[[object], str]:
    def parse(value: object) -> str:
        if value not in options:
            raise Invalid(f"{shown(value)} is not one of {', '.join(options)}")
        return str(value)

    return parse


def enum_value(cls: type[E], value: object) -> E:
    try:
        if not isinstance(value, str):
            raise ValueError(value)
        return cls(value)
    except ValueError:
        raise Invalid(f"{shown(value)} is not one of {', '.join(e.value for e in cls)}") from None


def enum_list(cls: type[E]) -> Callable[[object], tuple[E, ...]]:
    def parse(value: object) -> tuple[E, ...]:
        items = value.split(",") if isinstance(value, str) else value
        if not isinstance(items, list) or not items:
            raise Invalid(f"expected a non-empty list, got {shown(value)}")
        parsed = tuple(enum_value(cls, v.strip() if isinstance(v, str) else v) for v in items)
        if len(set(parsed)) != len(parsed):
            raise Invalid(f"{shown(value)} names a value twice")
        return parsed

    return parse


def labels(value: object) -> dict[str, str]:
    if isinstance(value, str):
        pairs = [p for p in value.split(",") if p.strip()]
        if any("=" not in p for p in pairs):
            raise Invalid(f"expected key=value pairs separated by commas, got {shown(value)}")
        value = dict(p.strip().split("=", 1) for p in pairs)
    if not isinstance(value, Mapping):
        raise Invalid(f"expected a mapping of label names to values, got {shown(value)}")
    out: dict[str, str] = {}
    for key, val in value.items():
        if not isinstance(key, str) or not _LABEL_NAME.fullmatch(key) or key.startswith("__"):
            raise Invalid(f"{shown(key)} is not a Prometheus label name")
        if key in RESERVED_LABELS:
            raise Invalid(f"label {key!r} is reserved (the metrics use it)")
        if not isinstance(val, str | int | float) or isinstance(val, bool):
            raise Invalid(f"label {key!r}: expected a string value, got {shown(val)}")
        out[key] = str(val)
    return out


def size(value: object) -> int:
    if isinstance(value, int) and not isinstance(value, bool):
        number = value
    else:
        match = _SIZE.fullmatch(value.strip()) if isinstance(value, str) else None
        if match is None:
            raise Invalid(f"expected a size such as 32MiB or 1000000, got {shown(value)}")
        number = int(match["n"]) * _SIZE_UNITS[match["unit"]]
    if number < 64 * 1024:
        raise Invalid(f"{shown(value)} is smaller than 64KiB")
    return number


def url_path(value: object) -> str:
    if not isinstance(value, str) or not value.startswith("/"):
        raise Invalid(f"expected a path starting with /, got {shown(value)}")
    if _ON_THE_WIRE.fullmatch(value) is None:
        # It goes into every request line and :path: a newline or a byte past ASCII there
        # raised out of every request, and the stream recorded nothing (issue 22).
        raise Invalid(f"{shown(value)}: only printable ASCII, without spaces, goes on the wire")
    return value


def target_name(value: object) -> str:
    """A target's name: the head of its stream names, metric labels, file names."""
    name = text(value)
    if _NAME.fullmatch(name) is None:
        raise Invalid(f"{shown(name)}: expected letters, digits, '.', '_' or '-'")
    return name


# A Kubernetes node name is a DNS subdomain (RFC 1123): lowercase labels joined by dots.
_NODE_NAME = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_NODE_NAME_MAX = 253


def node_name(value: object) -> str:
    """The name of a Kubernetes node, as `spec.nodeName` holds it."""
    name = text(value)
    if len(name) > _NODE_NAME_MAX:
        raise Invalid(f"a node name has at most {_NODE_NAME_MAX} characters, got {len(name)}")
    if _NODE_NAME.fullmatch(name) is None:
        raise Invalid(
            f"{shown(name)} is not a node name: lowercase letters, digits, '-' and '.', "
            "starting and ending with a letter or digit"
        )
    return name


def readable_file(value: object) -> str | None:
    if value is None or value == "":
        return None
    path = text(value)
    if not os.path.isfile(path):
        raise Invalid(f"{path}: no such file")
    if not os.access(path, os.R_OK):
        raise Invalid(f"{path}: not readable")
    return path


def ca_bundle(value: object) -> str | None:
    """A readable file of PEM certificates, refused here, at load, rather than when the first
    TLS context is made (after the daemon opened its port and its event log)."""
    path = readable_file(value)
    if path is not None:
        try:
            ssl.create_default_context(cafile=path)
        except ssl.SSLError as exc:
            raise Invalid(f"{path}: not a PEM CA bundle ({exc.reason or exc})") from None
        except (OSError, UnicodeDecodeError) as exc:
            raise Invalid(f"{path}: cannot read: {exc}") from None
    return path


def base_url(value: object) -> str:
    """`https://host[:port]`, normalised to carry the port; a path is refused because the
    probed path is one setting for every target."""
    raw = _bracketed(text(value))
    try:
        parts = urlsplit(raw)
        port = parts.port
    except ValueError as exc:
        raise Invalid(f"{raw!r} is not a URL: {exc}") from None
    if parts.scheme != "https" or not parts.hostname:
        raise Invalid(f"{raw!r} is not an https://HOST[:PORT] URL")
    if parts.path not in ("", "/") or parts.query or parts.fragment:
        raise Invalid(f"{raw!r} has a path; set the probed path with `path`")
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    return f"https://{host}:{port or 443}"


def _bracketed(url: str) -> str:
    """`https://fd00::1:443` as `https://[fd00::1]:443`: what `https://$(HOST):$(PORT)` makes
    of an IPv6 address in a pod (the Kubernetes service variables carry no brackets). Such a
    URL must end in its port; anything else is left for `urlsplit` to judge."""
    scheme, sep, rest = url.partition("://")
    netloc, slash, path = rest.partition("/")
    if not sep or "[" in netloc or netloc.count(":") < 2:
        return url
    host, _, port = netloc.rpartition(":")
    try:
        ipaddress.IPv6Address(host)
    except ValueError:
        raise Invalid(
            f"{url!r}: an IPv6 address in a URL needs brackets, or its port after it"
        ) from None
    return f"{scheme}://[{host}]:{port}{slash}{path}"


def mapping(value: object, keys: Mapping[str, Any]) -> dict[str, Any]:
    """A mapping whose keys must all be known."""
    if not isinstance(value, Mapping):
        raise Invalid(f"expected a mapping, got {shown(value)}")
    for key in value:
        if key not in keys:
            raise Invalid(f"unknown key {key!r}; known: {', '.join(keys)}")
    return dict(value)
