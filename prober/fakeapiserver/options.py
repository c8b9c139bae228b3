"""Options of the fake kube-apiserver: one typed record, the command line that fills it, and
every validation rule, each failing with one line that names the flag and the value."""

from __future__ import annotations

import argparse
import csv
import ssl
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from prober.common.values import duration, flag
from prober.core.header import apiserver_id

MAX_GOAWAY_CHANCE = 0.02  # upstream's validation limit for --goaway-chance
DEFAULT_USER = "system:admin"  # a token file with bare tokens maps them to this user


class OptionsError(ValueError):
    """Bad usage or bad input: the message is one line naming the flag, file or value."""


@dataclass(frozen=True, slots=True)
class User:
    name: str
    uid: str = ""
    groups: tuple[str, ...] = ("system:authenticated",)


ANONYMOUS = User("system:anonymous", "", ("system:unauthenticated",))


class EarlyAnswer(StrEnum):
    """What a server whose /readyz says ok before it can serve answers meanwhile, as the bug
    of openshift/kubernetes #2730 and #2732 did: an internal error, a known user forbidden
    (the authorizer's caches not synced yet), or nothing until the client gives up."""

    ERROR = "500"
    FORBIDDEN = "403"
    HANG = "hang"


@dataclass(frozen=True, slots=True)
class ApiServerOptions:
    cert: Path
    key: Path
    port: int = 6443
    bind_address: str = "127.0.0.1"
    plain_port: int | None = None  # h2c (prior knowledge) and HTTP/1.1 without TLS
    hostname: str = "localhost"
    shutdown_delay: float = 0.0
    send_retry_after: bool = True
    shutdown_annotation: bool = True  # the older `apiserver.k8s.io/shutdown` audit annotation
    tokens: dict[str, User] | None = None  # None: no authentication, everyone is admin
    audit_log: Path | None = None
    audit_log_maxsize_mb: int = 100
    audit_log_maxbackup: int = 10
    truth: Path | None = None
    goaway_chance: float = 0.0
    request_timeout: float = 60.0
    watch_grace: float = 0.0
    watch_min_qps: float = 200.0
    idle_timeout: float = 90.0
    read_header_timeout: float = 32.0
    goaway_linger: float = 1.0  # Go closes an HTTP/2 connection 1 s after its last stream
    shutdown_timeout: float | None = None  # None: upstream's rule (see `final_close`)
    etcd_servers: str | None = None  # host:port of etcd's gateway; None: no storage API
    synthetic_watches: int = 0  # informer watches counted in the drain, without a client
    watch_cache_size: int = 10000
    bookmark_interval: float = 60.0
    withhold_initial_events_end: bool = False  # a watch-list's end marker is never sent
    watch_cache_init: float = 0.0  # LIST and WATCH answer 429 this long after listening
    compaction_interval: float = 300.0
    identity_renew_interval: float = 10.0
    post_start_hooks: float = 0.0  # after listening, /readyz fails this long (see Startup)
    livez_grace: float = 0.0  # /livez passes while hooks run, this long after listening
    early_ready: float = 0.0  # /readyz ok this long before the server can serve; 0: off
    early_answer: EarlyAnswer = EarlyAnswer.ERROR  # what it answers meanwhile

    @property
    def final_close(self) -> float:
        """How long the HTTP server's Shutdown waits for connections before the process
        exits: 2 s with retry-after (genericapiserver.go), else the request timeout."""
        if self.shutdown_timeout is not None:
            return self.shutdown_timeout
        return 2.0 if self.send_retry_after else self.request_timeout

    @property
    def apiserver_id(self) -> str:
        return apiserver_id(self.hostname)

    def validate(self) -> None:
        for name, port in (("--port", self.port), ("--plain-port", self.plain_port)):
            if port is not None and not 0 <= port <= 65535:
                raise OptionsError(f"{name} {port}: not a port number (0-65535, 0 picks one)")
        if not 0.0 <= self.goaway_chance <= MAX_GOAWAY_CHANCE:
            raise OptionsError(
                f"--goaway-chance {self.goaway_chance}: must be between 0 and {MAX_GOAWAY_CHANCE}"
            )
        if not self.hostname:
            raise OptionsError("--hostname: must not be empty")
        if self.audit_log_maxsize_mb < 0 or self.audit_log_maxbackup < 0:
            raise OptionsError("--audit-log-maxsize/--audit-log-maxbackup: must not be negative")
        if self.watch_min_qps <= 0:
            raise OptionsError(f"--watch-drain-min-qps {self.watch_min_qps}: must be positive")
        self._validate_storage()
        self._validate_startup()
        for name in ("shutdown_delay", "request_timeout", "watch_grace", "idle_timeout"):
            if getattr(self, name) < 0:
                flag = "--" + name.replace("_", "-")
                raise OptionsError(f"{flag} {getattr(self, name)}: must not be negative")

    def _validate_storage(self) -> None:
        for name, count, least in (
            ("--synthetic-watches", self.synthetic_watches, 0),
            ("--watch-cache-size", self.watch_cache_size, 1),
        ):
            if count < least:
                raise OptionsError(f"{name} {count}: must be at least {least}")
        if self.etcd_servers is not None and not _is_endpoint(self.etcd_servers):
            raise OptionsError(f"--etcd-servers {self.etcd_servers}: expected host:port")
        for option, seconds in (
            ("--watch-bookmark-interval", self.bookmark_interval),
            ("--etcd-compaction-interval", self.compaction_interval),
            ("--identity-lease-renew-interval", self.identity_renew_interval),
        ):
            if seconds <= 0:
                raise OptionsError(f"{option} {seconds}: must be positive")

    def _validate_startup(self) -> None:
        for option, seconds in (
            ("--post-start-hooks-duration", self.post_start_hooks),
            ("--livez-grace-period", self.livez_grace),
            ("--early-ready-duration", self.early_ready),
        ):
            if seconds < 0:
                raise OptionsError(f"{option} {seconds}: must not be negative")

    def tls_context(self) -> ssl.SSLContext:
        """A server context offering ALPN h2 and http/1.1, as the apiserver does."""
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        context.set_alpn_protocols(["h2", "http/1.1"])
        for option, path in (("--cert", self.cert), ("--key", self.key)):
            if not Path(path).is_file():
                raise OptionsError(f"{option} {path}: no such file")
        try:
            context.load_cert_chain(str(self.cert), str(self.key))
        except (ssl.SSLError, ValueError) as error:
            raise OptionsError(
                f"--cert {self.cert} / --key {self.key}: cannot be loaded ({error})"
            ) from None
        return context


