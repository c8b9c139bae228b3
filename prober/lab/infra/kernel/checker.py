"""A pass-through LB's control plane: health checks of `/readyz` that steer the kernel's DNAT.

`python -m prober.lab.infra.kernel.checker CONFIG.json`, run inside the router namespace. Each
backend is checked every `interval` (`fastinter` while its state is changing), each check bounded by
`timeout`: a TLS or plain connection, `GET /readyz`, and a 200 is a pass. `fall` failures in a
row take a backend out of the set, `rise` passes put it back, as HAProxy and the clouds count.
A change is one `nft -f` transaction with the new set; with `reset_on_down` (AWS's connection
termination) the backend's flows are then deleted from conntrack, so the next packet of each
meets the router's reset rule. Once the change is made, one JSON line on stdout says so with
its wall time: that line is the ground truth of when the LB stopped choosing the backend.
"""

from __future__ import annotations

import asyncio
import json
import random
import re
import signal
import ssl
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from prober.lab.infra.kernel.nftables import Dispatch

_DELETED = re.compile(r"(\d+) flow entries have been deleted")


@dataclass(frozen=True, slots=True)
class Target:
    name: str
    address: str
    port: int
    health_port: int


@dataclass(frozen=True, slots=True)
class Check:
    """One health check as it went: when it started, how long it took, how late it began."""

    wall: float
    took: float
    late: float  # after its due time: the checker's own lag, which no cloud LB has
    problem: str | None

    def record(self) -> dict[str, object]:
        return {"wall": self.wall, "took": round(self.took, 4), "late": round(self.late, 4),
                "problem": self.problem}  # fmt: skip


@dataclass(frozen=True, slots=True)
class CheckerConfig:
    name: str
    dispatch: Dispatch
    targets: tuple[Target, ...]
    interval: float
    timeout: float
    fall: int
    rise: int
    tls: bool
    fastinter: float | None
    reset_on_down: bool

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> CheckerConfig:
        return cls(
            name=data["name"],
            dispatch=Dispatch(**data["dispatch"]),
            targets=tuple(Target(**t) for t in data["targets"]),
            interval=data["interval"],
            timeout=data["timeout"],
            fall=data["fall"],
            rise=data["rise"],
            tls=data["tls"],
            fastinter=data["fastinter"],
            reset_on_down=data["reset_on_down"],
        )


def say(event: str, **fields: object) -> None:
    print(json.dumps({"event": event, "wall": time.time(), **fields}), flush=True)


