"""The JSON documents the report layer writes and reads, as typed dicts.

Each type is the document exactly as `json.dumps` writes it and `json.loads` gives it back
(strings for enums, None for null), so the code that builds one, writes it, reads it back or
judges it is checked key by key: a misspelt key is a type error, not a missing field in a
file someone reads months later. Key order on disk is the order the builders write them in,
not the order here.

`summary.json` is schema v2; a v1 summary is v2 without the sampling's bounds, so the bound
keys are `NotRequired`: the writer always writes them, a reader of both versions asks `in`
first. `retried` and `stopped` are `NotRequired` too: v2 summaries written before resends
(requests cut by the stop) were counted have none. `tests/report/test_analyze.py` checks that
the writer writes every key the types name.

This module keeps its annotations evaluated (no `from __future__ import annotations`), so
that `__required_keys__` and `__optional_keys__` tell that test the truth.
"""

from typing import Any, Literal, NotRequired, TypeAlias, TypedDict

Metric: TypeAlias = Literal["reaction", "disruption"]


class KeyFields(TypedDict):
    """An LB x protocol x connection, as the enums' values."""

    lb: str
    protocol: str
    connection: str


class StreamFields(KeyFields):
    stream: str


# summary.json (`summary.build_summary`), v2; read back by `history.load_run_facts`


class WindowStreamEntry(StreamFields):
    """One stream during one shutdown window."""

    late: int
    max_elapsed: float | None
    reaction: float | None  # None: no late request
    reaction_lo: NotRequired[float | None]  # v2
    reaction_hi: NotRequired[float | None]  # v2
    bound_by: NotRequired[str | None]  # v2: `failure`, `restarted`, `sampling`, `closed`, None
    failures: int


class WindowEntry(TypedDict):
    """One shutdown window; times in run seconds."""

    host: str
    node: str | None
    delay: float
    t0: float
    t0_lo: float
    t0_hi: float
    closed_by: str
    end_t: NotRequired[float]  # schema 2.5: when it closed
    streams: list[WindowStreamEntry]
    instance: NotRequired[str]  # schema 2.7: the process that shut down, `node #start`


class IntervalEntry(TypedDict):
    """One disruption interval of a stream; times in run seconds."""

    start_t: float
    end_t: float
    start_lo: NotRequired[float | None]  # v2
    start_hi: NotRequired[float | None]  # v2
    end_lo: NotRequired[float | None]  # v2
    end_hi: NotRequired[float | None]  # v2
    start_ts: str
    end_ts: str
    error: str
    detail: str
    samples: int
    # schema 2.5: false where every failure in it was an answer with Retry-After that
    # client-go's retries got through: no client felt it (`core.perceived.Felt`)
    felt: NotRequired[bool]
    early: NotRequired[int]  # schema 3: its early failures (`core.instances`)
    cause: NotRequired[str]  # schema 3: `report.results.causes.Cause`
    pattern: NotRequired[str]  # schema 3: `report.results.patterns.Pattern`
    pattern_evidence: NotRequired[str]  # the facts that decided it
    pattern_confidence: NotRequired[str]  # high, medium, low


class RetryAfterEntry(TypedDict):
    """A stream's answers with `Retry-After`, as client-go would have retried them."""

    answers: int  # answered 429 or 5xx with Retry-After: raw disruption, as origin counts
    succeeded: int  # a retry succeeded: the client felt a wait, no failure
    felt: int  # the retries ended in a failure, or ran out of tries
    unresolved: int  # the run ended while client-go would still have waited
    max_waited: float  # seconds from the first try to the answer that ended a chain
    felt_disruption_seconds: float  # the raw figure less what every retry got through


class StreamEntry(StreamFields):
    samples: int
    retried: NotRequired[dict[str, int]]  # reason -> requests sent again once
    stopped: NotRequired[int]  # requests the daemon's stop cut: among samples, no failure
    same_node: NotRequired[int]  # schema 2.5: among samples, the prober's own node's
    disruption_seconds: float
    # schema 2.5: as a client felt it, less the intervals of answers with Retry-After that
    # client-go's retries got through (`core.perceived.Felt`); the raw figure is above
    felt_disruption_seconds: NotRequired[float]
    intervals: list[IntervalEntry]
    pattern_seconds: NotRequired[dict[str, float]]  # schema 3: disruption seconds by pattern


