"""The only code that calls the `kubernetes` client: read the Infrastructure `cluster` object
and the kube-apiserver identity Leases. Every client exception becomes one `ClusterError`
line here. The client is synchronous; callers run these methods in a thread.
"""

from __future__ import annotations

import datetime as dt
import json
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


@dataclass(frozen=True, slots=True)
class LeaseView:
    """One kube-apiserver identity Lease as listed. The server's text is never trusted: a
    field missing or not of its type is None, and a Lease without a name is no LeaseView."""

    host: str  # metadata.name: the APIServerID, the `host` of the shutdown header
    node: str | None  # the kubernetes.io/hostname label
    holder: str | None  # spec.holderIdentity: new with every process start
    renew_wall: float | None  # spec.renewTime (the apiserver's wall clock), epoch seconds


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

    def identity_leases(self) -> list[LeaseView]:
        """Every kube-apiserver identity Lease, as the server lists them."""

        def read() -> Any:
            # The raw answer (a urllib3 response), not the client's model: one Lease with a
            # garbled renewTime would make the model refuse the whole list.
            answer: Any = kubernetes.client.CoordinationV1Api(self._api).list_namespaced_lease(
                IDENTITY_NAMESPACE,
                label_selector=IDENTITY_SELECTOR,
                _request_timeout=REQUEST_TIMEOUT,
                _preload_content=False,
            )
            try:
                return answer.data
            finally:
                answer.release_conn()

        what = f"leases in {IDENTITY_NAMESPACE}"
        try:
            body = json.loads(self._call(what, read))
        except (ValueError, RecursionError):  # RecursionError: nested past any real answer
            raise ClusterError(f"{what}: the answer is no JSON") from None
        items = body.get("items") if isinstance(body, Mapping) else None
        views = (_lease_view(item) for item in (items if isinstance(items, list) else ()))
        return [view for view in views if view is not None]

    def _call(self, what: str, call: Any) -> Any:
        try:
            return call()
        except ApiException as exc:
            raise ClusterError(f"{what}: HTTP {exc.status} {exc.reason}") from None
        except _CLIENT_ERRORS as exc:
            raise ClusterError(f"{what}: cannot read from {self.host}: {_one_line(exc)}") from None


def _lease_view(item: object) -> LeaseView | None:
    metadata = _mapping(item, "metadata")
    name = _text(metadata.get("name"))
    if name is None:
        return None
    spec = _mapping(item, "spec")
    return LeaseView(
        host=name,
        node=_text(_mapping(metadata, "labels").get(HOSTNAME_LABEL)),
        holder=_text(spec.get("holderIdentity")),
        renew_wall=_micro_time(spec.get("renewTime")),
    )


def _mapping(parent: object, key: str) -> Mapping[str, Any]:
    value = parent.get(key) if isinstance(parent, Mapping) else None
    return value if isinstance(value, Mapping) else {}


def _micro_time(value: object) -> float | None:
    """metav1.MicroTime (RFC 3339 with microseconds) as epoch seconds; None if it is not one."""
    if not isinstance(value, str):
        return None
    try:
        moment = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
        return moment.timestamp() if moment.tzinfo is not None else None
    except (ValueError, OverflowError):
        return None


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= 200 else text[:197] + "..."