async def run_command(*argv: str, stdin: str | None = None) -> tuple[int, str]:
    proc = await asyncio.create_subprocess_exec(
        *argv,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    out, _ = await proc.communicate(None if stdin is None else stdin.encode())
    return proc.returncode or 0, out.decode(errors="replace").strip()


class Checker:
    def __init__(self, config: CheckerConfig) -> None:
        self.config = config
        self.up = {t.name: True for t in config.targets}  # HAProxy, too, starts them up
        self._tls = ssl.create_default_context()
        self._tls.check_hostname = False
        self._tls.verify_mode = ssl.CERT_NONE  # HAProxy's `check-ssl verify none`
        self._changing = asyncio.Lock()

    def script(self) -> str:
        healthy = [t.address for t in self.config.targets if self.up[t.name]]
        # No healthy target: the clouds fail open and spread flows over all of them.
        chosen = healthy or [t.address for t in self.config.targets]
        return self.config.dispatch.script(chosen)

    async def apply(self) -> None:
        code, out = await run_command("nft", "-f", "-", stdin=self.script())
        if code != 0:
            raise RuntimeError(f"{self.config.name}: nft -f: {out}")

    async def check(self, target: Target) -> str | None:
        """None when `/readyz` answered 200; otherwise why not, as HAProxy words it."""
        port = target.port if self.config.tls else target.health_port
        tls = self._tls if self.config.tls else None
        try:
            async with asyncio.timeout(self.config.timeout):
                reader, writer = await asyncio.open_connection(target.address, port, ssl=tls)
                try:
                    writer.write(
                        b"GET /readyz HTTP/1.1\r\nHost: " + target.address.encode()
                        + b"\r\nConnection: close\r\n\r\n"
                    )  # fmt: skip
                    status = await reader.readline()
                finally:
                    writer.close()
        except TimeoutError:
            return "Layer4 timeout"
        except (OSError, ssl.SSLError) as exc:
            return f"Layer4 connection problem: {exc.__class__.__name__}"
        parts = status.split()
        if len(parts) >= 2 and parts[1] == b"200":
            return None
        code = parts[1].decode(errors="replace") if len(parts) >= 2 else "none"
        return f"Layer7 wrong status, code: {code}"

    async def watch(self, target: Target) -> None:
        config = self.config
        loop = asyncio.get_running_loop()
        passes = fails = 0
        run: list[Check] = []  # the checks of the current run of passes or of failures
        before: Check | None = None  # the check before that run: its lateness carries over
        await asyncio.sleep(random.uniform(0, config.interval))  # HAProxy spreads first checks
        due = loop.time()
        while True:
            started = loop.time()
            problem = await self.check(target)
            took = loop.time() - started
            check = Check(time.time() - took, took, max(0.0, started - due), problem)
            if (problem is None) != (passes > 0):
                before, run = (run[-1] if run else None), []
            run.append(check)
            if problem is None:
                passes, fails = passes + 1, 0
            else:
                passes, fails = 0, fails + 1
            up = self.up[target.name]
            deciding = [*([before] if before else []), *run]
            if not up and passes >= config.rise:
                await self.change(target, True, "Layer7 check passed", deciding)
            elif up and fails >= config.fall and problem is not None:
                await self.change(target, False, problem, deciding)
            changing = (passes if not self.up[target.name] else fails) > 0
            gap = config.fastinter if changing and config.fastinter else config.interval
            # A check slower than the gap delays the next one as HAProxy's would; only
            # a start after both is the checker's own lag.
            due = max(started + gap, loop.time())
            await asyncio.sleep(max(0.0, due - loop.time()))

    async def change(self, target: Target, up: bool, reason: str, checks: list[Check]) -> None:
        decided = time.time()
        async with self._changing:
            self.up[target.name] = up
            await self.apply()
            reset = 0
            if not up and self.config.reset_on_down:
                reset = await self.terminate(target)
            # Why the change came when it did: the checks that made it, each with how late
            # it started and how long it took, and how long the change took to apply.
            applied = time.time() - decided
            say(
                "state", server=target.name, up=up, reason=reason, reset=reset,
                checks=[c.record() for c in checks], applied=round(applied, 4),
                lag=round(self.lag(checks) + applied, 4),
            )  # fmt: skip

    def lag(self, checks: list[Check]) -> float:
        """How much later these checks decided than the budget's worst case allows: starts
        after their due time, and checks that took longer than that case does (it has only
        the last one time out; a slow server or a busy checker can make each one slow)."""
        config = self.config
        gaps = [config.interval] + [config.fastinter or config.interval] * len(checks)
        overrun = sum(max(0.0, c.took - gap) for c, gap in zip(checks[:-1], gaps, strict=False))
        last = max(0.0, checks[-1].took - config.timeout)
        return sum(c.late for c in checks) + overrun + last

    async def terminate(self, target: Target) -> int:
        """Delete the target's flows through the VIP: their next packet is reset."""
        dispatch = self.config.dispatch
        code, out = await run_command(
            "conntrack", "-D", "-p", "tcp", "--orig-dst", dispatch.vip,
            "--orig-port-dst", str(dispatch.port), "--reply-src", target.address,
        )  # fmt: skip
        # conntrack exits 1 when nothing matched; its summary counts what it deleted.
        counted = _DELETED.search(out)
        if code not in (0, 1) or counted is None:
            raise RuntimeError(f"{self.config.name}: conntrack -D: {out}")
        return int(counted[1])

    async def run(self) -> None:
        await self.apply()
        say("ready", name=self.config.name, targets=[t.name for t in self.config.targets])
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        watchers: list[asyncio.Task[Any]] = [
            asyncio.create_task(self.watch(t), name=f"check-{t.name}") for t in self.config.targets
        ]
        done: asyncio.Task[Any] = asyncio.create_task(stop.wait(), name="stop")
        finished, _ = await asyncio.wait([done, *watchers], return_when=asyncio.FIRST_COMPLETED)
        for task in watchers:
            task.cancel()
        for task in finished:
            if task is not done:
                task.result()  # a watcher that failed: its error is the exit's reason


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m prober.lab.infra.kernel.checker CONFIG.json", file=sys.stderr)
        return 2
    config = CheckerConfig.from_json(json.loads(Path(argv[0]).read_text()))
    asyncio.run(Checker(config).run())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
