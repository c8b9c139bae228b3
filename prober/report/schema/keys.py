"""An LB x protocol x connection: the key every per-LB number of the reports is filed
under, as enums, and how it reads from and prints into the documents."""

from __future__ import annotations

from collections.abc import Mapping
from enum import Enum
from typing import TypeVar

from prober.core.models import LB, Connection, Protocol
from prober.report.schema.errors import BadInput
from prober.report.schema.types import KeyFields

Key = tuple[LB, Protocol, Connection]
E = TypeVar("E", bound=Enum)


def key_name(key: Key) -> str:
    lb, protocol, connection = key
    return f"{lb}/{protocol}/{connection}"


def entry_key(entry: KeyFields) -> Key:
    """The key of a document entry this process wrote: its values are the enums'."""
    return LB(entry["lb"]), Protocol(entry["protocol"]), Connection(entry["connection"])


def parse_key(entry: Mapping[str, object], where: str) -> Key:
    """The (lb, protocol, connection) of a JSON entry, or BadInput naming the bad value."""
    return (
        parse_enum(entry, "lb", LB, where),
        parse_enum(entry, "protocol", Protocol, where),
        parse_enum(entry, "connection", Connection, where),
    )


def parse_enum(entry: Mapping[str, object], name: str, cls: type[E], where: str) -> E:
    """The field `name` of a JSON entry as a value of `cls`, or BadInput naming it."""
    if name not in entry:
        raise BadInput(f"{where}: missing {name!r}")
    try:
        return cls(str(entry[name]))
    except ValueError as exc:
        raise BadInput(f"{where}: {exc}") from None
