"""The service network behind upstream's apiservers follows their own `kubernetes` endpoints,
as kube-proxy does: each apiserver's lease endpoint reconciler adds its address to
`default/kubernetes` and, as a pre-shutdown hook, removes it at SIGTERM.

`python -m prober.lab.infra.endpoints CA TOKEN URL...` runs where the prober runs (the client's
namespace on the kernel path): it watches the Endpoints object through each apiserver in turn
(directly, as kube-proxy reads through its own), and prints one JSON line per version seen:
`{"event": "endpoints", "wall": ..., "addresses": [...]}`. `Follower` reads those lines in the
lab and moves each address in or out of the service network after the proxies' sync delay;
the service network's state changes stay the LB truth they are for the fake.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import sys
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence

from prober.common.clock import SystemClock
from prober.core.models import Protocol
from prober.probe.credentials import TokenFile, client_context
from prober.probe.watcher import Answered, WatchClient, WatchTarget

PATH = "/api/v1/namespaces/default/endpoints?fieldSelector=metadata.name%3Dkubernetes&watch=true"
RETRY = 0.05  # seconds before the next apiserver, after a watch that ended or failed


def addresses(line: bytes) -> list[str] | None:
    """The addresses of a watch event's Endpoints; None for anything else."""
    try:
        event = json.loads(line)
        obj = event["object"]
        if event["type"] not in ("ADDED", "MODIFIED") or obj.get("kind") != "Endpoints":
            return None
        found = [a["ip"] for subset in obj.get("subsets") or [] for a in subset["addresses"]]
    except (ValueError, KeyError, TypeError, AttributeError):
        return None
    return sorted(found)


async def follow(urls: Sequence[str], ca: str, token: str) -> None:
    context = client_context(ca, Protocol.HTTP1, verify=True)
    clients = [
        WatchClient(WatchTarget(url, context, Protocol.HTTP1, token=TokenFile(token),
                                timeout=2.0, stall=3600.0), "endpoints", SystemClock())
        for url in urls
    ]  # fmt: skip

    def seen(line: bytes) -> str:
        found = addresses(line)
        if found is not None:
            print(json.dumps({"event": "endpoints", "wall": time.time(), "addresses": found}),
                  flush=True)  # fmt: skip
        return ""

    def started(answered: Answered) -> None:
        pass

    print(json.dumps({"event": "ready"}), flush=True)
    for client in itertools.cycle(clients):
        await client.watch(PATH, started, seen)
        await asyncio.sleep(RETRY)


class Follower:
    """The lab's side: each address that left or joined the endpoints, moved after `sync`
    seconds by `move(hostname, serving)`; addresses of no lab apiserver are ignored."""

    def __init__(
        self,
        hostnames: Mapping[str, str],
        sync: float,
        later: Callable[[float, Callable[[], Awaitable[None]]], None],
        move: Callable[[str, bool], Awaitable[None]],
    ) -> None:
        self._hostnames = hostnames
        self._sync = sync
        self._later = later
        self._move = move
        self._current: set[str] | None = None

    def __call__(self, line: str) -> None:
        try:
            record = json.loads(line)
            found = set(record["addresses"]) if record.get("event") == "endpoints" else None
        except (ValueError, KeyError, TypeError, AttributeError):
            return
        if found is None:
            return
        before, self._current = self._current, found
        if before is None:
            return  # the first version: what the service network was built with
        for address, serving in [*((a, False) for a in before - found),
                                 *((a, True) for a in found - before)]:  # fmt: skip
            hostname = self._hostnames.get(address)
            if hostname is not None:
                self._later(self._sync, self._mover(hostname, serving))

    def _mover(self, hostname: str, serving: bool) -> Callable[[], Awaitable[None]]:
        return lambda: self._move(hostname, serving)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m prober.lab.infra.endpoints")
    parser.add_argument("ca")
    parser.add_argument("token")
    parser.add_argument("urls", nargs="+")
    args = parser.parse_args(argv)
    try:
        asyncio.run(follow(args.urls, args.ca, args.token))
    except KeyboardInterrupt:
        sys.exit(0)


if __name__ == "__main__":
    main()
