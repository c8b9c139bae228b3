"""A fake kube-apiserver that behaves like a real one on the wire during graceful termination.

Run it as a process (`python -m prober.fakeapiserver --help`) or in-process:

    server = ApiServer(ApiServerOptions(cert=..., key=..., port=0, hostname="master-0"))
    ports = await server.start()
    server.begin_shutdown()
    await server.wait_stopped()
"""

from __future__ import annotations

from prober.fakeapiserver.lifecycle import Signal
from prober.fakeapiserver.options import ApiServerOptions, OptionsError, User, load_tokens
from prober.fakeapiserver.server import ApiServer, BoundPorts

__all__ = [
    "ApiServer",
    "ApiServerOptions",
    "BoundPorts",
    "OptionsError",
    "Signal",
    "User",
    "load_tokens",
]
