"""The kinds of stream `prober run` runs, in order: a new kind is one line here, none in
`daemon/app.py`. Each kind's pure side is also listed in `core.kinds.standard_kinds`, which is
what `prober analyze` reads logs with."""

from __future__ import annotations

from prober.daemon.kinds import KindRegistry
from prober.daemon.requests.kind import RequestKind
from prober.daemon.watches.kind import WatchKind


def default_kinds() -> KindRegistry:
    """A fresh registry of the standard kinds; `register` adds another (a test's, say)."""
    return KindRegistry([RequestKind(), WatchKind()])
