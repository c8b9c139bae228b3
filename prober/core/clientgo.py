"""client-go's retry rules, once, for every part of the prober that models what a Go client of
kube-apiserver does: the reflector's backoff between failed LIST/WATCH rounds, and the
`Retry-After` rule of a REST request. Pure: time and random draws come in as arguments.

Sources: k8s.io/client-go `tools/cache/reflector.go` (NewExponentialBackoffManager(800ms, 30s,
2m, 2.0, 1.0)), `k8s.io/apimachinery/pkg/util/wait` (ExponentialBackoffManager), and
`rest/request.go` (`checkWait`, `maxRetries` 10).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from prober.core.numbers import decimal_or_none

MAX_RETRIES = 10  # a REST request's tries on Retry-After

# Upstream's timers the daemon copies, in seconds, each with the floor it keeps when the lab
# shrinks it (config `time_scale`): client-go's reflector (`minWatchTimeout`, its backoff)
# and transport (`HTTP2_READ_IDLE_TIMEOUT_SECONDS`, `HTTP2_PING_TIMEOUT_SECONDS`), and
# kube-apiserver's identity Lease renewal (`--identity-lease-renew-interval`). The floors keep
# the servers unflooded and a PING above a busy machine's noise on a small scale. They are
# not settings: a cluster's clients run upstream's values, and so does the prober.
TIMERS: Mapping[str, tuple[float, float]] = {
    "watch_min_timeout": (300.0, 1.0),
    "watch_backoff_initial": (0.8, 0.01),
    "watch_backoff_cap": (30.0, 0.1),
    "watch_backoff_reset": (120.0, 1.0),
    "http2_read_idle_timeout": (30.0, 0.5),
    "http2_ping_timeout": (15.0, 0.25),
    "identity_renew_interval": (10.0, 0.0),
    # initialEventsEndBookmarkTicker: "awaiting required bookmark event" each 10 s (a stall);
    # never under 1 s, which a sync's connection and round trip may take unscaled
    "watch_list_stall": (10.0, 1.0),
}
TCP_KEEPALIVE = 30.0  # client-go's dialer: how a watch's dead flow is found on HTTP/1.1; unscaled


def timer(name: str, scale: float = 1.0) -> float:
    """Upstream's timer `name` (`TIMERS`) on a lab's time scale, to the millisecond."""
    return scaled(*TIMERS[name], scale)


def scaled(value: float, floor: float, scale: float) -> float:
    """`value` seconds on a lab's time scale, kept at `floor` or above, to the millisecond."""
    return value if scale == 1.0 else round(max(value * scale, floor), 3)


@dataclass(frozen=True, slots=True)
class BackoffPolicy:
    """The reflector's: NewExponentialBackoffManager(800ms, 30s, 2m, 2.0, 1.0)."""

    initial: float = 0.8
    cap: float = 30.0
    factor: float = 2.0
    jitter: float = 1.0
    reset_after: float = 120.0  # healthy this long since the last backoff: start again at initial


@dataclass(slots=True)
class Backoff:
    """wait.ExponentialBackoffManager: each `next` is the current step plus up to `jitter`
    times it; the step then grows by `factor` up to `cap`, and falls back to `initial` when
    `reset_after` seconds passed since the previous `next`."""

    policy: BackoffPolicy = field(default_factory=BackoffPolicy)
    _step: float = 0.0
    _last: float | None = None

    def next(self, now: float, draw: float) -> float:
        """Seconds to wait before the next try, at `now`; `draw` is uniform in [0, 1)."""
        policy = self.policy
        if self._last is None or now - self._last > policy.reset_after:
            self._step = policy.initial
        self._last = now
        step = self._step
        self._step = min(step * policy.factor, policy.cap)
        return step + draw * policy.jitter * step


def retry_after(status: int | None, headers: Mapping[str, str]) -> float | None:
    """checkWait: the seconds client-go waits before sending a request again, or None when it
    does not. It retries a 429 or any 5xx that carries `Retry-After` in whole seconds."""
    if status is None or not (status == 429 or 500 <= status <= 599):
        return None
    seconds = decimal_or_none(headers.get("retry-after", "").strip())
    return None if seconds is None else float(seconds)


def retry_after_detail(status: int, value: str) -> str:
    """How a sample's `detail` records an answer with `Retry-After`: `retry_after_value`
    reads the header's value back, so a replay applies `retry_after` as the daemon did."""
    return f"HTTP {status} Retry-After: {value}"


def retry_after_value(detail: str) -> str | None:
    _, found, value = detail.partition(" Retry-After: ")
    return value if found else None
