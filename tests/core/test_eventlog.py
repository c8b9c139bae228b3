"""The event log codec: the wire format, round trips, and what readers tolerate."""

from __future__ import annotations

import dataclasses
import json

import pytest

from prober.core.eventlog import EventLogError, EventLogReader, UnsupportedVersion, decode, encode
from prober.core.models import (
    REQUEST,
    ClosedBy,
    ErrorClass,
    Interval,
    RunRecord,
    StreamCounters,
    Summary,
    Window,
    WindowStream,
)
from tests.factories import STREAM, sample

RUN = RunRecord("run-1", "2026-11-30T00:00:00.000000Z", "aws", "0.1.0", {REQUEST: (STREAM.name,)})
LATE = sample(10.25, host="apiserver-x", late=True, elapsed=3, delay=129)
INTERVAL = Interval(
    STREAM,
    1.0,
    2.5,
    "a",
    "b",
    ErrorClass.GOAWAY,
    "goaway",
    3,
)
WINDOW = Window(
    host="apiserver-x",
    node="master-0",
    delay=129.0,
    first_seen_t=10.0,
    t0=9.75,
    t0_lo=9.5,
    t0_hi=10.0,
    closed_by=ClosedBy.RECOVERED,
    end_t=200.0,
    streams=(
        WindowStream(STREAM, 4, 3.0, 12.0, 2.25, 1),
        WindowStream(dataclasses.replace(STREAM, target="x"), 0, None, None, None, 0),
    ),
)
SUMMARY = Summary(
    "2026-11-30T00:01:00.000000Z",
    60.0,
    (StreamCounters(STREAM.name, 1200, 3, 40, 1.5, {"success": 1197, "timeout": 3}),),
)


@pytest.mark.parametrize("record", [RUN, LATE, INTERVAL, WINDOW, SUMMARY], ids=lambda r: r.KIND)
def test_round_trip(record) -> None:
    line = encode(record)
    assert "\n" not in line
    assert decode(line) == record
    assert decode(line.encode()) == record


def test_sample_wire_format_is_the_contract() -> None:
    obj = json.loads(encode(LATE))
    assert obj == {
        "v": 1,
        "kind": "sample",
        "ts": LATE.ts,
        "t": 10.25,
        "dur": 0.01,
        "stream": "kube-api-http2-internal-lb-new-connections",
        "target": "kube-api",
        "lb": "internal-lb",
        "protocol": "http2",
        "connection": "new",
        "reused": False,
        "http_version": "HTTP/2",
        "status": 200,
        "error": None,
        "detail": "",
        "shutdown": {"shutdown": True, "delay": 129.0, "elapsed": 3.0, "host": "apiserver-x"},
        "audit_id": LATE.audit_id,
        "local_port": None,
        "peer": None,
        "replaced": None,
        "replaced_port": None,
        "retried": None,
        "held": False,
        "burst": None,
    }


def test_a_stopped_sample_carries_its_phases_and_other_samples_no_phases_field() -> None:
    """`phases` is written only where it says something: a sample the stop cut."""
    stopped = dataclasses.replace(
        sample(3.5, error=ErrorClass.STOPPED, dur=0.7),
        detail="cut by the daemon's stop: sent, no answer yet",
        phases={"connected": 0.002, "sent": 0.002},
    )
    obj = json.loads(encode(stopped))
    assert (obj["error"], obj["status"], obj["phases"]) == (
        "stopped",
        None,
        {"connected": 0.002, "sent": 0.002},
    )
    assert decode(encode(stopped)) == stopped
    assert "phases" not in json.loads(encode(LATE))
    assert decode(encode(LATE)).phases == {}


def test_a_connections_age_is_written_when_known_even_at_zero() -> None:
    """0 is the age of a request that opened its connection: written, never read back as
    unknown. Unknown (no connection, or a log from before) is left out: old lines keep
    their bytes."""
    for age in (0.0, 12.345678):
        aged = dataclasses.replace(LATE, connection_age=age)
        assert json.loads(encode(aged))["connection_age"] == age
        assert decode(encode(aged)) == aged
    assert "connection_age" not in json.loads(encode(LATE))
    assert decode(encode(LATE)).connection_age is None