class SameNodeStreamEntry(StreamFields):
    """A stream's same-node requests (`core.samenode`): its own node's apiserver."""

    samples: int
    disruption_seconds: float
    intervals: list[IntervalEntry]


class SameNodeEntry(TypedDict):
    """What reached the prober's own node's apiserver through an LB: never an LB's result."""

    node: str | None  # the prober's node; None: not known, and nothing is same-node
    hairpins: list[str]  # LBs that hairpin from this node: their lost requests are its
    windows: list[WindowEntry]
    streams: list[SameNodeStreamEntry]  # the streams that had same-node requests


class WorstEntry(KeyFields):
    """Per key, the largest reaction over every window, and the largest disruption."""

    reaction: float | None
    reaction_lo: NotRequired[float | None]  # v2
    reaction_hi: NotRequired[float | None]  # v2
    disruption_seconds: float
    felt_disruption_seconds: NotRequired[float]  # schema 2.5: the largest felt disruption


class EndedEntry(TypedDict):
    abruptly: bool  # no `run_end` record: killed, at the last whole record
    t: float  # run time of the end
    ts: str
    reason: str | None  # why the daemon stopped; None when it ended abruptly


class VerdictEntry(TypedDict):
    name: str
    status: str  # passed, failed, skipped, by-design (junit.xml: failed, then passed)
    message: str
    observed: float | None
    allowed: float | None
    lb: NotRequired[str | None]  # schema 3: what it judges, None where not one of them
    protocol: NotRequired[str | None]
    connection: NotRequired[str | None]  # `watch` for a watch stream's tests
    cause: NotRequired[str | None]  # of the failed requests it judges (`report.results.causes`)


class CountsEntry(TypedDict):
    """junit.xml's counts: its testcases by outcome; `by_design`: of the failed, those
    failed and then passed, as a known flake (schema 3)."""

    tests: int
    failed: int
    passed: int
    skipped: int
    by_design: int


class AgeRowEntry(StreamFields):
    """What one stream met on connections opened in one phase of their server's shutdown
    (`core.connection_age`): counts by the phase each was met in."""

    opened: str  # a phase, phases joined by "|" where the bounds allow each, or why unplaced
    late: dict[str, int]
    failed: dict[str, int]
    resent: dict[str, int]  # kept connection cut as the request went out; Go resends it
    errors: dict[str, int]  # the failures' classes


class AgeFindingEntry(TypedDict):
    """Upstream's 20 % rule, per LB: did only connections opened in the delay's last 20 %
    (or later) fail?"""

    lb: str
    rule: str  # held, broken, undecided, untested (no shutdown)
    breaking: dict[str, int]  # opened -> failures on connections opened before the 80 % mark
    ambiguous: dict[str, int]  # opened -> failures whose opening the bounds put either side
    within: dict[str, int]  # opened -> failures on connections opened past the mark
    unplaced: dict[str, int]  # why -> failures put in no phase
    retry_after: int  # answers 429/503 with Retry-After: client-go retries them, no failure
    errors: dict[str, int]  # the classes of the breaking failures
    late_before_t0: dict[str, int]  # late answers on connections opened before T0, by phase met
    resent: dict[str, int]  # opened -> requests resent after their kept connection was cut
    text: str


class ConnectionAgesSection(TypedDict):
    rows: list[AgeRowEntry]
    findings: list[AgeFindingEntry]


# schema 2.7: the other edge, every restarted apiserver (`report.results.restarts`).


class AddBackEntry(TypedDict):
    target: str
    lb: str
    first_t: float | None
    added_lo: float | None
    added_hi: float | None
    seconds: float | None  # from T1 to the first answer through the LB
    seconds_lo: float | None
    seconds_hi: float | None
    budget: float | None  # the LB's worst add-back (interval x healthy threshold, a timeout)
    verdict: str | None  # within, over, undecided; None: not taken back, or no budget
    early: int
    unattributed: int


