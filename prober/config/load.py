"""Load the configuration: the YAML file, then `PROBER_<KEY>` variables, then flags.

Every top-level key has one parser (`fields`); a value keeps the name of where it came from
(`FILE: key`, `PROBER_KEY`, `--key`) so that an error names it. Environment variables that
are not keys are ignored: Kubernetes injects `PROBER_PORT` and friends for a Service named
`prober`.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import yaml

from prober.common.errors import UserError
from prober.common.logs import FORMATS, LEVELS
from prober.config import fields as f
from prober.config.model import (
    DEFAULT_TARGET_NAME,
    SERVICE_ACCOUNT_DIR,
    Config,
    Credentials,
    Target,
    with_credentials,
)
from prober.core.models import LB, Connection, Protocol


class ConfigError(UserError, ValueError):
    """A configuration fault, as one line naming the file, variable or flag and the field."""


def _targets(value: object) -> tuple[Target, ...]:
    if isinstance(value, str):  # from PROBER_TARGETS or a flag: YAML (or JSON) text
        value = yaml.safe_load(value)
    if not isinstance(value, list):
        raise f.Invalid(f"expected a list of targets, got {f.shown(value)}")
    targets: list[Target] = []
    for index, item in enumerate(value):
        try:
            target = _target(item)
        except f.Invalid as exc:
            raise f.Invalid(exc.problem, f"[{index}]{exc.sub}") from None
        if any((t.name, t.lb) == (target.name, target.lb) for t in targets):
            raise f.Invalid(f"target {target.name!r} on {target.lb} is listed twice", f"[{index}]")
        targets.append(target)
    return tuple(targets)


_TARGET_KEYS: dict[str, Callable[[object], Any]] = {
    "name": f.target_name,
    "lb": lambda v: f.enum_value(LB, v),
    "url": f.base_url,
    "ca_file": f.ca_bundle,
    "token_file": f.readable_file,
    "server_name": f.optional_text,
}


def _target(item: object) -> Target:
    raw = f.mapping(item, _TARGET_KEYS)
    for required in ("lb", "url"):
        if required not in raw:
            raise f.Invalid(f"missing {required!r}")
    values: dict[str, Any] = {"name": DEFAULT_TARGET_NAME}
    for key, value in raw.items():
        try:
            values[key] = _TARGET_KEYS[key](value)
        except f.Invalid as exc:
            raise f.Invalid(exc.problem, f".{key}") from None
    return Target(**values)


PARSERS: dict[str, Callable[[object], Any]] = {
    "platform": f.text,
    "interval": f.duration(minimum=0.001),
    "quiet_interval": f.duration(allow_zero=True),
    "settle": f.duration(allow_zero=True),
    "workers": f.positive_int,
    "timeout": f.duration(),
    "max_in_flight": f.positive_int,
    "max_apiservers": f.positive_int,
    "protocols": f.enum_list(Protocol),
    "connections": f.enum_list(Connection),
    "path": f.url_path,
    "consistent_reads": f.boolean,
    "event_log_stdout": f.stdout_records,
    "labels": f.labels,
    "listen": f.host_port,
    "event_log": f.optional_text,
    "event_log_max_size": f.size,
    "summary_interval": f.duration(minimum=1.0),
    "duration": f.optional_duration,
    "drain_timeout": f.duration(allow_zero=True),
    "ca_file": f.ca_bundle,
    "token_file": f.readable_file,
    "insecure_skip_tls_verify": f.boolean,
    "in_cluster": f.boolean,
    "kubeconfig": f.readable_file,
    "localhost": f.boolean,
    "node_refresh": f.duration(minimum=1.0),
    "log_format": f.choice(FORMATS),
    "log_level": f.choice(tuple(LEVELS)),
    "event_loop": f.choice(("uvloop", "asyncio")),
    "targets": _targets,
}


@dataclass(frozen=True, slots=True)
class _Value:
    raw: object
    where: str  # names the source and the key, e.g. "prober.yaml: workers" or "--workers"


def env_name(key: str) -> str:
    return f"PROBER_{key.upper()}"


def flag_name(key: str) -> str:
    return "--" + key.replace("_", "-")


def load_config(
    path: str | None = None,
    *,
    env: Mapping[str, str] | None = None,
    flags: Mapping[str, object] | None = None,
) -> Config:
    """The valid configuration from its three sources, or `ConfigError`."""
    values: dict[str, _Value] = {}
    if path is not None:
        values.update(_from_file(path))
    environ = os.environ if env is None else env
    for key in PARSERS:
        if environ.get(env_name(key)) is not None:
            values[key] = _Value(environ[env_name(key)], env_name(key))
    for key, raw in (flags or {}).items():
        if key not in PARSERS:
            raise ConfigError(f"{flag_name(key)}: not a configuration key")
        if raw is not None:
            values[key] = _Value(raw, flag_name(key))
    parsed: dict[str, Any] = {}
    for key, value in values.items():
        try:
            parsed[key] = PARSERS[key](value.raw)
        except f.Invalid as exc:
            raise ConfigError(f"{value.where}{exc.sub}: {exc.problem}") from None
        except yaml.YAMLError as exc:
            raise ConfigError(f"{value.where}: not YAML: {_one_line(exc)}") from None
    return _check(Config(**parsed), values)


def _from_file(path: str) -> dict[str, _Value]:
    try:
        with open(path, encoding="utf-8") as stream:
            document = yaml.safe_load(stream)
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 text (byte {exc.start})") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not YAML: {_one_line(exc)}") from None
    if document is None:
        return {}
    if not isinstance(document, dict):
        raise ConfigError(f"{path}: expected a mapping of settings, got {f.shown(document)}")
    for key in document:
        if key not in PARSERS:
            raise ConfigError(f"{path}: unknown key {key!r}")
    return {key: _Value(raw, f"{path}: {key}") for key, raw in document.items()}


def _check(config: Config, values: Mapping[str, _Value]) -> Config:
    """Rules that span several keys."""

    def where(key: str) -> str:
        return values[key].where if key in values else key

    if config.in_cluster and config.kubeconfig is not None:
        raise ConfigError(f"{where('kubeconfig')}: give either in_cluster or kubeconfig, not both")
    if not config.targets and not config.discovers:
        raise ConfigError(
            "targets: none configured; list some, or discover them with --in-cluster"
            " or --kubeconfig"
        )
    if config.localhost and not config.discovers:
        raise ConfigError(f"{where('localhost')}: only applies with --in-cluster or --kubeconfig")
    # The service account's files and the kubeconfig's CA are defaults only discovery brings
    # (`in_cluster` is discovery): `with_discovered` applies them after it, in the same rule.
    return with_credentials(config)


def service_account(config: Config) -> tuple[Credentials, ...]:
    """In a pod (`in_cluster`), the service account's CA and token are the last defaults."""
    if not config.in_cluster:
        return ()
    ca = os.path.join(SERVICE_ACCOUNT_DIR, "ca.crt")
    token = os.path.join(SERVICE_ACCOUNT_DIR, "token")
    return (
        Credentials(
            ca_file=ca if os.path.isfile(ca) else None,
            token_file=token if os.path.isfile(token) else None,
        ),
    )


def _one_line(exc: Exception) -> str:
    return " ".join(str(exc).split())
