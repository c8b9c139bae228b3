"""Configuration: defaults, the three sources and their order, one invalid input per rule."""

from __future__ import annotations

import dataclasses
import textwrap
from pathlib import Path

import pytest

from prober.cli import main
from prober.config import (
    Config,
    ConfigError,
    Credentials,
    Target,
    load_config,
    service_account,
    with_discovered,
)
from prober.core.budgets import PLATFORMS, settings_of, with_settings
from prober.core.models import LB, Connection, Protocol
from tests.support.certs import ca_pem

MINIMAL = """
targets:
  - lb: internal-lb
    url: https://api-int.example.com:6443
"""


def write(tmp_path: Path, text: str, name: str = "prober.yaml") -> str:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return str(path)


def test_defaults_follow_the_design(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, MINIMAL), env={})
    assert config.interval == 0.1
    assert config.workers == 2
    assert config.timeout == 5.0
    assert config.protocols == (Protocol.HTTP1, Protocol.HTTP2)
    assert config.connections == (Connection.NEW, Connection.REUSED)
    assert config.path == "/api/v1/namespaces/default"
    assert config.request_path == "/api/v1/namespaces/default?resourceVersion=0"
    assert config.listen == ("127.0.0.1", 9090)  # loopback unless told
    # kube-apiserver's identity Lease renew interval; reads well under it in a restart
    assert (config.identity_renew_interval, config.identity_refresh_fast) == (10.0, 1.0)
    assert config.targets == (Target("kube-api", LB.INTERNAL, "https://api-int.example.com:6443"),)
    assert [s.name for s in config.streams()] == [
        "kube-api-http1-internal-lb-new-connections",
        "kube-api-http1-internal-lb-reused-connections",
        "kube-api-http2-internal-lb-new-connections",
        "kube-api-http2-internal-lb-reused-connections",
    ]
    assert config.constant_labels == {"platform": "unknown"}


def test_the_design_example_loads(tmp_path: Path) -> None:
    ca = tmp_path / "ca.crt"
    token = tmp_path / "token"
    ca.write_text(ca_pem())
    token.write_text("x")
    path = write(
        tmp_path,
        f"""
        platform: aws
        interval: 100ms
        workers: 2
        timeout: 5s
        protocols: [http1, http2]
        connections: [new, reused]
        path: /api/v1/namespaces/default
        labels: {{job: e2e-aws-upgrade}}
        listen: 0.0.0.0:9090
        event_log: /var/log/prober/events.jsonl
        targets:
          - name: kube-api
            lb: internal-lb
            url: https://api-int.example.com:6443
            ca_file: {ca}
            token_file: {token}
            server_name: api-int.example.com
        """,
    )
    config = load_config(path, env={})
    assert config.platform == "aws"
    assert config.labels == {"job": "e2e-aws-upgrade"}
    assert config.constant_labels == {"platform": "aws", "job": "e2e-aws-upgrade"}
    assert config.event_log == "/var/log/prober/events.jsonl"
    (target,) = config.targets
    assert target.server_name == "api-int.example.com"
    assert target.ca_file == str(ca)


