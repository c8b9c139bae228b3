"""The apiserver's handler chain for one request, without sockets: the shutdown filters
(retry-after, wait group, late connections, the disruption header), authentication, routing,
audit and metrics. The connection layer feeds it `RequestStarted` events and sends back what
it returns."""

from __future__ import annotations

import json
import logging
import random
import urllib.parse
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from email.utils import formatdate
from typing import Any

from prober.common.clock import Clock
from prober.core.durations import format_go_duration
from prober.core.header import RESPONSE_HEADER, format_shutdown_header
from prober.core.numbers import is_decimal
from prober.core.truthlog import EarlyRequest, LateConnection
from prober.fakeapiserver import discovery, resources
from prober.fakeapiserver.api import Api, ApiAnswer, WatchStart
from prober.fakeapiserver.audit import AuditLog, audit_event, response_status
from prober.fakeapiserver.early import TIMEOUT, EarlyAnswers
from prober.fakeapiserver.events import RequestStarted
from prober.fakeapiserver.lifecycle import Lifecycle, Startup
from prober.fakeapiserver.metrics import ServerMetrics
from prober.fakeapiserver.options import ApiServerOptions, EarlyAnswer, User
from prober.fakeapiserver.requests import (
    RequestInfo,
    authenticate,
    exempt_from_retry_after,
    health_base,
    is_loopback,
    request_info,
    source_ips,
)
from prober.fakeapiserver.truth import TruthLog

log = logging.getLogger("prober.fakeapiserver")

ADMIN_PREFIX = "/_lab/"
SHUTDOWN_ANNOTATION = "apiserver.k8s.io/shutdown"
LATE_ANNOTATION = "openshift.io/during-graceful"
DECISION_ANNOTATION = "authorization.k8s.io/decision"


@dataclass(slots=True)
class ConnInfo:
    id: int
    peer_ip: str
    peer_port: int
    tls: bool
    accepted_mono: float
    late: bool
    protocol: str = ""  # "h1" or "h2" once known
    late_reported: bool = False


@dataclass(slots=True)
class Response:
    status: int
    headers: list[tuple[str, str]]
    body: bytes = b""
    close_reason: str | None = None  # the connection ends after this response, and why
    watch_timeout: float | None = None  # set on watches: the stream stays open
    start: WatchStart | None = None  # a watch on storage: feeds the open stream


@dataclass(slots=True)
class Exchange:
    """One request from its headers to its last response byte."""

    conn: ConnInfo
    stream_id: int
    method: str
    target: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    authority: str
    received_mono: float
    received_wall: float
    audit_id: str
    info: RequestInfo
    annotations: dict[str, str] = field(default_factory=dict)
    early: Response | None = None  # refused by a shutdown filter before its body arrived
    in_flight: bool = False
    user: User | None = None
    status: int = 0
    body: bytearray = field(default_factory=bytearray)

    @property
    def user_agent(self) -> str:
        return self.headers.get("user-agent", "")


