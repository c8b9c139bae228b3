"""`python -m prober.fakeapiserver`: the fake apiserver as a process.

Prints one JSON line `{"event": "listening", "port": N}` (plus `plain_port` when asked for)
once it accepts connections, then `{"event": "serving", "holder": H}` and `{"event": "ready",
"holder": H}` in the order they come true (`lifecycle.Startup`); H is the identity Lease's
holder, this process's identity. SIGTERM or SIGINT starts graceful termination and the process
exits 0 when it has finished; a second signal exits 1 at once, as kube-apiserver does.
"""

from __future__ import annotations

import asyncio
import json
import logging
import signal
import sys
from collections.abc import Sequence

from prober.common.exits import ExitCode
from prober.fakeapiserver.options import ApiServerOptions, OptionsError, options_from_args
from prober.fakeapiserver.server import ApiServer


async def serve(options: ApiServerOptions) -> int:
    server = ApiServer(options)
    try:
        ports = await server.start()
    except OSError as error:
        raise OptionsError(f"--port {options.port}: cannot listen ({error.strerror})") from None
    code = ExitCode.OK

    def on_signal(name: str) -> None:
        nonlocal code
        if not server.begin_shutdown(name):
            code = ExitCode.FAILED
            asyncio.get_running_loop().create_task(server.kill(), name="apiserver kill")

    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, on_signal, signal.Signals(signum).name)
    line: dict[str, object] = {"event": "listening", "port": ports.port}
    if ports.plain_port is not None:
        line["plain_port"] = ports.plain_port
    print(json.dumps(line), flush=True)
    announcing = asyncio.create_task(_announce(server), name="apiserver startup lines")
    await server.wait_stopped()
    announcing.cancel()
    return code


async def _announce(server: ApiServer) -> None:
    for name in server.startup.order:
        await server.startup.wait(name)
        print(json.dumps({"event": name, "holder": server.holder}), flush=True)


def main(argv: Sequence[str] | None = None) -> int:
    try:
        options = options_from_args(argv)
    except OptionsError as error:
        print(f"error: {error}", file=sys.stderr)
        return ExitCode.BAD_INPUT
    logging.basicConfig(
        stream=sys.stderr, level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s"
    )
    try:
        return asyncio.run(serve(options))
    except OptionsError as error:
        print(f"error: {error}", file=sys.stderr)
        return ExitCode.BAD_INPUT


if __name__ == "__main__":
    sys.exit(main())
