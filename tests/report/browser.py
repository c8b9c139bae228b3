"""Headless Chromium driven over the DevTools protocol on a pipe: no extra dependency.

`--remote-debugging-pipe` makes Chromium read protocol messages (JSON, NUL-terminated) on fd 3
and write them on fd 4. Through it we open a page, collect console calls, uncaught exceptions,
log entries and every network request the page makes, and take a full-page screenshot.
"""

from __future__ import annotations

import base64
import json
import os
import select
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

CHROMIUM = "/usr/bin/chromium"
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--remote-debugging-pipe",
]


@dataclass
class PageResult:
    console: list[dict[str, Any]] = field(default_factory=list)  # Runtime.consoleAPICalled
    exceptions: list[dict[str, Any]] = field(default_factory=list)  # Runtime.exceptionThrown
    log: list[dict[str, Any]] = field(default_factory=list)  # Log.entryAdded
    requests: list[str] = field(default_factory=list)  # URLs the page asked for
    values: dict[str, Any] = field(default_factory=dict)  # results of `evaluate`

    @property
    def errors(self) -> list[str]:
        found = [
            json.dumps(c.get("args"))[:200]
            for c in self.console
            if c["type"] in ("error", "assert")
        ]
        found += [e["exceptionDetails"].get("text", "?") for e in self.exceptions]
        found += [e["entry"]["text"] for e in self.log if e["entry"]["level"] == "error"]
        return found


class _Pipe:
    def __init__(self, write_fd: int, read_fd: int) -> None:
        self._w, self._r = write_fd, read_fd
        self._buffer = b""
        self._next_id = 0
        self.events: list[dict[str, Any]] = []

    def call(self, method: str, session: str | None = None, **params: Any) -> dict[str, Any]:
        self._next_id += 1
        message: dict[str, Any] = {"id": self._next_id, "method": method, "params": params}
        if session:
            message["sessionId"] = session
        os.write(self._w, json.dumps(message).encode() + b"\0")
        reply = self.wait(lambda m, i=self._next_id: m.get("id") == i)
        if "error" in reply:
            raise RuntimeError(f"{method}: {reply['error']}")
        return reply.get("result", {})

    def wait(self, wanted, timeout: float = 30.0) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while True:
            while b"\0" in self._buffer:
                raw, self._buffer = self._buffer.split(b"\0", 1)
                message = json.loads(raw)
                if "method" in message:
                    self.events.append(message)
                if wanted(message):
                    return message
            ready, _, _ = select.select([self._r], [], [], max(0.0, deadline - time.monotonic()))
            if not ready:
                raise TimeoutError("no answer from Chromium")
            chunk = os.read(self._r, 1 << 20)
            if not chunk:
                raise EOFError("Chromium closed the pipe")
            self._buffer += chunk


def open_page(
    url: str,
    screenshot: Path | None = None,
    evaluate: dict[str, str] | None = None,
    width: int = 1200,
) -> PageResult:
    """Load `url`, wait for its load event, run `evaluate` expressions, screenshot it."""
    to_browser_r, to_browser_w = os.pipe()
    from_browser_r, from_browser_w = os.pipe()
    profile = tempfile.TemporaryDirectory(prefix="prober-chromium-")
    # The shell moves the pipes to fds 3 and 4, where Chromium expects them.
    command = [
        "/bin/sh",
        "-c",
        'exec "$0" "$@" 3<&0 4>&1 </dev/null >/dev/null',
        CHROMIUM,
        *FLAGS,
        f"--user-data-dir={profile.name}",
        f"--window-size={width},900",
        "about:blank",
    ]
    process = subprocess.Popen(
        command, stdin=to_browser_r, stdout=from_browser_w, stderr=subprocess.DEVNULL
    )
    os.close(to_browser_r)
    os.close(from_browser_w)
    pipe = _Pipe(to_browser_w, from_browser_r)
    result = PageResult()
    try:
        target = pipe.call("Target.createTarget", url="about:blank")["targetId"]
        session = pipe.call("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
        for domain in ("Runtime", "Log", "Page", "Network"):
            pipe.call(f"{domain}.enable", session)
        pipe.call("Page.navigate", session, url=url)
        pipe.wait(lambda m: m.get("method") == "Page.loadEventFired")
        for name, expression in (evaluate or {}).items():
            reply = pipe.call(
                "Runtime.evaluate", session, expression=expression, returnByValue=True
            )
            result.values[name] = reply["result"].get("value")
        if screenshot is not None:
            size = pipe.call("Page.getLayoutMetrics", session)["cssContentSize"]
            clip = {"x": 0, "y": 0, "width": size["width"], "height": size["height"], "scale": 1}
            shot = pipe.call(
                "Page.captureScreenshot",
                session,
                format="png",
                clip=clip,
                captureBeyondViewport=True,
            )
            screenshot.write_bytes(base64.b64decode(shot["data"]))
        pipe.call("Browser.close")
    finally:
        os.close(to_browser_w)
        os.close(from_browser_r)
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        profile.cleanup()
    for event in pipe.events:
        params = event.get("params", {})
        if event["method"] == "Runtime.consoleAPICalled":
            result.console.append(params)
        elif event["method"] == "Runtime.exceptionThrown":
            result.exceptions.append(params)
        elif event["method"] == "Log.entryAdded":
            result.log.append(params)
        elif event["method"] == "Network.requestWillBeSent":
            result.requests.append(params["request"]["url"])
    return result
