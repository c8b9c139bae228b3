"""Every configuration key of `prober run`, declared once: its parser, the flag that sets it
and what `--help` says of it. The default is `Config`'s and shows in the help from there. The
file loader, the `PROBER_<KEY>` variables and the command line are all built from `KEYS`.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import yaml

from prober.common.logs import FORMATS, LEVELS
from prober.config import fields as f
from prober.config.lbsettings import lb_settings
from prober.config.model import DEFAULT_TARGET_NAME, MIB, Config, Target
from prober.core.durations import format_go_duration
from prober.core.models import LB, Connection, LBSettings, Protocol
from prober.core.shutdown import DEFAULT_MAX_OPEN


class Flag(enum.Enum):
    VALUE = "value"  # --key VALUE
    SWITCH = "switch"  # --key: true
    OPTIONAL = "optional"  # --key [VALUE]: `const` without one
    REPEATED = "repeated"  # --flag VALUE, again and again: `gather` makes one value of them


@dataclass(frozen=True, slots=True)
class Key:
    name: str
    parse: Callable[[object], Any]
    help: str
    flag: Flag = Flag.VALUE
    show: Callable[[Any], str] | None = str  # the default in --help; None: not shown
    flag_name: str | None = None  # when not --<name>
    metavar: str | None = None
    const: str | None = None  # Flag.OPTIONAL's value without one
    gather: Callable[[Sequence[str]], object] | None = None  # Flag.REPEATED

    @property
    def option(self) -> str:
        return self.flag_name or "--" + self.name.replace("_", "-")

    @property
    def env(self) -> str:
        return f"PROBER_{self.name.upper()}"

    def described(self) -> str:
        """The help line, with the default `Config` has."""
        default = _DEFAULTS[self.name]
        if self.show is None or _unset(default):
            return self.help
        return f"{self.help} ({self.show(default)})"


def _unset(default: Any) -> bool:
    """Nothing worth showing: no value, off, or empty. Not `default in (None, False, "")`:
    0 == False, so a key whose default is 0 would lose it from its help."""
    return (
        default is None
        or default is False
        or (isinstance(default, str | tuple | dict) and not default)
    )


def _seconds(value: float) -> str:
    return format_go_duration(value)


def _size(value: int) -> str:
    return f"{value // MIB}MiB" if value % MIB == 0 else str(value)


def _listen(value: tuple[str, int]) -> str:
    return f"{value[0]}:{value[1]}"


def _joined(values: Sequence[enum.Enum]) -> str:
    return ",".join(str(v.value) for v in values)


def _targets(value: object) -> tuple[Target, ...]:
    if isinstance(value, str):  # from PROBER_TARGETS or a flag: YAML (or JSON) text
        value = yaml.safe_load(value)
    if not isinstance(value, list):
        raise f.Invalid(f"expected a list of targets, got {f.shown(value)}")
    targets: list[Target] = []
    for index, item in enumerate(value):
        try:
            target = _target(item)
        except f.Invalid as exc:
            raise f.Invalid(exc.problem, f"[{index}]{exc.sub}") from None
        if any((t.name, t.lb) == (target.name, target.lb) for t in targets):
            raise f.Invalid(f"target {target.name!r} on {target.lb} is listed twice", f"[{index}]")
        targets.append(target)
    return tuple(targets)


def _lb_settings(value: object) -> LBSettings | None:
    # From a variable or a flag it comes as text: the same YAML as in the file.
    return lb_settings(yaml.safe_load(value) if isinstance(value, str) else value)


_TARGET_KEYS: dict[str, Callable[[object], Any]] = {
    "name": f.target_name,
    "lb": lambda v: f.enum_value(LB, v),
    "url": f.base_url,
    "ca_file": f.ca_bundle,
    "token_file": f.readable_file,
    "server_name": f.optional_text,
}


def _target(item: object) -> Target:
    raw = f.mapping(item, _TARGET_KEYS)
    for required in ("lb", "url"):
        if required not in raw:
            raise f.Invalid(f"missing {required!r}")
    values: dict[str, Any] = {"name": DEFAULT_TARGET_NAME}
    for key, value in raw.items():
        try:
            values[key] = _TARGET_KEYS[key](value)
        except f.Invalid as exc:
            raise f.Invalid(exc.problem, f".{key}") from None
    return Target(**values)


def _target_flags(texts: Sequence[str]) -> list[object]:
    """`--target LB=URL`, repeated; what is wrong with one is the parser's to name."""
    out: list[object] = []
    for text in texts:
        lb, sep, url = text.partition("=")
        out.append({"lb": lb, "url": url} if sep else text)
    return out


