"""Load the configuration: the YAML file, then `PROBER_<KEY>` variables, then flags.

Every top-level key is declared once, in `keys.KEYS` (its parser, flag, help and, from
`Config`, its default); a value keeps the name of where it came from
(`FILE: key`, `PROBER_KEY`, `--key`) so that an error names it. Environment variables that
are not keys are ignored: Kubernetes injects `PROBER_PORT` and friends for a Service named
`prober`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import yaml

from prober.common.errors import UserError
from prober.config import fields as f
from prober.config.keys import PARSERS
from prober.config.model import SERVICE_ACCOUNT_DIR, Config, Credentials, with_credentials


class ConfigError(UserError, ValueError):
    """A configuration fault, as one line naming the file, variable or flag and the field."""


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