def test_relative_paths_in_the_file_are_the_files_folders_and_elsewhere_the_working_ones(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As Prometheus and a kubeconfig read theirs: a config file moved with its CA and token
    beside it loads from any working folder. A variable or a flag is typed in a shell, and
    its relative path is that shell's."""
    folder = tmp_path / "conf"
    folder.mkdir()
    (folder / "ca.crt").write_text(ca_pem())
    (folder / "token").write_text("x")
    (tmp_path / "cwd-token").write_text("y")
    absolute = tmp_path / "other-ca.crt"
    absolute.write_text(ca_pem())
    path = write(
        folder,
        f"""
        event_log: logs/events.jsonl
        ca_file: ca.crt
        targets:
          - lb: internal-lb
            url: https://api-int.example.com:6443
            token_file: token
          - lb: external-lb
            url: https://api.example.com:6443
            ca_file: {absolute}
        """,
    )
    monkeypatch.chdir(tmp_path)
    config = load_config(path, env={"PROBER_TOKEN_FILE": "cwd-token"})
    assert config.event_log == str(folder / "logs/events.jsonl")
    assert config.ca_file == str(folder / "ca.crt")
    assert config.token_file == "cwd-token"
    internal, external = config.targets
    assert internal.token_file == str(folder / "token")
    assert external.ca_file == str(absolute)
    relative = write(folder, MINIMAL + "ca_file: missing.crt\n", name="relative.yaml")
    with pytest.raises(ConfigError, match=f"{folder}/missing.crt: no such file"):
        load_config(relative, env={})


def test_environment_overrides_the_file_and_flags_override_both(tmp_path: Path) -> None:
    path = write(tmp_path, MINIMAL + "workers: 3\ninterval: 1s\nplatform: gcp\n")
    env = {"PROBER_WORKERS": "4", "PROBER_INTERVAL": "250ms", "PROBER_PORT": "tcp://1.2.3.4:80"}
    config = load_config(path, env=env, flags={"interval": "50ms"})
    assert (config.workers, config.interval, config.platform) == (4, 0.05, "gcp")


def test_lists_and_labels_come_from_strings_too(tmp_path: Path) -> None:
    env = {"PROBER_PROTOCOLS": "http2", "PROBER_LABELS": "job=x,team=y"}
    config = load_config(write(tmp_path, MINIMAL), env=env, flags={"connections": "reused"})
    assert config.protocols == (Protocol.HTTP2,)
    assert config.connections == (Connection.REUSED,)
    assert config.labels == {"job": "x", "team": "y"}


def test_targets_from_the_environment_as_yaml() -> None:
    env = {"PROBER_TARGETS": '[{"lb": "external-lb", "url": "https://api.example.com"}]'}
    config = load_config(env=env)
    assert config.targets == (Target("kube-api", LB.EXTERNAL, "https://api.example.com:443"),)


CA_SOURCES = ["own", "flag", "env", "file", "discovered", "service account"]


@pytest.mark.parametrize("winner", CA_SOURCES)
def test_one_precedence_rule_for_a_targets_ca_and_token(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, winner: str
) -> None:
    """Each source offers its own CA and token; every source above `winner` is absent. The
    rule, most specific first: the target's own, the top-level setting (flag, env, file),
    what discovery read, the pod's service account."""
    files = {}
    for source in CA_SOURCES:
        name = source.replace(" ", "-")
        ca = write(tmp_path, ca_pem(), f"{name}.crt")
        files[source] = (ca, write(tmp_path, "t", f"{name}.tok"))
    account = tmp_path / "serviceaccount"
    account.mkdir()
    (account / "ca.crt").write_text(ca_pem())
    (account / "token").write_text("t")
    files["service account"] = (str(account / "ca.crt"), str(account / "token"))
    monkeypatch.setattr("prober.config.load.SERVICE_ACCOUNT_DIR", str(account))
    present = CA_SOURCES[CA_SOURCES.index(winner) :]

    def offered(source: str, key: str) -> dict[str, str]:
        ca, token = files[source]
        return {f"{key}ca_file": ca, f"{key}token_file": token} if source in present else {}

    top = offered("file", "")
    target = {"lb": "internal-lb", "url": "https://10.0.0.1", **offered("own", "")}
    config_file = write(tmp_path, yaml_text({**top, "targets": [target], "in_cluster": True}))
    env = {f"PROBER_{k.upper()}": v for k, v in offered("env", "").items()}
    config = load_config(config_file, env=env, flags=offered("flag", ""))
    discovered = Credentials(*files["discovered"]) if "discovered" in present else Credentials()
    resolved = with_discovered(config, (), "aws", discovered, *service_account(config))
    (chosen,) = resolved.targets
    assert (chosen.ca_file, chosen.token_file) == files[winner]


def yaml_text(document: dict[str, object]) -> str:
    import json

    return json.dumps(document)


def test_discovered_targets_take_the_platform_unless_one_is_configured() -> None:
    found = (Target("kube-api", LB.SERVICE_NETWORK, "https://10.0.0.1:443"),)
    assert with_discovered(Config(), found, "aws").platform == "aws"
    configured = with_discovered(Config(platform="gcp", targets=found), (), "aws")
    assert configured.platform == "gcp"


WIRE = "only printable ASCII, without spaces, goes on the wire"
INVALID = [
    ("workers: two", "workers: expected a whole number of at least 1, got 'two'"),
    ("workers: 0", "workers: expected a whole number of at least 1, got 0"),
    ("burst_parallel: -1", "burst_parallel: expected a whole number of at least 0, got -1"),
    ("rise: 0.5", "rise: expected a number of at least 1, got 0.5"),
    ("interval: 100", "interval: expected a Go duration such as 100ms or 5s, got 100"),
    ("interval: 100 ms", "interval: '100 ms' is not a Go duration such as 100ms or 5s"),
    ("interval: 0s", "interval: '0s' must be longer than 1ms"),
    ("timeout: -1s", "timeout: '-1s' must be longer than 0s"),
    ("protocols: [http3]", "protocols: 'http3' is not one of http1, http2"),
    ("protocols: []", "protocols: expected a non-empty list, got []"),
    ("connections: [new, new]", "connections: ['new', 'new'] names a value twice"),
    ("path: api", "path: expected a path starting with /, got 'api'"),
    ('path: "/api\\n"', "path: '/api\\n': only printable ASCII, without spaces, goes on the wire"),
    (
        "path: /caf\u00e9",
        "path: '/caf\u00e9': only printable ASCII, without spaces, goes on the wire",
    ),
    ("labels: {platform: x}", "labels: label 'platform' is reserved (the metrics use it)"),
    ("labels: {9x: y}", "labels: '9x' is not a Prometheus label name"),
    ("listen: 9090", "listen: expected HOST:PORT such as 0.0.0.0:9090, got 9090"),
    ("listen: ':99999'", "listen: ':99999': port '99999' is not a number from 0 to 65535"),
    ("event_log_max_size: 1KiB", "event_log_max_size: '1KiB' is smaller than 64KiB"),
    ("event_log_max_size: lots", "event_log_max_size: expected a size such as 32MiB"),
    ("event_log_keep_runs: 0", "event_log_keep_runs: expected a whole number of at least 1, got 0"),
    ("event_log_keep_size: 1KiB", "event_log_keep_size: '1KiB' is smaller than 64KiB"),
    ("summary_interval: 10ms", "summary_interval: '10ms' must be longer than 1s"),
    ("time_scale: 0", "time_scale: expected a number of at least 0.001, got 0"),
    # Removed keys name what stands in their place.
    ("identity_renew_interval: 5s", "identity_renew_interval: no longer a setting: "
     "kube-apiserver's 10 s, which the lab scales with time_scale"),
    ("identity_refresh_fast: 1s", "identity_refresh_fast: no longer a setting: a third of the "
     "identity Lease renew interval, at most 1 s"),
    ("watch_backoff_initial: 50ms", "watch_backoff_initial: no longer a setting: client-go's "
     "constant, which the prober runs as a cluster's clients do; the lab scales it with "
     "time_scale"),
    ("tcp_keepalive: 0s", "tcp_keepalive: no longer a setting: client-go's constant, which the "
     "prober runs as a cluster's clients do; the lab never changed it"),
    ("insecure_skip_tls_verify: maybe", "insecure_skip_tls_verify: expected true or false"),
    ("event_log_stdout: samples", "event_log_stdout: 'samples' is not one of off, all, compact"),
    ("watches: informer", "watches: 'informer' is not one of watch-list, list, off"),
    ("log_format: xml", "log_format: 'xml' is not one of json, console"),
    ("event_loop: asyncio", "event_loop: no longer a setting: the daemon runs on uvloop, "
     "about a third less CPU than asyncio's loop (bench/daemon_cpu.py)"),
    ("ca_file: /nonexistent/ca.crt", "ca_file: /nonexistent/ca.crt: no such file"),
    ("platform: ''", "platform: expected a non-empty string, got ''"),
    ("colour: blue", "unknown key 'colour'"),
    ("lb_settings: 129s", "lb_settings: expected a mapping of shutdown_delay, "
     "graceful_termination, external-lb, internal-lb, service-network, got '129s'"),
    ("lb_settings: {delay: 9s}", "lb_settings.delay: unknown key 'delay' (known: "
     "shutdown_delay, graceful_termination, external-lb, internal-lb, service-network)"),
    ("lb_settings: {shutdown_delay: 129}",
     "lb_settings.shutdown_delay: expected a Go duration such as 100ms or 5s, got 129"),
    ("lb_settings: {localhost: {}}", "lb_settings.localhost: unknown key 'localhost'"),
    ("lb_settings: {external-lb: 10s}", "lb_settings.external-lb: expected a mapping of "
     "interval, timeout, unhealthy, healthy, fastinter, sync_delay, hairpin, connections"),
    ("lb_settings: {internal-lb: {hairpin: maybe}}",
     "lb_settings.internal-lb.hairpin: expected true or false, got 'maybe'"),
    ("lb_settings: {external-lb: {interval: 0s}}",
     "lb_settings.external-lb.interval: '0s' must be longer than 0s"),
    ("lb_settings: {internal-lb: {unhealthy: 0}}",
     "lb_settings.internal-lb.unhealthy: expected a whole number of at least 1, got 0"),
    ("lb_settings: {internal-lb: {connections: drop}}",
     "lb_settings.internal-lb.connections: expected reset or kept, got 'drop'"),
    ("lb_settings: {internal-lb: {rise: 2}}", "lb_settings.internal-lb.rise: unknown key 'rise'"),
    ("node: Master_0", "node: 'Master_0' is not a node name: lowercase letters, digits, '-' "
     "and '.', starting and ending with a letter or digit"),
    ("node: " + "m" * 254, "node: a node name has at most 253 characters, got 254"),
    ("node: ''", "node: expected a non-empty string, got ''"),
]  # fmt: skip


@pytest.mark.parametrize(("line", "message"), INVALID)
def test_each_rule_names_the_file_and_field(tmp_path: Path, line: str, message: str) -> None:
    path = write(tmp_path, MINIMAL + line + "\n")
    with pytest.raises(ConfigError) as caught:
        load_config(path, env={})
    assert str(caught.value).startswith(f"{path}:5: {message}")  # the key's line
    assert "\n" not in str(caught.value)


INVALID_TARGETS = [
    ("targets: {lb: internal-lb}", "targets: expected a list of targets, got {'lb'"),
    ("targets: [{url: 'https://a'}]", "targets[0]: missing 'lb'"),
    ("targets: [{lb: int-lb, url: 'https://a'}]", "targets[0].lb: 'int-lb' is not one of"),
    ("targets: [{lb: localhost, url: 'http://a'}]", "targets[0].url: 'http://a' is not an"),
    ("targets: [{lb: localhost, url: 'https://a/x'}]", "targets[0].url: 'https://a/x' has a path"),
    (
        "targets: [{lb: localhost, url: 'https://fd00::1'}]",
        "targets[0].url: 'https://fd00::1': an IPv6 address in a URL needs brackets, or its port "
        "after it",
    ),
    ("targets: [{lb: localhost, url: 'https://a:x'}]", "targets[0].url: 'https://a:x' is not"),
    ("targets: [{lb: localhost, url: 'https://a', sni: b}]", "targets[0]: unknown key 'sni'"),
    (
        'targets: [{lb: localhost, url: "https://a", name: "kube\\napi"}]',
        "targets[0].name: 'kube\\napi': expected letters, digits, '.', '_' or '-'",
    ),
    (
        "targets: [{lb: localhost, url: 'https://a'}, {lb: localhost, url: 'https://b'}]",
        "targets[1]: target 'kube-api' on localhost is listed twice",
    ),
    ("targets: []", "targets: none configured; list some, or discover them"),
]


@pytest.mark.parametrize(("text", "message"), INVALID_TARGETS)
def test_each_target_rule_names_the_entry(tmp_path: Path, text: str, message: str) -> None:
    path = write(tmp_path, text + "\n")
    with pytest.raises(ConfigError) as caught:
        load_config(path, env={})
    assert message in str(caught.value)


def test_environment_and_flag_errors_name_the_variable_and_flag(tmp_path: Path) -> None:
    path = write(tmp_path, MINIMAL)
    with pytest.raises(ConfigError, match=r"^PROBER_WORKERS: expected a whole number"):
        load_config(path, env={"PROBER_WORKERS": "-3"})
    with pytest.raises(ConfigError, match=r"^--timeout: 'soon' is not a Go duration"):
        load_config(path, env={}, flags={"timeout": "soon"})
    with pytest.raises(ConfigError, match=r"^PROBER_TARGETS: not YAML: "):
        load_config(env={"PROBER_TARGETS": "[{"})


def test_file_level_faults(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"/missing.yaml: cannot read: No such file"):
        load_config(str(tmp_path / "missing.yaml"), env={})
    path = write(tmp_path, "- a\n- b\n")
    with pytest.raises(ConfigError, match=r"expected a mapping of settings, got \['a', 'b'\]"):
        load_config(path, env={})
    path = write(tmp_path, "a: [\n")
    with pytest.raises(ConfigError, match=r"prober.yaml: not YAML: "):
        load_config(path, env={})
    latin = tmp_path / "latin.yaml"
    latin.write_bytes(b"workers: 2 # caf\xe9\n" + MINIMAL.encode())
    with pytest.raises(ConfigError, match=r"latin.yaml: not UTF-8 text \(byte 16\)$"):
        load_config(str(latin), env={})


def test_a_garbage_ca_is_refused_at_load(tmp_path: Path) -> None:
    """Before the daemon opens its port or its event log, not at its first TLS context."""
    garbage = tmp_path / "ca.crt"
    garbage.write_text("not a certificate\n")
    path = write(tmp_path, MINIMAL + f"ca_file: {garbage}\n")
    with pytest.raises(ConfigError, match=rf"ca_file: {garbage}: not a PEM CA bundle \(") as e:
        load_config(path, env={})
    assert "\n" not in str(e.value)
    target = MINIMAL.rstrip() + f"\n    ca_file: {garbage}\n"
    with pytest.raises(ConfigError, match=r"targets\[0\]\.ca_file: .*not a PEM CA bundle"):
        load_config(write(tmp_path, target), env={})


@pytest.mark.parametrize(
    ("env", "flags", "message"),
    [
        ({"PROBER_WORKERS": "²"}, {}, "PROBER_WORKERS: expected a whole number of at least 1"),
        ({}, {"workers": "٣"}, "--workers: expected a whole number of at least 1"),
        ({}, {"listen": "127.0.0.1:²"}, "--listen: '127.0.0.1:²': port '²' is not a number"),
        ({}, {"interval": "1" * 5000 + "ms"}, "--interval: '1111"),
    ],
    ids=["superscript", "arabic-indic", "port", "5000-digit duration"],
)
def test_digits_int_refuses_are_one_line(tmp_path: Path, env, flags, message: str) -> None:
    with pytest.raises(ConfigError) as raised:
        load_config(write(tmp_path, MINIMAL), env=env, flags=flags)
    assert str(raised.value).startswith(message)


def test_cross_field_rules(tmp_path: Path) -> None:
    kube = write(tmp_path, "", name="kubeconfig")
    with pytest.raises(ConfigError, match="either in_cluster or kubeconfig, not both"):
        load_config(env={}, flags={"in_cluster": True, "kubeconfig": kube})
    path = write(tmp_path, MINIMAL + "localhost: true\n")
    with pytest.raises(ConfigError, match=r"localhost: only applies with --in-cluster"):
        load_config(path, env={})
    path = write(tmp_path, MINIMAL + "node: master-0\n")
    with pytest.raises(ConfigError) as caught:
        load_config(path, env={})
    assert str(caught.value) == (
        f"{path}:5: node: which apiserver runs on it comes from the identity Leases: "
        "needs --in-cluster or --kubeconfig"
    )
    config = load_config(path, env={}, flags={"kubeconfig": kube})
    assert config.node == "master-0"
    assert load_config(env={"PROBER_NODE": "ip-10-0-1-7.ec2.internal"}, flags={
        "in_cluster": True}).node == "ip-10-0-1-7.ec2.internal"  # fmt: skip


@pytest.mark.parametrize(
    ("flags", "sent"),
    [
        ({"consistent_reads": True}, "/api/v1/namespaces/default"),
        ({"path": "/readyz?verbose"}, "/readyz?verbose&resourceVersion=0"),
        ({"path": "/version", "consistent_reads": "true"}, "/version"),
    ],
)
def test_reads_come_from_the_watch_cache_unless_asked(tmp_path: Path, flags, sent: str) -> None:
    config = load_config(write(tmp_path, MINIMAL), env={}, flags=flags)
    assert config.request_path == sent


@pytest.mark.parametrize(
    ("value", "mode"),
    [("true", "all"), ("false", "off"), ("all", "all"), ("compact", "compact"), ("off", "off")],
)
def test_event_records_on_stdout_all_compact_or_off(tmp_path: Path, value: str, mode: str) -> None:
    path = write(tmp_path, MINIMAL + f"event_log_stdout: {value}\n")
    assert load_config(path, env={}).event_log_stdout == mode
    flagged = load_config(write(tmp_path, MINIMAL), env={}, flags={"event_log_stdout": value})
    assert flagged.event_log_stdout == mode


@pytest.mark.parametrize(
    ("value", "mode"),
    [("true", "watch-list"), ("false", "off"), ("watch-list", "watch-list"),
     ("list", "list"), ("off", "off")],
)  # fmt: skip
def test_watches_sync_by_watch_list_or_list_or_are_off(
    tmp_path: Path, value: str, mode: str
) -> None:
    assert load_config(write(tmp_path, MINIMAL), env={}).watches == "watch-list"
    path = write(tmp_path, MINIMAL + f"watches: {value}\n")
    assert load_config(path, env={}).watches == mode
    flagged = load_config(write(tmp_path, MINIMAL), env={"PROBER_WATCHES": value})
    assert flagged.watches == mode


def test_an_ipv6_service_address_as_a_pod_spells_it_is_bracketed(tmp_path: Path) -> None:
    """`https://$(KUBERNETES_SERVICE_HOST):$(KUBERNETES_SERVICE_PORT)` on a single-stack IPv6
    cluster: the variables carry no brackets."""
    flags = {"targets": [{"lb": "service-network", "url": "https://fd00:172:30::1:443"}]}
    config = load_config(env={}, flags=flags)
    assert config.targets[0].url == "https://[fd00:172:30::1]:443"


def test_every_fault_of_a_load_is_reported_in_one_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A config with two bad keys reported only the first: fixed, the second showed next."""
    path = write(tmp_path, MINIMAL + "workers: two\ncolour: blue\ntimeout: soon\n")
    assert main(["run", "--config", path, "--interval", "0s"]) == 2
    assert capsys.readouterr().err.splitlines() == [
        f"prober run: {path}:6: unknown key 'colour'",
        f"prober run: {path}:5: workers: expected a whole number of at least 1, got 'two'",
        f"prober run: {path}:7: timeout: 'soon' is not a Go duration such as 100ms or 5s",
        "prober run: --interval: '0s' must be longer than 1ms",
    ]


def test_rules_across_keys_are_all_reported_too(tmp_path: Path) -> None:
    path = write(tmp_path, "localhost: true\ntargets: []\n")
    with pytest.raises(ConfigError) as caught:
        load_config(path, env={})
    assert caught.value.lines() == [
        "targets: none configured; list some, or discover them with --in-cluster or --kubeconfig",
        f"{path}:1: localhost: only applies with --in-cluster or --kubeconfig",
    ]


def test_lb_settings_are_laid_over_the_platforms_row(tmp_path: Path) -> None:
    text = (
        "lb_settings:\n  shutdown_delay: 1m10s\n"
        "  external-lb: {interval: 5s, unhealthy: 3, connections: kept}\n"
        "  service-network: {sync_delay: 500ms}\n"
    )
    config = load_config(write(tmp_path, MINIMAL + text), env={})
    settings = config.lb_settings
    assert settings is not None
    own = with_settings(PLATFORMS["aws"], settings)
    assert (own.shutdown_delay, own.graceful_termination) == (70.0, 194.0)
    external = own.lb(LB.EXTERNAL)
    assert external.check is not None
    assert (external.check.interval, external.check.fall, external.check.timeout) == (5, 3, 10)
    assert external.stop_routing == 5 + 2 * 5 + 10
    assert not external.reset_on_down
    assert own.lb(LB.INTERNAL) == PLATFORMS["aws"].lb(LB.INTERNAL)  # not named: the row's
    assert own.lb(LB.SERVICE_NETWORK).stop_routing == 0.5
    via_flag = load_config(write(tmp_path, MINIMAL, "b.yaml"), env={},
                           flags={"lb_settings": "{shutdown_delay: 1m10s}"})  # fmt: skip
    assert via_flag.lb_settings is not None
    assert via_flag.lb_settings.shutdown_delay == 70.0


def test_a_platform_written_out_as_settings_is_the_same_platform() -> None:
    for platform in PLATFORMS.values():
        scaled = platform.scaled(0.05)
        assert with_settings(platform, settings_of(scaled)) == dataclasses.replace(
            scaled, time_scale=1.0, watch_grace=platform.watch_grace,
            lbs=tuple(dataclasses.replace(p, slowstart=q.slowstart)
                      for p, q in zip(scaled.lbs, platform.lbs, strict=True)),
        )  # fmt: skip