class Application:
    def __init__(
        self,
        options: ApiServerOptions,
        lifecycle: Lifecycle,
        clock: Clock,
        truth: TruthLog,
        *,
        audit: AuditLog | None = None,
        rng: random.Random | None = None,
        on_admin_shutdown: Callable[[], bool] | None = None,
        state: Callable[[], dict[str, Any]] | None = None,
        on_drained: Callable[[], None] | None = None,
        api: Api | None = None,
        startup: Startup | None = None,
    ) -> None:
        self.options = options
        self.lifecycle = lifecycle
        self.startup = startup
        self.early = (
            EarlyAnswers(options.early_answer, startup, clock, truth, options.request_timeout)
            if startup is not None and options.early_ready > 0
            else None
        )
        self.clock = clock
        self.truth = truth
        self.audit = audit
        self.api = api
        self.rng = rng or random.Random()
        self.apiserver_id = options.apiserver_id  # a hash: computed once
        self.metrics = ServerMetrics(self.apiserver_id)
        self._on_admin_shutdown = on_admin_shutdown or (lambda: False)
        self._state = state or dict
        self._on_drained = on_drained or (lambda: None)
        self._date_second = -1
        self._date = ""

    # -- the two halves of a request ------------------------------------------------------
    def start(self, conn: ConnInfo, event: RequestStarted) -> Exchange:
        """Headers arrived: apply the shutdown filters, which act before the body is read."""
        path, _, raw_query = event.target.partition("?")
        query = dict(urllib.parse.parse_qsl(raw_query, keep_blank_values=True))
        headers: dict[str, str] = {}
        for name, value in event.headers:
            headers.setdefault(name, value)
        exchange = Exchange(
            conn=conn,
            stream_id=event.stream_id,
            method=event.method,
            target=event.target,
            path=path,
            query=query,
            headers=headers,
            authority=event.authority,
            received_mono=self.clock.monotonic(),
            received_wall=self.clock.wall(),
            audit_id=headers.get("audit-id") or str(uuid.uuid4()),
            info=request_info(event.method, path, query),
        )
        if path.startswith(ADMIN_PREFIX):
            return exchange
        if self.lifecycle.not_accepting and not exempt_from_retry_after(path, exchange.user_agent):
            exchange.early = self._refuse(exchange)
            if exchange.early is not None:
                return exchange
        if not exchange.info.is_watch:
            exchange.in_flight = True
            self.metrics.in_flight += 1
        self._annotate(exchange)
        return exchange

    def finish(self, exchange: Exchange) -> Response | Awaitable[Response]:
        """The request is complete: authenticate, route, audit. Requests served from
        storage answer later: the caller awaits what this returns."""
        if exchange.path.startswith(ADMIN_PREFIX):
            return self._decorate(exchange, self._admin(exchange))
        auth = authenticate(
            self.options.tokens, exchange.headers.get("authorization"), exchange.path
        )
        exchange.user = auth.user
        if auth.user is None:
            body = resources.UNAUTHORIZED
            response = self._json(401, body)
            self._audit(exchange, "ResponseStarted", 401, {"message": auth.message})
            self._done(exchange, response.status)
            return self._decorate(exchange, response)
        if self.early is not None and self.early.applies(exchange.path):
            return self._early(exchange, self.early, auth.user)
        if self.api is not None and self.api.serves(exchange.info):
            return self._from_storage(exchange, self.api)
        return self._complete(exchange, self._route(exchange))

    async def _from_storage(self, exchange: Exchange, api: Api) -> Response:
        info = exchange.info
        answer = await api.serve(exchange.method, info, exchange.query, bytes(exchange.body))
        return self._complete(exchange, self._answer(exchange, answer))

    def _complete(self, exchange: Exchange, response: Response) -> Response:
        failure = _failure_of(response)
        stage = "ResponseStarted" if response.watch_timeout is not None else "ResponseComplete"
        self._audit(exchange, stage, response.status, failure)
        self._done(exchange, response.status)
        return self._decorate(exchange, response)

    def _early(
        self, exchange: Exchange, early: EarlyAnswers, user: User
    ) -> Response | Awaitable[Response]:
        """The server cannot serve yet (`early.py`). Its answers still pass the filter that
        adds the shutdown header: OpenShift's WithShutdownResponseHeader wraps the whole
        handler chain, authorization included, so a real one sends `shutdown=false` on its
        403s and 500s as on everything else; a hang sends nothing at all."""
        conn = exchange.conn
        request = EarlyRequest(
            exchange.audit_id, conn.id, exchange.stream_id, conn.protocol, exchange.method,
            exchange.path, f"{conn.peer_ip}:{conn.peer_port}", exchange.user_agent,
            exchange.received_wall, bool(self.startup and self.startup.ready),
        )  # fmt: skip
        if early.answer is not EarlyAnswer.HANG:
            status, body = early.body(exchange.info, exchange.path, user)
            response = self._json(status, body)
            if status == 403:
                exchange.annotations[DECISION_ANNOTATION] = "forbid"
                response.headers.append(("X-Content-Type-Options", "nosniff"))
            early.answered(request, status)
            return self._complete(exchange, response)
        return self._held(exchange, early, request)

    async def _held(
        self, exchange: Exchange, early: EarlyAnswers, request: EarlyRequest
    ) -> Response:
        await early.hold(request)
        return self._complete(exchange, self._json(504, TIMEOUT))

    def _answer(self, exchange: Exchange, answer: ApiAnswer) -> Response:
        response = Response(answer.status, [("Content-Type", resources.JSON)], answer.body)
        if answer.retry_after is not None:
            response.headers.append(("Retry-After", str(answer.retry_after)))
        if answer.start is not None:
            response.watch_timeout = self._watch_timeout(exchange)
            response.start = answer.start
            self.metrics.watches += 1
        return response

    def watch_ended(self, exchange: Exchange) -> None:
        self.metrics.watches -= 1
        if exchange.user is not None:
            self._audit(exchange, "ResponseComplete", exchange.status, None)

    def abandon(self, exchange: Exchange) -> None:
        """The client reset the stream or vanished before the response was sent."""
        self._done(exchange, 0)

    @property
    def in_flight(self) -> int:
        return self.metrics.in_flight

    # -- shutdown filters -----------------------------------------------------------------
    def _refuse(self, exchange: Exchange) -> Response | None:
        """WithRetryAfter (429, Connection: close) or WithWaitGroup (503, Retry-After: 1)."""
        if self.options.send_retry_after:
            response = Response(
                429,
                [
                    ("Content-Type", resources.TEXT),
                    ("Retry-After", "5"),
                    ("X-Content-Type-Options", "nosniff"),
                ],
                resources.RETRY_AFTER_TEXT,
                close_reason="retry-after",
            )
        elif exchange.info.is_watch:
            return None  # long-running requests bypass the wait group
        else:
            response = self._json(503, resources.SHUTTING_DOWN)
            response.headers.append(("Retry-After", "1"))
            response.close_reason = "keep-alive-disabled"
        self.metrics.retry_after[str(response.status)] += 1
        return self._decorate(exchange, response)

    def _annotate(self, exchange: Exchange) -> None:
        lifecycle, mono = self.lifecycle, exchange.received_mono
        loopback = is_loopback(exchange.conn.peer_ip)
        if lifecycle.shutdown_started and self.options.shutdown_annotation:
            percent = lifecycle.threshold_percent(mono)
            own = exchange.user_agent.startswith("kube-apiserver/")
            exchange.annotations[SHUTDOWN_ANNOTATION] = (
                f"elapsed={format_go_duration(lifecycle.elapsed(mono))} threshold={percent}%"
                f" late={_go_bool(percent > 80)} self={_go_bool(own)} loopback={_go_bool(loopback)}"
            )
        if exchange.conn.late:
            host = exchange.authority or self.options.hostname
            exchange.annotations[LATE_ANNOTATION] = (
                f"loopback={_go_bool(loopback)},{host},readyz=false"
            )
            self.metrics.late_requests += 1
            log.warning(
                "Request to %r (source IP %s, user agent %r) through a connection created very "
                "late in the graceful termination process (more than 80%% has passed), possibly "
                "a sign for a broken load balancer setup.",
                exchange.target,
                exchange.conn.peer_ip,
                exchange.user_agent,
            )
            if not exchange.conn.late_reported:
                exchange.conn.late_reported = True
                late = LateConnection(
                    conn=exchange.conn.id, path=exchange.path, user_agent=exchange.user_agent
                )
                self.truth.write(late)

    # -- routing --------------------------------------------------------------------------
    def _route(self, exchange: Exchange) -> Response:
        path = exchange.path
        base = health_base(path)
        if base is not None:
            return self._health(exchange, base)
        if path == "/version":
            return self._json(200, resources.VERSION_BODY)
        document = discovery.body(path) if exchange.method in ("GET", "HEAD") else None
        if document is not None:
            return self._json(200, document)
        if path == "/metrics":
            body = self.metrics.render()
            return Response(200, [("Content-Type", resources.PROMETHEUS_TEXT)], body)
        info = exchange.info
        if info.resource == "namespaces" and exchange.method in ("GET", "HEAD"):
            ref = info.object_ref
            if ref is not None and ref.name in (None, "default"):
                if info.is_watch:
                    return self._watch(exchange)
                found = resources.NAMESPACE_BODY if ref.name else resources.NAMESPACE_LIST_BODY
                return self._json(200, found)
        return self._json(404, resources.NOT_FOUND)

    def _health(self, exchange: Exchange, base: str) -> Response:
        endpoint = base[1:]
        checks = resources.READYZ_CHECKS if endpoint == "readyz" else resources.LIVEZ_CHECKS
        failing = frozenset(
            {"shutdown"} if endpoint == "readyz" and self.lifecycle.shutdown_started else ()
        )
        if self.startup is not None and self.startup.hooks_failing(
            endpoint, exchange.received_mono
        ):
            failing |= resources.POST_START_HOOKS
        check = exchange.path[len(base) + 1 :]
        if check:
            if check not in checks:
                return self._json(404, resources.NOT_FOUND)
            code, body = resources.single_check_body(check, failing)
        else:
            code, body = resources.health_body(
                endpoint, checks, failing, "verbose" in exchange.query
            )
        return Response(
            code, [("Content-Type", resources.TEXT), ("X-Content-Type-Options", "nosniff")], body
        )

    def _watch(self, exchange: Exchange) -> Response:
        self.metrics.watches += 1
        body = resources.watch_event("ADDED", resources.namespace())
        seconds = self._watch_timeout(exchange)
        return Response(200, [("Content-Type", resources.JSON)], body, watch_timeout=seconds)

    def _watch_timeout(self, exchange: Exchange) -> float:
        """`timeoutSeconds`, or a random time between the minimum request timeout (30 min)
        and twice that, as kube-apiserver spreads its watches' ends."""
        timeout = exchange.query.get("timeoutSeconds", "")
        return float(timeout) if is_decimal(timeout) else 1800.0 * (1 + self.rng.random())

    def _admin(self, exchange: Exchange) -> Response:
        if self.options.tokens is not None:
            auth = authenticate(self.options.tokens, exchange.headers.get("authorization"), "/")
            if auth.user is None:
                return self._json(401, resources.UNAUTHORIZED)
        if exchange.path == "/_lab/shutdown" and exchange.method == "POST":
            started = self._on_admin_shutdown()
            return self._json(202, {"shutdown": True, "started": started})
        if exchange.path == "/_lab/state" and exchange.method == "GET":
            return self._json(200, self._state())
        return self._json(404, resources.NOT_FOUND)

    # -- shared pieces --------------------------------------------------------------------
    def _json(self, status: int, body: Any) -> Response:
        """A JSON response; `body` is an object, or bytes already encoded."""
        data = body if isinstance(body, bytes) else resources.encode(body)
        return Response(status, [("Content-Type", resources.JSON)], data)

    def _decorate(self, exchange: Exchange, response: Response) -> Response:
        """Headers every response carries, and the HTTP/2 goaway-chance."""
        exchange.status = response.status
        headers = response.headers
        headers.append(("Audit-Id", exchange.audit_id))
        headers.append(("Cache-Control", "no-cache, private"))
        headers.append(("Date", self._http_date()))
        if exchange.info.resource:
            headers.append(("X-Kubernetes-Pf-Flowschema-Uid", resources.FLOWSCHEMA_UID))
            headers.append(("X-Kubernetes-Pf-Prioritylevel-Uid", resources.PRIORITY_LEVEL_UID))
        headers.append(("X-Backend", self.options.hostname))
        headers.append(("X-Connection-Id", str(exchange.conn.id)))
        if exchange.headers.get("x-openshift-if-disruption"):
            value = format_shutdown_header(
                self.lifecycle.shutdown_started,
                self.options.shutdown_delay,
                self.lifecycle.elapsed(exchange.received_mono),
                self.apiserver_id,
            )
            headers.append((_canonical(RESPONSE_HEADER), value))
        if response.close_reason is None:
            if self.lifecycle.stopped_listening:
                response.close_reason = "keep-alive-disabled"
            elif (
                exchange.conn.protocol == "h2"
                and self.options.goaway_chance > 0
                and self.rng.random() < self.options.goaway_chance
            ):
                response.close_reason = "goaway-chance"
        return response

    def _audit(
        self, exchange: Exchange, stage: str, code: int, failure: dict[str, Any] | None
    ) -> None:
        if self.audit is None:
            return
        status = response_status(code, failure if failure and "reason" in failure else None)
        if failure and "reason" not in failure:
            status = {"metadata": {}, "message": failure["message"], "code": code}
        annotations = dict(exchange.annotations)
        if exchange.user is not None:
            annotations.setdefault(DECISION_ANNOTATION, "allow")
            annotations["authorization.k8s.io/reason"] = ""
        self.audit.write(
            audit_event(
                audit_id=exchange.audit_id,
                stage=stage,
                request_uri=exchange.target,
                verb=exchange.info.verb,
                user=exchange.user,
                source_ips=source_ips(
                    exchange.headers.get("x-forwarded-for"),
                    exchange.headers.get("x-real-ip"),
                    exchange.conn.peer_ip,
                ),
                user_agent=exchange.user_agent,
                object_ref=exchange.info.object_ref,
                response_status=status,
                received_wall=exchange.received_wall,
                stage_wall=self.clock.wall(),
                annotations=annotations,
            )
        )

    def _done(self, exchange: Exchange, code: int) -> None:
        if exchange.in_flight:
            exchange.in_flight = False
            self.metrics.in_flight -= 1
            if not self.metrics.in_flight:
                self._on_drained()
        if code:
            info = exchange.info
            verb = info.verb.upper() if info.resource else exchange.method
            self.metrics.requests[(verb, info.resource, str(code), info.scope)] += 1

    def _http_date(self) -> str:
        second = int(self.clock.wall())
        if second != self._date_second:
            self._date_second = second
            self._date = formatdate(second, usegmt=True)
        return self._date


def _failure_of(response: Response) -> dict[str, Any] | None:
    if response.status < 400 or not response.body.startswith(b'{"kind":"Status"'):
        return None
    body: dict[str, Any] = json.loads(response.body)
    return body


def _go_bool(value: bool) -> str:
    return "true" if value else "false"


def _canonical(name: str) -> str:
    """Go's CanonicalMIMEHeaderKey: `X-OpenShift-Disruption` -> `X-Openshift-Disruption`."""
    return "-".join(part.capitalize() for part in name.split("-"))