class InstanceEntry(TypedDict):
    label: str  # node #start
    host: str
    node: str | None
    start: int
    holder: str | None
    first_t: float
    t1: float | None
    t1_lo: float | None
    t1_hi: float | None
    t1_lo_by: str | None
    t1_hi_by: str | None
    complete: bool  # every LB took it back before the run ended
    early: int
    lbs: list[AddBackEntry]


class RestartLBEntry(TypedDict):
    lb: str
    taken_back: int  # restarted instances it sent requests to
    missed: int  # restarted instances it never sent one to
    worst: float | None
    worst_lo: float | None
    worst_hi: float | None
    budget: float | None
    over: int
    undecided: int
    early: int
    unattributed: int
    text: str


class RestartsSection(TypedDict):
    instances: list[InstanceEntry]
    lbs: list[RestartLBEntry]


# schema 3.1: proof of completeness (`report.results.coverage`, `core.coverage`).


class CoverageTotalEntry(StreamFields):
    """A stream's whole run: ticks due, requests started, samples counted."""

    due: int
    started: int
    counted: int
    skipped: int  # ticks due but not sent, every reason


class CoverageStreamEntry(StreamFields):
    """One stream in one shutdown window: ticks due and taken, and its worst gap there."""

    due: int
    taken: int
    skipped: int
    share: float | None  # taken / due; None: nothing was due
    gap: float | None  # the gap largest for its schedule, seconds
    gap_start: float | None  # run seconds
    gap_end: float | None
    gap_start_ts: str | None  # RFC 3339
    gap_end_ts: str | None
    scheduled: float | None  # the mean gap the schedule asked for over it
    limit: float | None  # `limit_factor` x scheduled
    within: bool | None  # gap <= limit; None: no gap measured


class CoverageWindowEntry(TypedDict):
    host: str
    instance: str  # `node #start`, as windows[] names it
    t0: float
    end_t: float
    streams: list[CoverageStreamEntry]


class CoverageSection(TypedDict):
    limit_factor: float  # a gap's limit, in mean gaps of the schedule then in force
    streams: list[CoverageTotalEntry]
    windows: list[CoverageWindowEntry]


# schema 2.8: how the kept HTTP/2 connections spread after each restart
# (`report.results.rebalancing`).


class SharePeriodEntry(TypedDict):
    start: float  # run seconds: one summary period
    end: float
    requests: int
    shares: dict[str, float]  # apiserver host -> its share of the period's requests


class HeldEntry(TypedDict):
    host: str
    seconds: float | None  # from the restart's T1 until it held half its fair share; None: never
    seconds_lo: float | None
    seconds_hi: float | None


class RebalanceEntry(TypedDict):
    label: str  # the restarted instance, node #start
    host: str
    ready: float  # its T1 (its first sign where none is known)
    ready_lo: float | None
    ready_hi: float | None
    until: float  # the next shutdown's T0, or the run's last summary
    until_by: str  # "shutdown of <host>" or "run end"
    periods: list[SharePeriodEntry]
    held: list[HeldEntry]
    text: str


class OwnLateStream(TypedDict):
    stream: str
    connections: int  # opened in the delay's last 20 % for certain
    requests: int  # sent on them
    maybe_connections: int  # the bounds put their opening on either side of a mark
    maybe_requests: int


class OwnLateWindow(TypedDict):
    """The daemon's own late connections to one shutting-down apiserver
    (`report.results.own_late`)."""

    host: str
    node: str | None
    t0: float
    connections: int
    requests: int
    maybe_connections: int
    maybe_requests: int
    streams: list[OwnLateStream]
    text: str


class OwnLateSection(TypedDict):
    windows: list[OwnLateWindow]
    connections: int
    requests: int