KEYS: tuple[Key, ...] = (
    Key("platform", f.text, "constant `platform` label (default: discovered, or unknown)"),
    Key("interval", f.duration(minimum=0.001), "one worker's gap while an apiserver shuts down",
        show=_seconds),
    Key("quiet_interval", f.duration(allow_zero=True),
        "a stream's gap while none does; 0: always --interval", show=_seconds),
    Key("settle", f.duration(allow_zero=True),
        "quiet again this long after the last window or failure", show=_seconds),
    Key("workers", f.positive_int, "parallel workers per stream, staggered"),
    Key("timeout", f.duration(), "request timeout", show=_seconds),
    Key("burst_parallel", f.whole(0),
        "most witness-burst requests in flight at once, over every LB; 0: no bursts"),
    Key("rise", f.at_least(1.0),
        "new-connection streams of an LB whose reaction is open sample this many times "
        "faster than the window rate"),
    Key("early_for", f.duration(),
        "a restarted apiserver's failed answers this long after its /readyz went true are "
        "early: routed to it before it could serve", show=_seconds),
    Key("protocols", f.enum_list(Protocol), "comma-separated", show=_joined),
    Key("connections", f.enum_list(Connection), "comma-separated", show=_joined),
    Key("path", f.url_path, "probed path"),
    Key("consistent_reads", f.boolean,
        "read from etcd, not the watch cache (default: resourceVersion=0, as origin reads)",
        flag=Flag.SWITCH),
    Key("labels", f.labels, "constant label", flag=Flag.REPEATED, flag_name="--label",
        metavar="KEY=VALUE", gather=",".join),
    Key("listen", f.host_port, "HOST:PORT of /metrics, /healthz, /readyz", show=_listen),
    Key("event_log", f.optional_text, "write the JSON Lines event log to PATH", metavar="PATH"),
    Key("event_log_max_size", f.size, "rotate PATH past this size", show=_size),
    Key("event_log_keep_runs", f.positive_int,
        "earlier runs' logs kept beside PATH (PATH.previous-*), oldest pruned first"),
    Key("event_log_keep_size", f.size,
        "bytes those earlier runs' logs may take together; the newest is kept whatever its size",
        show=_size),
    Key("event_log_stdout", f.stdout_records,
        "also write the event log's records to stdout (CI collects pod logs, not files): all of "
        "them (no MODE), or compact: windows, intervals, pace, summaries, no samples",
        flag=Flag.OPTIONAL, const="all", metavar="MODE", show=None),
    Key("summary_interval", f.duration(minimum=1.0), "period of summary records", show=_seconds),
    Key("duration", f.optional_duration, "stop after this long (default: run until SIGTERM)"),
    Key("drain_timeout", f.duration(allow_zero=True),
        "on stop, wait this long for requests in flight; the rest are recorded as class "
        "stopped (no failure)", show=_seconds),
    Key("ca_file", f.ca_bundle, "CA bundle for targets that name none"),
    Key("token_file", f.readable_file, "bearer token file for targets that name none"),
    Key("insecure_skip_tls_verify", f.boolean, "do not verify certificates", flag=Flag.SWITCH),
    Key("in_cluster", f.boolean, "discover targets, platform and node names from the cluster",
        flag=Flag.SWITCH),
    Key("kubeconfig", f.readable_file, "discover targets and node names with this kubeconfig"),
    Key("localhost", f.boolean, "with discovery, also probe https://localhost:6443",
        flag=Flag.SWITCH),
    Key("node", f.node_name, "the node this prober runs on (the downward API's "
        "spec.nodeName): its own apiserver's answers through an LB are same-node, reported "
        "apart from the LB's"),
    Key("log_format", f.choice(FORMATS), f"{' or '.join(FORMATS)}"),
    Key("log_level", f.choice(tuple(LEVELS)), ", ".join(LEVELS)),
    Key("watches", f.watch_sync, "watch the heartbeat Lease through every LB, as informers "
        "do: watch-list (client-go 1.35's sync), list (LIST then WATCH) or off"),
    Key("heartbeat", f.text, "NAMESPACE/NAME of the heartbeat Lease (default: $POD_NAMESPACE/"
        "$POD_NAME, else default/prober-<hostname>)"),
    Key("heartbeat_interval", f.duration(minimum=0.01), "how often the heartbeat is renewed",
        show=_seconds),
    Key("watch_blind_after", f.duration(minimum=0.001),
        "a heartbeat unseen this long after its write makes a watch blind", show=_seconds),
    Key("slow_floor", f.duration(), "a stream is slow but up when its p99 answer time in the "
        "shutdown windows passes 3 x its quiet p99 and this", show=_seconds),
    Key("time_scale", f.at_least(0.001),
        "the lab's: upstream's timers the prober copies (client-go's watch timeout, backoff "
        "and HTTP/2 health check; the identity Lease renewal) multiplied by this; 1 in a "
        "cluster"),
    Key("lb_settings", _lb_settings, "this cluster's own LB health checks and shutdown delay, "
        "where not its platform's (YAML; see docs)", show=None),
    Key("targets", _targets,
        "probe URL behind LB (external-lb, internal-lb, service-network, localhost)",
        flag=Flag.REPEATED, flag_name="--target", metavar="LB=URL", gather=_target_flags),
)  # fmt: skip


