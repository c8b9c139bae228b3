"""Every overlay's /metrics as OpenShift's platform components serve theirs: a kube-rbac-proxy
sidecar serves it over TLS with the service CA's certificate for the Service the
ServiceMonitor selects, checks each scrape's token (TokenReview) and its right to GET /metrics
(SubjectAccessReview), and forwards to the prober on loopback; the ServiceMonitor scrapes it
over HTTPS with Prometheus' token and verifies the certificate's name; the kubelet's probes
reach the prober through it, on the paths it lets through without a token."""

from __future__ import annotations

from pathlib import PurePosixPath
from urllib.parse import urlsplit

import pytest

from tests.deploy.manifests import (
    OVERLAYS,
    PROXY,
    Obj,
    flags,
    held_rules,
    measuring,
    named,
    one,
    pod_spec,
    selects,
    workload,
)

SERVING_CERT = "service.beta.openshift.io/serving-cert-secret-name"
# What the platform Prometheus mounts: the service CA bundle, and its ServiceAccount's token.
SERVICE_CA = "/etc/prometheus/configmaps/serving-certs-ca-bundle/service-ca.crt"
TOKEN_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
UNAUTHENTICATED = {"/healthz", "/readyz"}  # the kubelet's probes carry no token


def _monitored_services(objects: list[Obj]) -> list[tuple[Obj, Obj]]:
    """(ServiceMonitor, Service) for every Service a ServiceMonitor selects."""
    pairs = [
        (monitor, service)
        for monitor in objects
        if monitor["kind"] == "ServiceMonitor"
        for service in objects
        if service["kind"] == "Service"
        and selects(monitor["spec"]["selector"]["matchLabels"], service["metadata"]["labels"])
    ]
    assert pairs, "no ServiceMonitor selects a Service"
    return pairs


def _proxy_port(objects: list[Obj]) -> Obj:
    (port,) = named(objects, PROXY)["ports"]
    return port


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_monitored_service_has_a_serving_certificate_its_proxy_serves(
    rendered: dict[str, list[Obj]], overlay: str
) -> None:
    objects = rendered[overlay]
    spec = pod_spec(objects)
    proxy = named(objects, PROXY)
    for _, service in _monitored_services(objects):
        secret = service["metadata"].get("annotations", {}).get(SERVING_CERT)
        assert secret, f"{service['metadata']['name']}: no {SERVING_CERT}"
        (volume,) = [v for v in spec["volumes"] if v.get("secret", {}).get("secretName") == secret]
        (mount,) = [m for m in proxy["volumeMounts"] if m["name"] == volume["name"]]
        assert mount["readOnly"] is True
        given = flags(proxy)
        # The two files the service CA writes into the Secret, from where they are mounted.
        for flag, key in (("--tls-cert-file", "tls.crt"), ("--tls-private-key-file", "tls.key")):
            assert PurePosixPath(given[flag]) == PurePosixPath(mount["mountPath"]) / key
        assert service["spec"]["ports"][0]["targetPort"] == _proxy_port(objects)["name"]
        # Only the proxy's container sees the key.
        for container in spec["containers"]:
            if container["name"] != PROXY:
                mounted = {m["name"] for m in container.get("volumeMounts", [])}
                assert volume["name"] not in mounted, container["name"]


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_scrape_is_https_with_a_token_and_a_verified_name(
    rendered: dict[str, list[Obj]], overlay: str
) -> None:
    for monitor, service in _monitored_services(rendered[overlay]):
        for endpoint in monitor["spec"]["endpoints"]:
            assert endpoint["scheme"] == "https"
            token = endpoint.get("bearerTokenFile") == f"{TOKEN_DIR}/token"
            assert token or "credentials" in endpoint.get("authorization", {})
            tls = endpoint["tlsConfig"]
            assert tls["caFile"] == SERVICE_CA
            # The certificate is issued for <Service>.<namespace>.svc: with the overlay's
            # name suffix, which kustomize adds to the Service's name, not to this string.
            meta = service["metadata"]
            assert tls["serverName"] == f"{meta['name']}.{meta['namespace']}.svc"
            assert not tls.get("insecureSkipVerify", False)
            assert endpoint["port"] == service["spec"]["ports"][0]["name"]


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_the_proxy_serves_tls_and_forwards_to_the_prober_on_loopback(
    rendered: dict[str, list[Obj]], overlay: str
) -> None:
    """The prober's own --listen is held to the upstream through its CLI in
    test_manifests.py; here, the proxy's side."""
    objects = rendered[overlay]
    given = flags(named(objects, PROXY))
    upstream = urlsplit(given["--upstream"])
    assert (upstream.scheme, upstream.hostname, upstream.path) == ("http", "127.0.0.1", "/")
    listen = measuring(objects)["args"]
    assert f"--listen=127.0.0.1:{upstream.port}" in listen
    port = _proxy_port(objects)["containerPort"]
    assert given["--secure-listen-address"] == f"[$(POD_IP)]:{port}"
    assert given["--tls-min-version"] in ("VersionTLS12", "VersionTLS13")
    assert set(given["--ignore-paths"].split(",")) == UNAUTHENTICATED
    assert "--insecure-listen-address" not in given
    assert "--allow-paths" not in given  # kube-rbac-proxy refuses it with --ignore-paths


