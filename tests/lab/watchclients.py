"""Real clients of the lab's API, run where the prober runs: a heartbeat writer and, through
each LB, a `kubectl get -w` (client-go) and a `kubernetes` Python client watch. Each prints
what it does as JSON lines on stdout:

    {"wrote": RV}                                   a heartbeat written, its resourceVersion
    {"client": "kubectl|python", "lb": LB, "rv": RV}  an event of the heartbeat Lease seen
    {"client": ..., "lb": ..., "restart": WHY}      a watch ended and was started again

    python watchclients.py CONFIG.json

kubectl exits when its watch ends and is started again, as `while :; do kubectl get -w; done`
would be. The Python client re-watches by itself after a clean end and retries a 410 once; on
a second 410 it lists again (no resourceVersion), on a broken connection it watches again
from the last version it saw, as a reflector would.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from typing import Any

import urllib3
from kubernetes import client, watch  # type: ignore[import-untyped]
from kubernetes.client.rest import ApiException  # type: ignore[import-untyped]

NAME = "heartbeat"
PAUSE = 0.3  # seconds before a watch starts again: kubectl costs a core's tenth to start
_print_lock = threading.Lock()


def say(**fields: Any) -> None:
    with _print_lock:
        print(json.dumps(fields), flush=True)


def api(url: str, config: dict[str, Any]) -> client.CoordinationV1Api:
    settings = client.Configuration()
    settings.host = url
    settings.ssl_ca_cert = config["ca"]
    settings.api_key = {"authorization": f"Bearer {config['token']}"}
    settings.retries = False
    return client.CoordinationV1Api(client.ApiClient(settings))


def heartbeat(config: dict[str, Any]) -> None:
    """Renew the Lease every `interval` through whichever LB answers, in turn."""
    apis = [api(url, config) for url in config["lbs"].values()]
    namespace, turn = config["namespace"], 0
    body = client.V1Lease(metadata=client.V1ObjectMeta(name=NAME), spec=client.V1LeaseSpec())
    while True:
        body.spec.holder_identity = f"writer-{time.time():.6f}"
        target = apis[turn % len(apis)]
        turn += 1
        try:
            try:
                # Over the version last written: a Lease takes no update without one.
                written = target.replace_namespaced_lease(NAME, namespace, body, _request_timeout=2)
            except ApiException as error:
                if error.status == 404:
                    written = target.create_namespaced_lease(namespace, body, _request_timeout=2)
                elif error.status in (409, 422):
                    current = target.read_namespaced_lease(NAME, namespace, _request_timeout=2)
                    body.metadata.resource_version = current.metadata.resource_version
                    continue
                else:
                    raise
            body.metadata.resource_version = written.metadata.resource_version
            say(wrote=int(written.metadata.resource_version))
        except (ApiException, urllib3.exceptions.HTTPError, OSError):
            continue  # that LB sent us to a stopping server: the next one
        time.sleep(config["interval"])


def python_watch(lb: str, url: str, config: dict[str, Any]) -> None:
    leases, version = api(url, config), None
    while True:
        stream = watch.Watch()
        # A read deadline: a flow that an LB dropped without telling this end (AWS resets
        # only the side that sends next, and a watch's client sends nothing) is found by the
        # client's own clock or never; the heartbeat and bookmarks keep a live one busy.
        arguments: dict[str, Any] = {
            "field_selector": f"metadata.name={NAME}",
            "allow_watch_bookmarks": True,
            "_request_timeout": (2, config["read_timeout"]),
        }
        if version is not None:
            arguments["resource_version"] = version
        why = "ended"
        try:
            for event in stream.stream(
                leases.list_namespaced_lease, config["namespace"], **arguments
            ):
                version = event["raw_object"]["metadata"]["resourceVersion"]
                if event["type"] != "BOOKMARK":
                    say(client="python", lb=lb, rv=int(version), type=event["type"])
        except ApiException as error:
            why = f"http {error.status}"
            if error.status == 410:
                version = None  # too old twice: list again
        except (urllib3.exceptions.HTTPError, OSError, ValueError) as error:
            why = type(error).__name__
        say(client="python", lb=lb, restart=why)
        time.sleep(PAUSE)


def kubectl_watch(lb: str, url: str, config: dict[str, Any]) -> None:
    argv = [
        "kubectl", "--server", url, "--certificate-authority", config["ca"],
        "--token", config["token"], "--cache-dir", f"{config['cache']}/{lb}",
        "--namespace", config["namespace"], "get", "leases",
        "--field-selector", f"metadata.name={NAME}", "--watch", "--output-watch-events",
        "--output", 'jsonpath={.type} {.object.metadata.resourceVersion}{"\\n"}',
    ]  # fmt: skip
    # client-go's HTTP/2 health check, on the lab's time scale: a flow an LB reset without
    # telling the client (AWS) is found by its PING, 30 + 15 s later at client-go's defaults.
    env = {**os.environ, "HTTP2_READ_IDLE_TIMEOUT_SECONDS": str(config["h2_read_idle"]),
           "HTTP2_PING_TIMEOUT_SECONDS": str(config["h2_ping_timeout"])}  # fmt: skip
    while True:
        with subprocess.Popen(
            argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env
        ) as proc:
            assert proc.stdout is not None
            for raw in proc.stdout:
                kind, _, version = raw.decode().strip().partition(" ")
                if version.isdigit():
                    say(client="kubectl", lb=lb, rv=int(version), type=kind)
            code = proc.wait()
        say(client="kubectl", lb=lb, restart=f"exit {code}")
        time.sleep(PAUSE)


def main() -> None:
    config = json.loads(open(sys.argv[1]).read())  # noqa: SIM115
    workers = [threading.Thread(target=heartbeat, args=(config,), daemon=True)]
    for lb, url in config["lbs"].items():
        for run in (python_watch, kubectl_watch):
            workers.append(threading.Thread(target=run, args=(lb, url, config), daemon=True))
    for worker in workers:
        worker.start()
    say(started=len(workers))
    for worker in workers:
        worker.join()


if __name__ == "__main__":
    main()
