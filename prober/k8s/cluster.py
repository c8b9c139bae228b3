"""The only code that calls the `kubernetes` client: read the Infrastructure `cluster` object
and the kube-apiserver identity Leases. Every client exception becomes one `ClusterError`
line here. The client is synchronous; callers run these methods in a thread.
"""

from __future__ import annotations

import ssl
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import kubernetes.client
import kubernetes.config
import urllib3.exceptions
import yaml
from kubernetes.client.exceptions import ApiException
from kubernetes.config.config_exception import ConfigException

from prober import __version__
from prober.k8s.errors import ClusterError

IDENTITY_NAMESPACE = "kube-system"
IDENTITY_SELECTOR = "apiserver.kubernetes.io/identity=kube-apiserver"
HOSTNAME_LABEL = "kubernetes.io/hostname"
REQUEST_TIMEOUT = 10.0

_CLIENT_ERRORS = (ApiException, urllib3.exceptions.HTTPError, OSError, ssl.SSLError, ValueError)


@dataclass(frozen=True, slots=True)
class Infrastructure:
    """What `config.openshift.io/v1` Infrastructure `cluster` says about the API endpoints."""

    platform: str | None  # status.platformStatus.type, lowercased (aws, gcp, azure, ...)
    api_url: str | None  # status.apiServerURL: the external LB
    internal_url: str | None  # status.apiServerInternalURL: the internal LB


class ClusterAccess:
    def __init__(self, api: kubernetes.client.ApiClient, ca_file: str | None, host: str) -> None:
        self._api = api
        self.ca_file = ca_file  # the CA the client trusts: a default for the probes
        self.host = host

    @classmethod
    def connect(cls, in_cluster: bool, kubeconfig: str | None) -> ClusterAccess:
        configuration = kubernetes.client.Configuration()
        source = "in-cluster service account" if in_cluster else f"kubeconfig {kubeconfig}"
        try:
            if in_cluster:
                kubernetes.config.load_incluster_config(client_configuration=configuration)
            else:
                kubernetes.config.load_kube_config(
                    config_file=kubeconfig, client_configuration=configuration
                )
        except (ConfigException, OSError, ValueError, TypeError, yaml.YAMLError) as exc:
            # ValueError covers a file that is not UTF-8 (UnicodeDecodeError).
            raise ClusterError(f"{source}: {_one_line(exc)}") from None
        configuration.retries = 1
        api = kubernetes.client.ApiClient(configuration)
        # The apiservers' audit logs name the prober's reads of the cluster as its own.
        api.user_agent = f"prober/{__version__} discovery"
        return cls(api, configuration.ssl_ca_cert, configuration.host)

    def infrastructure(self) -> Infrastructure:
        what = "infrastructures.config.openshift.io/cluster"
        body = self._call(
            what,
            lambda: kubernetes.client.CustomObjectsApi(self._api).get_cluster_custom_object(
                "config.openshift.io",
                "v1",
                "infrastructures",
                "cluster",
                _request_timeout=REQUEST_TIMEOUT,
            ),
        )
        status = body.get("status") if isinstance(body, Mapping) else None
        if not isinstance(status, Mapping):
            raise ClusterError(f"{what}: has no status")
        platform_status = status.get("platformStatus") or {}
        platform = platform_status.get("type") or status.get("platform")
        return Infrastructure(
            platform=str(platform).lower() if platform else None,
            api_url=_text(status.get("apiServerURL")),
            internal_url=_text(status.get("apiServerInternalURL")),
        )

    def identity_leases(self) -> dict[str, str]:
        """APIServerID (the Lease name) -> node name (its hostname label)."""
        leases = self._call(
            f"leases in {IDENTITY_NAMESPACE}",
            lambda: kubernetes.client.CoordinationV1Api(self._api).list_namespaced_lease(
                IDENTITY_NAMESPACE,
                label_selector=IDENTITY_SELECTOR,
                _request_timeout=REQUEST_TIMEOUT,
            ),
        )
        nodes: dict[str, str] = {}
        for lease in leases.items or ():
            labels = lease.metadata.labels or {}
            if lease.metadata.name and labels.get(HOSTNAME_LABEL):
                nodes[lease.metadata.name] = labels[HOSTNAME_LABEL]
        return nodes

    def _call(self, what: str, call: Any) -> Any:
        try:
            return call()
        except ApiException as exc:
            raise ClusterError(f"{what}: HTTP {exc.status} {exc.reason}") from None
        except _CLIENT_ERRORS as exc:
            raise ClusterError(f"{what}: cannot read from {self.host}: {_one_line(exc)}") from None


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= 200 else text[:197] + "..."
