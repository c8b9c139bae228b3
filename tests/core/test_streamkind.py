"""The pure side of the seam for kinds of stream: names, record types, the run record."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import ClassVar

import pytest

from prober.core.eventlog import EventLogReader, decode, encode
from prober.core.kinds import REQUEST, REQUESTS, run_record, standard_kinds
from prober.core.models import LB, Protocol, RunRecord, Sample, StreamId, StreamNameError
from prober.core.streamkind import KindSpec, KindStreamId, KindTable, kind_identity
from tests.factories import STREAM, sample

WATCH = KindStreamId("kube-api", Protocol.HTTP2, LB.INTERNAL, "beat")


@dataclass(frozen=True, slots=True)
class Beat:
    """A record of a made-up kind of stream, as a later kind would write one."""

    KIND: ClassVar[str] = "beat"
    t: float
    stream_id: KindStreamId = field(metadata=kind_identity("beat"))
    lag: float | None = None

    @property
    def stream(self) -> str:
        return self.stream_id.name


BEATS = KindSpec("beat", records=(Beat,))


def test_a_kinds_stream_is_named_like_a_request_streams_with_its_kind_at_the_end() -> None:
    assert WATCH.name == "kube-api-http2-internal-lb-beat"
    assert KindStreamId.parse(WATCH.name, "beat") == WATCH
    dashed = KindStreamId("my-api", Protocol.HTTP1, LB.SERVICE_NETWORK, "watch")
    assert KindStreamId.parse(dashed.name, "watch") == dashed


@pytest.mark.parametrize(
    ("parse", "name"),
    [
        (StreamId.parse, "kube-api-http2-internal-lb-watch"),
        (lambda n: KindStreamId.parse(n, "watch"), STREAM.name),
        (lambda n: KindStreamId.parse(n, "watch"), "http2-internal-lb-watch"),  # no target
        (lambda n: KindStreamId.parse(n, "watch"), "kube-api-http3-internal-lb-watch"),
    ],
)
def test_no_kind_reads_another_kinds_names(parse, name: str) -> None:
    with pytest.raises(StreamNameError):
        parse(name)


def test_request_stream_names_parse_as_they_always_did() -> None:
    names = ("kube-api-http2-internal-lb-new-connections", "a-b-http1-localhost-reused-connections")
    for name in names:
        assert StreamId.parse(name).name == name


@pytest.mark.parametrize("name", ["Watch", "connections", "two words", "", "9lives"])
def test_a_kinds_name_is_one_lowercase_word(name: str) -> None:
    with pytest.raises(ValueError, match="one lowercase word"):
        KindSpec(name)


def test_the_table_refuses_a_second_kind_of_a_name_or_a_record_kind_taken() -> None:
    table = standard_kinds()
    table.add(BEATS)
    with pytest.raises(ValueError, match="there already"):
        table.add(KindSpec("beat"))
    with pytest.raises(ValueError, match="'sample' is taken"):
        table.add(KindSpec("tick", records=(Sample,)))
    with pytest.raises(ValueError, match="'beat' is taken"):
        KindTable([KindSpec("tick", records=(Beat, Beat))])
    assert table.owner("beat") == "beat"
    assert table.owner("watch_end") == "watch"  # the standard kinds' own
    assert table.owner("sample") == REQUEST
    assert table.owner("run") is None
    assert table.record_types["beat"] is Beat


def test_a_kinds_record_round_trips_with_its_identity_spelled_out() -> None:
    beat = Beat(t=1.5, stream_id=WATCH, lag=0.25)
    line = encode(beat)
    assert json.loads(line) == {
        "v": 1,
        "kind": "beat",
        "t": 1.5,
        "stream": WATCH.name,
        "lb": "internal-lb",
        "protocol": "http2",
        "lag": 0.25,
    }
    assert decode(line, KindTable([REQUESTS, BEATS]).record_types) == beat


def test_a_reader_not_given_a_kind_skips_its_records_as_unknown() -> None:
    answered = sample(1.0)
    beat, late = encode(Beat(t=1.5, stream_id=WATCH)) + "\n", encode(answered) + "\n"
    plain = EventLogReader([beat, late], source="ev.jsonl")
    assert list(plain) == [answered]
    assert (plain.skipped, plain.unknown_kinds) == (1, 1)
    table = KindTable([REQUESTS, BEATS])
    given = list(EventLogReader([beat, late], types=table.record_types))
    assert [r.KIND for r in given] == ["beat", "sample"]


def test_the_run_record_holds_every_kinds_streams_by_kind() -> None:
    record = run_record(
        run_id="r",
        ts="x",
        platform="aws",
        version="1",
        streams={REQUEST: [STREAM.name], "beat": [WATCH.name], "idle": []},
    )
    assert record.kind_streams == {REQUEST: (STREAM.name,), "beat": (WATCH.name,)}
    assert record.streams_of(REQUEST) == (STREAM.name,)
    assert decode(encode(record)) == record
    assert '"streams"' not in encode(record)


@pytest.mark.parametrize(
    ("written", "kinds"),
    [
        ('"streams":[]', {}),
        (f'"streams":["{STREAM.name}"]', {REQUEST: (STREAM.name,)}),
        (f'"streams":["{STREAM.name}"],"kind_streams":{{"beat":["{WATCH.name}"]}}',
         {REQUEST: (STREAM.name,), "beat": (WATCH.name,)}),
    ],
    ids=["no streams", "requests", "requests and another kind"],
)  # fmt: skip
def test_a_run_record_written_before_reads_its_request_streams_by_kind(
    written: str, kinds: dict[str, tuple[str, ...]]
) -> None:
    """Logs written before 2026-12-06 kept the request streams in a list of their own."""
    old = f'{{"v":1,"kind":"run","run_id":"r","ts":"x","platform":"aws",{written},"version":"1"}}'
    assert decode(old) == RunRecord("r", "x", "aws", "1", kinds)
