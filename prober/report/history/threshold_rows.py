"""One row of thresholds.json, declared once: `Entry`. Its fields, in their order, are the
row's keys on disk (`to_row`); reading a row back checks each field by its declared type
(`from_row`), so a field added to `Entry` is written and checked with no second list.

    {"platform", "lb", "protocol", "connection", "metric": "reaction|disruption",
     "p50", "p75", "p95", "p99", "runs", "usable"}
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, fields
from enum import Enum
from typing import Any, get_args, get_type_hints

from prober.core.models import LB, Connection, Protocol
from prober.report.schema.errors import BadInput
from prober.report.schema.keys import Key, parse_enum
from prober.report.schema.types import Metric, ThresholdRow

METRICS: tuple[Metric, ...] = get_args(Metric)
QUANTILE_FIELDS = ("p50", "p75", "p95", "p99")
ALL_PLATFORMS = "all"  # the platform of the entries that pool every platform's runs


@dataclass(frozen=True, slots=True)
class Entry:
    """The percentiles of one platform x key x metric over the runs of a history."""

    platform: str  # in lower case: `AWS` from an Infrastructure object is `aws`
    lb: LB
    protocol: Protocol
    connection: Connection
    metric: Metric
    p50: float
    p75: float
    p95: float
    p99: float
    runs: int
    usable: bool

    @property
    def key(self) -> Key:
        return (self.lb, self.protocol, self.connection)

    @property
    def allowed(self) -> float:
        """The P99 rounded up to the second, never below 1 s (origin's rule)."""
        return float(max(1, math.ceil(self.p99)))


def sort_entries(entries: Iterable[Entry]) -> list[Entry]:
    """Platforms by name, `all` last; then LB, protocol, connection, metric, as enumerated."""
    return sorted(entries, key=_order)


def _order(e: Entry) -> tuple[int, str, int, int, int, int]:
    return (
        e.platform == ALL_PLATFORMS,
        e.platform,
        list(LB).index(e.lb),
        list(Protocol).index(e.protocol),
        list(Connection).index(e.connection),
        METRICS.index(e.metric),
    )


def to_row(entry: Entry) -> ThresholdRow:
    """The entry as thresholds.json writes it: its fields in order, enums as their values."""
    values = {f.name: getattr(entry, f.name) for f in fields(Entry)}
    return {name: v.value if isinstance(v, Enum) else v for name, v in values.items()}


def from_row(raw: object, where: str) -> Entry:
    """A row of thresholds.json as an entry, or BadInput naming the field that is wrong."""
    if not isinstance(raw, dict):
        raise BadInput(f"{where}: expected an object")
    return Entry(**{name: _read(raw, name, kind, where) for name, kind in _FIELD_TYPES.items()})


def _read(raw: Mapping[str, object], name: str, kind: Any, where: str) -> Any:
    """The field `name`, checked as its declared type `kind` says (Any: the checks are
    by that declaration, at run time)."""
    value: Any = raw.get(name)
    if isinstance(kind, type) and issubclass(kind, Enum):  # the key: LB, protocol, connection
        return parse_enum(raw, name, kind, where)
    if kind == Metric:
        if value not in METRICS:
            raise BadInput(f"{where}.{name}: {value!r} is not one of {list(METRICS)}")
        return value
    expected, check = _CHECKS[kind]
    if isinstance(value, bool) is not (kind is bool) or not check(value):
        what = f"a {name} name" if kind is str else expected
        raise BadInput(f"{where}.{name}: expected {what}, got {value!r:.40}")
    # JSON may spell 5.0 as 5: the allowed values and the verdicts must not tell.
    return float(value) if kind is float else value.lower() if isinstance(value, str) else value


_FIELD_TYPES: dict[str, Any] = get_type_hints(Entry)
# A plain field's type: what the message says it expected, and the check of its value.
_CHECKS: dict[type, tuple[str, Callable[[Any], bool]]] = {
    # json.loads takes NaN and Infinity; `recommend` cannot round them (it crashed).
    float: ("a number", lambda v: isinstance(v, int | float) and math.isfinite(v)),
    int: ("a positive integer", lambda v: isinstance(v, int) and v >= 1),
    bool: ("true or false", lambda v: isinstance(v, bool)),
    str: ("a name", lambda v: isinstance(v, str) and bool(v)),
}