def test_window_wire_format_is_the_contract() -> None:
    obj = json.loads(encode(WINDOW))
    assert set(obj) == {
        "v",
        "kind",
        "host",
        "node",
        "delay",
        "first_seen_t",
        "t0",
        "t0_lo",
        "t0_hi",
        "closed_by",
        "end_t",
        "streams",
    }
    assert obj["streams"][1] == {
        "stream": "x-http2-internal-lb-new-connections",
        "lb": "internal-lb",
        "protocol": "http2",
        "connection": "new",
        "late": 0,
        "max_elapsed": None,
        "last_late_t": None,
        "reaction": None,
        "failures": 0,
        "reaction_lo": None,
        "reaction_hi": None,
        "bound_by": None,
    }


@pytest.mark.parametrize(
    ("line", "message"),
    [
        (
            "{",
            "not JSON: Expecting property name enclosed in double quotes: line 1 column 2 (char 1)",
        ),
        ("[1]", "not a JSON object"),
        ('{"kind": "sample"}', "schema version None, this reader knows 1"),
        ('{"v": 2, "kind": "sample"}', "schema version 2, this reader knows 1"),
        ('{"v": 1, "kind": "weather"}', "unknown kind 'weather'"),
        ('{"v": 1}', "unknown kind None"),
        (
            '{"v": 1, "kind": "run", "run_id": "r", "ts": "x", "platform": "aws", "streams": []}',
            "run: missing field 'version'",
        ),
        (
            '{"v": 1, "kind": "run", "run_id": 5, "ts": "x", "platform": "aws", "streams": [], '
            '"version": "1"}',
            "run.run_id: expected a string, got 5",
        ),
        (
            '{"v": 1, "kind": "run", "run_id": "r", "ts": "x", "platform": "aws", "streams": "ab", '
            '"version": "1"}',
            "run.streams: expected a list, got 'ab'",
        ),
    ],
)
def test_decode_errors_name_the_problem(line: str, message: str) -> None:
    with pytest.raises(EventLogError) as info:
        decode(line)
    assert str(info.value) == message


def test_decode_field_errors_inside_nested_records() -> None:
    obj = json.loads(encode(LATE))
    obj["shutdown"]["elapsed"] = "3s"
    with pytest.raises(
        EventLogError, match=r"^sample.shutdown.elapsed: expected a number, got '3s'$"
    ):
        decode(json.dumps(obj))
    obj = json.loads(encode(LATE))
    obj["error"] = "boom"
    with pytest.raises(EventLogError, match=r"^sample.error: 'boom' is not one of \['timeout'"):
        decode(json.dumps(obj))
    obj = json.loads(encode(LATE))
    obj["status"] = True
    with pytest.raises(EventLogError, match=r"^sample.status: expected an integer, got True$"):
        decode(json.dumps(obj))


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"lb": "external-lb"}, f"sample.lb: external-lb is not the lb of stream {STREAM.name}"),
        ({"target": "other"}, f"sample.target: other is not the target of stream {STREAM.name}"),
        ({"lb": "nowhere"}, "sample.lb: 'nowhere' is not one of"),
        ({"stream": "kube-api"}, "sample.stream: stream name 'kube-api' does not end in"),
        ({"stream": 7}, "sample.stream: expected a string, got 7"),
        ({"connection": None}, "sample.connection: None is not one of ['new', 'reused']"),
    ],
    ids=["lb", "target", "bad-lb", "bad-name", "name-type", "no-connection"],
)
def test_a_records_stream_fields_must_agree_with_its_name(change, message) -> None:
    # One identity on the record: the fields written beside the name are read back from it,
    # so a line whose fields and name disagree is damaged, not a second stream.
    obj = json.loads(encode(LATE))
    obj.update(change)
    with pytest.raises(EventLogError) as info:
        decode(json.dumps(obj))
    assert str(info.value).startswith(message)


def test_a_missing_stream_field_is_named() -> None:
    obj = json.loads(encode(LATE))
    del obj["protocol"]
    with pytest.raises(EventLogError, match=r"^sample: missing field 'protocol'$"):
        decode(json.dumps(obj))


