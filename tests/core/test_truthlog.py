"""The truth log's records: one of every kind through the event log's codec and back, the
wire format the lab's files have, and a file split into its processes."""

from __future__ import annotations

import json

import pytest

from prober.core.eventlog import decode, encode
from prober.core.phase import ShutdownPhase
from prober.core.truthlog import (
    SIGNAL_TYPES,
    STARTUP_TYPES,
    TRUTH_TYPES,
    Compacted,
    ConnectionClosed,
    ConnectionOpened,
    EarlyAnswered,
    EarlyRequest,
    GoawaySent,
    InitialEventsEnd,
    LateConnection,
    LeaseWritten,
    Listening,
    PeerGoaway,
    ProtocolError,
    RetryAfterTotal,
    ShutdownInitiated,
    SyntheticWatchesEnded,
    TruthRecord,
    WatchEnded,
    WatchStarted,
    first,
    of_kind,
    processes,
    stamp,
)
from prober.fakeapiserver.lifecycle import Signal, Startup

AFTER = ShutdownPhase.AFTER
OTHERS: list[TruthRecord] = [
    Listening(port=6443, plain_port=None, holder="apiserver-x_1", early_ready=5.0,
              early_answer="403"),
    ShutdownInitiated(trigger="SIGTERM", delay=70.0),
    ConnectionOpened(conn=1, peer="198.18.0.2:4000", tls=True, protocol=None, late=False),
    ConnectionClosed(conn=1, protocol="h2", by="server", reason="shutdown", requests=3),
    GoawaySent(conn=1, last_stream_id=13, error_code=0, reason="retry-after"),
    ProtocolError(conn=2, reason="bad preface"),
    PeerGoaway(conn=3, reason="goaway"),
    LateConnection(conn=4, path="/api", user_agent="curl/8.5.0"),
    EarlyAnswered(request=EarlyRequest(audit_id="a", conn=1, stream=1, protocol="h1",
                                       method="GET", path="/api", peer="198.18.0.2:1",
                                       user_agent="curl/8.5.0", received=1.5, after_ready=True),
                  answer="hang", status=None, how="client-gone"),
    WatchStarted(conn=1, stream=3, peer="198.18.0.2:4000", protocol="h2", path="/api?watch=1",
                 phase=ShutdownPhase.DELAY_LATE),
    WatchEnded(conn=1, stream=3, how="drained", phase=AFTER, events=7, seconds=2.5, drain_rank=9),
    SyntheticWatchesEnded(ended={"drained": 1990, "cut": 10}, first=1.0, last=11.0),
    LeaseWritten(verb="update", namespace="kube-system", name="apiserver-x", revision=7,
                 holder=None, renew_time="2026-11-30T00:00:00.000000Z"),
    Compacted(revision=42),
    RetryAfterTotal(codes={"429": 4}),
    InitialEventsEnd(conn=1, stream=5, events=1, revision=42, withheld=True),
]  # fmt: skip
EXAMPLES = [
    *OTHERS,
    *(cls() for cls in SIGNAL_TYPES.values() if cls is not ShutdownInitiated),
    *(cls(holder="apiserver-x_1") for cls in STARTUP_TYPES.values()),
]


def stamped(record: TruthRecord, wall: float = 1_800_000_000.25) -> TruthRecord:
    return stamp(record, host="master-0", apiserver="apiserver-x", wall=wall, mono=12.5)


@pytest.mark.parametrize("record", EXAMPLES, ids=lambda r: r.KIND)
def test_every_kind_comes_back_as_it_was_written(record: TruthRecord) -> None:
    written = stamped(record)
    assert decode(encode(written), TRUTH_TYPES) == written


def test_every_kind_is_in_the_table_once() -> None:
    assert {r.KIND for r in EXAMPLES} == set(TRUTH_TYPES)
    assert len(EXAMPLES) == len(TRUTH_TYPES)


def test_a_line_begins_with_its_kind_and_its_stamp() -> None:
    line = encode(stamped(ShutdownInitiated(trigger="api", delay=70.0)))
    assert json.loads(line) == {
        "v": 1, "kind": "ShutdownInitiated", "host": "master-0", "apiserver": "apiserver-x",
        "wall": 1_800_000_000.25, "ts": "2027-01-15T08:00:00.250000Z", "mono": 12.5,
        "trigger": "api", "delay": 70.0,
    }  # fmt: skip
    upstream = json.loads(encode(stamped(ShutdownInitiated(delay=70.0))))
    assert "trigger" not in upstream  # upstream's main names no trigger


def test_the_fakes_signals_and_instants_each_have_their_kind() -> None:
    assert {s.value for s in Signal} <= set(SIGNAL_TYPES)
    assert set(STARTUP_TYPES) == {Startup.READY, Startup.SERVING}


def test_a_file_splits_into_its_processes_at_each_listening() -> None:
    listening = Listening(port=6443, holder="h")
    records = [stamped(r) for r in (Compacted(revision=1), listening, Compacted(revision=2),
                                    listening, RetryAfterTotal(codes={}))]  # fmt: skip
    split = processes(records)
    assert [[r.KIND for r in p] for p in split] == [
        ["compacted"], ["listening", "compacted"], ["listening", "retry_after_total"]
    ]  # fmt: skip
    assert [r.revision for r in of_kind(records, Compacted)] == [1, 2]
    assert first(split[1], Compacted) == records[2]
    assert first(split[2], Compacted) is None