# Keys that were, and what stands in their place: each named in one line where it is set.
_AS_SHIPPED = Config()
_CLIENT_GO = "client-go's constant, which the prober runs as a cluster's clients do; the lab "
REMOVED = {
    **dict.fromkeys(
        ("watch_min_timeout", "watch_backoff_initial", "watch_backoff_cap",
         "watch_backoff_reset", "http2_read_idle_timeout", "http2_ping_timeout"),
        _CLIENT_GO + "scales it with time_scale",
    ),
    "watch_backoff_factor": _CLIENT_GO + "never changed it",
    "watch_backoff_jitter": _CLIENT_GO + "never changed it",
    "tcp_keepalive": _CLIENT_GO + "never changed it",
    "identity_renew_interval": f"kube-apiserver's {_AS_SHIPPED.identity_renew_interval:g} s, "
    "which the lab scales with time_scale",
    "identity_refresh_fast": "a third of the identity Lease renew interval, at most 1 s",
    "node_refresh": "the identity Leases are read every six renew intervals, "
    f"{_AS_SHIPPED.node_refresh:g} s",
    "event_loop": "the daemon runs on uvloop, about a third less CPU than asyncio's loop "
    "(bench/daemon_cpu.py)",
    "max_apiservers": f"a run tracks and labels at most {DEFAULT_MAX_OPEN} apiservers, as "
    "prober analyze replays it",
    "max_in_flight": "at most 10 requests wait per worker before its ticks are skipped",
    "watch_max_event": f"a watch event past {_AS_SHIPPED.watch_max_event // MIB} MiB ends the "
    "watch: only a guard of the daemon's memory, no cluster's setting (etcd's objects are at "
    "most 1.5 MiB)",
}  # fmt: skip


# Keys whose values are paths, and the same in each target: in the file, a relative one is
# the config file's folder's, as Prometheus's and a kubeconfig's are; from a variable or a
# flag it is the working folder's, as a shell's.
PATH_KEYS = ("event_log", "ca_file", "token_file", "kubeconfig")
TARGET_PATH_KEYS = ("ca_file", "token_file")


def _default(field: dataclasses.Field[Any]) -> Any:
    if field.default_factory is not dataclasses.MISSING:
        return field.default_factory()
    return None if field.default is dataclasses.MISSING else field.default


_DEFAULTS: dict[str, Any] = {field.name: _default(field) for field in dataclasses.fields(Config)}
PARSERS: dict[str, Callable[[object], Any]] = {key.name: key.parse for key in KEYS}