def test_unknown_fields_are_ignored_and_optional_fields_may_be_absent() -> None:
    obj = json.loads(encode(LATE))
    obj["from_the_future"] = 1
    del obj["local_port"], obj["peer"], obj["held"]
    assert decode(json.dumps(obj)) == LATE


def test_encode_refuses_non_finite_numbers() -> None:
    endless = dataclasses.replace(INTERVAL, end_t=float("inf"))
    with pytest.raises(EventLogError, match="interval: cannot encode"):
        encode(endless)


def lines(*records, tail: str = "") -> list[str]:
    return [encode(r) + "\n" for r in records] + ([tail] if tail else [])


def test_reader_skips_a_truncated_last_line() -> None:
    reader = EventLogReader(lines(RUN, LATE, tail=encode(INTERVAL)[:30]), source="ev.jsonl")
    assert list(reader) == [RUN, LATE]
    assert (reader.lines, reader.skipped, reader.truncated) == (3, 1, True)
    assert reader.problems == ["ev.jsonl:3: truncated last line"]


def test_reader_accepts_a_complete_last_line_without_newline() -> None:
    reader = EventLogReader(lines(RUN, tail=encode(LATE)))
    assert list(reader) == [RUN, LATE]
    assert reader.skipped == 0


def test_reader_skips_unknown_kinds_and_blank_lines_and_counts_them() -> None:
    raw = [*lines(RUN), '{"v": 1, "kind": "weather", "sunny": true}\n', "\n", *lines(LATE)]
    reader = EventLogReader(raw, source="ev.jsonl")
    assert list(reader) == [RUN, LATE]
    assert (reader.skipped, reader.unknown_kinds) == (2, 1)
    assert reader.problems == ["ev.jsonl:2: unknown kind 'weather'", "ev.jsonl:3: blank line"]


def test_reader_corrupt_middle_line_fatal_unless_asked_to_skip() -> None:
    raw = [*lines(RUN), '{"v": 1, "kind": "sample", "t": \n', *lines(LATE)]
    with pytest.raises(EventLogError, match=r"^ev.jsonl:2: not JSON"):
        list(EventLogReader(raw, source="ev.jsonl"))  # the rule of every command
    reader = EventLogReader(raw, source="ev.jsonl", strict=False)  # --skip-bad-lines
    assert list(reader) == [RUN, LATE]
    assert reader.skipped == 1
    assert reader.problems[0].startswith("ev.jsonl:2: not JSON")


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("NaN", "ev.jsonl:2: sample.t: expected a finite number, got NaN"),
        ("-Infinity", "ev.jsonl:2: sample.t: expected a finite number, got -Infinity"),
        ("1e400", "ev.jsonl:2: sample.t: expected a finite number, got 1e400"),
        ('"soon"', "ev.jsonl:2: sample.t: expected a number, got 'soon'"),
    ],
)
def test_a_non_finite_or_mistyped_number_names_the_file_line_and_field(
    value: str, message: str
) -> None:
    sample = encode(LATE).replace(f'"t":{LATE.t}', f'"t":{value}')
    assert sample != encode(LATE)
    with pytest.raises(EventLogError) as caught:
        list(EventLogReader([*lines(RUN), sample + "\n"], source="ev.jsonl"))
    assert str(caught.value) == message


def test_reader_refuses_another_schema_version() -> None:
    raw = [*lines(RUN), '{"v": 2, "kind": "run"}\n']
    with pytest.raises(EventLogError, match=r"^ev.jsonl:2: schema version 2, this reader knows 1$"):
        list(EventLogReader(raw, source="ev.jsonl"))
    with pytest.raises(UnsupportedVersion):
        decode(raw[1])


def test_reader_takes_bytes_and_survives_invalid_utf8() -> None:
    raw = [encode(RUN).encode() + b"\n", b"\xff\xfe garbage\n", encode(LATE).encode() + b"\n"]
    with pytest.raises(EventLogError, match=r"^<lines>:2: not JSON"):
        list(EventLogReader(raw))
    reader = EventLogReader(raw, strict=False)
    assert list(reader) == [RUN, LATE]
    assert reader.skipped == 1