class RebalancingSection(TypedDict):
    pool: int  # kept HTTP/2 connections the daemon held, over every LB
    apiservers: list[str]
    covers: bool  # pool >= apiservers: each could hold one
    half_fair: float  # half of 1/apiservers
    restarts: list[RebalanceEntry]
    text: str


class SummaryDocument(TypedDict):
    v: Literal[1, 2, 3]
    run_id: str
    started: NotRequired[str]  # RFC 3339, the run's start; summaries before the export had none
    platform: str
    windows: list[WindowEntry]
    streams: list[StreamEntry]
    worst: list[WorstEntry]
    watches: NotRequired[
        dict[str, Any]
    ]  # `results.watches` (schema 2.1: a summary before had none)
    ended: NotRequired[EndedEntry]  # schema 2.2: how the run ended
    verdicts: NotRequired[list[VerdictEntry]]  # schema 2.3: every test junit.xml reports
    explained: NotRequired[list[str]]  # schema 2.3: one line per LB, why its numbers are so
    counts: NotRequired[CountsEntry]  # schema 3: junit.xml's counts
    retry_after: NotRequired[dict[str, RetryAfterEntry]]  # schema 2.4: by stream
    apiservers: NotRequired[dict[str, str]]  # schema 2.5: APIServerID -> node, as learnt
    same_node: NotRequired[SameNodeEntry]  # schema 2.5: the prober's own node, apart
    connection_ages: NotRequired[ConnectionAgesSection]  # schema 2.6 (`results.connection_ages`)
    restarts: NotRequired[RestartsSection]  # schema 2.7: the other edge (`report.results.restarts`)
    coverage: NotRequired[CoverageSection]  # schema 3.1: what was due and taken, per window
    rebalancing: NotRequired[RebalancingSection]  # schema 2.8 (`report.results.rebalancing`)
    own_late: NotRequired[OwnLateSection]  # schema 2.8 (`report.results.own_late`)
    latency: NotRequired[Any]  # schema 3.1: answer times by run phase (`results.latency`)
    patterns: NotRequired[dict[str, float]]  # schema 3: every stream's disruption s by pattern


# thresholds.json (`thresholds.to_document`); read back by `thresholds.load_thresholds`


# A row's fields are declared once, by `threshold_rows.Entry`, which writes and checks them.
ThresholdRow: TypeAlias = dict[str, str | float | bool]


class Period(TypedDict):
    """The runs' start times a history covers, RFC 3339: `to` is exclusive in a query."""

    start: str
    end: str


class ThresholdsDocument(TypedDict):
    v: Literal[1]
    period: NotRequired[Period]  # unknown for summaries written before they carried `started`
    entries: list[ThresholdRow]


# recommendations.json (`prober recommend --out`), written only


class RecommendationPart(TypedDict):
    """The worst P99 reaction of one connection mode, and the delay it asks for."""

    p99: float
    lb: str
    protocol: str
    runs: int
    delay: float


class RecommendationPrior(TypedDict):
    """What the platform's LB settings ask for (`core.budgets`): the slowest LB's worst case
    to stop routing new connections, and the delay it needs."""

    lb: str
    budget: float
    delay: float


class PlatformRecommendation(TypedDict):
    platform: str
    today: float
    new: RecommendationPart | None
    reused: RecommendationPart | None
    prior: RecommendationPrior | None  # None: a platform the LB table does not know
    recommended: float | None  # new's delay, or the prior's while the history is thin
    why: str


class RecommendationsDocument(TypedDict):
    v: Literal[1]
    rule: str
    buffer: float
    platforms: list[PlatformRecommendation]


# regression.json (`prober thresholds --check`), written only


class RegressionRow(KeyFields):
    platform: str
    metric: Metric
    runs: int | None  # None: not tested (no usable history)
    exceeding: int | None
    threshold: float | None
    p_value: float | None
    regressed: bool
    history: str


class RegressionDocument(TypedDict):
    v: Literal[1]
    test: str
    quantile: str
    alpha: float
    runs: int
    results: list[RegressionRow]


Document: TypeAlias = (
    SummaryDocument | ThresholdsDocument | RecommendationsDocument | RegressionDocument
)
