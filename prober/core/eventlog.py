"""The event log codec, schema v1: one JSON object per line, `{"v": 1, "kind": ..., fields...}`.

One generic encoder and decoder serve every record kind: a record's dataclass fields *are* its
JSON fields, and decoding follows the field annotations (str, int, float, bool, enums, nested
dataclasses, tuples, mappings, optionals), so adding a field to a model is the whole change;
a field marked `models.OMIT_EMPTY` is left out of the line while empty, one marked
`models.OMIT_NONE` while None.
Readers are lenient where a crash or a newer writer leaves marks (a truncated last line,
unknown kinds, unknown fields) and strict where data is wrong. The record types of other kinds
of stream (`core.streamkind`) decode alike once a reader is given them (`types`); a kind it was
not given is an unknown kind, skipped and counted as ever.
"""

from __future__ import annotations

import dataclasses
import json
import types
import typing
from collections.abc import Callable, Iterable, Iterator, Mapping
from enum import Enum
from typing import Any

from prober.core import strictjson
from prober.core.models import (
    RECORD_TYPES,
    REQUEST,
    LogRecord,
    Record,
    RunRecord,
    StreamId,
    StreamNameError,
)

SCHEMA_VERSION = 1
MAX_PROBLEMS_KEPT = 100

_BY_KIND: Mapping[str, type[LogRecord]] = {cls.KIND: cls for cls in RECORD_TYPES}
# What a reader yields: the request kind's records, or a record of a kind it was given.
AnyRecord = Record | LogRecord


class EventLogError(ValueError):
    """A line that is not a valid v1 record."""


class UnknownKind(EventLogError):
    """A record kind this reader does not know (written by a newer version): skipped."""


class UnsupportedVersion(EventLogError):
    """A record from another schema version: the whole log needs another reader."""