def _is_endpoint(text: str) -> bool:
    host, _, port = text.removeprefix("http://").rpartition(":")
    return bool(host) and port.isdigit() and 0 < int(port) <= 65535


def load_tokens(path: Path) -> dict[str, User]:
    """A bearer token file: one token per line (user `system:admin`), or kube-apiserver's
    `--token-auth-file` CSV lines `token,user,uid,"group1,group2"`."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise OptionsError(f"--token-file {path}: cannot be read ({error})") from None
    tokens: dict[str, User] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        row = next(csv.reader([line.strip()]))
        if len(row) == 1:
            tokens[row[0]] = User(DEFAULT_USER, "", ("system:masters", "system:authenticated"))
        elif len(row) >= 3 and row[0] and row[1]:
            groups = tuple(g for g in (row[3].split(",") if len(row) > 3 else []) if g)
            tokens[row[0]] = User(row[1], row[2], (*groups, "system:authenticated"))
        else:
            raise OptionsError(f"--token-file {path}:{number}: expected token or token,user,uid")
    if not tokens:
        raise OptionsError(f"--token-file {path}: no token in the file")
    return tokens


# A Go duration, 0 allowed: the flags' defaults are upstream's, several of them 0s.
_duration = flag(duration(allow_zero=True))


EXAMPLE = """\
example:
  python -m prober.fakeapiserver --port 0 --cert server.crt --key server.key \\
      --hostname master-0 --shutdown-delay-duration 10s --token-file token \\
      --audit-log /tmp/lab/audit.log --truth /tmp/lab/truth.jsonl --plain-port 0
  # prints {"event": "listening", "port": 40123, "plain_port": 40124}, then
  # {"event": "serving", "holder": ...} and {"event": "ready", ...} as each comes true; then
  kill -TERM <pid>       # or: curl -k -X POST https://127.0.0.1:40123/_lab/shutdown
  # the bug of openshift/kubernetes #2730: /readyz ok 30 s before it can serve, 403 meanwhile
  python -m prober.fakeapiserver --port 0 --cert server.crt --key server.key \\
      --post-start-hooks-duration 2s --early-ready-duration 30s --early-ready-answer 403
