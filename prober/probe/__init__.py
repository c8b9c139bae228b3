"""The only code that touches httpx: one request for one stream -> one `Sample`.

Every httpx/httpcore/ssl/socket exception is mapped to one `ErrorClass` here and nowhere else.
"""

from prober.probe.credentials import TokenFile, client_context
from prober.probe.prober import Prober, ProbeTarget

__all__ = ["ProbeTarget", "Prober", "TokenFile", "client_context"]
