"""A tiny TLS server speaking just enough of the Kubernetes API for the real `kubernetes`
client: GET the Infrastructure `cluster` object and list Leases with a label selector (or
answer a recorded list as it is).
It checks the bearer token, as an apiserver does. Runs in a thread (the client is sync).
"""

from __future__ import annotations

import json
import ssl
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

INFRASTRUCTURE = "/apis/config.openshift.io/v1/infrastructures/cluster"
LEASES = "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases"


def infrastructure(platform: str, api: str, internal: str) -> dict[str, Any]:
    return {
        "apiVersion": "config.openshift.io/v1",
        "kind": "Infrastructure",
        "metadata": {"name": "cluster"},
        "status": {
            "platform": platform,
            "platformStatus": {"type": platform},
            "apiServerURL": api,
            "apiServerInternalURL": internal,
        },
    }


def lease(name: str, labels: dict[str, str]) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "kube-system", "labels": labels}, "spec": {}}


class KubeAPI:
    def __init__(self, context: ssl.SSLContext, token: str) -> None:
        self.infrastructure: dict[str, Any] | None = None
        self.leases: list[dict[str, Any]] = []
        self.lease_list: dict[str, Any] | None = None  # a recorded LeaseList: served as it is
        self.forbidden: set[str] = set()  # paths RBAC does not let this token read: 403
        self.token = token
        self.requests: list[str] = []
        api = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                api.requests.append(self.path)
                status, body = api.answer(self.path, self.headers.get("Authorization"))
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: object) -> None:
                pass

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.socket = context.wrap_socket(self._httpd.socket, server_side=True)
        self.port = self._httpd.server_address[1]
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    def start(self) -> KubeAPI:
        self._thread.start()
        return self

    def close(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def answer(self, target: str, authorization: str | None) -> tuple[int, dict[str, Any]]:
        if authorization != f"Bearer {self.token}":
            return 401, status(401, "Unauthorized")
        parts = urlsplit(target)
        if parts.path in self.forbidden:
            return 403, status(403, "Forbidden")
        if parts.path == INFRASTRUCTURE and self.infrastructure is not None:
            return 200, self.infrastructure
        if parts.path == LEASES and self.lease_list is not None:
            return 200, self.lease_list
        if parts.path == LEASES:
            selector = parse_qs(parts.query).get("labelSelector", [""])[0]
            key, _, value = selector.partition("=")
            items = [x for x in self.leases if not key or x["metadata"]["labels"].get(key) == value]
            return 200, {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "LeaseList",
                "metadata": {},
                "items": items,
            }
        return 404, status(404, "NotFound")

    def kubeconfig(self, directory: Path, ca_file: str, token: str | None = None) -> Path:
        path = directory / "kubeconfig"
        path.write_text(
            json.dumps(
                {
                    "apiVersion": "v1",
                    "kind": "Config",
                    "clusters": [
                        {
                            "name": "c",
                            "cluster": {"server": self.url, "certificate-authority": ca_file},
                        }
                    ],
                    "users": [{"name": "u", "user": {"token": token or self.token}}],
                    "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
                    "current-context": "x",
                }
            )
        )
        return path


def status(code: int, reason: str) -> dict[str, Any]:
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "status": "Failure",
        "reason": reason,
        "code": code,
    }