def _probes(container: Obj) -> list[Obj]:
    kinds = ("livenessProbe", "readinessProbe", "startupProbe")
    return [container[kind] for kind in kinds if kind in container]


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_probes_reach_the_prober_through_the_proxy(
    rendered: dict[str, list[Obj]], overlay: str
) -> None:
    """By the proxy's port number: the kubelet looks a probe's named port up in the probe's
    own container, and the prober's declares none. Over HTTPS, on a path the proxy lets
    through without a token."""
    objects = rendered[overlay]
    port = _proxy_port(objects)["containerPort"]
    container = measuring(objects)
    assert "livenessProbe" in container
    probes = _probes(container)
    for probe in probes:
        get = probe["httpGet"]
        assert (get["port"], get["scheme"]) == (port, "HTTPS")
        assert get["path"] in UNAUTHENTICATED
    if overlay != "audit":
        assert {p["httpGet"]["path"] for p in probes} == UNAUTHENTICATED


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_the_proxy_may_review_tokens_and_access_and_holds_a_token(
    rendered: dict[str, list[Obj]], overlay: str
) -> None:
    """TokenReview and SubjectAccessReview are cluster-scoped `create`s, held by the pod's
    ServiceAccount. A pod that mounts no token for its own container (the audit follower
    reads files only) mounts one in the proxy alone."""
    objects = rendered[overlay]
    held = held_rules(objects)
    assert ("*", "authentication.k8s.io", "tokenreviews", "", "create") in held
    assert ("*", "authorization.k8s.io", "subjectaccessreviews", "", "create") in held
    spec = pod_spec(objects)
    if spec.get("automountServiceAccountToken") is not False:
        return
    tokens = {
        v["name"]
        for v in spec["volumes"]
        if any("serviceAccountToken" in s for s in v.get("projected", {}).get("sources", []))
    }
    for container in spec["containers"]:
        mounts = {m["name"]: m["mountPath"] for m in container.get("volumeMounts", [])}
        mounted = [path for name, path in mounts.items() if name in tokens]
        assert mounted == ([TOKEN_DIR] if container["name"] == PROXY else []), container["name"]


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_the_network_policy_admits_the_scrape_port(
    rendered: dict[str, list[Obj]], overlay: str
) -> None:
    objects = rendered[overlay]
    policy = one(objects, "NetworkPolicy")
    labels = workload(objects)["spec"]["template"]["metadata"]["labels"]
    assert selects(policy["spec"]["podSelector"]["matchLabels"], labels)
    admitted = {port["port"] for rule in policy["spec"]["ingress"] for port in rule["ports"]}
    proxy_port = _proxy_port(objects)
    assert admitted & {proxy_port["name"], proxy_port["containerPort"]}