"""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m prober.fakeapiserver",
        description=(
            "A fake kube-apiserver for the lab that behaves like a real one on the wire during "
            "graceful termination: /readyz, the X-OpenShift-Disruption header, 429/503 "
            "retry-after, HTTP/2 GOAWAY, late-connection audit annotations, audit log and a "
            "ground-truth event file. SIGTERM starts graceful termination; SIGKILL is a crash."
        ),
        epilog=EXAMPLE,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add = parser.add_argument
    add("--port", type=int, default=6443, help="TLS port (h2 and http/1.1 by ALPN); 0 picks one")
    add("--bind-address", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    add("--plain-port", type=int, help="also serve h2c (prior knowledge) and HTTP/1.1 here")
    add("--cert", type=Path, required=True, help="server certificate chain (PEM)")
    add("--key", type=Path, required=True, help="server private key (PEM)")
    add("--hostname", default="localhost", help="host name; the APIServerID is derived from it")
    add(
        "--shutdown-delay-duration",
        type=_duration,
        default=0.0,
        metavar="DURATION",
        help="Go duration /readyz fails before the server stops accepting requests (default 0s)",
    )
    add(
        "--shutdown-send-retry-after",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="after the delay answer 429 until drained (default) instead of closing the listener",
    )
    add(
        "--shutdown-audit-annotation",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="add the apiserver.k8s.io/shutdown audit annotation after shutdown starts",
    )
    add(
        "--token-file",
        type=Path,
        help="bearer tokens accepted (one per line, or token,user,uid,groups); others get 401",
    )
    add("--audit-log", type=Path, help="audit.k8s.io/v1 Event JSON Lines file")
    add(
        "--audit-log-maxsize",
        type=int,
        default=100,
        metavar="MB",
        help="rotate the audit log to audit-<timestamp>.log at this size (0: never)",
    )
    add("--audit-log-maxbackup", type=int, default=10, help="rotated audit files to keep")
    add("--truth", type=Path, help="ground-truth JSON Lines: lifecycle signals, GOAWAYs, closes")
    add(
        "--goaway-chance",
        type=float,
        default=0.0,
        help=f"fraction of HTTP/2 requests answered with GOAWAY (0 to {MAX_GOAWAY_CHANCE})",
    )
    add(
        "--request-timeout",
        type=_duration,
        default=60.0,
        metavar="DURATION",
        help="bound on draining in-flight requests and connections (default 1m0s)",
    )
    add(
        "--shutdown-watch-termination-grace-period",
        type=_duration,
        default=0.0,
        metavar="DURATION",
        help="drain open watches within this period (default 0s: at once)",
    )
    add(
        "--watch-drain-min-qps",
        type=float,
        default=200.0,
        help="floor of the watch drain rate (upstream: 200 per second)",
    )
    add(
        "--idle-timeout",
        type=_duration,
        default=90.0,
        metavar="DURATION",
        help="close idle HTTP/1.1 and HTTP/2 connections after this (default 1m30s)",
    )
    add(
        "--read-header-timeout",
        type=_duration,
        default=32.0,
        metavar="DURATION",
        help="close connections whose request headers stall this long (default 32s)",
    )
    add(
        "--shutdown-timeout",
        type=_duration,
        metavar="DURATION",
        help="how long the stopping server waits for connections before it exits and cuts "
        "what is left (default: 2s with retry-after, else the request timeout)",
    )
    add(
        "--etcd-servers",
        metavar="HOST:PORT",
        help="etcd (its JSON gateway) to keep objects in: Leases, discovery and watches are "
        "served only with it",
    )
    add(
        "--synthetic-watches",
        type=int,
        default=2000,
        help="informer watches the server holds without a client, drained at shutdown among "
        "the real ones (default 2000)",
    )
    add("--watch-cache-size", type=int, default=10000, help="events the watch cache keeps")
    add(
        "--watch-bookmark-interval",
        type=_duration,
        default=60.0,
        metavar="DURATION",
        help="how often a watch that allows bookmarks gets one (default 1m0s)",
    )
    add(
        "--watch-cache-init-duration",
        type=_duration,
        default=0.0,
        metavar="DURATION",
        help="KEP-4568: LIST and WATCH answer 429 (storage is (re)initializing, Retry-After "
        "1) this long after the server listens, as a restarted kube-apiserver's watch cache "
        "does until it is ready (default 0s: off)",
    )
    add(
        "--withhold-initial-events-end",
        action="store_true",
        help="never send a watch-list's initial-events-end bookmark: its clients stall "
        "(the lab's; a real one always sends it)",
    )
    add(
        "--etcd-compaction-interval",
        type=_duration,
        default=300.0,
        metavar="DURATION",
        help="how often the server tries to compact etcd, as kube-apiserver does (default 5m0s)",
    )
    add(
        "--identity-lease-renew-interval",
        type=_duration,
        default=10.0,
        metavar="DURATION",
        help="how often the server renews its identity Lease in kube-system (default 10s)",
    )
    _add_startup(add)
    return parser


def _add_startup(add: Callable[..., object]) -> None:
    add(
        "--post-start-hooks-duration",
        type=_duration,
        default=0.0,
        metavar="DURATION",
        help="how long the post-start hooks run after the server listens: /readyz, /healthz "
        "and /livez fail with them until they and the identity Lease's first write are done "
        "(default 0s: ready at that write)",
    )
    add(
        "--livez-grace-period",
        type=_duration,
        default=0.0,
        metavar="DURATION",
        help="/livez passes while the hooks run for this long after listening (default 0s)",
    )
    add(
        "--early-ready-duration",
        type=_duration,
        default=0.0,
        metavar="DURATION",
        help="the bug of openshift/kubernetes #2730: /readyz says ok this long before the "
        "server can serve, and every other request meanwhile gets --early-ready-answer "
        "(default 0s: off)",
    )
    add(
        "--early-ready-answer",
        choices=[answer.value for answer in EarlyAnswer],
        default=EarlyAnswer.ERROR.value,
        help="what a request gets before the server can serve: 500, 403 (a known user "
        "forbidden) or hang (no answer until the client gives up) (default 500)",
    )


def options_from_args(argv: Sequence[str] | None = None) -> ApiServerOptions:
    """Parse and validate; bad flags exit 2 through argparse, bad values raise OptionsError."""
    args = build_parser().parse_args(argv)
    options = ApiServerOptions(
        cert=args.cert,
        key=args.key,
        port=args.port,
        bind_address=args.bind_address,
        plain_port=args.plain_port,
        hostname=args.hostname,
        shutdown_delay=args.shutdown_delay_duration,
        send_retry_after=args.shutdown_send_retry_after,
        shutdown_annotation=args.shutdown_audit_annotation,
        tokens=load_tokens(args.token_file) if args.token_file else None,
        audit_log=args.audit_log,
        audit_log_maxsize_mb=args.audit_log_maxsize,
        audit_log_maxbackup=args.audit_log_maxbackup,
        truth=args.truth,
        goaway_chance=args.goaway_chance,
        request_timeout=args.request_timeout,
        watch_grace=args.shutdown_watch_termination_grace_period,
        watch_min_qps=args.watch_drain_min_qps,
        idle_timeout=args.idle_timeout,
        read_header_timeout=args.read_header_timeout,
        shutdown_timeout=args.shutdown_timeout,
        etcd_servers=args.etcd_servers,
        synthetic_watches=args.synthetic_watches,
        watch_cache_size=args.watch_cache_size,
        bookmark_interval=args.watch_bookmark_interval,
        withhold_initial_events_end=args.withhold_initial_events_end,
        watch_cache_init=args.watch_cache_init_duration,
        compaction_interval=args.etcd_compaction_interval,
        identity_renew_interval=args.identity_lease_renew_interval,
        post_start_hooks=args.post_start_hooks_duration,
        livez_grace=args.livez_grace_period,
        early_ready=args.early_ready_duration,
        early_answer=EarlyAnswer(args.early_ready_answer),
    )
    options.validate()
    return options
