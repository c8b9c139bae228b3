"""What a server whose /readyz went true before it could serve answers meanwhile: the bug of
openshift/kubernetes #2730 and #2732, which those changes fixed by holding /readyz back.

From listening until the server serves (`lifecycle.Startup`), every request but the health
checks gets the early answer. Authentication works (a bad token still gets 401); then, by
`--early-ready-answer`:

- `500`: an internal error, as a handler whose dependencies are not ready returns one;
- `403`: a known user forbidden, what RBAC's authorizer says before its informers synced
  (kubernetes #121635);
- `hang`: no answer; the request waits until the client gives up, bounded as every request
  is by the request timeout, whose filter then answers 504.

The truth log gets one `early_answer` record per such request when it is settled: its
Audit-ID, connection, stream, protocol, method, path, peer, user agent, when it arrived
(`received`, wall) and whether /readyz was true by then (`after_ready`), the mode (`answer`),
the status sent (`status`, null for none) and `how` it ended: `answered`, `client-gone` (a hang
the client gave up on), `timeout` (the 504) or `cut` (the server stopped while it held it). A
hang sends nothing, no header either: only its Audit-ID ties a client's timeout to this
server, and only this record has it (the audit log has what was answered).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from prober.common.clock import Clock
from prober.core.truthlog import EarlyAnswered, EarlyRequest
from prober.fakeapiserver import resources
from prober.fakeapiserver.lifecycle import Startup
from prober.fakeapiserver.options import EarlyAnswer, User
from prober.fakeapiserver.requests import RequestInfo, health_base
from prober.fakeapiserver.truth import TruthLog

# apierrors.NewInternalError's shape; the cause is the fake's wording.
CAUSE = "the server is not ready to serve: caches not synced"
INTERNAL_ERROR = resources.encode(
    resources.status(
        500, "InternalError", f"Internal error occurred: {CAUSE}", {"causes": [{"message": CAUSE}]}
    )
)
# What k8s.io/apiserver's timeout filter answers a request that outlived the request timeout.
TIMEOUT = resources.encode(
    resources.status(
        504,
        "Timeout",
        "Timeout: request did not complete within requested timeout - context deadline exceeded",
        True,
    )
)


@dataclass(eq=False, slots=True)
class EarlyAnswers:
    answer: EarlyAnswer
    startup: Startup
    clock: Clock
    truth: TruthLog
    request_timeout: float
    _held: dict[int, EarlyRequest] = field(default_factory=dict, init=False)  # hangs, by id()

    def applies(self, path: str) -> bool:
        """Whether a request for `path` gets the early answer now: the health checks stay
        truthful to the mode (/readyz says ok), every other request cannot be served."""
        return not self.startup.serving and health_base(path) is None

    def body(self, info: RequestInfo, path: str, user: User) -> tuple[int, bytes]:
        """The answer of the 500 and 403 modes."""
        if self.answer is EarlyAnswer.FORBIDDEN:
            return 403, resources.encode(forbidden(info, path, user))
        return 500, INTERNAL_ERROR

    def answered(self, request: EarlyRequest, status: int) -> None:
        self._record(request, status, "answered")

    async def hold(self, request: EarlyRequest) -> None:
        """A hang: returns when the request timeout passes (the caller answers 504); raises
        CancelledError, recorded as the client's giving up, when the stream or the
        connection goes first."""
        key = id(request)
        self._held[key] = request
        try:
            await self.clock.sleep(self.request_timeout)
        except asyncio.CancelledError:
            if self._held.pop(key, None) is not None:
                self._record(request, None, "client-gone")
            raise
        del self._held[key]
        self._record(request, 504, "timeout")

    @property
    def holding(self) -> int:
        """How many hangs it holds now."""
        return len(self._held)

    def cut(self) -> None:
        """The server stops: the hangs it still holds are cut. Called before the truth log
        closes, which comes before their cancellation reaches them."""
        for request in self._held.values():
            self._record(request, None, "cut")
        self._held.clear()

    def _record(self, request: EarlyRequest, status: int | None, how: str) -> None:
        answer = self.answer.value
        self.truth.write(EarlyAnswered(request=request, answer=answer, status=status, how=how))


def forbidden(info: RequestInfo, path: str, user: User) -> dict[str, Any]:
    """responsewriters.Forbidden's Status: `<resource> "<name>" is forbidden: User "<u>"
    cannot <verb> resource "<r>" in API group "<g>" in the namespace "<ns>"`, or `forbidden:
    User "<u>" cannot <verb> path "<p>"` for a path that is no resource."""
    ref = info.object_ref
    if ref is None:
        message = f'forbidden: User "{user.name}" cannot {info.verb} path "{path}"'
        return resources.status(403, "Forbidden", message, True)
    # The request-info resolver reads /api/v1/namespaces/<name> as in namespace <name>.
    namespace = ref.namespace or (ref.name if ref.resource == "namespaces" else None)
    where = f'in the namespace "{namespace}"' if namespace else "at the cluster scope"
    cannot = (
        f'User "{user.name}" cannot {info.verb} resource "{ref.resource}" in API group '
        f'"{ref.api_group}" {where}'
    )
    qualified = f"{ref.resource}.{ref.api_group}" if ref.api_group else ref.resource
    subject = f'{qualified} "{ref.name}"' if ref.name else qualified
    details = {"name": ref.name, "group": ref.api_group, "kind": ref.resource}
    present = {key: value for key, value in details.items() if value}  # omitempty
    return resources.status(403, "Forbidden", f"{subject} is forbidden: {cannot}", present)
