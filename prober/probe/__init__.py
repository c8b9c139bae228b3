"""One request for one stream -> one `Sample`, over the probe's own HTTP client (`wire`).

Every ssl/socket exception becomes a `wire.errors` error where the client meets it, and every
outcome one `ErrorClass` in `classify`, nowhere else.
"""

from prober.probe.credentials import TokenFile, client_context
from prober.probe.prober import Prober, ProbeTarget

__all__ = ["ProbeTarget", "Prober", "TokenFile", "client_context"]