def encode(record: LogRecord) -> str:
    """One record as one JSON line, without the newline."""
    body: dict[str, Any] = {"v": SCHEMA_VERSION, "kind": record.KIND}
    body.update(_to_json(record))
    try:
        return json.dumps(body, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    except ValueError as exc:
        raise EventLogError(f"{record.KIND}: cannot encode: {exc}") from None


def _to_json(value: Any) -> Any:
    if isinstance(value, Enum):
        return value.value
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        body: dict[str, Any] = {}
        for f in dataclasses.fields(value):
            keys = f.metadata.get("keys")
            if f.metadata.get("omit_empty") and not getattr(value, f.name):
                continue  # read back as its default (`models.OMIT_EMPTY`)
            if f.metadata.get("omit_none") and getattr(value, f.name) is None:
                continue  # read back as None (`models.OMIT_NONE`)
            if keys is None:
                body[f.name] = _to_json(getattr(value, f.name))
            else:  # a stream identity, written as its name and the fields beside it
                stream = getattr(value, f.name)
                body.update((key, stream.value_of(key)) for key in keys)
        return body
    if isinstance(value, tuple | list):
        return [_to_json(v) for v in value]
    if isinstance(value, Mapping):
        return {str(k): _to_json(v) for k, v in value.items()}
    return value


def decode(line: str | bytes, types: Mapping[str, type[LogRecord]] = _BY_KIND) -> AnyRecord:
    """Parse one line into its record, raising `EventLogError` (or a subclass) on any fault.
    `types`: record kind -> type (`KindTable.record_types`); the request kind's by default."""
    try:
        # Marked, not refused: a NaN is then named by its field, as a wrong type is.
        obj = strictjson.loads_marked(line)
    except ValueError as exc:
        raise EventLogError(f"not JSON: {exc}") from None
    if not isinstance(obj, dict):
        raise EventLogError("not a JSON object")
    version = obj.get("v")
    if version != SCHEMA_VERSION:
        raise UnsupportedVersion(f"schema version {version!r}, this reader knows {SCHEMA_VERSION}")
    kind = obj.get("kind")
    if not isinstance(kind, str) or kind not in types:
        raise UnknownKind(f"unknown kind {kind!r}")
    if kind == RunRecord.KIND and "streams" in obj:
        obj = _run_as_written_before(obj)
    return typing.cast(AnyRecord, _from_json(types[kind], obj, kind))


def _run_as_written_before(obj: dict[str, Any]) -> dict[str, Any]:
    """A run record as logs before 2026-12-06 wrote it: the request streams in a list of
    their own (`streams`), every other kind's in `kind_streams`. Read as one mapping, so that
    those logs analyze as they always did."""
    body = dict(obj)
    requests = body.pop("streams")
    _expect(isinstance(requests, list), "run.streams", "a list", requests)
    others = body.get("kind_streams", {})
    if not isinstance(others, dict):
        return obj  # wrong as written: the decoder names the field
    body["kind_streams"] = ({REQUEST: requests} if requests else {}) | others
    return body


def _from_json(tp: Any, value: Any, where: str) -> Any:
    return _decoder(tp)(value, where)


Decoder = Callable[[Any, str], Any]
_DECODERS: dict[Any, Decoder] = {}


def _decoder(tp: Any) -> Decoder:
    """One decoder per annotation, built once: reading a long log walks no type twice."""
    found = _DECODERS.get(tp)
    if found is None:
        found = _DECODERS[tp] = _build_decoder(tp)
    return found


def _build_decoder(tp: Any) -> Decoder:
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        (inner,) = (o for o in typing.get_args(tp) if o is not type(None))
        return _optional(_decoder(inner))
    if origin is tuple:
        return _tuple_of(_decoder(typing.get_args(tp)[0]))
    if origin in (Mapping, dict):
        key_tp, val_tp = typing.get_args(tp)
        return _mapping_of(_decoder(key_tp), _decoder(val_tp))
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        return lambda value, where: _dataclass_from_json(tp, value, where)
    if isinstance(tp, type) and issubclass(tp, Enum):
        return _enum_of(tp)
    if tp not in _SCALARS:
        raise TypeError(f"the codec does not know type {tp!r}")
    return _SCALARS[tp]


def _optional(inner: Decoder) -> Decoder:
    return lambda value, where: None if value is None else inner(value, where)


def _tuple_of(item: Decoder) -> Decoder:
    def decode_tuple(value: Any, where: str) -> Any:
        _expect(isinstance(value, list), where, "a list", value)
        return tuple(item(v, f"{where}[{i}]") for i, v in enumerate(value))

    return decode_tuple


def _mapping_of(key: Decoder, val: Decoder) -> Decoder:
    def decode_mapping(value: Any, where: str) -> Any:
        _expect(isinstance(value, dict), where, "an object", value)
        return {key(k, where): val(v, f"{where}.{k}") for k, v in value.items()}

    return decode_mapping


def _enum_of(tp: type[Enum]) -> Decoder:
    def decode_enum(value: Any, where: str) -> Any:
        try:
            return tp(value)
        except ValueError:
            raise EventLogError(
                f"{where}: {value!r} is not one of {[e.value for e in tp]}"
            ) from None

    return decode_enum


def _dataclass_from_json(cls: type[Any], value: Any, where: str) -> Any:
    _expect(isinstance(value, dict), where, "an object", value)
    kwargs: dict[str, Any] = {}
    for name, keys, parse, decode_field, required in _fields(cls):
        if keys is not None:
            kwargs[name] = _stream_from_json(keys, parse, value, where)
        elif name in value:
            kwargs[name] = decode_field(value[name], f"{where}.{name}")
        elif required:
            raise EventLogError(f"{where}: missing field {name!r}")
    return cls(**kwargs)


# (name, stream keys, stream parser, decoder, required) per field of a record type
FieldPlan = tuple[str, Any, Any, Decoder, bool]
_FIELDS: dict[type[Any], tuple[FieldPlan, ...]] = {}


def _fields(cls: type[Any]) -> tuple[FieldPlan, ...]:
    plan = _FIELDS.get(cls)
    if plan is None:
        hints = _hints(cls)
        plan = _FIELDS[cls] = tuple(
            (
                f.name,
                f.metadata.get("keys"),
                f.metadata.get("parse", StreamId.parse),
                _no_decoder if f.metadata.get("keys") is not None else _decoder(hints[f.name]),
                f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING,
            )
            for f in dataclasses.fields(cls)
        )
    return plan


def _no_decoder(value: Any, where: str) -> Any:
    raise AssertionError(f"{where}: a stream identity is decoded from its keys")


def _stream_from_json(
    keys: tuple[str, ...], parse: Callable[[str], Any], value: dict[str, Any], where: str
) -> Any:
    """The identity from its name (`parse`: `StreamId.parse`, or another kind's); each field
    written beside the name must agree with it."""
    for key in keys:
        if key not in value:
            raise EventLogError(f"{where}: missing field {key!r}")
    name = _scalar(str, value["stream"], f"{where}.stream")
    try:
        stream = parse(name)
    except StreamNameError as exc:
        raise EventLogError(f"{where}.stream: {exc}") from None
    hints = _hints(type(stream))
    for key in keys[1:]:
        written = _from_json(hints[key], value[key], f"{where}.{key}")
        if written != getattr(stream, key):
            raise EventLogError(f"{where}.{key}: {written!s} is not the {key} of stream {name}")
    return stream


def _scalar(tp: Any, value: Any, where: str) -> Any:
    if tp not in _SCALARS:
        raise TypeError(f"{where}: the codec does not know type {tp!r}")
    return _SCALARS[tp](value, where)


def _float(value: Any, where: str) -> float:
    if type(value) is float:  # the common case first: bool is no float
        return value
    _expect(isinstance(value, int) and not isinstance(value, bool), where, "a number", value)
    return float(value)


def _int(value: Any, where: str) -> int:
    _expect(isinstance(value, int) and not isinstance(value, bool), where, "an integer", value)
    return typing.cast(int, value)


def _bool(value: Any, where: str) -> bool:
    _expect(isinstance(value, bool), where, "true or false", value)
    return typing.cast(bool, value)


def _str(value: Any, where: str) -> str:
    _expect(isinstance(value, str), where, "a string", value)
    return typing.cast(str, value)


_SCALARS: dict[Any, Decoder] = {float: _float, int: _int, bool: _bool, str: _str}


def _expect(ok: bool, where: str, what: str, value: Any) -> None:
    if not ok:
        if isinstance(value, strictjson.NonFinite) and what == "a number":
            what = "a finite number"
        shown = repr(value)
        shown = shown if len(shown) <= 40 else shown[:40] + "..."
        raise EventLogError(f"{where}: expected {what}, got {shown}")


_HINTS: dict[type[Any], dict[str, Any]] = {}


def _hints(cls: type[Any]) -> dict[str, Any]:
    if cls not in _HINTS:
        _HINTS[cls] = typing.get_type_hints(cls)
    return _HINTS[cls]


class EventLogReader:
    """Iterate the records of an event log's lines, counting what it had to skip.

    The rules of every file the prober writes and reads back (docs/ARCHITECTURE.md section
    4), the same for every command: skipped and counted, never fatal, a truncated last line
    (a writer killed mid-line), unknown kinds and blank lines. Any other fault (not JSON, a
    non-finite number, a wrong type, a missing field) raises `EventLogError` naming the
    source, the line and the field. Only a user's explicit `strict=False` (`prober analyze
    --skip-bad-lines`) skips and counts those too. A record of another schema version always
    raises: guessing is worse.
    """

    def __init__(
        self,
        lines: Iterable[str | bytes],
        *,
        source: str = "<lines>",
        strict: bool = True,
        types: Mapping[str, type[LogRecord]] = _BY_KIND,
    ):
        self._lines = lines
        self._types = types
        self._source = source
        self._strict = strict
        self.lines = 0
        self.skipped = 0
        self.unknown_kinds = 0
        self.truncated = False
        self.problems: list[str] = []

    def __iter__(self) -> Iterator[AnyRecord]:
        iterator = iter(self._lines)
        current = next(iterator, None)
        while current is not None:
            following = next(iterator, None)
            self.lines += 1
            record = self._decode(current, is_last=following is None)
            if record is not None:
                yield record
            current = following

    def _decode(self, raw: str | bytes, *, is_last: bool) -> AnyRecord | None:
        text = raw.decode("utf-8", errors="replace") if isinstance(raw, bytes) else raw
        complete = text.endswith("\n")
        if not text.strip():
            self._skip("blank line")
            return None
        try:
            return decode(text, self._types)
        except UnsupportedVersion as exc:
            raise EventLogError(f"{self._source}:{self.lines}: {exc}") from None
        except UnknownKind as exc:
            self.unknown_kinds += 1
            self._skip(str(exc))
        except EventLogError as exc:
            if is_last and not complete:
                self.truncated = True
                self._skip("truncated last line")
            elif self._strict:
                raise EventLogError(f"{self._source}:{self.lines}: {exc}") from None
            else:
                self._skip(str(exc))
        return None

    def _skip(self, reason: str) -> None:
        self.skipped += 1
        if len(self.problems) < MAX_PROBLEMS_KEPT:
            self.problems.append(f"{self._source}:{self.lines}: {reason}")
